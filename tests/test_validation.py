"""The simulator-validation helpers on constructed cases with known answers."""

import json
import pickle
import shutil
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import pytest

import dlcluster.paths
from dlcluster.sim.workload import Workload
from dlcluster.trace import load_trace
from dlcluster.trace.times import to_local_naive
from dlcluster.validation import calibrate as vc, heldout, latency, measures
from dlcluster.validation import calibration as vcache
from dlcluster.validation import jobsets as js
from dlcluster.validation import workload as vw


def test_best_hour_shift_finds_a_known_shift():
    rng = np.random.default_rng(1)
    base = rng.poisson(5, 900)
    other = np.concatenate([rng.poisson(5, 37), base])  # other[h + 37] == base[h]
    shift, corr = js.best_hour_shift(base, other, min_overlap_h=500)
    assert shift == 37 and corr == pytest.approx(1.0)


def _constructed_sets(n=3000, seed=2):
    """Reference jobs with calendar times across the DST change, and the same jobs as wall-clock offsets."""
    rng = np.random.default_rng(seed)
    begin = pd.Timestamp("2017-10-01 00:00", tz="UTC")
    submit = begin + pd.to_timedelta(np.sort(rng.uniform(0, 50 * 86400, n)).round(), unit="s")
    gpus = rng.choice([1, 2, 4, 8], n)
    duration = rng.integers(60, 10**6, n).astype(float)
    origin_local = pd.Timestamp("2017-09-20 03:00:00")
    # the offset set also has jobs of its own before the reference begins
    early = pd.Series(origin_local + pd.to_timedelta(np.sort(rng.uniform(0, 10 * 86400, 400)).round(), unit="s"))
    local = pd.concat([early, to_local_naive(pd.Series(submit))], ignore_index=True)
    offsets = (local - origin_local).dt.total_seconds().to_numpy()
    all_gpus = np.concatenate([rng.choice([1, 2], 400), gpus])
    all_duration = np.concatenate([rng.integers(60, 10**6, 400).astype(float), duration])
    return submit, gpus, duration, origin_local, offsets, all_gpus, all_duration


def test_align_offsets_recovers_origin_and_wallclock_offsets():
    submit, gpus, duration, origin_local, offsets, o_gpus, o_duration = _constructed_sets()
    al = js.align_offsets(offsets, o_gpus, o_duration, pd.Series(submit), gpus, duration)
    assert al.origin_local == origin_local
    assert al.supporting_pairs == len(submit)
    assert al.utc_mode_before_dst_s == 0 and al.utc_mode_after_dst_s == 3600
    assert al.offsets_are_wallclock
    back = js.offsets_to_utc(offsets[400:], al.origin_local).reset_index(drop=True)
    truth = pd.Series(submit).reset_index(drop=True)
    # only wall-clock times of the repeated hour (01:00-02:00 PST on 2017-11-05) come back an hour early (read as PDT)
    off = back != truth
    repeated = ((truth >= pd.Timestamp("2017-11-05 09:00", tz="UTC"))
                & (truth < pd.Timestamp("2017-11-05 10:00", tz="UTC")))
    assert (off == repeated).all() and ((truth - back)[off] == pd.Timedelta(hours=1)).all()


def test_offsets_to_utc_across_dst():
    utc = js.offsets_to_utc([0.0, 86400.0], pd.Timestamp("2017-11-04 12:00:00"))
    assert list(utc) == [pd.Timestamp("2017-11-04 19:00", tz="UTC"), pd.Timestamp("2017-11-05 20:00", tz="UTC")]


def test_match_exact_is_one_to_one_with_ties_in_duration_order():
    t = pd.Series(pd.to_datetime(["2017-10-01 00:00:00", "2017-10-01 00:00:00", "2017-10-01 00:00:05"], utc=True))
    left = vw.match_exact(t, [1, 1, 2], [50.0, 10.0, 7.0], t[[1, 0, 2]].reset_index(drop=True),
                          [1, 1, 4], [11.0, 49.0, 7.0])
    # the two 1-GPU jobs of the same second pair by duration rank; the 2-GPU job has no partner
    assert list(left) == [1, 0, -1]


def test_match_nearest_tolerance():
    a = pd.Series(pd.to_datetime(["2017-10-01 00:00:00", "2017-10-01 01:00:00"], utc=True))
    b = pd.Series(pd.to_datetime(["2017-10-01 00:00:01", "2017-10-01 01:00:05"], utc=True))
    assert list(js.match_nearest(a, [2, 2], b, [2, 2], tolerance_s=1.0)) == [0, -1]


def test_draw_vcs_is_deterministic_and_respects_size_buckets():
    ref_vc = ["a"] * 50 + ["b"] * 50
    ref_gpus = [1] * 50 + [8] * 50
    gpus = np.array([1] * 30 + [8] * 30)
    one = vw.draw_vcs(gpus, ref_vc, ref_gpus, seed=7)
    assert list(one) == list(vw.draw_vcs(gpus, ref_vc, ref_gpus, seed=7))
    assert set(one[:30]) == {"a"} and set(one[30:]) == {"b"}


def test_warm_start_mask():
    arrival = np.array([0.0, 50.0, 90.0, 100.0, 150.0])
    service = np.array([200.0, 10.0, 5.0, 1.0, 1.0])
    # measured from t=100 with 20 s of warm-up: job 0 still runs at 100, job 2 is inside the warm-up
    assert list(vw.warm_start_mask(arrival, service, 100.0, 20.0)) == [True, False, True, True, True]
    assert list(vw.warm_start_mask(arrival, service, 100.0, 0)) == [False, False, False, True, True]
    assert vw.warm_start_mask(arrival, service, 100.0, None).all()


def test_workload_from_raw_job_log(raw_small):
    w, excluded = vw.workload_from_job_log(load_trace(raw_small))
    assert list(w.jobid) == ["application_1_0001", "application_1_0002", "application_1_0006"]
    # service = last end - first start: the failed job's two attempts and the gap between them
    assert list(w.service_s) == [3600.0, 3300.0, 9000.0]
    assert list(w.num_gpus) == [4, 1, 1] and list(w.vc) == ["vc1", "vc1", "vc1"]
    assert excluded == {"never started (no attempt start or end)": 1,
                        "start or end unknown (e.g. still running at the trace's end)": 2}


def _replay_of_two_dre_jobs(arrival_s, num_gpus, service_s):
    """Replay jobs r0, r1 of VC "a" from 2017-10-01 UTC, matched to the DRE records d0, d1."""
    epoch = pd.Timestamp("2017-10-01", tz="UTC")
    w = Workload(jobid=np.array(["r0", "r1"], dtype=object), vc=np.array(["a", "a"], dtype=object),
                 user=np.array([None, None], dtype=object), arrival_s=np.array(arrival_s),
                 num_gpus=np.array(num_gpus), service_s=np.array(service_s), epoch=epoch)
    return vw.ReplayWorkload(w, np.array(["dre record"] * 2, dtype=object), np.array(["d0", "d1"], dtype=object),
                             epoch)


def test_dre_first_waits_use_the_matched_duration():
    epoch = pd.Timestamp("2017-10-01", tz="UTC")
    rep = _replay_of_two_dre_jobs(arrival_s=[0.0, 0.0], num_gpus=[2, 4], service_s=[1000.0, 500.0])
    dre = pd.DataFrame({"jobid": ["d0", "d1", "d2"], "vc": ["a", "a", "b"], "num_gpus": [2, 4, 8],
                        "submitted": [epoch] * 3,
                        "last_end": [epoch + pd.Timedelta(seconds=1100), epoch + pd.Timedelta(seconds=400),
                                     epoch + pd.Timedelta(seconds=50)],
                        "queueing_delay_s": [600.0, 0.0, 0.0], "num_servers": [1, 1, 2],
                        "run_time_s": [500.0, 400.0, 50.0]})
    table, excluded = vw.dre_first_waits(rep, dre)
    # d0: first start = 1100 - 1000 = 100 s after submit (DRE recorded 600 s: its last attempt)
    assert list(table["first_wait_s"]) == [100.0] and list(table["recorded_wait_s"]) == [600.0]
    assert list(table["num_servers"]) == [1] and list(table["run_time_s"]) == [500.0]
    assert excluded == {"no matching job in the replay workload": 1, "first start before submit (inconsistent)": 1}


def test_gpu_seconds_per_day():
    days = pd.date_range("2017-10-01", periods=2, freq="D", tz="UTC")
    submit = pd.Series(pd.to_datetime(["2017-10-01 12:00", "2017-10-02 00:00"], utc=True))
    out = js.gpu_seconds_per_day(submit, [2, 1], [86400.0, 3600.0], days)
    assert list(out) == [2 * 43200.0, 2 * 43200.0 + 3600.0]


def test_ks_on_hand_made_samples():
    assert measures.ks_distance([1, 2, 3], [4, 5, 6]) == 1.0
    assert measures.ks_distance([1, 2, 3, 4], [1, 2, 3, 4]) == 0.0
    assert measures.ks_distance([1, 2, 3, 4], [3, 4, 5, 6]) == 0.5


def test_real_occupancy_leaves_out_monitoring_gaps():
    t = pd.date_range("2017-10-01", periods=4, freq="min", tz="UTC")
    occ = pd.DataFrame({"time": t, "active": [10, 0, 20, 30], "total": [40, 40, 40, 40]})
    out = measures.real_occupancy(occ, "1h")
    assert list(out) == [pytest.approx(0.5)]
    assert int(measures.monitoring_gaps(occ).sum()) == 1


def test_log_median_error_and_quota_completion():
    table = pd.DataFrame({"simulated_median_s": [200.0, 0.0], "real_median_s": [100.0, 1.0]})
    assert measures.log_median_error(table) == pytest.approx(np.log(2) / 2)
    w = Workload(jobid=np.array(["j0", "j1", "j2"], dtype=object), vc=np.array(["a", "x", "y"], dtype=object),
                 user=np.array([None] * 3, dtype=object), arrival_s=np.zeros(3), num_gpus=np.array([1, 1, 3]),
                 service_s=np.array([10.0, 10.0, 10.0]), epoch=pd.Timestamp("2017-10-01", tz="UTC"))
    table = pd.DataFrame({"vc": ["a"], "gpus": [8]})
    assert vc.vc_quotas(table, w, 16, "none") == {"a": 8}
    # 8 GPUs left over, shared 1:3 by GPU-seconds
    assert vc.vc_quotas(table, w, 16, "demand") == {"a": 8, "x": 2, "y": 6}


def test_spans_split_the_occupancy_data():
    t = pd.date_range("2017-10-01", periods=10 * 1440, freq="min", tz="UTC")
    occ = pd.DataFrame({"time": t, "active": 1, "total": 2})
    s = measures.spans(occ, 7)
    assert s["fit"] == (t[0], t[0] + pd.Timedelta(days=7)) and s["held_out"][0] == s["fit"][1]
    with pytest.raises(ValueError, match="no held-out span"):
        measures.spans(occ, 12)


@pytest.fixture(scope="module")
def rfold_alignment(public_trace):
    rf, pol = public_trace.rfold_jobs, public_trace.jobs_of("pollux")
    return js.align_offsets(rf["arrival_offset_s"], rf["num_gpus"], rf["duration_s"],
                            pol["submitted"], pol["num_gpus"], pol["run_time_s"])


def test_rfold_alignment_on_the_real_sets(rfold_alignment):
    # RFold's offset 0 is 2017-08-14 23:27:00 Pacific wall-clock: offsets were taken from the job log's local times
    assert rfold_alignment.origin_local == pd.Timestamp("2017-08-14 23:27:00")
    # 75,116 (GPUs, duration)-equal pairs of the 907,817 candidates differ by exactly the modal offset
    assert rfold_alignment.offsets_are_wallclock and rfold_alignment.supporting_pairs == 75116
    assert rfold_alignment.candidate_pairs == 907817


def test_replay_workload_vcs_are_labelled_and_deterministic(public_trace, rfold_alignment):
    one = vw.rfold_replay_workload(public_trace, rfold_alignment, seed=0)
    again = vw.rfold_replay_workload(public_trace, rfold_alignment, seed=0)
    other = vw.rfold_replay_workload(public_trace, rfold_alignment, seed=1)
    assert len(one.workload) == 111549
    assert (one.workload.vc == again.workload.vc).all()
    drawn = one.vc_source == "drawn"
    # another seed changes only drawn VCs
    assert (one.workload.vc[~drawn] == other.workload.vc[~drawn]).all()
    assert (one.workload.vc[drawn] != other.workload.vc[drawn]).any()
    # a job with a DRE record carries that record's VC; every Pollux job is matched once
    dre = public_trace.jobs_of("dre").set_index("jobid")
    rec = one.vc_source == "dre record"
    assert (one.workload.vc[rec] == dre.loc[one.dre_jobid[rec].astype(str), "vc"].to_numpy()).all()
    assert one.info["pollux_jobs_matched"] == 82247
    # 16 of the 5,910 DRE records find no RFold job of the same submit second and GPUs
    assert one.info["dre_records_matched"] == rec.sum() == pd.notna(one.dre_jobid).sum() == 5894


def test_cold_start_keeps_nothing_from_before_the_measurement(public_trace, rfold_alignment):
    cold = vw.rfold_replay_workload(public_trace, rfold_alignment, warmup_days=0)
    start_s = (cold.measure_start - cold.workload.epoch) / pd.Timedelta(seconds=1)
    assert cold.measure_start == public_trace.occupancy["time"].min()
    assert (cold.workload.arrival_s >= start_s).all()
    warm = vw.rfold_replay_workload(public_trace, rfold_alignment, warmup_days=7)
    early = warm.workload.arrival_s < start_s - 7 * 86400
    # jobs from before the warm-up are kept only when still running at the measurement start
    assert early.any() and (warm.workload.arrival_s[early] + warm.workload.service_s[early] > start_s).all()


def test_missing_at_end_share_on_two_jobs():
    t0 = pd.Timestamp("2017-10-01", tz="UTC")
    submit = pd.Series([t0, t0])
    # a 2-GPU job of 10 days and a 1-GPU job of 1 day, looked at half a day in
    share = js.missing_at_end_share(submit, [2, 1], [10 * 86400.0, 86400.0], [t0 + pd.Timedelta(hours=12)],
                                    [0, 1, 10])
    assert list(share) == [1.0, pytest.approx(2 / 3), 0.0]


def test_scheduler_latency_median_spread_and_determinism():
    assert latency.scheduler_latency(vc.ReplayParams(), [1, 2, 8]).tolist() == [0.0, 0.0, 0.0]
    assert latency.scheduler_latency(vc.ReplayParams(latency_s=60.0), [1, 8]).tolist() == [60.0, 60.0]
    spread = vc.ReplayParams(latency_s=60.0, latency_spread=2.0)
    draws = latency.scheduler_latency(spread, np.ones(20001), seed=3)
    assert np.array_equal(draws, latency.scheduler_latency(spread, np.ones(20001), seed=3))
    assert np.median(draws) == pytest.approx(60.0, rel=0.05)
    # sigma 2: the 84th percentile sits e^2 above the median
    assert np.quantile(draws, 0.8413) / np.median(draws) == pytest.approx(np.exp(2.0), rel=0.1)


def _two_mode_waits(n_fast, n_slow, fast_s, slow_s, bucket, seed):
    rng = np.random.default_rng(seed)
    waits = np.concatenate([fast_s * np.exp(0.3 * rng.standard_normal(n_fast)),
                            slow_s * np.exp(1.0 * rng.standard_normal(n_slow))])
    return pd.DataFrame({"submitted": pd.Timestamp("2017-10-05", tz="UTC"), "bucket": bucket, "first_wait_s": waits})


def test_latency_mixture_recovers_two_known_modes_per_size():
    # 40% of 2-4 GPU jobs start after ~12 s, the rest after ~400 s; 5-8 GPU jobs: 30% at ~12 s, else ~1,000 s
    waits = pd.concat([_two_mode_waits(800, 1200, 12.0, 400.0, "2-4", 1),
                       _two_mode_waits(300, 700, 12.0, 1000.0, "5-8", 2),
                       _two_mode_waits(5, 5, 12.0, 1000.0, ">8", 3)])
    span = (pd.Timestamp("2017-10-01", tz="UTC"), pd.Timestamp("2017-10-10", tz="UTC"))
    rows = {row[0]: dict(zip(latency.LATENCY_FIELDS, row, strict=True))
            for row in latency.fit_latency_mixture(waits, span)}
    assert set(rows) == {"all", "2-4", "5-8"}   # >8 has 10 records, under min_records: its jobs take the "all" row
    for bucket, share, slow in (("2-4", 0.4, 400.0), ("5-8", 0.3, 1000.0)):
        assert rows[bucket]["fast_share"] == pytest.approx(share, abs=0.03)
        assert rows[bucket]["fast_median_s"] == pytest.approx(12.0, rel=0.05)
        assert rows[bucket]["fast_sigma"] == pytest.approx(0.3, rel=0.15)
        assert rows[bucket]["slow_median_s"] == pytest.approx(slow, rel=0.15)
        assert rows[bucket]["slow_sigma"] == pytest.approx(1.0, rel=0.15)
    # outside the span nothing is fitted
    with pytest.raises(ValueError, match="0 real waits in the span"):
        latency.fit_latency_mixture(waits, (span[1], span[1] + pd.Timedelta(days=1)))
    # drawing from the fit gives each size its own modes: 5-8 GPU jobs wait longer than 2-4 GPU ones
    params = vc.ReplayParams(latency_mixture=latency.fit_latency_mixture(waits, span))
    assert vc.ReplayParams.from_dict(json.loads(json.dumps(asdict(params)))) == params
    draws = latency.scheduler_latency(params, np.repeat([4, 8, 16, 1], 20000), seed=0).reshape(4, -1)
    assert np.mean(draws[0] < 40) == pytest.approx(0.4, abs=0.02)
    assert np.mean(draws[1] < 40) == pytest.approx(0.3, abs=0.02)
    assert np.median(draws[1][draws[1] > 40]) > 2 * np.median(draws[0][draws[0] > 40])
    # >8 GPUs (too few records for a fit of their own) and 1 GPU both take the "all" row
    assert np.mean(draws[2] < 40) == pytest.approx(np.mean(draws[3] < 40), abs=0.02)
    assert np.mean(draws[2] < 40) == pytest.approx(rows["all"]["fast_share"], abs=0.02)
    single = latency.fit_latency_mixture(waits, span, by_size=False, modes=1)
    assert [row[0] for row in single] == ["all"] and single[0][1] == 0.0
    constant = vc.ReplayParams(latency_mixture=latency.fit_latency_mixture(waits, span, by_size=False, modes=0))
    assert len(set(latency.scheduler_latency(constant, [1, 4, 8, 64]).tolist())) == 1


def _two_job_replay(params):
    """Two 8-GPU jobs on one 8-GPU server: the second waits for the first (1000 s of service)."""
    rep = _replay_of_two_dre_jobs(arrival_s=[0.0, 10.0], num_gpus=[8, 8], service_s=[1000.0, 1000.0])
    machines = pd.DataFrame({"machine": ["m0"], "num_gpus": [8]})
    quotas = pd.DataFrame({"vc": ["a"], "nodes": [1], "gpus": [8]})
    return vc.run_replay(rep, machines, quotas, params)


def test_replay_params_put_the_scheduling_cycle_into_the_simulation():
    # a 4-s cycle: r0 enters the queue at 30 s and waits for the tick at 32 s; r1 enters at 40 s (a tick) and takes
    # the server at 1032 s, itself a tick, when r0 ends
    jobs = _two_job_replay(vc.ReplayParams(latency_s=30.0, heartbeat_s=4.0)).result.jobs
    assert jobs["first_start_s"].tolist() == [32.0, 1032.0]
    assert jobs["held_by_timer_s"].tolist() == [2.0, 0.0]


def test_replay_adds_the_scheduler_latency_to_each_wait_and_table2_counts_it_as_other():
    from dlcluster.validation import scorecard
    replay = _two_job_replay(vc.ReplayParams(latency_s=30.0))
    jobs = replay.result.jobs
    # r0 enters the queue at 30 s and starts at once; r1 enters at 40 s and waits until r0 ends (1030 s)
    assert jobs["queueing_delay_s"].tolist() == [0.0, 990.0]
    real = pd.DataFrame({"jobid": ["d0", "d1"], "vc": ["a", "a"],
                         "submitted": [pd.Timestamp("2017-10-01", tz="UTC")] * 2,
                         "num_gpus": [8, 8], "bucket": ["5-8", "5-8"], "first_wait_s": [30.0, 1020.0]})
    pairs = measures.paired_delays(replay, real)
    assert pairs["simulated_s"].tolist() == [30.0, 1020.0]
    table = scorecard.replay_table2(replay)
    row = table.loc["5-8"]
    assert row["wait_h"] == pytest.approx((30 + 1020) / 3600)
    # r1's 990 s are fair-share or fragmentation (the server is busy), both jobs' 30 s latency is "other"
    assert row["other_share"] == pytest.approx(60 / 1050)
    assert row["fair_share_share"] + row["fragmentation_share"] == pytest.approx(990 / 1050)


def test_calibrated_replay_is_the_one_replay_record_with_what_it_ran_on():
    from dlcluster.validation.replay import Replay
    params = vc.ReplayParams(latency_s=30.0, lending=False)
    replay = _two_job_replay(params)
    assert type(replay) is Replay  # the same record notebook 01's Pollux replay returns
    assert replay.params == params and replay.lending is False and replay.quotas == {"a": 8}
    assert replay.topology.total_gpus == 8 and replay.racks == {"m0": 0}
    assert replay.latency_s.tolist() == [30.0, 30.0] and len(replay.replay.workload) == 2


def test_scorecard_marks_each_target():
    from dlcluster.validation import scorecard
    held = {"busy_servers_mae_pp_complete": 3.0, "gpu_allocation_shortfall_pp": 2.5, "max_median_ratio": 1.4,
            "max_p90_ratio": 2.1, "fig3_median_ks": 0.15, "fig3_max_ks": float("nan"), "fig3_share_3min_within": 0.5,
            "servers_spanned_max_ks": 0.1, "latency_only_wait_share": 0.05}
    card = scorecard.scorecard(held)
    # at most 5 / 0 / 1.5 / 2 / 0.15 / 0.3 (NaN: not measured, not met) / more than half / 0.15 / 0.2
    assert card["met"].tolist() == [True, False, True, False, True, False, False, True, True]
    text = scorecard.scorecard_text(card)
    assert text.startswith("5 of 9 validation targets met")
    assert "2.50 (target at most 0)" in text and "0.50 (target more than 0.5)" in text
    assert scorecard.scorecard({**held, "fig3_share_3min_within": 0.51})["met"].sum() == 6
    # each target's reason, from the one function that decides every verdict
    reasons = card.set_index("key")["reason"]
    assert reasons["fig3_max_ks"] == "Full trace's Figure 3: largest KS over those cells could not be measured."
    assert reasons["max_p90_ratio"].startswith("Largest p90 first-wait ratio per size bucket, either way 2.1, ")


def test_helios_complete_log_figures_are_the_published_ones():
    from dlcluster.validation import peers
    table = peers.helios_complete_log()
    assert table.loc["all", ["fifo_jct_s", "fifo_queue_s", "sjf_jct_s", "sjf_queue_s"]].tolist() == \
        [86072, 56531, 34272, 4731]
    assert table.drop(index="all")["nodes"].sum() == table.loc["all", "nodes"] == 352


def test_complete_log_comparison_on_a_two_job_workload():
    from dlcluster.validation import peers
    epoch = pd.Timestamp("2017-10-02 07:00", tz="UTC")
    w = Workload(jobid=np.array(["a", "b", "c"], dtype=object), vc=np.array(["ed69ec", "ed69ec", "nope"], dtype=object),
                 user=np.array([None] * 3, dtype=object), arrival_s=np.array([0.0, 10.0, 0.0]),
                 num_gpus=np.array([64, 8, 1]), service_s=np.array([100.0, 50.0, 5.0]), epoch=epoch)
    quotas = pd.DataFrame({"vc": ["ed69ec"], "nodes": [8], "gpus": [64]})
    table, excluded = peers.complete_log_comparison(w, quotas, policies=("fifo",))
    # ed69ec has 8 nodes: job b waits for job a (FIFO, whole cluster): queue 90 s, JCT 140 s
    assert table.loc["ed69ec", "ours_fifo_queue_s"] == pytest.approx(45.0)
    assert table.loc["ed69ec", "ours_fifo_jct_s"] == pytest.approx((100 + 140) / 2)
    assert table.loc["ed69ec", "helios_fifo_queue_s"] == 28
    assert excluded == {"VC without a node count (peer mode)": 1}


SMALL_SPACE = {"relax_after_s": [60.0, 180.0],
               "reclaim_after_s": {"low": 60.0, "high": 600.0, "log": True, "off": None}}


def test_cached_calibration_equals_a_fresh_one(public_trace, tmp_path, monkeypatch):
    first = vcache.calibrated_params("public", fit_days=2, space=SMALL_SPACE, n_trials=3, replay_days=3, warmup_days=1,
                                     cache_dir=tmp_path)
    files = sorted(f.name for f in tmp_path.glob("calibration-*"))
    # the study, the result, the lock that keeps a second process from searching beside this one, the calibrated
    # replay the held-out figures were measured on and the workloads it replayed
    assert files == [f"calibration-{first.key}.{ext}" for ext in ("db", "json", "lock", "replay.pickle",
                                                                  "workloads.pickle")]
    assert len(first.trials) == 3
    # the first trial is the start point: unlimited lending, no reclaim, relax after 3 min, overhead-only latency
    assert first.trials.loc[0, "relax_after_s"] == 180.0 and first.trials["reclaim_after_s"].isna()[0]
    # the same search again, without the cache (a new study): the same trials, the same best (deterministic)
    fresh = vcache.calibrated_params("public", fit_days=2, space=SMALL_SPACE, n_trials=3, replay_days=3, warmup_days=1,
                                     cache_dir=tmp_path / "fresh")
    same = [c for c in first.trials.columns if c != "wall_s"]
    pd.testing.assert_frame_equal(first.trials[same], fresh.trials[same])
    assert fresh.params == first.params and pd.Series(fresh.held_out).equals(pd.Series(first.held_out))
    # the best trial is the first feasible placement (else the closest), then the lowest objective; the calibrated
    # params are its values, and how close it came to the constraint is recorded
    from dlcluster.validation import search as sr
    best = sr.best_trial(first.trials)
    assert first.params.relax_after_s == best["relax_after_s"]
    assert first.constraint["violation"] <= best["violation"] + 1e-12 and first.constraint["trials"] == 3
    # read back from the cache, never searched again: numbers spelt differently (60 for 60.0, 2.0 days for 2) are the
    # same calibration
    def no_search(*args, **kwargs):
        raise AssertionError("the cached calibration was not read")

    monkeypatch.setattr(vcache, "search", no_search)
    again = vcache.calibrated_params("public", fit_days=2.0, space={**SMALL_SPACE, "relax_after_s": [60, 180]},
                                     n_trials=3, replay_days=3, warmup_days=1, cache_dir=tmp_path)
    assert again.key == first.key and again.params == first.params and again.held_out == first.held_out
    pd.testing.assert_frame_equal(again.trials, first.trials)
    monkeypatch.undo()
    # the stored calibrated replay is the replay of the calibrated parameters, run again here
    stored, rerun = again.calibrated_replay(), vc.run_replay(again.replay, public_trace.machines,
                                                             public_trace.vc_quotas, again.params)
    assert stored.params == again.params and stored.topology == rerun.topology
    for table in ("jobs", "attempts", "timeseries"):
        pd.testing.assert_frame_equal(getattr(stored.result, table), getattr(rerun.result, table))
    (tmp_path / f"calibration-{first.key}.replay.pickle").unlink()
    replayed = again.calibrated_replay()   # without its store: replayed
    pd.testing.assert_frame_equal(replayed.result.jobs, rerun.result.jobs)
    # another setting is another calibration, kept beside the first
    other = vcache.calibrated_params("public", fit_days=2, space=SMALL_SPACE, n_trials=2, replay_days=3, warmup_days=1,
                                     cache_dir=tmp_path)
    assert other.key != first.key and len(other.trials) == 2
    assert sorted(f.name for f in tmp_path.glob("calibration-*.json")) == sorted(
        f"calibration-{key}.json" for key in (first.key, other.key))
    assert len(again.full_replay.workload) == 111549
    # the stored workloads are those built from the trace
    built = vcache.replay_workloads("public", 0, 3, 1)
    stored = pickle.loads((tmp_path / f"calibration-{first.key}.workloads.pickle").read_bytes())
    assert pd.Series(vars(stored.alignment)).equals(pd.Series(vars(built.alignment)))
    pd.testing.assert_frame_equal(stored.waits, built.waits)
    for part in ("full", "replay"):
        ours, theirs = getattr(stored, part), getattr(built, part)
        for field in ("arrival_s", "num_gpus", "service_s", "vc"):
            np.testing.assert_array_equal(getattr(ours.workload, field), getattr(theirs.workload, field))
        np.testing.assert_array_equal(ours.vc_source, theirs.vc_source)
        np.testing.assert_array_equal(ours.dre_jobid, theirs.dre_jobid)
    with pytest.raises(ValueError, match="not a ReplayParams field"):
        vcache.calibrated_params("public", space={"nope": [1]}, cache_dir=tmp_path)
    # no cache_dir: the calibration is looked up in $DLCLUSTER_CACHE_DIR (here a doctored copy, to see it is read)
    env_cache = tmp_path / "env-cache"
    env_cache.mkdir()
    stored = json.loads((tmp_path / f"calibration-{first.key}.json").read_text())
    stored["held_out"]["max_ks"] = 0.123
    (env_cache / f"calibration-{first.key}.json").write_text(json.dumps(stored))
    monkeypatch.setenv("DLCLUSTER_CACHE_DIR", str(env_cache))
    from_env = vcache.calibrated_params("public", fit_days=2, space=SMALL_SPACE, n_trials=3, replay_days=3,
                                        warmup_days=1)
    assert from_env.key == first.key and from_env.held_out["max_ks"] == 0.123


def test_a_cached_calibration_is_found_before_anything_is_loaded(tmp_path, monkeypatch):
    """The cache key comes from the settings, the code, the environment and the trace's files: a hit reads one
    JSON file and builds the replay workloads only when they are used; an edited input file is a miss."""
    import dlcluster.trace as trace_module
    key_of = vcache.calibration_key
    settings = {"trace": "public", "fit_days": 2, "seed": 0, "n_trials": 3, "space": SMALL_SPACE, "replay_days": 3,
                "warmup_days": 1, "top_vcs": 5}
    key = key_of(settings)
    assert key_of({**settings, "fit_days": 2.0, "space": {**SMALL_SPACE, "relax_after_s": [60, 180]}}) == key
    assert key_of({**settings, "seed": 1}) != key
    stored = {"params": {}, "trials": {"trial": [0]}, "spans": {"fit": ["2017-10-03", "2017-10-05"]},
              "held_out": {"max_ks": 0.5, "complete_until": "2017-11-20"}, "settings": settings,
              "optimality": {"round": [1], "parameter": [None], "moved": ["best"], "objective": [1.0],
                             "objective_change": [0.0], "improves": [False]}}
    (tmp_path / f"calibration-{key}.json").write_text(json.dumps(stored))

    def no_loading(*args, **kwargs):
        raise AssertionError("the trace was loaded for a cached calibration")

    monkeypatch.setattr(trace_module, "load_trace", no_loading)
    monkeypatch.setattr(vcache, "replay_workloads", no_loading)
    found = vcache.calibrated_params("public", fit_days=2, space=SMALL_SPACE, n_trials=3, replay_days=3,
                                     warmup_days=1, cache_dir=tmp_path)
    assert found.key == key and found.held_out["max_ks"] == 0.5
    with pytest.raises(AssertionError, match="loaded for a cached calibration"):
        _ = found.replay   # the workloads are built on first use
    # another copy of the public data with one file edited: another key
    copy = tmp_path / "root"
    (copy / "data").mkdir(parents=True)
    shutil.copytree(dlcluster.paths.public_dir(), copy / "data" / "public")
    monkeypatch.setenv("DLCLUSTER_ROOT", str(copy))
    assert key_of(settings) == key
    (copy / "data" / "public" / "vc_quotas.parquet").write_bytes(b"edited")
    assert key_of(settings) != key


def test_an_interrupted_search_resumes_its_study(tmp_path):
    """Trials already completed are kept: a second call runs only the missing ones (batches of two)."""
    from dlcluster.validation import search as sr
    calls = []

    def objective(params):
        calls.append(params.relax_after_s)
        value = abs(params.relax_after_s - 300.0)
        return measures.Evaluation(value, 0.0, 0.0, 0.0, 0.0, 0.0, value)

    space = {"relax_after_s": {"low": 30.0, "high": 1800.0, "log": True}}
    start = vc.ReplayParams()
    best4, trials4 = sr.search(objective, start, space, 4, tmp_path / "s.db", "s", seed=1, workers=1)
    assert len(calls) == 4 and calls[0] == 180.0 and len(trials4) == 4   # the start point first
    best6, trials6 = sr.search(objective, start, space, 6, tmp_path / "s.db", "s", seed=1, workers=1)
    assert len(calls) == 6 and trials6["trial"].tolist() == list(range(6))
    pd.testing.assert_frame_equal(trials6.head(4), trials4)
    assert abs(best6.relax_after_s - 300) <= abs(best4.relax_after_s - 300)
    # the same search from scratch proposes the same trials, and so does it with each batch's two trials run side
    # by side in two processes (the proposals do not depend on the number of workers)
    _, again = sr.search(objective, start, space, 6, tmp_path / "t.db", "t", seed=1, workers=1)
    pd.testing.assert_frame_equal(again, trials6)
    _, forked = sr.search(objective, start, space, 6, tmp_path / "u.db", "u", seed=1, workers=2)
    pd.testing.assert_frame_equal(forked, trials6)
    with pytest.raises(ValueError, match="must be a list of values or"):
        sr.check_space({"relax_after_s": {"low": 1.0}})


def _toy_objective(calls: list, interrupt_at: int | None = None, shift: float = 0.0):
    """A cheap objective on every axis of the default space, lowest at relax 5 min, reclaim after 2 min, caps at
    twice the quota, best fit, relax, racks of 16 and demand quotas; raises Ctrl-C on call ``interrupt_at``.
    ``shift`` moves the best relax timeout (other values for the same draws)."""
    import math

    def objective(params):
        if interrupt_at is not None and len(calls) == interrupt_at:
            raise KeyboardInterrupt
        calls.append(params)
        value = (math.log(params.relax_after_s / (300.0 + shift)) ** 2 + 0.3 * (params.placement != "best_fit")
                 + (0.2 if params.reclaim_after_s is None else math.log(params.reclaim_after_s / 120.0) ** 2 / 10)
                 + (0.4 if params.max_capacity_factor is None else (params.max_capacity_factor - 2.0) ** 2 / 4)
                 + 0.1 * (params.locality != "relax") + 0.05 * (params.rack_size != 16)
                 + 0.05 * (params.unknown_vc_quota != "demand"))
        return measures.Evaluation(value, 0.0, 0.0, 0.0, 0.0, 0.0, round(value, 12))
    return objective


def test_the_tpe_phase_is_deterministic_and_resumes_as_if_never_interrupted(tmp_path):
    """14 trials of the default space, asked two at a time: the 8 start points, 2 random start-up trials of
    Optuna's TPE sampler (10 with the start points), then 4 trials that TPE proposes from the results so far. One
    worker, so that the toy objective records its calls in this process (the trials do not depend on it)."""
    from optuna.samplers import TPESampler

    from dlcluster.validation import search as sr
    # Optuna's default start-up, kept
    assert TPESampler()._n_startup_trials == 10 < 14 and sr.BATCH == 2 and len(sr.START_POINTS) == 8

    def run(objective, name):
        return sr.search(objective, start, space, n, tmp_path / f"{name}.db", name, seed=3, workers=1)

    start, space, n = vc.ReplayParams(), sr.DEFAULT_SPACE, 14
    calls = []
    best, trials = run(_toy_objective(calls), "a")
    assert len(calls) == n and trials["trial"].tolist() == list(range(n))
    assert (calls[0].max_capacity_factor, calls[1].max_capacity_factor) == (None, 1.0)  # the start points
    assert best == calls[int(trials["objective"].idxmin())]
    # past the start-up, TPE reads the results: other objective values for the same draws give the same first ten
    # trials and other proposals after them (so this test reaches the TPE phase)
    _, moved = run(_toy_objective([], shift=900.0), "b")
    axes = list(space)
    pd.testing.assert_frame_equal(_as_values(moved[axes].head(10)), _as_values(trials[axes].head(10)))
    assert not moved[axes].tail(4).equals(trials[axes].tail(4))
    # the same search in a new study, stopped by Ctrl-C during trial 11 (a TPE trial, second of the batch 10-11),
    # proposes the same first 11 trials (deterministic); the batch is lost, and run again, the search proposes
    # the same trials as the uninterrupted one, 10 and 11 included, and ends with the same best
    cut_calls = []
    with pytest.raises(KeyboardInterrupt):
        run(_toy_objective(cut_calls, interrupt_at=11), "c")
    assert cut_calls == calls[:11]
    resumed_best, resumed = run(_toy_objective(cut_calls), "c")
    assert cut_calls == [*calls[:11], *calls[10:]] and resumed_best == best   # trial 10 ran twice
    assert resumed["trial"].tolist() == [*range(10), *range(12, n + 2)]   # numbers 10 and 11 were the lost batch
    pd.testing.assert_frame_equal(resumed.drop(columns="trial"), trials.drop(columns="trial"))
    # Ctrl-C during the first start point: the batch's two start points are queued again after the other six,
    # then the same random start-up trials follow (TPE's later proposals read the trials in their new order, so
    # they may differ: only a lost start point reorders the history)
    cut_calls = []
    with pytest.raises(KeyboardInterrupt):
        run(_toy_objective(cut_calls, interrupt_at=0), "d")
    _, resumed = run(_toy_objective(cut_calls), "d")
    order = [2, 3, 4, 5, 6, 7, 0, 1, 8, 9]
    assert cut_calls[:10] == [calls[k] for k in order] and len(cut_calls) == n
    assert resumed["trial"].tolist() == list(range(2, n + 2))
    pd.testing.assert_frame_equal(_as_values(resumed.drop(columns="trial").head(10)),
                                  _as_values(trials.drop(columns="trial").iloc[order].reset_index(drop=True)))


def _as_values(trials: pd.DataFrame) -> pd.DataFrame:
    """Some rows of a trials table compared by value: an axis that is off (None) in every row of a whole table is an
    object column, in a table where some later trial switched it on a float column with NaN."""
    return trials.astype(object).where(trials.notna(), None)


def test_overhead_latency_is_fitted_on_the_fast_waits_only():
    # 40% of waits ~12 s (the overhead), the rest ~400 s: only the first are fitted
    waits = pd.concat([_two_mode_waits(800, 1200, 12.0, 400.0, "2-4", 1),
                       _two_mode_waits(300, 700, 14.0, 1000.0, "5-8", 2)])
    span = (pd.Timestamp("2017-10-01", tz="UTC"), pd.Timestamp("2017-10-10", tz="UTC"))
    rows = {row[0]: dict(zip(latency.LATENCY_FIELDS, row, strict=True))
            for row in latency.fit_overhead_latency(waits, span)}
    assert set(rows) == {"all", "2-4", "5-8"}
    assert rows["2-4"]["fast_share"] == 1.0 and rows["2-4"]["fast_median_s"] == pytest.approx(12.0, rel=0.05)
    assert rows["5-8"]["fast_median_s"] == pytest.approx(14.0, rel=0.05)
    assert rows["2-4"]["fast_sigma"] == pytest.approx(0.3, rel=0.15)
    draws = latency.scheduler_latency(vc.ReplayParams(latency_mixture=latency.fit_overhead_latency(waits, span)),
                                 np.full(20000, 4), seed=0)
    assert np.quantile(draws, 0.99) < 40   # the overhead alone never makes a long wait


def test_servers_spanned_pairs_each_record_with_its_replayed_job():
    # two 8-GPU jobs on two 4-GPU servers: each spans 2 servers in the replay; the records say 1 and 2
    rep = _replay_of_two_dre_jobs(arrival_s=[0.0, 5000.0], num_gpus=[8, 8], service_s=[1000.0, 1000.0])
    machines = pd.DataFrame({"machine": ["m0", "m1"], "num_gpus": [4, 4]})
    quotas = pd.DataFrame({"vc": ["a"], "nodes": [1], "gpus": [8]})
    replay = vc.run_replay(rep, machines, quotas, vc.ReplayParams(locality="any"))
    real = pd.DataFrame({"jobid": ["d0", "d1"], "vc": ["a", "a"],
                         "submitted": [pd.Timestamp("2017-10-01", tz="UTC")] * 2,
                         "num_gpus": [8, 8], "bucket": ["5-8", "5-8"], "first_wait_s": [0.0, 0.0],
                         "num_servers": [1, 2]})
    spanned = measures.servers_spanned(replay, real)
    assert spanned.set_index("jobid")[["real_servers", "simulated_servers"]].to_dict("index") == {
        "d0": {"real_servers": 1, "simulated_servers": 2}, "d1": {"real_servers": 2, "simulated_servers": 2}}
    table = measures.servers_spanned_table(spanned)
    assert table.loc["5-8", "ks"] == 0.5 and table.loc["5-8", "real_one_server_share"] == 0.5
    causes = measures.wait_by_cause(replay)
    assert causes == {"fair_share": 0.0, "fragmentation": 0.0, "backoff": 0.0, "latency": 0.0}


def test_ablation_changes_one_ingredient_at_a_time_and_keeps_the_model_before_it():
    waits = pd.concat([_two_mode_waits(400, 600, 12.0, 400.0, "2-4", 1),
                       _two_mode_waits(100, 200, 12.0, 900.0, "5-8", 2)])
    span = (pd.Timestamp("2017-10-01", tz="UTC"), pd.Timestamp("2017-10-10", tz="UTC"))
    best = vc.ReplayParams(locality="relax", max_capacity_factor=1.5, reclaim_after_s=120.0,
                           latency_mixture=latency.fit_overhead_latency(waits, span), servers_in_service=360,
                           attempt_split=(0.4, 0.0, 0.5, 1.0))
    variants = heldout.ablation_variants(best, waits, span)
    # issue 29's ingredients, each switched the other way
    assert variants["all listed servers in service (539)"].servers_in_service is None
    assert variants["420 servers in service (the record's count)"].servers_in_service == 420
    assert variants["caps from each VC's demand (0.95 quantile)"].cap_quantile == 0.95
    assert variants["back-off for every size"].backoff == "every"
    assert variants["back-off for jobs that would borrow"].backoff == "borrowers"
    assert variants["gangs hold GPUs while waiting"].gang_hold is True
    limits = variants["user limits (YARN defaults; users = bursts, assumed)"]
    assert (limits.user_limit_factor, limits.minimum_user_limit_percent) == (1.0, 100.0)
    assert variants["one attempt per job (no split)"].attempt_split == ()
    # the contention mechanism's, and the model before it
    assert variants["no reclaim"].reclaim_after_s is None
    assert variants["no cap (unlimited lending)"].max_capacity_factor is None
    assert variants["lending off"].lending is False
    assert variants["no locality (no racks, no back-off)"].locality == "any"
    assert variants["no VC quotas"].quotas is False
    assert variants["no scheduler latency"].latency_mixture == ()
    before = variants["latency fitted to the real waits, no contention"]
    assert before.max_capacity_factor is None and before.reclaim_after_s is None and before.servers_in_service is None
    assert before.latency_mixture[1][1] < 1   # a two-mode mixture: its slow mode draws the queueing
    for name, params in variants.items():
        changed = {k for k, v in asdict(params).items() if v != asdict(best)[k]}
        assert changed, name
    others = heldout.ablation_variants(replace(best, servers_in_service=None, cap_quantile=0.9, backoff="every",
                                          gang_hold=True, user_limit_factor=2.0, attempt_split=()))
    assert {"one cap factor for every VC (no caps from demand)", "back-off for gangs only", "no gang holds",
            "no user limits"} <= set(others) and "all listed servers in service (539)" not in others
    assert "back-off for every size" not in others
    assert "no reclaim" not in heldout.ablation_variants(vc.ReplayParams())


def test_sharing_options_give_each_vc_its_cap_and_the_reclaim():
    params = vc.ReplayParams(max_capacity_factor=1.5, reclaim_after_s=90.0)
    options = vc.sharing_options(params, {"a": 64, "b": 4}, 3205, ["a", "b", "c"])
    # caps: 1.5 x quota, at least the quota and one 8-GPU server (c has no quota)
    assert options["max_capacity"] == {"a": 96, "b": 8, "c": 8}
    assert options["reclaim"].max_wait_before_kill_s == 90.0 and not options["reclaim"].keep_progress
    assert vc.sharing_options(vc.ReplayParams(), {"a": 64}, 3205, ["a"]) == {"lending": True}
    assert vc.sharing_options(params, None, 3205, ["a"]) == {"lending": True}


def test_preemptions_are_counted_with_the_gpu_hours_they_lose():
    from types import SimpleNamespace

    t0 = pd.Timestamp("2017-11-01", tz="UTC")
    jobs = pd.DataFrame({"jobid": ["a", "b", "c"], "submitted": [t0, t0, t0 - pd.Timedelta(days=30)]})
    attempts = pd.DataFrame({"jobid": ["a", "a", "b", "c"],
                             "outcome": ["preempted", "finished", "finished", "preempted"],
                             "start_s": [0.0, 7200.0, 0.0, 0.0], "end_s": [3600.0, 9000.0, 100.0, 50.0],
                             "num_gpus": [8, 8, 1, 4]})
    rep = SimpleNamespace(result=SimpleNamespace(jobs=jobs, attempts=attempts),
                          params=vc.ReplayParams(reclaim_after_s=60.0))
    span = (t0 - pd.Timedelta(days=1), t0 + pd.Timedelta(days=1))
    # c was submitted before the span: its preemption is not counted; a lost an hour on 8 GPUs
    figures = measures.preemption_figures(rep, span)
    assert figures == {"count": 1, "attempts": 3, "share_of_attempts": 1 / 3, "jobs_preempted": 1,
                       "gpu_hours_lost": 8.0, "attempts_per_job": 1.5}
    kept = SimpleNamespace(result=rep.result, params=vc.ReplayParams(reclaim_after_s=60.0, reclaim_keeps_progress=True))
    assert measures.preemption_figures(kept, span)["gpu_hours_lost"] == 0.0   # a checkpoint restore loses no work


def test_sensitivity_moves_each_fitted_value_and_keeps_the_others():
    best = vc.ReplayParams(locality="relax", relax_after_s=120.0, max_capacity_factor=1.5, reclaim_after_s=None,
                           placement="most_free", rack_size=16, unknown_vc_quota="none", servers_in_service=360)
    moves = {(name, label): params for name, label, params in heldout._moves(best)}
    assert moves[("relax_after_s", "x2")].relax_after_s == 240.0
    assert moves[("max_capacity_factor", "halfway to the quota")].max_capacity_factor == 1.25
    assert moves[("max_capacity_factor", "unlimited")].max_capacity_factor is None
    assert moves[("reclaim_after_s", "on after 300 s")].reclaim_after_s == 300.0
    assert moves[("servers_in_service", "x0.95")].servers_in_service == 342
    assert moves[("servers_in_service", "x1.05")].servers_in_service == 378
    assert moves[("locality", "any")].locality == "any" and moves[("placement", "packed")].placement == "packed"
    assert moves[("rack_size", "32")].rack_size == 32
    assert moves[("unknown_vc_quota", "demand")].unknown_vc_quota == "demand"
    assert moves[("backoff", "every")].backoff == "every" and moves[("gang_hold", "True")].gang_hold is True
    assert moves[("backoff", "borrowers")].backoff == "borrowers"
    for (name, _), params in moves.items():
        changed = {k for k, v in asdict(params).items() if v != asdict(best)[k]}
        assert changed == {name}, (name, changed)
    demand = {(n, label): p for n, label, p in heldout._moves(replace(best, cap_quantile=0.8))}
    assert demand[("cap_quantile", "halfway to 1")].cap_quantile == pytest.approx(0.9)


def test_sensitivity_reuses_the_ablation_replays_with_the_same_parameters(monkeypatch):
    best = vc.ReplayParams(locality="relax", relax_after_s=120.0, max_capacity_factor=1.5, servers_in_service=360)
    replay, other = object(), object()
    replayed = []

    def run_replay(workload, machines, vc_table, params):
        assert workload is replay
        replayed.append(params)
        return params

    def evaluate(rep, occupancy, real_waits, span, gpu_util_cdf):   # "replay" here is its parameters
        value = 1.0 if rep == best else 2.0
        return measures.Evaluation(value, 0.0, 0.0, 0.0, 0.0, 0.0, value)

    monkeypatch.setattr(heldout, "run_replay", run_replay)
    monkeypatch.setattr(heldout, "evaluate", evaluate)
    any_locality = replace(best, locality="any")
    parts = {f"evaluation.{k}": [7.0, 9.0] for k in measures.Evaluation.__dataclass_fields__}
    table = pd.DataFrame({"max_ks": [0.1, 0.2], **parts}, index=["no locality", "Pollux workload"])
    variants = {"no locality": (replay, any_locality), "Pollux workload": (other, any_locality),
                "not run": (replay, replace(best, rack_size=32))}
    known = heldout.ablation_evaluations(table, variants, replay)
    assert known == [(any_locality, measures.Evaluation(*[7.0] * 10))]   # same workload, and run
    sens = heldout.sensitivity(best, replay, None, None, None, None, None, None, workers=1, calibrated=best,
                          evaluated=known)
    moves = [params for _, _, params in heldout._moves(best)]
    assert replayed == [p for p in moves if p != any_locality] and len(replayed) == len(moves) - 1
    reused = sens.loc[("locality", "any")]
    assert reused["objective"] == 7.0 and reused["objective_change"] == 6.0
    assert (sens.drop(("locality", "any"))["objective_change"] == 1.0).all()


def test_single_moves_move_each_axis_once_by_the_stated_steps():
    from dlcluster.validation import search as sr
    space = {"placement": ["most_free", "best_fit", "packed"],
             "relax_after_s": {"low": 30.0, "high": 1800.0, "log": True},
             "reclaim_after_s": {"low": 15.0, "high": 3600.0, "log": True, "off": None},
             "servers_in_service": {"low": 300, "high": 420, "int": True, "off": None},
             "cap_quantile": {"low": 0.5, "high": 1.0, "off": None}}
    best = vc.ReplayParams(placement="packed", relax_after_s=1600.0, reclaim_after_s=None, servers_in_service=410,
                           cap_quantile=0.6)
    moves = {(name, label): params for name, label, params in sr.single_moves(best, space)}
    assert set(moves) == {("placement", "most_free"), ("placement", "best_fit"), ("relax_after_s", "1800"),
                          ("relax_after_s", "1280"), ("reclaim_after_s", "on"), ("servers_in_service", "420"),
                          ("servers_in_service", "398"), ("servers_in_service", "off"), ("cap_quantile", "0.65"),
                          ("cap_quantile", "0.55"), ("cap_quantile", "off")}
    # 1600 x 1.25 clipped to 1800; an axis that is off is switched on at the geometric middle of its range
    assert moves[("reclaim_after_s", "on")].reclaim_after_s == pytest.approx((15.0 * 3600.0) ** 0.5, rel=1e-5)
    # 410 +- 12 (a tenth of the range), clipped to 420, rounded to whole servers
    assert moves[("servers_in_service", "398")].servers_in_service == 398
    for (name, _), params in moves.items():
        changed = {k for k, v in asdict(params).items() if v != asdict(best)[k]}
        assert changed == {name}, (name, changed)


def test_polish_takes_single_moves_until_none_improves():
    from dlcluster.validation import search as sr
    space = {"placement": ["most_free", "best_fit", "packed"], "rack_size": [16, 32]}

    def objective(params):   # best: packed (-2) and rack 32 (-1); most_free 0, best_fit -1
        value = {"most_free": 0.0, "best_fit": -1.0, "packed": -2.0}[params.placement] - (params.rack_size == 32)
        return measures.Evaluation(value, 0.0, 0.0, 0.0, 0.0, 0.0, value)

    start = vc.ReplayParams(placement="most_free", rack_size=16)
    # round 1 takes packed (-2, the best single move), round 2 rack 32 (-3), round 3 finds no move that improves
    best, check = sr.polish(objective, start, space, rounds=3, workers=1)
    assert (best.placement, best.rack_size) == ("packed", 32) and sr.optimum_reached(check)
    assert check["round"].unique().tolist() == [3]
    assert check.set_index("moved")["objective_change"].to_dict() == {"best": 0.0, "most_free": 2.0, "best_fit": 1.0,
                                                                      "16": 1.0}
    # one round: the best move is taken, but the round cannot show that the optimum is reached
    best, check = sr.polish(objective, start, space, rounds=1, workers=1)
    assert best.placement == "packed" and best.rack_size == 16 and not sr.optimum_reached(check)


def test_polish_replays_no_parameter_set_twice_and_no_inert_move():
    from dlcluster.validation import search as sr
    space = {"placement": ["most_free", "best_fit", "packed"], "rack_size": [16, 32], "steer_single": [True, False]}
    replayed = []

    def objective(params):   # as above; steer_single acts only on the packed placement, where it costs 0.5
        replayed.append(params)
        value = {"most_free": 0.0, "best_fit": -1.0, "packed": -2.0}[params.placement] - (params.rack_size == 32) \
            + 0.5 * (params.placement == "packed" and not params.steer_single)
        return measures.Evaluation(value, 0.0, 0.0, 0.0, 0.0, 0.0, value)

    start = vc.ReplayParams(placement="most_free", rack_size=16, steer_single=True)
    best, check = sr.polish(objective, start, space, rounds=5, workers=1, best_objective=0.0)
    assert (best.placement, best.rack_size, best.steer_single) == ("packed", 32, True) and sr.optimum_reached(check)
    # round 1 from most_free/16: best_fit, packed, 32 (steer_single is inert: not replayed); round 2 from packed/16:
    # 32 and steer_single off (most_free/16 is the start, best_fit/16 was round 1's); round 3 from packed/32: best_fit
    # at 32 and steer_single off (most_free/32 was round 1's, packed/16 round 2's best)
    assert [(p.placement, p.rack_size, p.steer_single) for p in replayed] == [
        ("best_fit", 16, True), ("packed", 16, True), ("most_free", 32, True),
        ("packed", 32, True), ("packed", 16, False),
        ("best_fit", 32, True), ("packed", 32, False)]
    last = check.set_index(["parameter", "moved"])
    assert not last["inert"].any() and last.loc[("steer_single", "False"), "objective_change"] == 0.5
    # from a most_free best the packing rule cannot act: marked inert, the best's objective, never replayed
    replayed.clear()
    _, check = sr.polish(objective, vc.ReplayParams(placement="best_fit", rack_size=32), space, rounds=1, workers=1,
                         best_objective=-2.0)
    row = check.set_index(["parameter", "moved"]).loc[("steer_single", "False")]
    assert row["inert"] and row["objective_change"] == 0.0 and not row["improves"]
    assert all(p.steer_single for p in replayed) and len(replayed) == 3


def test_effective_params_reset_only_fields_that_cannot_act():
    base = vc.ReplayParams()
    # without Philly's packing its rules cannot act; with it they do
    assert vc.ReplayParams(steer_single=False, gang_whole_servers=False).effective() == base
    packed = vc.ReplayParams(placement="packed", steer_single=False)
    assert packed.effective() == packed
    # the gang timeout acts only where locality relaxes; the relax timeout not under "any" with the gang back-off
    assert vc.ReplayParams(locality="any", gang_relax_after_s=600.0, relax_after_s=60.0).effective() == \
        vc.ReplayParams(locality="any")
    every = vc.ReplayParams(locality="any", relax_after_s=60.0, backoff="every")
    assert every.effective() == every
    relaxing = vc.ReplayParams(gang_relax_after_s=600.0, relax_after_s=60.0)
    assert relaxing.effective() == relaxing
    # caps from demand replace the factor
    assert vc.ReplayParams(cap_quantile=0.8, max_capacity_factor=2.0).effective() == vc.ReplayParams(cap_quantile=0.8)
    assert vc.ReplayParams(max_capacity_factor=2.0).effective().max_capacity_factor == 2.0


def test_placement_variants_switch_each_packing_rule():
    packed = vc.ReplayParams(placement="packed")
    rows = heldout.placement_variants(packed)
    assert rows["spreading placement (most_free)"].placement == "most_free"
    assert rows["best fit without packing rules"].placement == "best_fit"
    assert rows["packing without 1-GPU steering"].steer_single is False
    assert rows["packing with gangs in pieces"].gang_whole_servers is False
    assert set(heldout.placement_variants(vc.ReplayParams())) == {"best fit without packing rules",
                                                                  "Philly's packing (sim/packing.py)"}
    # the simulator gets the rules as sim/packing.py's placement
    option = vc.placement_option(rows["packing with gangs in pieces"])
    assert (option.steer_single, option.whole_servers_for_gangs) == (True, False)
    assert vc.placement_option(vc.ReplayParams()) == "most_free"


def test_waiting_variants_switch_the_cycle_and_the_lending_limit_and_the_search_may_leave_both_out():
    from dlcluster.validation import search as sr

    rows = heldout.waiting_variants(vc.ReplayParams())
    assert rows["a scheduling cycle (3-s YARN heartbeats)"].heartbeat_s == 3.0
    assert rows["lending limited per VC (50% of its idle quota)"].lending_share == 0.5
    assert {k for k, v in asdict(rows["a scheduling cycle (3-s YARN heartbeats)"]).items()
            if v != asdict(vc.ReplayParams())[k]} == {"heartbeat_s"}
    both = heldout.waiting_variants(vc.ReplayParams(heartbeat_s=2.0, lending_share=0.3))
    assert both["no scheduling cycle"].heartbeat_s is None
    assert both["no lending limit (every idle GPU lent)"].lending_share is None
    assert set(rows) <= set(heldout.ablation_variants(vc.ReplayParams()))
    # both are axes of the calibration's search that may be off (the start points leave them off)
    for axis in ("heartbeat_s", "lending_share"):
        assert sr.DEFAULT_SPACE[axis]["off"] is None
        assert sr._enqueue(sr.START_POINTS[0], sr.DEFAULT_SPACE, vc.ReplayParams())[f"{axis}:on"] is False


def test_the_replay_counts_locality_delay_with_headroom_and_keeps_the_old_clock_as_an_ablation_row():
    # issue 47: the replay's Philly policy gets the headroom clock; the first-pass clock is one ablation row away
    assert vc.ReplayParams().relax_clock == "headroom"
    rows = heldout.waiting_variants(vc.ReplayParams())
    old = rows["relax clock from first pass (old)"]
    assert {k for k, v in asdict(old).items() if v != asdict(vc.ReplayParams())[k]} == {"relax_clock"}
    assert "clock from the first pass" in old.label() and "clock" not in vc.ReplayParams().label()
    assert heldout.waiting_variants(old)["relax clock only with headroom (YARN)"] == vc.ReplayParams()
    # no relax, no clock: the row is left out and the field is inert
    assert not any("relax clock" in name for name in heldout.waiting_variants(vc.ReplayParams(locality="any")))
    assert vc.ReplayParams(locality="any", relax_clock="first_pass").effective() == \
        vc.ReplayParams(locality="any").effective()


def test_placement_facts_count_jobs_by_memory_size_and_server_size():
    from dlcluster.validation.ingredients import placement_facts
    machines = pd.DataFrame({"machine": ["a", "b", "c", "d"], "num_gpus": [8, 8, 4, 4],
                             "gpu_mem": ["12GB", "24GB", "12GB", "24GB"]})
    rows = [("j1", 0, "c", 2), ("j1", 1, "a", 2),            # last attempt on a: 2 GPUs, one 8-GPU server
            ("j2", 0, "a", 4), ("j2", 0, "d", 4),            # 8 GPUs over two servers of both memory sizes
            ("j3", 0, "d", 1),                               # a 1-GPU job: d does not count as used by a gang
            ("j4", 0, "a", 8), ("j4", 0, "b", 8)]            # 16 GPUs on two 8-GPU servers
    placements = pd.DataFrame([(j, a, m) for j, a, m, k in rows for _ in range(k)],
                              columns=["jobid", "attempt", "machine"])
    facts = placement_facts(placements, machines)
    assert facts["jobs"] == 4 and facts["jobs_on_both_memory_sizes"] == 2                       # j2 and j4
    assert facts["servers.12GB.4gpu"] == 1 and facts["servers.12GB.4gpu.with_multi_gpu_job"] == 0   # j1 left c
    assert facts["servers.24GB.4gpu.with_multi_gpu_job"] == 1 and facts["servers.12GB.8gpu.with_multi_gpu_job"] == 1
    assert (facts["2-4.jobs"], facts["2-4.one_server"], facts["2-4.only_on_8gpu_servers"]) == (1, 1, 1)
    assert (facts["5-8.jobs"], facts["5-8.one_server"], facts["5-8.only_on_8gpu_servers"]) == (1, 0, 0)
    assert (facts[">8.jobs"], facts[">8.one_server"], facts[">8.only_on_8gpu_servers"]) == (1, 0, 1)
    with pytest.raises(ValueError, match="machine list lacks"):
        placement_facts(placements.assign(machine="zz"), machines)
