"""What the occupancy record's "active" count is (validation/busy_servers.py): servers in use per minute from job
records, the evidence on hand-made records with known answers, the reading on the real record, and the replay in
the record's units."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dlcluster.validation import busy_servers as bs

T0 = pd.Timestamp("2017-10-03 07:00", tz="UTC")


def _at(minutes: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(minutes=minutes)


def _jobs():
    # a: 2 GPUs on m1 and 2 on m2, minutes 1..3 (ends 3:30, so it counts in minute 3); b: 1 GPU on m1, minutes 2..4
    attempts = pd.DataFrame({"jobid": ["a", "b"], "attempt": [0, 0], "start": [_at(1), _at(2)],
                             "end": [_at(3.5), _at(5)]})
    placements = pd.DataFrame({"jobid": ["a"] * 4 + ["b"], "attempt": [0] * 5,
                               "machine": ["m1", "m1", "m2", "m2", "m1"], "gpu": [0, 1, 0, 1, 2]})
    return attempts, placements


def test_servers_and_gpus_in_use_per_minute():
    attempts, placements = _jobs()
    minutes = pd.date_range(T0, periods=7, freq="min")
    used = bs.servers_and_gpus_in_use(attempts, placements, minutes)
    assert used["servers"].tolist() == [0, 2, 2, 2, 1, 0, 0]
    assert used["gpus"].tolist() == [0, 4, 5, 5, 1, 0, 0]


def test_evidence_on_a_hand_made_record():
    attempts, placements = _jobs()
    # minute 2 is a monitoring gap (active 0) while both jobs run; the counted set grows from 4 to 6 at minute 4
    occupancy = pd.DataFrame({"time": pd.date_range(T0, periods=7, freq="min"),
                              "active": [1, 1, 0, 2, 3, 1, 1], "total": [4, 4, 4, 4, 6, 6, 6]})
    machines = pd.DataFrame({"machine": ["m1", "m2", "m3"], "num_gpus": [8, 4, 0]})
    cdf = pd.DataFrame({"gpu_util_percent": [0.0, 0.0, 50.0, 100.0], "cdf_percent": [0.0, 40.0, 70.0, 100.0]})
    ev = bs.record_evidence(occupancy, attempts, placements, machines, cdf)
    assert (ev["gap_minutes"], ev["gap_minutes_with_jobs"], ev["gap_mean_servers_in_use"]) == (1, 1, 2.0)
    assert (ev["modal_total"], ev["servers_with_gpus"], ev["gpus_in_service"], ev["machines_listed"]) == (4, 2, 12, 3)
    assert ev["jumps"][["total_before", "total_after", "active_before", "active_after"]].values.tolist() == \
        [[4, 6, 2, 3]]
    # servers in use by the job set vs active, outside the gap: minute 1: 2 > 1 -> one minute above
    assert (ev["minutes_job_set_above_active"], ev["minutes_compared"]) == (1, 6)
    # not active, mean over the 6 minutes seen: 1 - mean(1/4, 1/4, 2/4, 3/6, 1/6, 1/6)
    assert ev["inactive_share"] == pytest.approx(1 - np.mean([1 / 4, 1 / 4, 2 / 4, 3 / 6, 1 / 6, 1 / 6]))
    assert ev["gpu_minutes_at_zero"] == pytest.approx(0.4) and ev["allocated_lower_bound"] == pytest.approx(0.6)
    # the most GPUs the active servers could hold, largest first (8, then 4): active 1,1,2,3,1,1 -> 8,8,12,12,8,8
    assert ev["max_gpu_share_on_active"] == pytest.approx(np.mean([8, 8, 12, 12, 8, 8]) / 12)
    text = bs.record_definition_text(ev)
    assert "In all 1 minutes where it is 0, the DRE job records show jobs running" in text
    assert "it comes from the monitoring record, not the job log" in text
    assert "active moves by +1 at the same minute, 50% of the servers added" in text


def test_the_real_record_counts_servers_in_use_from_the_monitoring():
    from dlcluster.trace import load_trace

    t = load_trace("public")
    dre = t.jobs_of("dre")
    ev = bs.record_evidence(t.occupancy, t.attempts[t.attempts["jobid"].isin(dre["jobid"])], t.placements,
                            t.machines, t.cluster_gpu_util_cdf)
    # every monitoring gap has DRE jobs running: active is not counted from the job log
    assert ev["gap_minutes"] == ev["gap_minutes_with_jobs"] == 1131
    # a fixed set of 420 servers (the official list's 552 on two local days), not the 539 with GPUs
    assert (ev["modal_total"], ev["servers_with_gpus"], ev["machines_listed"]) == (420, 539, 552)
    assert set(ev["totals"].index) == {174, 420, 552}
    grow = ev["jumps"].iloc[0]
    assert (grow["total_before"], grow["total_after"], grow["active_after"] - grow["active_before"]) == (420, 552, 95)
    # DRE's servers in use stay at or below it; the inactive share is below the GPU-minutes at 0%
    assert ev["minutes_job_set_above_active"] == 5
    assert ev["inactive_share"] < ev["gpu_minutes_at_zero"]
    assert ev["corr_active_servers"] > ev["corr_active_gpus"]
    assert ev["max_gpu_share_on_active"] > ev["allocated_lower_bound"]


def test_replay_in_record_units_and_its_errors():
    from types import SimpleNamespace

    # a replay of 10 servers sampled every 30 min over two hours; the record: total 20, active 5 then 10
    ts = pd.DataFrame({"time_s": [0.0, 1800.0, 3600.0, 5400.0], "idle_servers": [8, 8, 5, 5],
                       "allocated_gpus": [16, 16, 40, 40]})
    result = SimpleNamespace(timeseries=ts, epoch=T0, topology=SimpleNamespace(num_servers=10))
    occupancy = pd.DataFrame({"time": pd.date_range(T0, periods=120, freq="min"),
                              "active": [5] * 60 + [10] * 60, "total": [20] * 120})
    table = bs.replay_in_record_units(result, occupancy)
    assert table["real"].tolist() == [5, 10]
    assert table["servers_with_a_job"].tolist() == [2, 5]
    assert table["busy_share_of_total"].tolist() == [4, 10]
    assert table["gpus_in_8gpu_servers"].tolist() == [2, 5]
    errors = bs.record_units_errors(table)
    assert errors.loc["servers_with_a_job", "mae_pp"] == pytest.approx(100 * (3 + 5) / 2 / 20)
    assert errors.loc["busy_share_of_total", "bias_pp"] == pytest.approx(100 * (-1 + 0) / 2 / 20)
