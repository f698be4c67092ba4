"""Ingest (raw files -> Parquet) gives the same tables as the in-memory loader, and never looks complete early."""

import json
import shutil

import pandas as pd
import pytest

from dlcluster import paths
from dlcluster.trace import load_trace
from dlcluster.trace.ingest import IncompleteIngestError, ingest, load_ingested


def assert_same_trace(ingested: dict, direct) -> None:
    for name in ("jobs", "attempts", "placements", "machines"):
        pd.testing.assert_frame_equal(ingested[name].reset_index(drop=True),
                                      getattr(direct, name).reset_index(drop=True))
    pd.testing.assert_frame_equal(ingested["gpu_util"], direct.gpu_util)
    pd.testing.assert_frame_equal(ingested["host_util"], direct.host_util)
    pd.testing.assert_frame_equal(ingested["quality"].summary(), direct.quality.summary())
    pd.testing.assert_frame_equal(ingested["quality"].to_frame(), direct.quality.to_frame())


def test_ingest_equals_in_memory_load(tmp_path, raw_small):
    out = ingest(raw_small, tmp_path / "philly", progress=False)
    assert_same_trace(load_ingested(out), load_trace(raw_small))


def test_block_size_changes_nothing_but_the_parts(tmp_path, raw_small):
    big = load_ingested(ingest(raw_small, tmp_path / "big", progress=False))
    small = ingest(raw_small, tmp_path / "small", block_bytes=100, progress=False)
    assert len(list((small / "gpu_util").glob("part-*.parquet"))) > 3
    assert_same_trace(load_ingested(small), load_trace(raw_small))
    pd.testing.assert_frame_equal(load_ingested(small)["gpu_util"], big["gpu_util"])


def test_manifest_counts_rows_and_samples(tmp_path, raw_small):
    manifest = json.loads((ingest(raw_small, tmp_path / "philly", progress=False) / "manifest.json").read_text())
    assert manifest["util"]["gpu_util"]["rows"] == 6            # 9 lines, 3 quarantined
    # m1: 2 cells x 2 rows, m2: 8 x 3 rows, m3: all NA
    assert manifest["util"]["gpu_util"]["samples"] == 4 + 24
    assert manifest["tables"]["jobs"] == 6 and manifest["synthetic"] is False


def test_failed_ingest_is_not_loadable_and_a_rerun_finishes(tmp_path, raw_small, monkeypatch):
    import dlcluster.trace.ingest as ingest_mod

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ingest_mod, "read_official_machine_list", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest(raw_small, tmp_path / "philly", progress=False)
    assert not (tmp_path / "philly" / "manifest.json").exists()
    with pytest.raises(IncompleteIngestError, match="interrupted ingest"):
        load_ingested(tmp_path / "philly")
    monkeypatch.undo()
    assert_same_trace(load_ingested(ingest(raw_small, tmp_path / "philly", progress=False)), load_trace(raw_small))


def test_complete_ingest_is_not_redone_until_a_raw_file_changes(tmp_path, raw_small):
    raw = tmp_path / "raw"
    shutil.copytree(raw_small, raw)
    out = ingest(raw, tmp_path / "philly", progress=False)
    part = out / "gpu_util" / "part-00000.parquet"
    before = part.stat().st_mtime_ns
    ingest(raw, out, progress=False)
    assert part.stat().st_mtime_ns == before
    text = (raw / "cluster_cpu_util").read_text().replace("m1,12.5", "m1,99.5")
    (raw / "cluster_cpu_util").write_text(text)
    host = load_ingested(ingest(raw, out, progress=False))["host_util"].set_index("machine")
    assert host.loc["m1", "cpu_util"] == 99.5


def test_synthetic_trace_is_never_ingested_as_the_real_one(tmp_path, raw_small, monkeypatch):
    raw = tmp_path / "raw"
    shutil.copytree(raw_small, raw)
    (raw / "SYNTHETIC.md").write_text("# SYNTHETIC trace\n")
    monkeypatch.setenv("DLCLUSTER_ROOT", str(tmp_path / "root"))
    with pytest.raises(ValueError, match="SYNTHETIC"):
        ingest(raw, paths.ingested_philly_dir(), progress=False)
    out = ingest(raw, tmp_path / "elsewhere", progress=False)
    assert json.loads((out / "manifest.json").read_text())["synthetic"] is True
    shutil.copytree(out, paths.ingested_philly_dir())          # smuggled in by hand
    with pytest.raises(ValueError, match="SYNTHETIC"):
        load_ingested(paths.ingested_philly_dir())


def test_large_utilization_stays_on_disk_with_a_warning(tmp_path, raw_small):
    out = ingest(raw_small, tmp_path / "philly", progress=False)
    with pytest.warns(UserWarning, match="left on disk"):
        tables = load_ingested(out, max_util_rows=10)
    assert tables["gpu_util"] is None and tables["host_util"] is None
    assert len(tables["jobs"]) == 6


def test_repeated_minutes_are_kept_and_counted_like_the_in_memory_loader(tmp_path, raw_small):
    raw = tmp_path / "raw"
    shutil.copytree(raw_small, raw)
    for name in ("cluster_gpu_util", "cluster_cpu_util"):
        lines = (raw / name).read_text().splitlines(keepends=True)
        (raw / name).write_text("".join(lines + [lines[1]]))      # the first data row again, at the end
    out = ingest(raw, tmp_path / "philly", block_bytes=100, progress=False)
    direct = load_trace(raw)
    assert_same_trace(load_ingested(out), direct)
    assert direct.quality.counts("cluster_gpu_util")["flags"]["repeated machine/gpu/time sample (kept)"] == 8
    assert direct.quality.counts("cluster_cpu_util")["flags"]["repeated machine/time sample (kept)"] == 1
