"""Every source returns the documented columns, so analyses run unchanged on any of them."""

import pytest

from dlcluster.trace import load_trace
from dlcluster.trace.schema import (ATTEMPTS_COLUMNS, GPU_UTIL_COLUMNS, HOST_UTIL_COLUMNS, JOBS_COLUMNS,
                                    MACHINES_COLUMNS, PLACEMENTS_COLUMNS, RFOLD_JOBS_COLUMNS, size_bucket)


@pytest.mark.parametrize("source", ["public", "raw_small"])
def test_documented_columns(source, raw_small):
    tr = load_trace(raw_small if source == "raw_small" else source)
    assert list(tr.jobs.columns) == list(JOBS_COLUMNS)
    assert list(tr.attempts.columns) == list(ATTEMPTS_COLUMNS)
    assert list(tr.placements.columns) == list(PLACEMENTS_COLUMNS)
    assert list(tr.machines.columns) == list(MACHINES_COLUMNS)
    assert list(tr.gpu_util.columns) == list(GPU_UTIL_COLUMNS)
    assert list(tr.host_util.columns) == list(HOST_UTIL_COLUMNS)
    for col in ("submitted", "first_start", "last_end"):
        assert str(tr.jobs[col].dtype) == "datetime64[ns, UTC]"


def test_public_rfold_columns():
    tr = load_trace("public")
    assert list(tr.rfold_jobs.columns) == list(RFOLD_JOBS_COLUMNS)


def test_size_buckets():
    import pandas as pd
    assert size_bucket(1) == "1" and size_bucket(4) == "2-4" and size_bucket(5) == "5-8" and size_bucket(16) == ">8"
    assert list(size_bucket(pd.Series([1, 2, 8, 9]))) == ["1", "2-4", "5-8", ">8"]
