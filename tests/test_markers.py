"""The markers for optional extras (tests/conftest.py) skip with their reason, and only when needed.

Whether PyTorch is installed is simulated by patching `importlib.util.find_spec`, which the
conftest asks, so both branches are checked on every machine, with or without the extra.
"""

import importlib.machinery
import importlib.util
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TORCH_REASON = "needs PyTorch: pip install -e '.[torch]' (CI installs it)"

MARKED_AND_PLAIN = """
import pytest

@pytest.mark.torch
def test_needs_torch():
    pass

def test_needs_nothing():
    pass
"""


def _pretend_torch(monkeypatch, installed: bool):
    real = importlib.util.find_spec

    def find_spec(name, package=None):
        if name == "torch":
            return importlib.machinery.ModuleSpec("torch", None) if installed else None
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def _skip_lines(result) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("SKIPPED")]


@pytest.fixture
def project_like(pytester):
    """A pytest project with this repository's conftest and marker configuration."""
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    markers = "".join(f"\n    {m}" for m in options["markers"])
    pytester.makeini(f"[pytest]\naddopts = {options['addopts']}\nmarkers ={markers}\n")
    pytester.makepyfile(test_sample=MARKED_AND_PLAIN)
    return pytester


def test_torch_marked_test_is_skipped_with_how_to_enable_it_when_torch_is_missing(project_like, monkeypatch):
    _pretend_torch(monkeypatch, installed=False)
    result = project_like.runpytest_inprocess("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    assert _skip_lines(result) == [f"SKIPPED [1] test_sample.py:3: {TORCH_REASON}"]


def test_torch_marked_test_runs_when_torch_is_importable(project_like, monkeypatch):
    _pretend_torch(monkeypatch, installed=True)
    project_like.runpytest_inprocess().assert_outcomes(passed=2)


def test_the_real_torch_tests_skip_cleanly_without_torch(pytester, monkeypatch):
    """No collection error: the module imports PyTorch only in fixtures, so the marker decides."""
    _pretend_torch(monkeypatch, installed=False)
    result = pytester.runpytest_inprocess(str(REPO / "tests" / "test_colocation_torch.py"), "-rs",
                                          "-p", "no:cacheprovider")
    result.assert_outcomes(skipped=4)
    [line] = _skip_lines(result)
    assert line.startswith("SKIPPED [4] ") and line.endswith(f"test_colocation_torch.py: {TORCH_REASON}")
