"""The design-implication experiments: workload transforms, measures, placements, CIs and sentences."""

import math

import numpy as np
import pandas as pd
import pytest

from dlcluster import experiments as E
from dlcluster.sim import FailureModel, default_failure_model, generate_workload, simulate, topology_from_spec
from dlcluster.sim.workload import Workload

EPOCH = pd.Timestamp("2017-10-03 07:00:00", tz="UTC")


def make_workload(rows, vc="vc"):
    """rows: (name, arrival_s, gpus, service_s)."""
    return Workload(jobid=np.array([r[0] for r in rows], dtype=object), vc=np.array([vc] * len(rows), dtype=object),
                    user=np.array(["u"] * len(rows), dtype=object), arrival_s=np.array([float(r[1]) for r in rows]),
                    num_gpus=np.array([r[2] for r in rows], dtype=np.int64),
                    service_s=np.array([float(r[3]) for r in rows]), epoch=EPOCH)


# ----------------------------------------------------------------------------- workload transforms

def test_scale_load_compresses_inter_arrival_times():
    w = make_workload([("a", 100, 1, 10), ("b", 200, 1, 10), ("c", 400, 2, 10)])
    assert E.scale_load(w, 2.0).arrival_s.tolist() == [100.0, 150.0, 250.0]
    assert E.scale_load(w, 1.0) is w
    with pytest.raises(ValueError, match="load factor must be > 0"):
        E.scale_load(w, 0)


def test_resample_periods_draws_whole_periods():
    day = 86400.0
    rows = [(f"j{d}-{k}", d * day + 1000 * k + 7 * d, 1 + d % 2, 100 + d) for d in range(6) for k in range(d + 1)]
    rows.append(("last", 6 * day, 1, 999))  # span exactly 6 days
    w = make_workload(rows)
    out = E.resample_periods(w, seed=3, block_days=1.0)
    assert E.resample_periods(w, seed=3, block_days=0) is w
    assert out.jobid.size == len(set(out.jobid))  # unique ids although periods repeat
    origin = {j: i for i, j in enumerate(w.jobid)}
    source = np.array([origin[j.rsplit("~", 1)[0]] for j in out.jobid])
    assert (out.num_gpus == w.num_gpus[source]).all() and (out.service_s == w.service_s[source]).all()
    period = np.array([int(j.rsplit("~", 1)[1]) for j in out.jobid])
    assert sorted(set(period)) == list(range(6))  # 6 periods of one day
    # each new period holds exactly the jobs of one original period, at the same offsets within it
    for k in range(6):
        members = source[period == k]
        original_days = {min(int(w.arrival_s[i] // day), 5) for i in members}
        assert len(original_days) == 1
        d = original_days.pop()
        expected = {i for i in range(len(w.jobid)) if min(int(w.arrival_s[i] // day), 5) == d}
        assert set(members) == expected
        offsets = out.arrival_s[period == k] - k * day
        assert np.allclose(np.sort(offsets), np.sort(w.arrival_s[members] - d * day))
    again = E.resample_periods(w, seed=3, block_days=1.0)
    assert (again.arrival_s == out.arrival_s).all() and (again.jobid == out.jobid).all()
    other = E.resample_periods(w, seed=4, block_days=1.0)
    assert not (len(other.jobid) == len(out.jobid) and (other.jobid == out.jobid).all())


# ----------------------------------------------------------------------------- measures

def test_measure_known_answer():
    topo = topology_from_spec(1, 2, 4)
    w = make_workload([("a", 0, 1, 100), ("b", 10, 8, 50)])
    result = simulate(w, topo, "philly", quotas={"vc": 8}, slowdown=None)
    m = E.measure(result, w).set_index("bucket")
    assert m.loc["1", "jct_mean_s"] == 100 and m.loc["1", "queue_mean_s"] == 0
    assert m.loc["5-8", "jct_mean_s"] == 140 and m.loc["5-8", "queue_mean_s"] == 90
    assert m.loc["5-8", "fair_share_delay_mean_s"] == 90 and m.loc["5-8", "frag_delay_mean_s"] == 0
    assert m.loc["all", "jct_mean_s"] == 120 and m.loc["all", "jobs"] == 2
    assert m.loc["all", "gpu_hours"] == pytest.approx((100 + 8 * 50) / 3600)
    assert m.loc["all", "useful_share"] == pytest.approx(1.0) and m.loc["all", "speed_mean"] == pytest.approx(1.0)
    assert m.loc["5-8", "spread_share"] == 1.0 and m.loc["1", "spread_share"] == 0.0
    assert m.loc["2-4", "jobs"] == 0 and math.isnan(m.loc["2-4", "jct_mean_s"])
    # over the arrival span [0, 10] job a holds one GPU of one of the two servers
    assert m.loc["all", "busy_server_share"] == 0.5 and m.loc["all", "allocated_gpu_share"] == 1 / 8
    assert (m["population"] == "all jobs").all() and math.isnan(m.loc["all", "busy_server_share_dates"])
    # time-weighted over [0, 200]: job a on one of the two servers 0-100, job b on both 100-150, nothing after
    dated = E.measure(result, w, dates_window=(0.0, 200.0)).set_index("bucket")
    assert dated.loc["all", "busy_server_share_dates"] == pytest.approx((100 * 0.5 + 50 * 1.0) / 200)


def test_measure_on_a_replay_of_real_durations_counts_the_work_at_ideal_speed():
    # b (8 GPUs) spans both servers as its DRE record did (real speed 0.5): it runs its real 50 s, which hold 25 s of
    # work at ideal speed; a (1 GPU) has no record and runs on one server, as every 1-GPU job
    from dlcluster.sim import SlowdownModel
    from dlcluster.sim.slowdown import REAL_FROM_RECORD, ReplaySlowdown, real_placement_speeds

    topo = topology_from_spec(1, 2, 4)
    w = make_workload([("a", 0, 1, 100), ("b", 0, 8, 50)])
    model = SlowdownModel(0.5, 0.5)
    speed, source = real_placement_speeds(model, w.num_gpus, [0, 2], {})
    result = simulate(w, topo, "philly", quotas={"vc": 8}, slowdown=ReplaySlowdown(model, speed, source))
    assert list(result.jobs["jct_s"]) == [100.0, 150.0]   # b waits for a's GPU, then runs 50 s
    extras = {"real_speed": speed, "real_from_record": source == REAL_FROM_RECORD}
    m = E.measure(result, w, extras).set_index("bucket")
    assert m.loc["5-8", "speed_mean"] == 0.5 and m.loc["1", "speed_mean"] == 1.0
    assert m.loc["all", "useful_share"] == pytest.approx((100 + 8 * 25) / (100 + 8 * 50))
    assert m.loc["all", "real_placement_record_share"] == 0.5 and m.loc["1", "real_placement_record_share"] == 0.0


def test_every_wait_counts_a_preempted_jobs_requeue_where_the_first_wait_does_not():
    # a (4 GPUs, 10 h) runs alone; b (4 GPUs, 100 s) arrives at 2 h. Tiresias LAS: b, with less attained service,
    # preempts a, which waits 100 s to resume: first waits 0 and 0, every wait 100 s and 0. Philly (no preemption):
    # b waits for a's end, 8 h, its first and only wait
    topo = topology_from_spec(1, 1, 4)
    w = make_workload([("a", 0, 4, 36000), ("b", 7200, 4, 100)])
    las = E.measure(simulate(w, topo, "las", quotas=None, slowdown=None), w).set_index("bucket").loc["all"]
    assert las["queue_mean_s"] == 0.0 and las["wait_total_mean_s"] == 50.0 and las["jct_mean_s"] == 18100.0
    philly = E.measure(simulate(w, topo, "philly", quotas=None, slowdown=None), w).set_index("bucket").loc["all"]
    assert philly["queue_mean_s"] == philly["wait_total_mean_s"] == 14400.0
    assert E.is_preemptive("Tiresias 2D-LAS") and not E.is_preemptive("Philly")


def test_measure_counts_failed_attempts_and_good_jobs():
    model = FailureModel.from_dict({"classes": {"bad input": {
        "category": "user", "probability": 1.0, "rtf": {"dist": "empirical", "samples_s": [30.0]},
        "retryable": False}}})
    topo = topology_from_spec(1, 1, 4)
    w = make_workload([("a", 0, 2, 100)])
    for retry, attempts in [("philly", 4), ("adaptive", 1)]:
        result = simulate(w, topo, "fifo", quotas=None, slowdown=None, failures=model, retry=retry)
        m = E.measure(result, w, {"good": np.array([False])})
        row = m[(m["population"] == "all jobs") & (m["bucket"] == "all")].iloc[0]
        assert row["failed_jobs"] == 1
        assert row["wasted_gpu_hours"] == pytest.approx(attempts * 30 * 2 / 3600)
        assert row["useful_share"] == 0.0
        good = m[(m["population"] == "good jobs") & (m["bucket"] == "all")].iloc[0]
        assert good["jobs"] == 0


def test_good_jobs_are_the_jobs_the_simulator_leaves_alone():
    w = generate_workload(400, seed=1)
    model = default_failure_model()
    result = simulate(w, topology_from_spec(2, 4, 8), "philly", failures=model, retry="philly", seed=7)
    good = model.draws(len(w), 1, 7).job_class < 0
    assert (result.jobs["fail_class"].isna().to_numpy() == good).all()
    assert 0 < good.sum() < len(w)


# ----------------------------------------------------------------------------- placements and policies

def test_dedicated_placement_never_shares_a_server():
    topo = topology_from_spec(1, 2, 4)
    w = make_workload([("a", 0, 1, 100), ("b", 0, 1, 100), ("c", 0, 1, 100), ("d", 150, 8, 10)])
    result = simulate(w, topo, "philly", placement=E.DedicatedPlacement(), slowdown=None)
    jobs = result.jobs.set_index("jobid")
    assert jobs.loc["a", "first_start_s"] == 0 and jobs.loc["b", "first_start_s"] == 0
    assert jobs.loc["c", "first_start_s"] == 100  # 6 GPUs were free, but on servers in use
    assert jobs.loc["c", "delay_fragmentation_s"] + jobs.loc["c", "delay_backoff_s"] == 100
    assert jobs.loc["d", "first_start_s"] == 200 and jobs.loc["d", "num_servers"] == 2
    placements = result.placements().merge(result.attempts[["jobid", "attempt", "start_s", "end_s"]])
    for machine, rows in placements.groupby("machine"):
        spans = rows.drop_duplicates("jobid").sort_values("start_s")
        assert (spans["start_s"].to_numpy()[1:] >= spans["end_s"].to_numpy()[:-1]).all(), machine


def test_long_jobs_strict_policy_holds_only_long_jobs_to_locality():
    topo = topology_from_spec(1, 2, 4)
    blockers = [("x", 0, 3, 10000), ("y", 0, 3, 10000)]  # leave one free GPU on each server
    for service, policy, start in [(100, E.LongJobsStrictPolicy(), 181), (5000, E.LongJobsStrictPolicy(), 10000),
                                   (5000, "philly", 181)]:
        w = make_workload(blockers + [("c", 1, 2, service)])
        result = simulate(w, topo, policy, slowdown=None)
        assert result.jobs.set_index("jobid").loc["c", "first_start_s"] == start, (service, policy)


# ----------------------------------------------------------------------------- learning curves

def test_quality_lost_known_answers():
    lower = pd.DataFrame({"value": [10, 5, 4, 4.001, 3.99], "direction": "lower"})
    assert E.quality_lost(lower, 3) == pytest.approx((4 - 3.99) / 3.99)
    assert E.quality_lost(lower, 5) == 0.0
    higher = pd.DataFrame({"value": [0.5, 0.7, float("nan"), 0.8, 0.79], "direction": "higher"})
    assert E.quality_lost(higher, 2) == pytest.approx(0.125)
    assert E.quality_lost(higher, 3) == pytest.approx(0.125)  # NaN epochs never count as best


def test_early_stop_points_from_the_real_curves_stay_within_tolerance():
    points = E.early_stop_points("pollux", 0.01)
    assert len(points) == 40 and points.attrs["dropped"] == 0
    assert ((points["time_fraction"] > 0) & (points["time_fraction"] <= 1)).all()
    assert ((points["quality_lost"] >= 0) & (points["quality_lost"] <= 0.01 + 1e-12)).all()
    looser = E.early_stop_points("pollux", 0.05)
    assert (looser["time_fraction"].to_numpy() <= points["time_fraction"].to_numpy()).all()


# ----------------------------------------------------------------------------- calibration and grids

def _calibration(busy_dates, busy_span=None):
    n = len(busy_dates)
    return pd.DataFrame({"bucket": "all", "population": "all jobs", "load": [1.0, 2.0, 3.0][:n],
                         "busy_server_share_dates": busy_dates,
                         "busy_server_share": busy_span if busy_span is not None else [np.nan] * n})


def test_calibrated_load_interpolates():
    assert E.calibrated_load(_calibration([0.2, 0.5, 0.8]), 0.65) == 2.5
    assert E.calibrated_load(_calibration([np.nan, 0.5, 0.8], [0.1, 0.3, 0.7]), 0.5) == 2.5  # whole-span fallback
    with pytest.raises(ValueError, match="outside the simulated busy-server shares"):
        E.calibrated_load(_calibration([0.2, 0.5, 0.8]), 0.9)


def test_experiment_cells_of_the_small_grids():
    # small: one replay per arm (the block design), the calibrated timeout only; pollux-small: 180 s
    for name, calibrated, loads, timeouts in (("small", None, {1.0}, 0), ("pollux-small", 3.5, {3.5}, 1)):
        spec = E.grid_spec(name)
        cells = E.experiment_cells(spec, "public", "fp", [0, 1], calibrated)
        counts = pd.Series([c["experiment"] for c in cells]).value_counts().to_dict()
        # locality: strict, any, the grid's timeouts and the calibrated one (180 s unless given), long jobs
        # strict/migrated (work left: an oracle)/migrated (attained service); interference: 2 x 2 + dedicated;
        # failures: 1 model x 5 retry settings (no failures, its one-attempt base, 3 rules); early stop: off + 1
        # tolerance; policies at two loads
        assert counts == {"locality": 2 * (6 + timeouts - (name == "pollux-small")), "interference": 10,
                          "failures": 10, "early_stop": 4, "policy": 2 * len(spec.policies) * 2}, name
        assert {c["load"] for c in cells if c["experiment"] != "policy"} == loads
        assert all(c["inputs"] == "fp" for c in cells)
    validated = E.experiment_cells(E.grid_spec("small"), "public", "fp", [0], default_relax_s=60.0)
    assert all(c["replay"] == E.grid_spec("small").replay.cell() for c in validated)
    assert E.grid_spec("small").replay.block_days == 1.0 and E.grid_spec("full").replay.block_days == 7.0
    # the calibrated relax timeout joins the grid's and is the long-jobs arms' timeout
    assert sorted({c["relax_after_s"] for c in validated if c["experiment"] == "locality" and c["relax_after_s"]}) \
        == [60.0]
    full = E.experiment_cells(E.grid_spec("full"), "public", "fp", [0], default_relax_s=120.0)
    assert sorted({c["relax_after_s"] for c in full if c["experiment"] == "locality" and c["relax_after_s"]}) \
        == [60.0, 120.0, 900.0]
    assert {c["relax_after_s"] for c in validated if c.get("long_jobs") in ("strict", "migrate")} == {60.0}
    assert [c["long_jobs"] for c in validated if c["experiment"] == "locality" and c["long_jobs"] != "as-others"] \
        == ["strict", "migrate", "migrate-attained"]
    with pytest.raises(ValueError, match="no calibrated factor"):
        E.experiment_cells(E.grid_spec("pollux-small"), "public", "fp", [0])
    with pytest.raises(ValueError, match="grid must be one of"):
        E.grid_spec("huge")


def test_run_cell_is_deterministic_and_covers_every_experiment():
    base = {"trace": "public", "start": "2017-10-03", "max_jobs": 300, "racks": 2, "resample_block_days": 0.5,
            "seed": 1, "load": 1.5, "load_setting": "scaled", "inputs": "test"}
    cells = [{**base, "experiment": "locality", "locality": "relax", "relax_after_s": 60.0, "long_jobs": "migrate"},
             {**base, "experiment": "interference", "placement": "dedicated", "migration": False},
             {**base, "experiment": "failures", "failure_model": "fitted", "retry": "prerun"},
             {**base, "experiment": "early_stop", "tolerance": 0.01, "curve_source": "pollux"},
             {**base, "experiment": "policy", "policy": "gittins"}]
    for cell in cells:
        first, second = E.run_cell(cell), E.run_cell(cell)
        pd.testing.assert_frame_equal(first, second)
        total = first[(first["bucket"] == "all") & (first["population"] == "all jobs")].iloc[0]
        assert total["jobs"] > 250 and total["gpu_hours"] > 0, cell["experiment"]
    failures = E.run_cell(cells[2])
    assert set(failures["population"]) == {"all jobs", "good jobs"}
    assert failures["prerun_gpu_hours"].max() > 0
    early = E.run_cell(cells[3])
    # each job draws one of the 40 real curves: the mean quality lost is the curves' mean, within 4 standard
    # errors of a mean of that many draws (a bound of 0.01, the tolerance, holds for any draw)
    points = E.early_stop_points("pollux", 0.01)["quality_lost"]
    row = early[(early["bucket"] == "all") & (early["population"] == "all jobs")].iloc[0]
    assert row["quality_lost_mean"] == pytest.approx(points.mean(), abs=4 * points.std() / np.sqrt(row["jobs"]))
    with pytest.raises(ValueError, match="unknown experiment"):
        E.run_cell({**base, "experiment": "nope"})


# ----------------------------------------------------------------------------- confidence intervals

def test_summarize_and_paired_change():
    table = pd.DataFrame({"arm": ["base", "base", "new", "new"], "seed": [0, 1, 0, 1], "load_label": "L",
                          "jct": [10.0, 20.0, 12.0, 26.0]})
    s = E.summarize(table, ["arm"], ["jct"]).set_index("arm")
    assert s.loc["base", "mean"] == 15.0 and s.loc["new", "mean"] == 19.0 and s.loc["new", "n"] == 2
    change = E.paired_change(table, "arm", "base", "jct", ["load_label"]).iloc[0]
    assert change["arm"] == "new" and change["mean"] == 4.0
    half = 12.7062047 * math.sqrt(8) / math.sqrt(2)  # t(0.975, 1) x sd of [2, 6] / sqrt(2)
    assert change["ci_low"] == pytest.approx(4 - half) and change["ci_high"] == pytest.approx(4 + half)
    # relative: on the log of the per-seed ratios 1.2 and 1.3
    relative = E.paired_change(table, "arm", "base", "jct", ["load_label"], relative=True).iloc[0]
    logs = np.log([1.2, 1.3])
    assert relative["mean"] == pytest.approx(math.exp(logs.mean()) - 1)
    assert relative["ci_low"] == pytest.approx(math.exp(logs.mean() - 12.7062047 * logs.std(ddof=1) / math.sqrt(2)) - 1)


def test_summarize_puts_each_metric_on_its_own_scale():
    table = pd.DataFrame({"arm": "a", "seed": [0, 1, 2], "queue_mean_s": [5.0, 600.0, 86400.0],
                          "waited_share": [0.01, 0.5, 0.99], "speed_mean": [0.5, 0.9, 1.0]})
    s = E.summarize(table, ["arm"], ["queue_mean_s", "waited_share", "speed_mean"]).set_index("metric")
    assert s.loc["queue_mean_s", "method"] == "Student t on the log scale" and s.loc["queue_mean_s", "ci_low"] > 0
    assert s.loc["waited_share", "method"] == "Student t on the logit scale"
    assert 0 < s.loc["waited_share", "ci_low"] and s.loc["waited_share", "ci_high"] < 1
    assert s.loc["speed_mean", "ci_low"] > 0


# ----------------------------------------------------------------------------- sentences

def _rows(values, metrics):
    """Sweep rows from {(load, arm, bucket): [value per seed]} for each metric (same values for all metrics)."""
    out = []
    for (load, arm, bucket), per_seed in values.items():
        for seed, value in enumerate(per_seed):
            out.append({"load_label": load, "arm": arm, "bucket": bucket, "seed": seed, "jobs": 5,
                        **{m: value for m in metrics}})
    return pd.DataFrame(out)


def test_locality_conclusion_is_computed_from_the_numbers():
    frames = []
    for metric, values in [
        ("queue_mean_s", {"L1": ([50, 70], [100, 140]), "L2": ([5, 5], [5, 5])}),
        ("jct_mean_s", {"L1": ([3000, 4200], [2500, 3500]), "L2": ([100, 100], [60, 150])}),
        ("useful_share", {"L1": ([0.8, 0.8], [0.9, 0.9]), "L2": ([0.9, 0.9], [0.9, 0.9])})]:
        frames.append(_rows({(load, arm, "5-8"): v for load, (relax, strict) in values.items()
                             for arm, v in (("relax after 3 min", relax), ("strict locality", strict))}, [metric]))
    rows = frames[0].merge(frames[1]).merge(frames[2])
    text = E.locality_conclusion(rows, ["L2", "L1"], "5-8", "L1")
    assert text.startswith("[mechanism] Holding 5-8-GPU jobs to strict locality instead of Philly's 'relax after 3 "
                           "min': at L1")
    # paired by seed, on the log of the ratios: x2 both times, +12.5% and -1/6 both times (intervals collapse)
    assert "raised their mean queueing delay (1.0 min → 2.0 min, ×2 [95% CI ×2, ×2])" in text
    assert "cut their mean JCT (1.0 h → 50.0 min, −17% [95% CI −17%, −17%])" in text
    # a base wait under a minute: the paired difference, never a ratio, and no direction where it includes none
    assert ("at L2 it made no significant difference at 2 seeds to their mean queueing delay "
            "(5 s → 5 s, ±0 s [95% CI ±0 s, ±0 s]; a difference, not a ratio: a base under 60 s") in text
    assert "made no significant difference at 2 seeds to their mean JCT (1.7 min → 1.8 min" in text
    assert ("the lowest mean JCT for them at L1 came with 'strict locality' (against the default: "
            "1.0 h → 50.0 min, −17% [95% CI −17%, −17%]: lower)") in text
    # the useful share under strict locality follows from the setup: tagged, and stated without a finding's verb
    assert ("[by construction, not a finding: strict locality never spreads a job that fits on one server, and the "
            "slowdown model charges only spread placements] The useful share of their GPU time, 'relax after 3 min' "
            "→ strict locality: at L1, 80% → 90%, +12% [95% CI +12%, +12%]") in text
    assert "raised the useful share" not in text


def test_interference_conclusion():
    values = {}
    for arm, speed, frag, jct in [("pack (best fit)", 0.6, 60, 5000), ("spread (Philly)", 0.8, 600, 4000),
                                  ("spread (Philly) + migration", 0.8, 300, 3900),
                                  (E.DEDICATED_ARM, 1.0, 7200, 9000)]:
        values[arm] = (speed, frag, jct)
    rows = pd.DataFrame([{"load_label": "L", "arm": arm, "bucket": bucket, "seed": seed, "jobs": 3,
                          "speed_mean": v[0], "frag_delay_mean_s": v[1] * (1 + seed), "jct_mean_s": v[2]}
                         for arm, v in values.items() for bucket in ("all", "5-8") for seed in (0, 1)])
    text = E.interference_conclusion(rows, "L", "5-8")
    assert text.startswith("[mechanism] At L, jobs ran at a mean speed of 1.00 on dedicated servers vs 0.60 packed and "
                           "0.80 spread")
    assert "5-8-GPU jobs waited on average 3.0 h for a local placement with dedicated servers vs 1.5 min packed" in text
    assert "under spreading, migration cut that wait (15.0 min → 7.5 min, −50% [95% CI −50%, −50%])" in text
    assert ("the lowest mean JCT of all jobs came from 'spread (Philly) + migration' (against Philly's spreading: "
            "1.1 h → 1.1 h, −3% [95% CI −3%, −3%]: lower)") in text
    # under an assumed colocation slowdown the same sentence rests on the assumption
    assumed = E.interference_conclusion(rows, "L", "5-8", scenario="paper")
    assert assumed.startswith("[assumption, not a finding: the colocation slowdown of scenario 'paper' is assumed")
    by_scenario = E.interference_conclusion_by_scenario(rows.assign(interference="paper"), "L", "5-8")
    assert "[assumption, not a finding: which placement wins rests on the assumed colocation slowdown ('paper')]" \
        in by_scenario


def test_policy_and_early_stop_conclusions():
    rows = pd.concat([
        _rows({("L", "FIFO", "all"): [7200, 7200], ("L", "Philly", "all"): [3600, 4000],
               ("L", "SRTF (oracle bound)", "all"): [1800, 1800]}, ["jct_mean_s"]),
        _rows({("L", "Philly", ">8"): [86400, 86400], ("L", "FIFO", ">8"): [172800, 172800]},
              ["jct_p99_s", "jct_mean_s"])]).assign(load_setting="real")
    text = E.policy_conclusion(rows, ["L"], ">8")
    assert text.startswith("Across scheduling policies, [mechanism] at L the lowest mean JCT")
    # Philly is the best non-oracle policy: the runner-up (FIFO) is compared with it, paired by seed; the ratios
    # 2.0 and 1.8 leave an interval over 2 seeds that includes no change
    assert ("at L the lowest mean JCT of the non-oracle policies was Philly's (1.1 h; Philly → FIFO: 1.1 h → 2.0 h, "
            "×1.9 [95% CI ×0.97, ×3.7]: no significant difference at 2 seeds") in text
    assert "SRTF bound 30.0 min), with p99 JCT of >8-GPU jobs 1.0 d under Philly vs 2.0 d under FIFO" in text
    assert text.endswith("and the lowest mean JCT per job size from >8 GPUs: Philly.")
    tie = _rows({("L", "FIFO", "all"): [3600, 3600], ("L", "Philly", "all"): [3601, 3601]}, ["jct_mean_s", "jct_p99_s"])
    assert E.policy_conclusion(tie.assign(load_setting="real"), ["L"], ">8") == (
        "Across scheduling policies, [mechanism] at L every non-oracle policy had the same mean JCT within 0.5% "
        "(1.0 h).")
    # at a scaled load the result rests on the assumed arrivals
    assert E.policy_conclusion(tie.assign(load_setting="scaled"), ["L"], ">8").startswith(
        "Across scheduling policies, [assumption, not a finding: the arrivals are scaled to a load the record does not "
        "show (a sensitivity)] at L")
    savings = pd.DataFrame({"load_label": ["L", "L", "M"], "tolerance": [0.001, 0.01, 0.01],
                            "gpu_hours_change": [-0.1, -0.25, -0.3], "gpu_hours_change_ci_low": [-0.12, -0.4, -0.5],
                            "gpu_hours_change_ci_high": [-0.08, 0.05, -0.1], "seeds": 3,
                            "quality_lost": [0.0004, 0.004, 0.005]})
    text = E.early_stop_conclusion(savings, "L")
    assert text.startswith("[by construction, not a finding: each job ends at a convergence point drawn from the real "
                           "learning curves (notebook 03)")
    assert "within 0.1%: 10.0% of GPU-hours saved [95% CI 8.0%, 12.0%] for a mean quality loss of 0.040%" in text
    assert "within 1.0%: GPU-hours −25% [95% CI −40%, +5%]: no significant difference at 3 seeds" in text
    assert "at M: 30.0% of GPU-hours saved [95% CI 10.0%, 50.0%]" in text


def test_failures_conclusion_explains_faster_good_jobs_and_an_empty_prerun():
    base = {"failure_model": "fitted", "load_label": "L", "prerun_caught_jobs_mean": 0.0, "failed_jobs_mean": 40.0,
            "wasted_share_ci_low": 0.05, "wasted_share_ci_high": 0.15}
    costs = pd.DataFrame([
        {**base, "arm": "retry everything (Philly)", "wasted_share_mean": 0.1, "prerun_share_mean": 0.0,
         "gpu_hours_change": -0.2, "gpu_hours_change_ci_low": -0.25, "gpu_hours_change_ci_high": -0.15,
         "good_wait_change": -0.5, "good_wait_change_ci_low": -0.6, "good_wait_change_ci_high": -0.4,
         "good_jct_change": -0.1, "good_jct_change_ci_low": -0.3, "good_jct_change_ci_high": 0.1},
        {**base, "arm": "1-GPU pre-run + class-aware", "wasted_share_mean": 0.08, "prerun_share_mean": 0.01,
         "gpu_hours_change": -0.3, "gpu_hours_change_ci_low": -0.35, "gpu_hours_change_ci_high": -0.25,
         "good_wait_change": -0.6, "good_wait_change_ci_low": -0.7, "good_wait_change_ci_high": -0.5,
         "good_jct_change": -0.2, "good_jct_change_ci_low": -0.3, "good_jct_change_ci_high": -0.1}])
    text = E.failures_conclusion(costs, "L", seeds=3, earliest_rtf={"fitted": 300.0}, prerun_s=300.0)
    # the wasted GPU time follows from the injected model, the never-failing jobs' shorter waits from the demand it
    # removes: both tagged by construction and stated, not claimed as findings
    assert text.startswith("At L: [by construction, not a finding: the failures are injected by the model on top of "
                           "durations that already hold the real failed attempts")
    assert ("[by construction, not a finding: the injected failures remove work from the cluster: a job the model "
            "hits fails each attempt") in text
    assert ("Against the same replay without failures: under retry everything (Philly), the GPU-hours of the run "
            "−20% [95% CI −25%, −15%] (lower), the mean wait of the never-failing jobs −50% [95% CI −60%, −40%] "
            "(lower) and their mean JCT −10% [95% CI −30%, +10%] (no significant difference at 3 seeds)") in text
    assert "cut the mean wait" not in text and "[mechanism]" not in text
    # the fitted model's pre-run cannot be tested on public data: its failures start no earlier than 5 minutes
    assert ("Whether a pre-run pays **cannot be tested on public data**: the 5.0 min pre-run caught 0.0 failing jobs "
            "here only because this model's shortest runtime to failure is 5.0 min (the DRE records hold only jobs "
            "that ran at least 5 minutes)") in text
    # no reduction of the cluster's load: no causal sentence
    # the never-failing jobs waited 20 s without failures: their change is the difference in seconds, not -75%
    near_zero = costs.assign(good_wait_base=20.0, good_wait_difference=-15.0, good_wait_difference_ci_low=-20.0,
                             good_wait_difference_ci_high=-10.0)
    assert ("the mean wait of the never-failing jobs −15 s [95% CI −20 s, −10 s] (lower; a difference, not a ratio: "
            "a base under 60 s") in E.failures_conclusion(near_zero, "L", seeds=3)
    calm = costs.assign(gpu_hours_change=0.0, gpu_hours_change_ci_low=-0.1, gpu_hours_change_ci_high=0.1)
    calm_text = E.failures_conclusion(calm, "L", seeds=3)
    assert "remove work" not in calm_text and "[by construction, not a finding: the failures are injected" in calm_text


def test_earliest_runtime_to_failure():
    from dlcluster.sim.failures import FailureModel, default_failure_model
    model = FailureModel.from_dict({"classes": {
        "a": {"category": "user", "probability": 0.1, "retryable": False,
              "rtf": {"dist": "empirical", "samples_s": [300.0, 900.0, 4000.0]}},
        "b": {"category": "infrastructure", "probability": 0.1, "retryable": True,
              "rtf": {"dist": "empirical", "samples_s": [1200.0, 14400.0]}}}})
    assert E.earliest_rtf_s(model) == pytest.approx(300.0)
    assert E.earliest_rtf_s(default_failure_model()) < 60.0   # lognormal: reaches down to seconds


# ----------------------------------------------------------------------------- the validated replay

def test_replay_block_inputs_are_built_from_the_calibrated_params(public_trace, monkeypatch):
    from dlcluster.validation import calibrate as vc
    from dlcluster.validation import calibration as vcache
    from dlcluster.validation import workload as vw

    full = vw.rfold_replay_workload(public_trace)
    params = vc.ReplayParams(unknown_vc_quota="demand", max_capacity_factor=1.5, reclaim_after_s=120.0,
                             relax_after_s=600.0, rack_size=32, placement="best_fit", latency_s=60.0)
    begin = pd.Timestamp("2017-11-07 07:00", tz="UTC")
    calibration = vcache.Calibration(params, pd.DataFrame(), {"fit": (EPOCH, begin),
                                                          "held_out": (begin, begin + pd.Timedelta(days=30))},
                                 {"complete_until": begin + pd.Timedelta(days=2), "busy_servers_mae_pp": 1.0,
                                  "busy_servers_mae_pp_complete": 1.0, "gpu_allocation_shortfall_pp": -1.0,
                                  "max_median_ratio": 1.2, "max_p90_ratio": 1.9, "max_ks": 0.1,
                                  "servers_spanned_max_ks": 0.1, "latency_only_wait_share": 0.1},
                                 {"top_vcs": 5, "trace": "public", "seed": 0, "replay_days": None,
                                  "warmup_days": None}, "k")
    workloads = vcache.ReplayWorkloads(None, full, full, None)
    monkeypatch.setattr(vcache, "replay_workloads", lambda *args, **kwargs: workloads)
    monkeypatch.setattr(E.CalibratedReplay, "calibration", lambda self, trace, cache_dir=None: calibration)
    spec = E.CalibratedReplay(fit_days=99, block_days=7.0)  # fit_days unused: mocked
    E.replay_block_inputs.cache_clear()
    inputs = E.replay_block_inputs("public", spec)
    # machines in racks of 32, the quotas of the calibrated rule on the calibration's workload
    assert inputs.topology.num_racks == 17 and inputs.topology.total_gpus == 3205
    assert inputs.quotas == vc.vc_quotas(public_trace.vc_quotas, full.workload, 3205, "demand")
    assert len(inputs.quotas) > 11   # the VCs without a public node count got a share
    # the calibrated sharing: each VC capped at 1.5x its quota (at least one 8-GPU server), reclaim after 120 s
    options = dict(inputs.options)
    caps, reclaim = options.pop("max_capacity"), options.pop("reclaim")
    # real durations: no slowdown on top; sampled every minute, as the occupancy record
    assert options == {"lending": True, "placement": "best_fit", "slowdown": None, "sample_interval_s": 60.0}
    assert caps == {vc: max(int(1.5 * inputs.quotas.get(vc, 0)), inputs.quotas.get(vc, 0), 8) for vc in caps}
    assert set(caps) == set(map(str, inputs.workload.vc)) and reclaim.max_wait_before_kill_s == 120.0
    assert inputs.philly == {"locality": "relax", "relax_after_s": 600.0, "backoff": "gangs",
                             "gang_relax_after_s": None, "relax_clock": "headroom"}
    # every RFold job replayed, each arriving 60 s after its submit (the scheduler latency); measured from the replay's
    # first measured minute in whole weeks up to the completeness horizon (5 weeks of the 5 weeks 1 day before it)
    np.testing.assert_array_equal(inputs.workload.arrival_s, full.workload.arrival_s + 60.0)
    start = pd.Timestamp(full.measure_start)
    assert inputs.block_starts == tuple(start + pd.Timedelta(days=7 * k) for k in range(5))
    start_s = (start - full.workload.epoch) / pd.Timedelta(seconds=1)
    submitted = full.workload.arrival_s
    np.testing.assert_array_equal(inputs.blocks, np.where((submitted >= start_s) & (submitted < start_s + 35 * 86400),
                                                          (submitted - start_s) // (7 * 86400), -1))
    assert inputs.anchor_s == start_s + 60.0 and (inputs.blocks == -1).sum() > 1000   # the jobs before warm it up
    # too short a span for two blocks
    with pytest.raises(ValueError, match="at least 2 blocks"):
        E.replay_block_inputs("public", E.CalibratedReplay(fit_days=99, block_days=30.0))
    E.replay_block_inputs.cache_clear()


def test_scale_load_around_an_anchor():
    w = make_workload([("a", 0, 1, 10), ("b", 100, 1, 10), ("c", 300, 1, 10)])
    assert E.scale_load(w, 2.0, anchor_s=100.0).arrival_s.tolist() == [50.0, 100.0, 200.0]


def test_tied_policies_are_named_with_what_was_measured():
    from dlcluster.experiments.policies import tie_clause
    rows = pd.DataFrame({"arm": ["FIFO", "FIFO", "Philly", "Philly", "Tiresias 2D-LAS"],
                         "jct_mean_s": [100.0, 102.0, 101.0, 101.0, 80.0],
                         "frag_delay_mean_s": [0.0, 0.0, 0.0, 0.0, 0.0],
                         "fair_share_delay_mean_s": [3600.0, 3600.0, 3600.0, 3600.0, 60.0]})
    text = tie_clause(rows)
    assert text == ("; FIFO and Philly gave the same mean JCT within 0.05% (1.7 min); their jobs waited on average "
                    "0 s for locality and 1.0 h for a quota or cap: Philly differs from FIFO only in relaxing "
                    "locality, which acts on the first")
    assert tie_clause(rows[rows["arm"] != "Philly"]) == ""


def test_every_load_gets_a_colour_past_the_palette():
    # zip(loads, LOAD_COLORS) dropped the sixth load from the plots without a word
    from dlcluster.experiments.plots import LOAD_COLORS, load_colors

    loads = [f"load {i}" for i in range(len(LOAD_COLORS) + 2)]
    colors = load_colors(loads)
    assert list(colors) == loads
    assert [colors[x] for x in loads] == [*LOAD_COLORS, *LOAD_COLORS[:2]]


def test_policy_context_is_generated_from_the_same_runs():
    rows = _rows({("L", "Philly", "all"): [0.30, 0.35], ("L", "FIFO", "all"): [0.5, 0.5]}, ["waited_share"])
    rows["queue_mean_s"] = [3600.0, 7200.0, 10.0, 10.0]
    rows["load_setting"] = "real"
    text = E.policy_context(rows, "L")
    assert text.startswith("[mechanism] Under Philly at L, 32.5% [95% CI ")
    assert "the mean wait of all jobs was 1.5 h [95% CI " in text and "had queues to act on" in text
    rows["waited_share"] = [0.001, 0.002, 0.5, 0.5]
    assert "the policies can only tie here" in E.policy_context(rows, "L")


#: Each experiment's baseline arm under the calibrated parameters of the test below (placement best fit): the policies'
#: Philly arm, the failures' arm without failures, early termination's arm without it, the locality arm relaxing
#: after the calibrated timeout, and the interference arm placing as calibrated (best fit: "pack") without
#: migration, under no interference
BASELINE_ARMS = (
    {"experiment": "policy", "policy": "philly"},
    {"experiment": "failures", "failure_model": "illustrative", "retry": "none"},
    {"experiment": "early_stop", "tolerance": None, "curve_source": "pollux"},
    {"experiment": "locality", "locality": "relax", "relax_after_s": 600.0, "long_jobs": "as-others"},
    {"experiment": "interference", "placement": "pack", "migration": False, "interference": "none",
     "colocated_one_server": 1.0, "colocated_spread": 1.0},
)


@pytest.fixture(scope="module")
def short_calibrated_replay(public_trace):
    """A short replay (1 day of warm-up, 2 measured) with calibrated parameters unlike the simulator's defaults, its
    mocked calibration, and notebook 05's replay of it (:func:`dlcluster.validation.calibrate.run_replay`)."""
    from dlcluster.validation import calibrate as vc
    from dlcluster.validation import calibration as vcache
    from dlcluster.validation import workload as vw

    full = vw.rfold_replay_workload(public_trace)
    begin = pd.Timestamp("2017-10-10 07:00", tz="UTC")
    replay = vw.measurement_window(full, begin, 2.0, 1.0)
    params = vc.ReplayParams(unknown_vc_quota="demand", max_capacity_factor=1.5, reclaim_after_s=120.0,
                             relax_after_s=600.0, gang_relax_after_s=1200.0, rack_size=32, placement="best_fit",
                             latency_s=60.0, slowdown=True,
                             real_placement_shares="2-4:100:0.9;5-8:100:0.7;>8:100:0")
    calibration = vcache.Calibration(params, pd.DataFrame(), {"fit": (EPOCH, begin),
                                                          "held_out": (begin, begin + pd.Timedelta(days=30))},
                                 {"complete_until": begin + pd.Timedelta(days=2), "busy_servers_mae_pp": 1.0,
                                  "busy_servers_mae_pp_complete": 1.0, "gpu_allocation_shortfall_pp": -1.0,
                                  "max_median_ratio": 1.2, "max_p90_ratio": 1.9, "max_ks": 0.1,
                                  "servers_spanned_max_ks": 0.1, "latency_only_wait_share": 0.1},
                                 {"top_vcs": 5, "trace": "public", "seed": 0, "replay_days": 2.0,
                                  "warmup_days": 1.0}, "k")
    reference = vc.run_replay(replay, public_trace.machines, public_trace.vc_quotas, params).result.jobs
    return full, replay, begin, params, calibration, reference


@pytest.mark.parametrize("arm", BASELINE_ARMS, ids=[a["experiment"] for a in BASELINE_ARMS])
def test_the_baseline_arm_is_notebook_05s_replay(short_calibrated_replay, monkeypatch, arm):
    """Every experiment's baseline arm (:data:`BASELINE_ARMS`) on the block design at the real load is notebook 05's
    replay (:func:`dlcluster.validation.calibrate.run_replay` with the calibrated parameters, the slowdown relative to
    each job's real placement included): the same jobs' JCTs and waits per block, with calibrated options that differ
    from the simulator's defaults (a gang timeout of its own among them)."""
    from dlcluster.validation import calibration as vcache

    full, replay, begin, params, calibration, reference = short_calibrated_replay
    workloads = vcache.ReplayWorkloads(None, full, replay, None)
    monkeypatch.setattr(vcache, "replay_workloads", lambda *args, **kwargs: workloads)
    monkeypatch.setattr(E.CalibratedReplay, "calibration", lambda self, trace, cache_dir=None: calibration)
    spec = E.CalibratedReplay(fit_days=99, block_days=1.0)   # fit_days unused: mocked
    E.replay_block_inputs.cache_clear()
    inputs = E.replay_block_inputs("public", spec)
    assert len(inputs.block_starts) == 2 and inputs.block_starts[0] == begin
    # the slowdown acts: finished jobs placed unlike their DRE record ran longer or shorter than their real durations
    done = (reference["status"] == "Pass").to_numpy()
    run_time, service = reference["run_time_s"].to_numpy()[done], replay.workload.service_s[done]
    assert (np.abs(run_time - service) > 1).sum() > 10
    submitted = replay.workload.arrival_s
    begin_s = (begin - replay.workload.epoch) / pd.Timedelta(seconds=1)
    np.testing.assert_array_equal(inputs.measured, (submitted >= begin_s) & (submitted < begin_s + 2 * 86400))
    common = {"trace": "public", "replay": spec.cell(), "calibration_cache": None, "seed": 0, "load": 1.0,
              "load_setting": "real", "resample_block_days": 0.0}
    columns = {k: v for k, v in {**common, **arm}.items() if k != "replay"}   # as run_sweep adds them
    rows = E.with_arms(E.run_cell({**common, **arm}).assign(**columns))
    everyone = rows[(rows["population"] == "all jobs") & (rows["bucket"] == "all")]
    assert list(everyone["seed"]) == [0, 1]   # the replicate is the block
    for block in (0, 1):
        same = reference[inputs.blocks == block]
        row = everyone[everyone["block"] == block].iloc[0]
        assert row["jobs"] == len(same) > 500
        assert row["jct_mean_s"] == pytest.approx(same["jct_s"].mean(), rel=1e-12)
        assert row["queue_mean_s"] == pytest.approx(same["queueing_delay_s"].mean(), rel=1e-12)
        ran = same[same["first_start_s"].notna()]
        assert row["spread_share"] == pytest.approx((ran["num_servers"] > 1).mean(), rel=1e-12)
        # the jobs whose real placement is their DRE record's (the others' from the shares)
        assert row["real_placement_record_share"] == pytest.approx(
            (replay.servers_spanned()[inputs.blocks == block] > 0).mean(), rel=1e-12)
    # pooled over the blocks: the mean over every measured job of notebook 05's replay
    pooled = E.level_interval(everyone, "jct_mean_s")
    assert pooled.mean == pytest.approx(reference[inputs.measured]["jct_s"].mean(), rel=1e-12)
    assert pooled.low <= pooled.mean <= pooled.high
    E.replay_block_inputs.cache_clear()


def test_an_implication_is_answered_from_its_interval():
    from dlcluster.experiments.intervals import Interval

    method = "paired by block"
    assert E.answer_words(Interval(-0.10, -0.15, -0.05, 8, method)) == "supported"
    assert E.answer_words(Interval(0.10, 0.05, 0.15, 8, method)) == "contradicted"
    assert E.answer_words(Interval(0.10, 0.05, 0.15, 8, method), predicted="up") == "supported"
    # an interval across no change bounds the effect by its larger end
    assert E.answer_words(Interval(-0.02, -0.06, 0.04, 8, method)) == "no effect larger than 6%"
    # under 1%: one decimal (0.16% would read "no effect larger than 0%")
    assert E.answer_words(Interval(-0.0005, -0.0016, 0.0004, 8, method)) == "no effect larger than 0.2%"
    assert E.answer_words(Interval(-0.02, float("nan"), float("nan"), 1, "one block")).startswith("not computable")


def test_an_implications_change_shows_a_narrow_interval_to_a_tenth_of_a_point():
    from dlcluster.experiments.common import percent_text
    from dlcluster.experiments.implications import Answer
    from dlcluster.experiments.intervals import Interval

    def shown(change):
        row = Answer("migrate long jobs", "supported", "mean JCT", change, "mechanism", "7 blocks").row()
        return row["change"], row["smallest detectable change"]

    narrow = Interval(-0.0242, -0.0310, -0.0187, 7, "paired by block", detectable=0.0092)
    assert shown(narrow) == ("−2.4% [95% CI −3.1%, −1.9%]", "±0.9%")
    wide = Interval(-0.382, -0.446, -0.306, 7, "paired by block", detectable=0.177)
    assert shown(wide) == ("−38% [95% CI −45%, −31%]", "±18%")
    assert percent_text(0.0004, 1) == "±0%" and percent_text(-0.0004) == "±0%"


# ----------------------------------------------------------------------------- what a sentence may say

def test_a_change_on_a_near_zero_base_is_a_difference_never_a_ratio():
    from dlcluster.experiments.common import NEAR_ZERO_DURATION_S, change_text, near_zero_reason
    from dlcluster.experiments.intervals import Interval

    # a fragmentation wait of 0.3 s → 3.3 s: x11 as a ratio, +3 s as a difference (interval over 2 seeds: t(0.975, 1)
    # x sd of the differences [2, 4] / sqrt(2) = 12.7062047)
    rows = _rows({("L", "spread (Philly)", "5-8"): [0.2, 0.4], ("L", "spread (Philly) + migration", "5-8"): [2.2, 4.4]},
                 ["frag_delay_mean_s"])
    text = E.interference.compare_arms(rows, "spread (Philly)", "spread (Philly) + migration", "frag_delay_mean_s",
                                       "that wait")
    assert text == ("made no significant difference at 2 seeds to that wait (0 s → 3 s, +3 s [95% CI −10 s, +16 s]; "
                    f"a difference, not a ratio: a base under {NEAR_ZERO_DURATION_S:g} s, where a ratio swings by "
                    "factors on seconds)")
    # a base of a minute or more keeps its ratio
    assert near_zero_reason(60.0, Interval(1.0, 0.5, 1.5, 7, "paired by block"), "queue_mean_s") == ""
    # a ratio interval that reaches x0 is not shown either, whatever the base
    assert near_zero_reason(3600.0, Interval(10.0, -1.0, 33.0, 7, "paired by block"), "jct_mean_s").startswith(
        "the ratio's interval reaches from ×0 past no change")
    # ... but a wait that all but vanished, on a base of hours, keeps its ratio (−99% is what happened)
    assert near_zero_reason(3600.0, Interval(-0.9, -0.99, -0.8, 7, "paired by block"), "queue_mean_s") == ""
    # a share near zero: the difference in points
    assert near_zero_reason(0.005, None, "waited_share").startswith("a base under 1%")
    # no difference to show: the two values alone
    assert change_text(0.0, 1.0, Interval(10.0, -1.0, 33.0, 7, "m"), near_zero="why") == "0 s → 1 s; no ratio: why"


def test_a_preemptive_policys_first_wait_is_not_comparable_with_philly():
    from dlcluster.report.verdicts import NOT_COMPARABLE

    assert E.is_preemptive("Tiresias Gittins") and E.is_preemptive("SRTF (oracle bound)")
    assert not E.is_preemptive("FIFO") and not E.is_preemptive("Philly")
    verdict = E.first_wait_verdict("Tiresias Gittins", "Philly", 5000)
    assert verdict.verdict == NOT_COMPARABLE and verdict.reason.startswith(
        "Another definition: ours is wait from submit to the first start; a preempted job's later waits are not in it")
    assert E.first_wait_verdict("FIFO", "Philly", 5000).like_for_like.startswith("like for like")
    # the paired changes: the first wait of Gittins has no value and says why; its JCT and every wait are compared
    rows = _rows({("L", "Philly", "all"): [100.0, 200.0], ("L", "Tiresias Gittins", "all"): [1.0, 2.0],
                  ("L", "FIFO", "all"): [110.0, 220.0]}, ["jct_mean_s", "wait_total_mean_s", "queue_mean_s"])
    changes = E.policy_changes(rows).set_index(["metric", "arm"])
    first = changes.loc[("queue_mean_s", "Tiresias Gittins")]
    assert math.isnan(first["mean"]) and first["verdict"] == NOT_COMPARABLE and "preempted" in first["why"]
    assert changes.loc[("queue_mean_s", "FIFO"), "mean"] == pytest.approx(0.1)
    assert changes.loc[("wait_total_mean_s", "Tiresias Gittins"), "mean"] == pytest.approx(-0.99)
    assert changes.loc[("jct_mean_s", "Tiresias Gittins"), "mean"] == pytest.approx(-0.99)


def test_every_sentence_kind_is_tagged_with_its_reason():
    assert E.kind_tag("mechanism") == "[mechanism]"
    assert E.tagged("assumption", "X.", "an assumed slowdown") == "[assumption, not a finding: an assumed slowdown] X."
    with pytest.raises(ValueError, match="needs its reason"):
        E.kind_tag("by construction")
    with pytest.raises(ValueError, match="kind must be one of"):
        E.kind_tag("finding")
    assert E.load_kind("real") == ("mechanism", "")
    assert E.load_kind("scaled")[0] == "assumption"


def test_an_interval_wider_than_the_target_says_why():
    from dlcluster.experiments.implications import Answer
    from dlcluster.experiments.intervals import Interval

    # isolate or pack under the paper's assumed interference: x10.1 [x8.4, x12.0]
    big = Interval(9.14, 7.41, 11.04, 7, "paired by block", detectable=0.3)
    text = E.interval_target(big, "assumption", "colocation interference assumed")
    assert text.startswith("not met (+741% to +1104%, 363 points): an effect of ×10 has an interval wider than ±10 "
                           "points although its direction is certain (the whole interval lies above no change): "
                           "relative to the effect itself it spans −17% to +19%, and ±10 points would need the effect "
                           "known to ±1.0% of itself")
    assert text.endswith("; and it rests on an assumed input (colocation interference assumed)")
    assert E.interval_target(Interval(-0.024, -0.031, -0.019, 7, "m"), "mechanism") == "met (±0.7 points)"
    vague = E.interval_target(Interval(0.05, -0.10, 0.25, 7, "m", detectable=0.3), "mechanism")
    assert vague == ("not met (−10% to +25%, 35 points): the blocks disagree more than this design resolves; the "
                     "smallest change it could detect is ±30%")
    answers = [Answer("isolate or pack against interference", "contradicted", "mean JCT", big, "assumption",
                      "7 blocks", "colocation interference assumed"),
               Answer("migrate long jobs", "supported", "mean JCT", Interval(-0.024, -0.031, -0.019, 7, "m"),
                      "mechanism", "7 blocks")]
    assert E.answers_table(answers).loc["migrate long jobs", "±10-point target"] == "met (±0.7 points)"
    note = E.target_note(answers)
    assert note.startswith("Intervals wider than the ±10-point target: *isolate or pack against interference* "
                           "(mean JCT): not met") and "migrate long jobs" not in note


def test_strict_locality_explains_shorter_waits_from_the_same_runs():
    def block(arm, bucket, queue, gpu_hours, spread):
        return [{"load_label": "L", "arm": arm, "bucket": bucket, "seed": seed, "jobs": 5, "queue_mean_s": q,
                 "gpu_hours": gpu_hours, "spread_share": spread} for seed, q in enumerate(queue)]

    relax, strict = "relax after 3 min", "strict locality"
    rows = pd.DataFrame([
        *block(relax, "1", [7200, 7200], 100, 0.0), *block(strict, "1", [3600, 3600], 100, 0.0),
        *block(relax, "2-4", [600, 600], 50, 0.25), *block(strict, "2-4", [1200, 1200], 40, 0.0),
        *block(relax, "5-8", [3600, 3600], 80, 0.5), *block(strict, "5-8", [7200, 7200], 60, 0.0),
        *block(relax, ">8", [86400, 86400], 500, 1.0), *block(strict, ">8", [43200, 43200], 500, 1.0)])
    text = E.strict_locality_explanation(rows, "L", relax)
    assert text.startswith("[mechanism] Mean first wait, 'relax after 3 min' → strict locality: 1-GPU jobs 2.0 h → "
                           "1.0 h, −50% [95% CI −50%, −50%]: lower; >8-GPU jobs 1.0 d → 12.0 h, −50%")
    assert ("strict locality holds the 2-4 and 5-8-GPU gangs back until one server has room (their waits: 2-4-GPU "
            "jobs 20.0 min against 10.0 min, 5-8-GPU jobs 2.0 h against 1.0 h)") in text
    assert ("where 'relax after 3 min' ran 25% of 2-4-GPU jobs, 50% of 5-8-GPU jobs over more than one server, "
            "strict locality spreads none (0% and 0%)") in text
    # the >8-GPU jobs waited longer under strict locality: no word about them
    slower = rows.assign(queue_mean_s=np.where((rows["bucket"] == ">8") & (rows["arm"] == strict), 2e5,
                                               rows["queue_mean_s"]))
    assert ">8-GPU gangs" not in E.strict_locality_explanation(slower, "L", relax)
    assert E.strict_locality_explanation(rows.assign(queue_mean_s=100.0), "L", relax) == ""


def test_a_small_certain_effect_that_misses_the_target_is_put_down_to_the_blocks():
    from dlcluster.experiments.intervals import Interval

    text = E.interval_target(Interval(0.34, 0.06, 0.67, 12, "m", detectable=0.39), "mechanism")
    assert text == ("not met (+6% to +67%, 61 points): the blocks disagree more than this design resolves; the "
                    "smallest change it could detect is ±39%; its direction is certain all the same")


def test_every_locality_arm_keeps_the_calibrated_back_off_and_gang_timeout():
    """The locality arms vary the relax timeout and the long jobs' treatment only: the calibrated back-off scope and
    the gangs' own timeout hold in every arm (so that the arm at the calibrated timeout is notebook 05's replay), and
    so does the replay's slowdown, never a second one on top of it."""
    from dlcluster.experiments.grid import simulation_options

    workload = make_workload([("a", 0, 1, 10.0)])
    philly = {"locality": "relax", "relax_after_s": 600.0, "backoff": "every", "gang_relax_after_s": 1200.0}
    replay_slowdown = object()
    for cell in ({"locality": "relax", "relax_after_s": 600.0, "long_jobs": "as-others"},
                 {"locality": "relax", "relax_after_s": 60.0, "long_jobs": "as-others"},
                 {"locality": "relax", "relax_after_s": 600.0, "long_jobs": "strict"}):
        policy, options, _, _ = simulation_options({"experiment": "locality", **cell}, workload, philly,
                                                   replay_slowdown)
        assert (policy.relax_after_s, policy.backoff, policy.gang_relax_after_s) == (cell["relax_after_s"], "every",
                                                                                     1200.0)
        assert options["slowdown"] is replay_slowdown
