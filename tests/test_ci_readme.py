"""CI runs the README's test command first, on the clean checkout, so the README's path is what CI tests.

(Issue 11: `.ci/run` installed the extras before `make test`, so a test needing an extra passed in
CI and failed for a new user following the README.)
"""

import os
import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Shell set-up lines that install nothing and run nothing, allowed before the README's command.
SHELL_SETUP = re.compile(r"^(set -[a-z]+( [a-z]+)*|cd .+)$")


def readme_commands(text: str) -> list[str]:
    """The commands of the first `sh` block under "## Two commands", comments dropped."""
    section = text.split("\n## Two commands\n", 1)
    assert len(section) == 2, 'README.md has no "## Two commands" section'
    block = re.search(r"```sh\n(.*?)```", section[1], re.S)
    assert block, 'README.md\'s "## Two commands" section has no ```sh block'
    return [cmd for line in block.group(1).splitlines() if (cmd := _command(line))]


def ci_commands(text: str) -> list[str]:
    """The commands `.ci/run` runs, in order, after its shell set-up lines."""
    commands = [cmd for line in text.splitlines() if (cmd := _command(line))]
    while commands and SHELL_SETUP.match(commands[0]):
        commands.pop(0)
    return commands


def _command(line: str) -> str:
    """A shell line without its comment, its words separated by one space."""
    return " ".join(shlex.split(line, comments=True))


def test_readme_gives_the_two_commands():
    commands = readme_commands((REPO / "README.md").read_text())
    assert "make reports" in commands and "make test" in commands, commands


def test_ci_runs_the_readme_test_command_first():
    readme = readme_commands((REPO / "README.md").read_text())
    [test_command] = [cmd for cmd in readme if cmd.split()[-1] == "test"]
    ci = (REPO / ".ci" / "run").read_text()
    assert "set -euo pipefail" in ci.splitlines()
    assert os.access(REPO / ".ci" / "run", os.X_OK)
    commands = ci_commands(ci)
    assert commands[:1] == [test_command], (
        f".ci/run must first run the README's test command {test_command!r} on the clean checkout; "
        f"its first command is {commands[:1]}")


def test_ci_rebuilds_the_reports_and_checks_them_against_the_golden_results():
    commands = ci_commands((REPO / ".ci" / "run").read_text())
    assert "make reports" in commands and "make check-results" in commands
    # the golden check reads the reports just built, before anything else is installed
    assert commands.index("make test") < commands.index("make reports") < commands.index("make check-results")
    assert commands.index("make check-results") < min(i for i, c in enumerate(commands) if "pip install" in c)


def test_ci_checks_the_results_again_as_on_another_cpu():
    """The golden results hold on another CPU too: CI rebuilds the reports with numpy's baseline SIMD paths and
    another BLAS kernel and checks them against the same golden file, before anything else is installed."""
    commands = ci_commands((REPO / ".ci" / "run").read_text())
    # at CI parameters, against their own golden file (the same code paths in a fifth of the time)
    other = "make check-other-cpu PARAMS=params/ci.yaml"
    assert commands.index("make check-results") < commands.index(other)
    assert commands.index(other) < min(i for i, c in enumerate(commands) if "pip install" in c)
    assert (REPO / "golden" / "ci.yaml").is_file() and (REPO / "params" / "ci.yaml").is_file()
    recipe = (REPO / "Makefile").read_text().split("\ncheck-other-cpu:", 1)[1].split("\n\n", 1)[0]
    assert "--golden golden/$(CONFIG).yaml" in recipe and "reports --params $(PARAMS)" in recipe
    other_cpu = re.search(r"^OTHER_CPU := (.*)$", (REPO / "Makefile").read_text(), re.M).group(1)
    assert other_cpu == "NPY_DISABLE_CPU_FEATURES=X86_V3 OPENBLAS_CORETYPE=Sandybridge"


def test_the_parsers_see_what_a_reader_sees():
    readme = "intro\n\n## Two commands\n\n```sh\nmake reports   # all\nmake  test     # tests\n```\n\n```sh\nx\n```\n"
    assert readme_commands(readme) == ["make reports", "make test"]
    ci = ("#!/usr/bin/env bash\n# comment\nset -euo pipefail\ncd \"$(dirname \"$0\")/..\"\n\n"
          "pip install -e '.[torch]'\nmake test\n")
    assert ci_commands(ci) == ["pip install -e .[torch]", "make test"]


def test_make_test_runs_the_pinned_linter_before_the_tests():
    """A lint finding fails `make test` (issue 26): the recipe lints first, with the ruff the test extra pins."""
    import tomllib

    recipe = re.search(r"^test:.*\n((?:\t.+\n)+)", (REPO / "Makefile").read_text(), re.M)
    assert recipe, "the Makefile has no `test` recipe"
    lines = [line.strip() for line in recipe.group(1).splitlines()]
    assert lines[0] == "$(BIN)/ruff check lib tests bench scripts", lines
    assert any("pytest" in line for line in lines[1:]), lines
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pins = [p for p in pyproject["project"]["optional-dependencies"]["test"] if p.startswith("ruff")]
    assert len(pins) == 1 and pins[0].startswith("ruff=="), pins
    assert f"- {pins[0]}" in (REPO / "environment.yml").read_text()   # mirrored for conda users
    assert pyproject["tool"]["ruff"]["lint"]["select"], "no lint rules chosen"
