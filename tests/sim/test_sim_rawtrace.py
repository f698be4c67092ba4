"""The raw Philly trace writer: the format, parsed back by hand and by the project's loader."""

from __future__ import annotations

import csv
import json
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from sim_helpers import make_workload

from dlcluster.sim import RetryPolicy, Topology, simulate, write_raw_trace

NAIVE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
UTIL_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:00 (PDT|PST)$")


def simulated_run(directory, epoch):
    topo = Topology(server_names=("m4", "m9"), server_gpus=(8, 4), server_rack=(0, 0))
    w = make_workload([("j1", 0, 2, 12000), ("j2", 60, 8, 5400), ("j3", 120, 4, 600), ("big", 0, 20, 10),
                       ("j4", 200, 8, 600)])
    w = replace(w, epoch=pd.Timestamp(epoch, tz="UTC"))
    result = simulate(w, topo, "las", retry=RetryPolicy(prerun_s=120), slowdown=None)
    return result, write_raw_trace(result, directory, util_hours=3, seed=1)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    # 00:30 PDT on 2017-11-05: the run crosses the DST change (01:00-02:00 happens twice).
    return simulated_run(tmp_path_factory.mktemp("raw"), "2017-11-05 07:30:00")


def test_job_log_format(run_dir):
    result, out = run_dir
    records = json.loads((out / "cluster_job_log").read_text())
    assert [r["jobid"] for r in records] == list(result.jobs["jobid"])
    for rec in records:
        assert set(rec) == {"status", "vc", "jobid", "user", "submitted_time", "attempts"}
        assert rec["status"] in {"Pass", "Killed", "Failed"}
        assert NAIVE.match(rec["submitted_time"])
        for att in rec["attempts"]:
            assert set(att) == {"start_time", "end_time", "detail"}
            assert NAIVE.match(att["start_time"]) and NAIVE.match(att["end_time"])
            for d in att["detail"]:
                assert re.match(r"^m\d+$", d["ip"]) and all(re.match(r"^gpu\d$", g) for g in d["gpus"])
    by_id = {r["jobid"]: r for r in records}
    assert by_id["big"]["status"] == "Killed" and by_id["big"]["attempts"] == []  # rejected: 20 > 12 GPUs
    assert by_id["j1"]["submitted_time"] == "2017-11-05 00:30:00"  # naive US/Pacific (PDT)
    j2 = result.attempts[result.attempts["jobid"] == "j2"]
    assert len(by_id["j2"]["attempts"]) == len(j2) >= 2  # one-GPU pre-run, then the gang
    gang = by_id["j2"]["attempts"][-1]["detail"]
    assert sum(len(d["gpus"]) for d in gang) == 8


def test_gpu_util_format(run_dir):
    result, out = run_dir
    lines = (out / "cluster_gpu_util").read_text().splitlines()
    assert lines[0] == "time,machineId," + ",".join(f"gpu{g}_util" for g in range(8))
    rows = list(csv.reader(lines[1:]))
    assert len(rows) == 3 * 60 * 2  # 3 hours x 60 minutes x 2 servers
    suffixes = set()
    for row in rows:
        assert len(row) == 11 and row[-1] == ""  # trailing comma
        assert UTIL_TIME.match(row[0])
        suffixes.add(row[0][-3:])
        values = row[2:10]
        if row[1] == "m9":  # 4 GPUs: gpu4..gpu7 absent
            assert values[4:] == ["NA"] * 4
            values = values[:4]
        assert all(0.0 <= float(v) <= 100.0 for v in values)
    assert suffixes == {"PDT", "PST"}
    busy = np.array([[float(v) for v in r[2:6]] for r in rows]).max()
    assert busy > 0  # some GPU is in use in the window


def test_machine_list_and_labels(run_dir):
    _, out = run_dir
    assert (out / "cluster_machine_list").read_text().splitlines() == [
        "machineId, number of GPUs, single GPU mem", "m4,8, 12GB", "m9,4, 12GB"]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["simulated"] is True and meta["gpu_util"]["synthetic"] is True
    assert "SIMULATED" in (out / "README.md").read_text()


def test_loader_reads_the_simulated_run_like_the_real_trace(tmp_path):
    from dlcluster.trace import load_trace
    result, out = simulated_run(tmp_path, "2017-10-03 07:30:00")  # no DST change: naive times are exact
    trace = load_trace(out)
    jobs = trace.jobs.set_index("jobid")
    sim = result.jobs.set_index("jobid")
    assert set(jobs.index) == set(sim.index)
    ran = sim[sim["status"] != "Rejected"]
    assert (jobs.loc[ran.index, "num_attempts"] == ran["num_attempts"]).all()
    # times are written to the second
    assert np.allclose(jobs.loc[ran.index, "gpu_time_s"], ran["gpu_time_s"], atol=8 * ran["num_attempts"].max())
    assert np.allclose(jobs.loc[ran.index, "queueing_delay_s"], ran["queueing_delay_s"], atol=1)
    assert set(trace.machines["machine"]) == {"m4", "m9"}
    assert trace.gpu_util is not None and len(trace.gpu_util) > 0


def test_job_levels_come_from_the_real_cluster_cdf_less_its_idle_gpus():
    """Not a parameter chosen to give 52%: the real CDF, with the run's idle GPUs taken off its mass at 0%."""
    import numpy as np
    import pandas as pd

    from dlcluster.paths import public_dir
    from dlcluster.sim.rawtrace import draw_job_levels, real_gpu_quantiles

    cdf = pd.read_parquet(public_dir() / "cluster_gpu_util_cdf.parquet")
    quantiles = real_gpu_quantiles(cdf)
    at_zero = float((cdf["gpu_util_percent"] == 0).mean())        # 32% of the real GPU-minutes read 0%
    assert at_zero == pytest.approx(0.323, abs=0.0005)
    busy_mean = float(cdf.loc[cdf["gpu_util_percent"] > 0, "gpu_util_percent"].mean())
    # all GPUs allocated: 32.2% of held GPUs at 0%, the rest from the CDF's part above 0% -> the CDF's own mean
    levels = draw_job_levels(200_000, np.random.default_rng(0), 1.0, quantiles)
    assert np.mean(levels == 0) == pytest.approx(at_zero, abs=0.005)
    assert levels.mean() == pytest.approx(cdf["gpu_util_percent"].mean(), rel=0.01)
    # 60% allocated: the 40% idle GPUs explain all of the CDF's zeros, so no held GPU reads 0%
    levels = draw_job_levels(200_000, np.random.default_rng(0), 0.6, quantiles)
    assert (levels > 0).all() and levels.mean() == pytest.approx(busy_mean, rel=0.01)
    assert set(np.unique(levels)) <= set(quantiles)
    with pytest.raises(ValueError, match="allocated_share"):
        draw_job_levels(1, np.random.default_rng(0), 0.0, quantiles)
