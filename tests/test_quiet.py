"""A quiet test run: a test prints nothing on success (what it would show goes in its assertion message).

pytest captures what a test writes; only a test that turns the capture off (or writes past it) can print between
pytest's progress lines. No test may.
"""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PAST_THE_CAPTURE = re.compile(r"\bcap(sys|fd|sysbinary|fdbinary)\.disabled\s*\(|\bsys\.__(stdout|stderr)__|/dev/tty")


def test_no_test_prints_past_the_capture():
    offenders = [f"{path.relative_to(TESTS)}:{number}: {line.strip()}"
                 for path in sorted(TESTS.rglob("*.py")) if path.name != "test_quiet.py"
                 for number, line in enumerate(path.read_text().splitlines(), start=1)
                 if PAST_THE_CAPTURE.search(line)]
    assert not offenders, ("a test prints nothing on success: put what it shows in its assertion message instead of "
                           f"turning the capture off: {offenders}")


def test_the_check_finds_each_way_past_the_capture():
    for line in ("    with capsys.disabled():", "with capfd.disabled():", "print(x, file=sys.__stdout__)",
                 "open('/dev/tty', 'w')"):
        assert PAST_THE_CAPTURE.search(line), line
    assert not PAST_THE_CAPTURE.search("print(x)  # captured by pytest")
