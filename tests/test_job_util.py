"""The out-of-core per-job GPU utilization join: hand-computed answers, and the in-memory rule it must follow."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from dlcluster import paths
from dlcluster.analysis.job_util import job_gpu_util
from dlcluster.analysis.utilization import DEFAULT_GRID, ecdf, gpu_minutes
from dlcluster.trace import load_trace
from dlcluster.trace.ingest import IncompleteIngestError, ingest

# util(m1, gpu0, minute t) = 10 + t, m1/gpu1 = 20 + t, m2/gpu0 = 30 + t, m2/gpu1 = 40 + t, for t = 0..5
# (00:00..00:05 PDT); m2/gpu1 is NA at t = 1.
VALUE = {("m1", 0): 10, ("m1", 1): 20, ("m2", 0): 30, ("m2", 1): 40}


def att(start, end, machine, gpu):
    return {"start_time": start and f"2017-10-03 00:{start}", "end_time": end and f"2017-10-03 00:{end}",
            "detail": [{"ip": machine, "gpus": [f"gpu{gpu}"]}]}


JOBS = [
    # a: minutes 1, 2 of m1/gpu0 -> 11, 12
    {"jobid": "a", "status": "Pass", "attempts": [att("01:00", "03:00", "m1", 0)]},
    # b: attempt 0 gets minutes 0, 1 (20, 21); attempt 1 is still running: minutes 4, 5 (24, 25)
    {"jobid": "b", "status": "Killed", "attempts": [att("00:00", "02:00", "m1", 1), att("03:30", None, "m1", 1)]},
    # c and d overlap on m2/gpu0: c gets 0, 1 (30, 31); d (the later start) gets 2 (32);
    # minutes 3, 4: the latest start is d's, which has ended -> nobody's
    {"jobid": "c", "status": "Pass", "attempts": [att("00:00", "05:00", "m2", 0)]},
    {"jobid": "d", "status": "Pass", "attempts": [att("02:00", "03:00", "m2", 0)]},
    # e: start unknown -> left out
    {"jobid": "e", "status": "Failed", "attempts": [att(None, "04:00", "m2", 1)]},
    # f: minute 0 (40); minute 1 is NA
    {"jobid": "f", "status": "Pass", "attempts": [att("00:00", "02:00", "m2", 1)]},
    # g: attempt 0 has no end and is not the last -> left out; attempt 1 gets minute 4 of m1/gpu0 (14)
    {"jobid": "g", "status": "Failed", "attempts": [att("00:00", None, "m1", 0), att("04:00", "05:00", "m1", 0)]},
]


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw") / "hand"
    raw.mkdir()
    records = [{"vc": "vc1", "user": "u1", "submitted_time": "2017-10-02 23:00:00", **job} for job in JOBS]
    (raw / "cluster_job_log").write_text(json.dumps(records))
    lines = ["time,machineId," + ",".join(f"gpu{i}_util" for i in range(8))]
    for t in range(6):
        for machine in ("m1", "m2"):
            cells = [str(VALUE[(machine, g)] + t) for g in (0, 1)]
            if machine == "m2" and t == 1:
                cells[1] = "NA"
            lines.append(f"2017-10-03 00:0{t}:00 PDT,{machine}," + ",".join(cells + ["NA"] * 6) + ",")
    (raw / "cluster_gpu_util").write_text("\n".join(lines) + "\n")
    return raw, ingest(raw, raw.parent / "ingested", progress=False)


def dropped(result) -> dict:
    return dict(zip(result.dropped["reason"], result.dropped["rows"], strict=True))


def test_per_job_known_answers(hand_made):
    result = job_gpu_util(hand_made[1], per="job")
    frame = result.frame.set_index("jobid")
    assert frame["gpu_minutes"].to_dict() == {"a": 2, "b": 4, "c": 2, "d": 1, "f": 1, "g": 1}
    assert frame["mean_util"].to_dict() == {"a": 11.5, "b": 22.5, "c": 30.5, "d": 32.0, "f": 40.0, "g": 14.0}
    assert frame.loc["b", "status"] == "Killed" and (frame["num_gpus"] == 1).all()
    assert (frame["gpus_observed"] == 1).all() and frame.loc["b", "minutes"] == 4
    d = dropped(result)
    assert d["attempt start unknown"] == 1
    assert d["attempt end unknown (not running)"] == 1
    assert d["GPU-attempt spans overlapping an earlier span on the same GPU (samples go to the later start)"] == 1
    assert d["utilization NA inside an attempt (offline GPU)"] == 1
    assert d["GPU minute outside every attempt (idle or unattributed)"] == 23 - 11   # 24 cells, 1 NA


def test_per_attempt_and_value_counts(hand_made):
    attempts = job_gpu_util(hand_made[1], per="attempt").frame.set_index(["jobid", "attempt"])
    assert attempts.loc[("b", 0), "mean_util"] == 20.5 and attempts.loc[("b", 1), "mean_util"] == 24.5
    assert ("g", 0) not in attempts.index
    counts = job_gpu_util(hand_made[1], per="value_counts").frame
    assert counts.groupby("status")["samples"].sum().to_dict() == {"Killed": 4, "Pass": 6, "Failed": 1}
    pass_values = counts[counts["status"] == "Pass"]["util"].tolist()
    assert pass_values == [11.0, 12.0, 30.0, 31.0, 32.0, 40.0]


def test_only_selected_attempts(hand_made):
    only = pd.DataFrame({"jobid": ["b"], "attempt": [1]})
    result = job_gpu_util(hand_made[1], per="sample", only=only)
    assert result.frame["util"].tolist() == [24.0, 25.0]
    assert result.frame["time"].tolist() == [pd.Timestamp("2017-10-03 07:04", tz="UTC"),
                                             pd.Timestamp("2017-10-03 07:05", tz="UTC")]
    assert dropped(result)["attempt not selected"] == 6      # 9 attempts: 2 unusable, 1 chosen


def test_samples_on_disk_equal_samples_in_memory(hand_made, tmp_path):
    in_memory = job_gpu_util(hand_made[1], per="sample")
    on_disk = job_gpu_util(hand_made[1], per="sample", out=tmp_path / "samples.parquet")
    assert on_disk.frame is None and on_disk.path.exists()
    back = pd.read_parquet(on_disk.path).sort_values(["jobid", "attempt", "time"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(back[["jobid", "attempt", "util"]], in_memory.frame[["jobid", "attempt", "util"]],
                                  check_dtype=False)
    assert (back["time"].astype("datetime64[ns, UTC]") == in_memory.frame["time"]).all()
    pd.testing.assert_frame_equal(on_disk.dropped, in_memory.dropped)


@pytest.mark.parametrize("case", ["hand_made", "raw_small"])
def test_same_samples_as_the_in_memory_join(case, hand_made, raw_small, tmp_path):
    raw, ingested = hand_made if case == "hand_made" else (raw_small, ingest(raw_small, tmp_path / "i", progress=False))
    trace = load_trace(raw)
    expected = gpu_minutes(trace.gpu_util, trace.jobs, trace.placements, trace.attempts).frame
    expected = expected.sort_values(["jobid", "attempt", "machine", "gpu", "time"]).reset_index(drop=True)
    got = job_gpu_util(ingested, per="sample").frame
    pd.testing.assert_frame_equal(got, expected, check_dtype=False)


def test_load_trace_philly_feeds_the_join(hand_made, tmp_path, monkeypatch):
    """What a notebook does with trace="philly": the Trace's location is the ingested directory."""
    root = tmp_path / "root"
    shutil.copytree(hand_made[1], root / "data" / "philly")
    (root / "data" / "external" / "philly").mkdir(parents=True)
    shutil.copy(paths.external_dir() / "philly" / "vc_nodes.csv", root / "data" / "external" / "philly")
    monkeypatch.setenv("DLCLUSTER_ROOT", str(root))
    trace = load_trace("philly")
    pd.testing.assert_frame_equal(job_gpu_util(trace).frame, job_gpu_util(hand_made[1]).frame)


def test_clear_errors(hand_made, tmp_path):
    with pytest.raises(ValueError, match="per must be one of"):
        job_gpu_util(hand_made[1], per="minute")
    with pytest.raises(ValueError, match="only for per='sample'"):
        job_gpu_util(hand_made[1], per="job", out=tmp_path / "x.parquet")
    with pytest.raises(IncompleteIngestError, match="no manifest"):
        job_gpu_util(hand_made[0])


def test_cdf_from_value_counts_equals_the_cdf_of_the_samples(hand_made):
    counts = job_gpu_util(hand_made[1], per="value_counts").frame
    samples = job_gpu_util(hand_made[1], per="sample").frame
    # the one ECDF helper, each distinct value weighted by its count (no expansion of millions of samples)
    np.testing.assert_allclose(ecdf(counts["util"], DEFAULT_GRID, counts["samples"]),
                               ecdf(samples["util"], DEFAULT_GRID))
    assert ecdf([30.0, 10.0], [5, 10, 29.9, 30], weights=[1, 3]).tolist() == [0, 75, 75, 100]
    assert np.isnan(ecdf([], [1.0], weights=[])).all()
