"""One cluster (issue 47 point 3): the replay notebook 05 validates charges each job its simulated placement's speed
relative to its real one, the real one read from DRE: its own record, else DRE's per-size shares of the fit span."""

import json
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest

from dlcluster.sim import Workload
from dlcluster.sim.slowdown import REAL_FROM_RECORD, REAL_FROM_SHARES, ReplaySlowdown, default_slowdown_model
from dlcluster.validation import calibrate as vc
from dlcluster.validation import workload as vw
from dlcluster.validation.calibration import start_params

EPOCH = pd.Timestamp("2017-10-01", tz="UTC")


def waits_table(rows):
    """rows: (days after EPOCH, GPUs, servers spanned); first waits of 10 s, one attempt each."""
    return pd.DataFrame({
        "jobid": [f"d{i}" for i in range(len(rows))], "vc": "a",
        "submitted": [EPOCH + pd.Timedelta(days=d) for d, _, _ in rows],
        "num_gpus": [g for _, g, _ in rows],
        "bucket": [{1: "1"}.get(g, "2-4" if g <= 4 else "5-8" if g <= 8 else ">8") for _, g, _ in rows],
        "recorded_wait_s": 10.0, "first_wait_s": 10.0, "num_servers": [n for _, _, n in rows],
        "run_time_s": 3600.0})


def test_real_placement_shares_per_size_bucket():
    waits = waits_table([(0, 1, 1), (0, 2, 1), (0, 4, 1), (0, 3, 2), (0, 2, 1), (0, 8, 1), (0, 6, 2), (0, 16, 2)])
    assert vc.real_placement_shares(waits) == "2-4:4:0.75;5-8:2:0.5;>8:1:0"
    assert vc.placement_shares_of("2-4:4:0.75;5-8:2:0.5;>8:1:0") == {"2-4": 0.75, "5-8": 0.5, ">8": 0.0}


def test_the_calibration_reads_the_shares_on_the_fit_span_only():
    # 30 fit-span records, every one on one server; the held-out span's are all spread: they must not show
    fit = [(d % 5, 2 + d % 3, 1) for d in range(30)]
    held_out = [(20 + d % 5, 4, 2) for d in range(30)]
    params = start_params(waits_table(fit + held_out), (EPOCH, EPOCH + pd.Timedelta(days=10)))
    assert params.slowdown
    assert params.real_placement_shares == "2-4:30:1"


def test_the_replays_slowdown_takes_each_jobs_own_record_else_the_shares():
    w = Workload(jobid=np.array(["r0", "r1", "r2", "r3"], dtype=object), vc=np.array(["a"] * 4, dtype=object),
                 user=np.array([None] * 4, dtype=object), arrival_s=np.zeros(4), num_gpus=np.array([4, 4, 4, 1]),
                 service_s=np.full(4, 100.0), epoch=EPOCH)
    replay = vw.ReplayWorkload(w, np.array(["dre record", "dre record", "drawn", "drawn"], dtype=object),
                               np.array(["d0", "d1", None, None], dtype=object), EPOCH, {},
                               np.array([1, 2, 0, 0]))
    params = vc.ReplayParams(slowdown=True, real_placement_shares="2-4:10:0.5")
    slowdown = vc.replay_slowdown(params, replay)
    spread = default_slowdown_model().cross_server
    assert isinstance(slowdown, ReplaySlowdown) and slowdown.model == default_slowdown_model()
    # r0 one server, r1 spread (their records); r2 half on one server in expectation; a 1-GPU job on one server
    np.testing.assert_allclose(slowdown.real_speed, [1.0, spread, 1.0 / (0.5 + 0.5 / spread), 1.0])
    assert list(slowdown.real_source) == [REAL_FROM_RECORD, REAL_FROM_RECORD, REAL_FROM_SHARES, REAL_FROM_SHARES]
    assert slowdown.shares() == {REAL_FROM_RECORD: 0.5, REAL_FROM_SHARES: 0.5}
    # a part of the replay keeps each job's record
    assert list(replay.take([1, 2]).servers_spanned()) == [2, 0]
    with pytest.raises(ValueError, match="real_placement_shares is empty"):
        vc.replay_slowdown(vc.ReplayParams(slowdown=True), replay)


def test_the_slowdown_options_round_trip_and_are_inert_when_off():
    params = vc.ReplayParams(slowdown=True, real_placement_shares="2-4:10:0.5;5-8:3:0.25")
    stored = json.loads(json.dumps(asdict(params)))
    assert vc.ReplayParams.from_dict(stored) == params
    assert vc.ReplayParams(real_placement_shares="2-4:10:0.5").effective() == vc.ReplayParams()
    assert "relative to each job's real placement" in params.ingredients()


def test_dre_records_give_each_replayed_job_its_servers(public_trace):
    replay = vw.rfold_replay_workload(public_trace)
    spanned = replay.servers_spanned()
    has_record = pd.notna(replay.dre_jobid)
    assert (spanned[~has_record] == 0).all() and (spanned[has_record] >= 1).all()
    dre = public_trace.jobs_of("dre").set_index("jobid")["num_servers"]
    np.testing.assert_array_equal(spanned[has_record], dre.loc[replay.dre_jobid[has_record]].to_numpy(int))
