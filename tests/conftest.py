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
