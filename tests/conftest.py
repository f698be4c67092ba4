import importlib.util
import os
from pathlib import Path

import pytest
from hypothesis import settings

pytest_plugins = ["pytester"]  # tests/test_markers.py runs pytest on the hooks below

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Property tests draw the same examples on every run (the seed comes from each test's name, not from the
# clock), and no example database replays what an earlier run happened to find: a failure reproduces, and a
# green run stays green. Every ``settings(...)`` in the tests inherits this profile.
settings.register_profile("dlcluster", derandomize=True, database=None)
settings.load_profile("dlcluster")

# What the README names optional: a test marked with one of these markers is skipped, with the
# reason and how to enable it, when its module is not importable. Every other dependency of the
# tests is in the `test` extra that `make test` installs, so nothing else may skip.
OPTIONAL_MARKERS = {
    "torch": ("torch", "needs PyTorch: pip install -e '.[torch]' (CI installs it)"),
}


def pytest_collection_modifyitems(config, items):
    missing = {marker: reason for marker, (module, reason) in OPTIONAL_MARKERS.items()
               if importlib.util.find_spec(module) is None}
    for item in items:
        for marker, reason in missing.items():
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session", autouse=True)
def own_cache_dir(tmp_path_factory):
    """The tests' own cache of sweep cells and calibrations (``DLCLUSTER_CACHE_DIR``), one per session (shared by
    its pytest-xdist workers: a calibration one worker made is read by the other, never searched beside it).

    Set in the environment, so the kernels papermill starts for the notebook tests inherit it: a
    calibration or sweep cell cached by ``make reports`` in ``reports/.sweep-cache`` never satisfies a
    test, which recomputes what it checks.
    """
    from dlcluster.paths import CACHE_DIR_ENV

    path = _shared_dir(tmp_path_factory, "sweep-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv(CACHE_DIR_ENV, str(path))
    yield path
    patch.undo()


@pytest.fixture(scope="session")
def raw_small():
    return FIXTURES / "raw_small"


@pytest.fixture(scope="session")
def public_trace():
    from dlcluster.trace import load_trace
    return load_trace("public")


@pytest.fixture(scope="session")
def fallback_cross_validation():
    """The leave-one-split-out cross-validation of the failure classifier's fallback over its whole settings grid
    (:func:`dlcluster.analysis.classify.cross_validate_fallback` on the measured messages): 60 trainings, once per
    session; each test reads the settings it checks."""
    from dlcluster.analysis.classify import cross_validate_fallback, measured_messages

    return cross_validate_fallback(measured_messages())


@pytest.fixture(scope="session")
def ci_calibrated_replay(public_trace):
    """Notebook 05's calibrated replay under params/ci.yaml, run again from its cached calibration (the one
    notebooks 01, 05 and 06 share): ``(calibration, replay)``, once per session."""
    from dlcluster.report.runner import read_params
    from dlcluster.validation import calibrate, calibration

    ci = read_params(REPO / "params" / "ci.yaml")
    small = ci["notebooks"]["05-simulator-validation"]
    cal = calibration.calibrated_params(ci["trace"], small["fit_days"], ci["seed"], None, small["calibration_trials"],
                                        small["replay_days"], small["warmup_days"])
    return cal, calibrate.run_replay(cal.replay, public_trace.machines, public_trace.vc_quotas, cal.params)


_CI_RUNS: dict = {}


def _shared_dir(tmp_path_factory, name: str) -> Path:
    """A folder of this session's temporary folder; under pytest-xdist, one for all its workers."""
    base = tmp_path_factory.getbasetemp()
    base = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = base / name
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def ci_reports(tmp_path_factory):
    """The folder where :func:`ci_notebook` writes each notebook's report (``<stem>/results.json``, figures)."""
    return _shared_dir(tmp_path_factory, "reports-ci")


@pytest.fixture(scope="session")
def ci_notebook(ci_reports):
    """Execute a notebook once per session with params/ci.yaml; returns its results.json as a dict (and, as
    ``folder``, the folder the notebook wrote its outputs to)."""
    from dlcluster.atomic import exclusive_lock
    from dlcluster.report import read_results_json
    from dlcluster.report.runner import execute_notebook, read_params

    out = ci_reports
    params = read_params(REPO / "params" / "ci.yaml")

    def run(stem: str) -> dict:
        if stem not in _CI_RUNS:
            # once per session, whichever pytest-xdist worker asks first; the other waits and reads its report
            with exclusive_lock(out / f"{stem}.lock"):
                if not (out / stem / "results.json").exists():
                    execute_notebook(REPO / "notebooks" / f"{stem}.ipynb", out, params, html=False)
            _CI_RUNS[stem] = {**read_results_json(out / stem / "results.json"), "folder": out / stem}
        return _CI_RUNS[stem]

    run.out_dir = out   # the executed notebooks: <out_dir>/<stem>.ipynb
    return run
