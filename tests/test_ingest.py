"""Ingest (raw files -> Parquet) gives the same tables as the in-memory loader."""

import pandas as pd

from dlcluster.trace import load_trace
from dlcluster.trace.ingest import ingest, load_ingested


def test_ingest_equals_in_memory_load(tmp_path, raw_small):
    out = ingest(raw_small, tmp_path / "philly")
    ingested = load_ingested(out)
    direct = load_trace(raw_small)
    for name in ("jobs", "attempts", "placements", "machines"):
        a = ingested[name].drop(columns=["source"], errors="ignore")
        b = getattr(direct, name).drop(columns=["source"], errors="ignore")
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))
    key = ["machine", "gpu", "time"]
    pd.testing.assert_frame_equal(ingested["gpu_util"].sort_values(key).reset_index(drop=True),
                                  direct.gpu_util.sort_values(key).reset_index(drop=True))
    assert ingested["quality"].summary().equals(direct.quality.summary())


def test_failed_ingest_leaves_no_output(tmp_path, raw_small, monkeypatch):
    import dlcluster.trace.ingest as ingest_mod

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ingest_mod, "read_official_machine_list", boom)
    try:
        ingest(raw_small, tmp_path / "philly")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
