from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def raw_small():
    return FIXTURES / "raw_small"


@pytest.fixture(scope="session")
def public_trace():
    from dlcluster.trace import load_trace
    return load_trace("public")


_CI_RUNS: dict = {}


@pytest.fixture(scope="session")
def ci_notebook(tmp_path_factory):
    """Execute a notebook once per session with params/ci.yaml; returns its results.json as a dict."""
    import json

    from dlcluster.report.runner import execute_notebook, read_params

    out = tmp_path_factory.mktemp("reports-ci")
    params = read_params(REPO / "params" / "ci.yaml")

    def run(stem: str) -> dict:
        if stem not in _CI_RUNS:
            execute_notebook(REPO / "notebooks" / f"{stem}.ipynb", out, params, html=False)
            _CI_RUNS[stem] = json.loads((out / stem / "results.json").read_text())
        return _CI_RUNS[stem]

    return run
