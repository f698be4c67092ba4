"""The full-size synthetic stand-in (for benchmarks only): labelled, seeded, in the raw format, known dirt."""

import hashlib
import json

import pytest

from dlcluster.analysis.job_util import job_gpu_util
from dlcluster.trace import load_trace
from dlcluster.trace.ingest import ingest
from dlcluster.sim.synthetic import FULL_JOBS, FULL_MINUTES, generate_raw_trace

SCALE = 0.002


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    return generate_raw_trace(tmp_path_factory.mktemp("synthetic") / "raw", scale=SCALE, seed=1, progress=False)


@pytest.fixture(scope="module")
def trace(raw):
    return load_trace(raw)


def test_it_says_it_is_synthetic(raw, trace):
    meta = json.loads((raw / "metadata.json").read_text())
    assert meta["synthetic"] is True and "NEVER results" in meta["purpose"]
    assert trace.describe_source(trace.jobs["source"].iloc[0])["label"].startswith("SYNTHETIC")
    assert (raw / "SYNTHETIC.md").read_text().startswith("# SYNTHETIC trace: not real Philly data")
    assert "SYNTHETIC" in (raw / "README.md").read_text()


def test_sizes_follow_the_scale(raw, trace):
    meta = json.loads((raw / "metadata.json").read_text())
    minutes = round(FULL_MINUTES * SCALE)
    assert meta["minutes"] == minutes and meta["jobs"] == round(FULL_JOBS * SCALE)
    assert len(trace.jobs) == round(FULL_JOBS * SCALE)
    for name in ("cluster_gpu_util", "cluster_cpu_util", "cluster_mem_util"):
        with open(raw / name, "rb") as fh:
            assert sum(1 for _ in fh) == 1 + minutes * 552
    assert trace.gpu_util["machine"].nunique() == 552 - 13     # 13 machines have no GPU: NA only


def test_the_planted_malformed_lines_and_nothing_else_are_quarantined(raw, trace):
    meta = json.loads((raw / "metadata.json").read_text())
    reasons = trace.quality.to_frame().set_index(["file", "kind", "reason"])
    for file, defects in meta["defects"].items():
        assert len(defects) == 3            # one of each kind at this scale
        for defect in defects:
            examples = reasons.loc[(file, "quarantined", defect["kind"]), "examples"]
            assert f"line {defect['line']}" in examples
        counts = trace.quality.counts(file)
        assert sum(counts["quarantined"].values()) == 3 and counts["read"] == meta["rows_per_util_file"]
    assert trace.quality.counts("cluster_job_log")["quarantined"] == {}


def test_absent_gpus_read_na_and_idle_gpus_read_zero(raw, trace, tmp_path):
    counts = trace.machines.set_index("machine")["num_gpus"]
    gpus_seen = trace.gpu_util.groupby("machine")["gpu"].max() + 1
    assert (gpus_seen == counts.reindex(gpus_seen.index)).all()
    result = job_gpu_util(ingest(raw, tmp_path / "ingested", progress=False), per="sample")
    held = result.frame[["machine", "gpu", "time"]].assign(held=True)
    every = trace.gpu_util.merge(held, on=["machine", "gpu", "time"], how="left")
    idle = every["held"].isna()
    assert idle.any() and (every.loc[idle, "util"] == 0).all()
    assert every.loc[~idle, "util"].between(0, 100).all() and every.loc[~idle, "util"].mean() > 20


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    def digest(directory):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.glob("cluster_*"))}

    a = digest(generate_raw_trace(tmp_path / "a", scale=0.0005, seed=7, progress=False))
    b = digest(generate_raw_trace(tmp_path / "b", scale=0.0005, seed=7, progress=False))
    c = digest(generate_raw_trace(tmp_path / "c", scale=0.0005, seed=8, progress=False))
    assert a == b
    assert all(a[name] != c[name] for name in a if name != "cluster_machine_list")


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="scale"):
        generate_raw_trace(tmp_path / "x", scale=0)
    (tmp_path / "exists").mkdir()
    with pytest.raises(FileExistsError):
        generate_raw_trace(tmp_path / "exists", scale=0.0005)
