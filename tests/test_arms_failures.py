"""The failure arms: the same attempt split in every arm (none), and no ratio on a wait under the floor."""

import numpy as np
import pandas as pd
import pytest

from dlcluster import experiments as E
from dlcluster.experiments import failures
from dlcluster.sim import simulate, topology_from_spec
from dlcluster.sim.attempts import PLANNED_RETRY, PlannedRetries
from dlcluster.sim.workload import Workload

EPOCH = pd.Timestamp("2017-10-03 07:00:00", tz="UTC")


def _costs_table():
    """Failure-arm rows over 2 seeds (not the block design): the never-failing jobs' mean wait without failures is 20
    and 40 s under model 'illustrative' (under the floor) and 600 and 800 s under 'fitted'; retrying everything takes
    it to 0 s / to half."""
    rows = []
    for model, base_wait, arm_wait in (("illustrative", [20.0, 40.0], [0.0, 0.0]),
                                       ("fitted", [600.0, 800.0], [300.0, 400.0])):
        for retry, waits in (("none", base_wait), ("philly", arm_wait)):
            for seed, wait in enumerate(waits):
                for population in ("all jobs", "good jobs"):
                    rows.append({"experiment": "failures", "population": population, "bucket": "all",
                                 "failure_model": model, "load_label": "L", "retry": retry,
                                 "arm": failures.RETRY_NAMES[retry], "seed": seed, "jobs": 100,
                                 "gpu_hours": 1000.0 - 100.0 * (retry != "none"), "wasted_gpu_hours": 50.0,
                                 "prerun_gpu_hours": 0.0, "prerun_caught_jobs": 0, "failed_jobs": 5,
                                 "jct_mean_s": 3600.0 + wait, "queue_mean_s": wait})
    return pd.DataFrame(rows)


def test_no_ratio_on_a_wait_under_the_floor_only_the_difference_with_its_interval():
    assert failures.GOOD_WAIT_FLOOR_S == E.common.NEAR_ZERO_DURATION_S == 60.0
    costs = failures.failure_costs(_costs_table()).set_index("failure_model")
    small, large = costs.loc["illustrative"], costs.loc["fitted"]
    # 20 s and 40 s → 0 s: a ratio would read −100% [−100%, −100%]; it is left out, the difference stays
    assert small["good_wait_base"] == pytest.approx(30.0)
    assert np.isnan(small["good_wait_change"]) and np.isnan(small["good_wait_change_ci_low"]) \
        and np.isnan(small["good_wait_change_ci_high"])
    # paired differences −20 and −40 s: mean −30, t(0.975, 1) = 12.7062 x sd 14.142 / sqrt(2) = 127.06
    assert small["good_wait_difference"] == pytest.approx(-30.0)
    assert small["good_wait_difference_ci_low"] == pytest.approx(-30.0 - 127.062, abs=0.01)
    assert small["good_wait_difference_ci_high"] == pytest.approx(-30.0 + 127.062, abs=0.01)
    assert small["good_wait_note"] == ("a difference, not a ratio: the wait without failures (30 s) is under "
                                       "1.0 min")
    # 600 and 800 s → half: above the floor the ratio stays (−50% in both seeds)
    assert large["good_wait_change"] == pytest.approx(-0.5) and large["good_wait_note"] == ""
    # the sentence says the same as the table: the difference in seconds, with its interval
    text = E.failures_conclusion(costs.reset_index(), "L", seeds=2)
    assert "the mean wait of the never-failing jobs −30 s [95% CI −2.6 min, +1.6 min] (no significant difference" \
        in text
    assert "−100%" not in text


def _workload():
    return Workload(jobid=np.array(["a", "b"], dtype=object), vc=np.array(["vc", "vc"], dtype=object),
                    user=np.array(["u", "u"], dtype=object), arrival_s=np.array([0.0, 10.0]),
                    num_gpus=np.array([1, 1], dtype=np.int64), service_s=np.array([1000.0, 500.0]), epoch=EPOCH)


def test_the_injected_arms_and_their_base_leave_the_split_out_the_baseline_keeps_it():
    """'none' is notebook 05's replay (the split kept: no options of its own); 'one-attempt' and the injected arms
    set failures and retry, which replaces the split: the injected arms' base replays each job as one attempt."""
    w = _workload()
    topology = topology_from_spec(racks=1, servers_per_rack=1, gpus_per_server=4)
    # the replay's options: job a replayed as a first attempt of 400 s and a re-queue (the attempt split)
    replay = {"failures": PlannedRetries([400.0, np.nan]), "retry": PLANNED_RETRY}
    ran = {}
    for retry in ("none", "one-attempt", "philly"):
        cell = {"experiment": "failures", "failure_model": "illustrative", "retry": retry, "seed": 0,
                "trace": "public"}
        _, options, _, extras = failures.options(cell, w, {}, None)
        assert set(options) == (set() if retry == "none" else {"failures", "retry"})
        merged = {**replay, **options}   # as run_cell merges the replay's options with the arm's
        assert isinstance(merged["failures"], PlannedRetries) == (retry == "none")
        ran[retry] = simulate(w, topology, "fifo", seed=0, **merged).jobs.set_index("jobid")
    # the baseline keeps the split: job a in two attempts; the arms' base: each job one attempt of its whole duration
    assert ran["none"]["num_failures"].tolist() == [1, 0]
    assert ran["one-attempt"]["num_failures"].tolist() == [0, 0]
    # the split keeps progress: the same JCT either way
    assert ran["none"].loc["a", "jct_s"] == pytest.approx(1000.0) == ran["one-attempt"].loc["a", "jct_s"]


def test_the_failures_baseline_is_philly_as_calibrated_its_one_attempt_base_runs_on_its_own():
    common = {"trace": "public", "resample_block_days": 0.0, "inputs": "test", "seed": 0, "load_setting": "real",
              "load": 1.0}
    replay = {**common, "replay": {"block_days": 7.0}, "calibration_cache": None}
    for scope in (common, replay):
        base = {**scope, "experiment": "failures", "failure_model": "fitted", "retry": "none"}
        one = {**base, "retry": "one-attempt"}
        stop = {**scope, "experiment": "early_stop", "tolerance": None, "curve_source": "pollux"}
        philly = {**scope, "experiment": "policy", "policy": "philly"}
        same_as = E.shared_simulations([base, one, stop, philly])
        assert same_as(base) == base and same_as(one) == one
        assert (same_as(stop), same_as(philly)) == (base, base)


def test_failure_costs_compare_the_injected_arms_with_the_one_attempt_base():
    table = _costs_table()
    # a 'one-attempt' base 10 s above 'none' in every row: the arms' changes are read against it, 'none' drops out
    extra = table[table["retry"] == "none"].copy()
    extra["retry"], extra["arm"] = "one-attempt", failures.RETRY_NAMES["one-attempt"]
    extra["queue_mean_s"] += 10.0
    extra["jct_mean_s"] += 10.0
    costs = failures.failure_costs(pd.concat([table, extra], ignore_index=True)).set_index("failure_model")
    assert list(costs["arm"]) == [failures.RETRY_NAMES["philly"]] * 2
    assert costs.loc["fitted", "good_wait_base"] == pytest.approx(710.0)
    assert costs.loc["illustrative", "good_wait_difference"] == pytest.approx(-40.0)
