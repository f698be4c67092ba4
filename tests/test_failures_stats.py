"""Known-answer tests for the trace failure statistics (dlcluster.analysis.failures).

The toy trace below is small enough to compute every expected value by hand;
the hand computation is written next to each assertion.
"""

import math

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis import failures as F

T0 = pd.Timestamp("2017-10-01", tz="UTC")


def _t(seconds):
    return T0 + pd.Timedelta(seconds=seconds)


@pytest.fixture()
def toy():
    # jobid, status, GPUs, GPU time, user, attempts
    jobs = pd.DataFrame({
        "jobid": ["j1", "j2", "j3", "j4", "j5", "j6", "j7"],
        "status": pd.array(["Pass", "Failed", "Killed", "Failed", "Running", None, "Pass"], dtype="string"),
        "num_gpus": pd.array([1, 4, 8, 16, 1, 2, 2], dtype="Int64"),
        "gpu_time_s": [100.0, 300.0, 600.0, 1000.0, np.nan, 50.0, 200.0],
        "user": pd.array(["u1", "u1", "u2", "u2", "u3", None, "u3"], dtype="string"),
        "num_attempts": pd.array([1, 2, 1, 3, 1, None, 2], dtype="Int64"),
        "submitted": [_t(0), _t(10), _t(20), _t(30), _t(40), _t(50), _t(60)],
        "run_time_s": [100.0, 100.0, 75.0, 60.0, np.nan, 25.0, 100.0],
    })
    rows = [  # jobid, attempt, start, duration (None = still running)
        ("j1", 0, 1000, 100), ("j2", 0, 0, 50), ("j2", 1, 60, 40), ("j3", 0, 0, 75),
        ("j4", 0, 0, 10), ("j4", 1, 15, 20), ("j4", 2, 40, 30), ("j5", 0, 1050, None),
        ("j7", 0, 0, 5), ("j7", 1, 10, 95),
    ]
    attempts = pd.DataFrame({
        "jobid": [r[0] for r in rows], "attempt": [r[1] for r in rows],
        "start": [_t(r[2]) for r in rows],
        "end": [_t(r[2] + r[3]) if r[3] is not None else pd.NaT for r in rows],
        "running": [r[3] is None for r in rows],
        "num_gpus": [int(jobs.set_index("jobid").loc[r[0], "num_gpus"]) for r in rows],
        "duration_s": [float(r[3]) if r[3] is not None else np.nan for r in rows],
    })
    return jobs, attempts


def test_final_status_jobs_counts_what_it_leaves_out(toy):
    jobs, _ = toy
    final, dropped = F.final_status_jobs(jobs)
    assert sorted(final["jobid"]) == ["j1", "j2", "j3", "j4", "j7"]
    assert dropped.to_dict() == {"still running at trace end": 1, "no status in the source": 1}


def test_status_shares_by_count_and_gpu_time(toy):
    jobs, _ = toy
    s = F.status_shares(jobs).set_index("status")
    # 5 final jobs: Pass 2, Killed 1, Failed 2; GPU time 300 / 600 / 1300 of 2200
    assert s["jobs"].to_dict() == {"Pass": 2, "Killed": 1, "Failed": 2}
    assert s.loc["Pass", "jobs_pct"] == pytest.approx(40.0)
    assert s.loc["Killed", "gpu_time_pct"] == pytest.approx(100 * 600 / 2200)
    assert s.loc["Failed", "gpu_time_pct"] == pytest.approx(100 * 1300 / 2200)
    u = F.unsuccessful_share(jobs)
    assert u["unsuccessful_jobs"] == 3
    assert u["unsuccessful_jobs_pct"] == pytest.approx(60.0)
    assert u["unsuccessful_gpu_time_pct"] == pytest.approx(100 * 1900 / 2200)
    assert u["left_out"] == {"still running at trace end": 1, "no status in the source": 1}


def test_status_shares_per_size_bucket(toy):
    jobs, _ = toy
    s = F.status_shares(jobs, by_size=True).set_index(["size_bucket", "status"])
    # bucket 2-4 holds j2 (Failed, 4 GPUs, 300 GPU-s) and j7 (Pass, 2 GPUs, 200 GPU-s)
    assert s.loc[("2-4", "Failed"), "jobs_pct"] == pytest.approx(50.0)
    assert s.loc[("2-4", "Failed"), "gpu_time_pct"] == pytest.approx(60.0)
    assert s.loc[("2-4", "Pass"), "gpu_time_pct"] == pytest.approx(40.0)
    assert s.loc[("5-8", "Killed"), "jobs_pct"] == pytest.approx(100.0)
    assert s.loc[(">8", "Failed"), "jobs"] == 1
    assert s.loc[("1", "Pass"), "jobs"] == 1


def test_attempts_summary(toy):
    jobs, _ = toy
    a = F.attempts_summary(jobs).set_index("status")
    # attempts 1, 2, 1, 3, 2 -> mean 1.8, three jobs retried, four retries
    assert a.loc["all", "jobs"] == 5
    assert a.loc["all", "mean_attempts"] == pytest.approx(1.8)
    assert a.loc["all", "retried_jobs"] == 3
    assert a.loc["all", "retried_pct"] == pytest.approx(60.0)
    assert a.loc["all", "retries"] == 4
    assert a.loc["Failed", "mean_attempts"] == pytest.approx(2.5)
    assert a.loc["Pass", "max_attempts"] == 2


def test_attempts_summary_is_empty_without_attempt_counts(toy):
    jobs, _ = toy
    assert F.attempts_summary(jobs.assign(num_attempts=pd.array([None] * 7, dtype="Int64"))).empty


def test_attempt_outcomes_marks_events_and_censoring(toy):
    jobs, attempts = toy
    o, dropped = F.attempt_outcomes(jobs, attempts)
    outcome = o.set_index(["jobid", "attempt"])["outcome"].to_dict()
    assert outcome == {("j1", 0): "passed", ("j2", 0): "failed", ("j2", 1): "failed", ("j3", 0): "killed",
                       ("j4", 0): "failed", ("j4", 1): "failed", ("j4", 2): "failed", ("j5", 0): "running",
                       ("j7", 0): "failed", ("j7", 1): "passed"}
    # j5 is still running: censored at the trace end (j1's end at 1100 s) - its start (1050 s)
    assert o.set_index("jobid").loc["j5", "duration_s"] == pytest.approx(50.0)
    assert dropped.empty


def test_open_attempt_of_a_finished_job_is_left_out(toy):
    # raw logs hold killed jobs whose last attempt never got an end time: not "still running"
    jobs, attempts = toy
    j3 = attempts["jobid"] == "j3"
    attempts.loc[j3, ["end", "duration_s"]] = [pd.NaT, np.nan]
    attempts.loc[j3, "running"] = True
    o, dropped = F.attempt_outcomes(jobs, attempts)
    assert "j3" not in set(o["jobid"])
    assert dropped.to_dict() == {"job has a final status but its last attempt no end time": 1}


def test_jobs_killed_before_any_attempt_count_no_retry(toy):
    jobs, _ = toy
    jobs.loc[jobs["jobid"] == "j3", "num_attempts"] = 0
    a = F.attempts_summary(jobs).set_index("status")
    assert a.loc["Killed", "retries"] == 0 and a.loc["all", "retries"] == 4
    assert a.loc["all", "mean_attempts"] == pytest.approx(8 / 5)


def test_kaplan_meier_with_censoring(toy):
    jobs, attempts = toy
    o, _ = F.attempt_outcomes(jobs, attempts)
    curves = F.rtf_survival(o)
    q = F.survival_quantiles(curves).iloc[0]
    # times: 5e 10e 20e 30e 40e 50e 50c(running) 75c(killed) 95c 100c (n=10)
    # S: 0.9, 0.8, 0.7, 0.6, 0.5, then at 50 the risk set is 5: 0.5 * 4/5 = 0.4
    np.testing.assert_allclose(curves["all"].surv_prob, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    assert q["failed_by_end_pct"] == pytest.approx(60.0)
    assert q["t_10pct_failed_s"] == 5.0
    assert q["t_25pct_failed_s"] == 20.0
    assert q["t_50pct_failed_s"] == 40.0


def test_rtf_percentiles_of_failed_attempts(toy):
    jobs, attempts = toy
    o, _ = F.attempt_outcomes(jobs, attempts)
    p = F.rtf_percentiles(o).iloc[0]
    # failed durations 5, 10, 20, 30, 40, 50 (numpy linear interpolation)
    assert p["failures"] == 6
    assert p["p50_s"] == pytest.approx(25.0)
    assert p["p90_s"] == pytest.approx(45.0)
    assert p["p95_s"] == pytest.approx(47.5)
    by = F.rtf_percentiles(o, by="size_bucket").set_index("group")
    assert by.loc[">8", "p50_s"] == pytest.approx(20.0)  # j4: 10, 20, 30


def test_failure_rate_by_size_with_wilson_interval(toy):
    jobs, _ = toy
    r = F.failure_rate_by_size(jobs).set_index("size_bucket")
    assert r["failed"].to_dict() == {"1": 0, "2-4": 1, "5-8": 0, ">8": 1}
    assert r.loc["2-4", "failed_pct"] == pytest.approx(50.0)
    # Wilson, k=1, n=2, z=1.96: centre 0.5, half-width 1.96*sqrt(0.125+0.2401)/2.9208 = 0.4055
    assert r.loc["2-4", "ci_low_pct"] == pytest.approx(9.45, abs=0.01)
    assert r.loc["2-4", "ci_high_pct"] == pytest.approx(90.55, abs=0.01)


def test_user_failure_summary(toy):
    jobs, _ = toy
    per_user, s = F.user_failure_summary(jobs)
    assert per_user.set_index("user")["failed"].to_dict() == {"u1": 1, "u2": 1, "u3": 0}
    assert s == {"users": 3, "users_with_failure": 2, "users_with_repeated_failures": 0, "failures": 2,
                 "top10pct_users_failure_share_pct": 50.0}


def _sequence_jobs(sequences):
    rows = []
    for user, statuses in sequences.items():
        for i, status in enumerate(statuses):
            rows.append({"jobid": f"{user}-{i}", "user": user, "status": status, "submitted": _t(i),
                         "num_gpus": 1, "gpu_time_s": 1.0})
    jobs = pd.DataFrame(rows)
    jobs["status"] = jobs["status"].astype("string")
    return jobs


def test_repeat_failures_conditional_probabilities():
    jobs = _sequence_jobs({"a": ["Failed", "Failed", "Pass"], "b": ["Pass", "Failed", "Failed", "Failed"],
                           "c": ["Pass", "Pass"]})
    r = F.repeat_failures(jobs, n_permutations=50, seed=3)
    # after a failure: a F->F, a F->P, b F->F, b F->F = 3/4; otherwise: b P->F, c P->P = 1/2
    assert r["pairs"] == 6
    assert r["p_fail_after_fail_pct"] == pytest.approx(75.0)
    assert r["p_fail_after_other_pct"] == pytest.approx(50.0)
    assert r["difference_pct_points"] == pytest.approx(25.0)
    assert r == F.repeat_failures(jobs, n_permutations=50, seed=3)  # same seed, same p-values


def test_repeat_failures_without_any_failure_is_undefined_not_significant():
    jobs = _sequence_jobs({"a": ["Pass", "Killed", "Pass"], "b": ["Pass", "Pass"]})
    r = F.repeat_failures(jobs, n_permutations=50, seed=0)
    assert r["pairs"] == 3 and r["p_fail_after_other_pct"] == 0.0
    for key in ("p_fail_after_fail_pct", "difference_pct_points", "p_value_within_user", "p_value_across_users"):
        assert math.isnan(r[key]), key  # before: p = 1/51, a "significant" test of nothing


def test_repeat_failures_detects_runs_of_failures():
    # every user fails five times in a row, then passes five times: strong clustering in time
    jobs = _sequence_jobs({f"u{i}": ["Failed"] * 5 + ["Pass"] * 5 for i in range(20)})
    r = F.repeat_failures(jobs, n_permutations=200, seed=0)
    assert r["p_fail_after_fail_pct"] == pytest.approx(80.0)   # 4 of 5 failures are followed by one
    assert r["p_fail_after_other_pct"] == pytest.approx(0.0)
    assert r["p_value_within_user"] < 0.01
    # the same statuses in alternating order: no clustering within users
    alt = _sequence_jobs({f"u{i}": ["Failed", "Pass"] * 5 for i in range(20)})
    assert F.repeat_failures(alt, n_permutations=200, seed=0)["p_value_within_user"] > 0.5


def test_repeat_failures_interval_resamples_users_and_stays_in_range():
    # every user alike (80 points after a failure, 0 otherwise): any resample of users gives 80 exactly
    same = F.repeat_failures(_sequence_jobs({f"u{i}": ["Failed"] * 5 + ["Pass"] * 5 for i in range(20)}),
                             n_permutations=200, seed=0)
    assert (same["difference_ci_low_pct"], same["difference_ci_high_pct"]) == pytest.approx((80.0, 80.0))
    # half the users repeat failures (+80), half alternate (F P F P: 0 after a failure, 100 otherwise): the
    # difference is 0 over all, and the interval, drawn over users, straddles zero within [-100, 100]
    mixed = {**{f"r{i}": ["Failed"] * 5 + ["Pass"] * 5 for i in range(10)},
             **{f"a{i}": ["Failed", "Pass"] * 5 for i in range(10)}}
    r = F.repeat_failures(_sequence_jobs(mixed), n_permutations=300, seed=1)
    assert -100 <= r["difference_ci_low_pct"] < r["difference_pct_points"] < r["difference_ci_high_pct"] <= 100
    assert r["difference_ci_low_pct"] < 0 < r["difference_ci_high_pct"]
    assert r == F.repeat_failures(_sequence_jobs(mixed), n_permutations=300, seed=1)   # seeded
    # undefined difference: no interval either
    none = F.repeat_failures(_sequence_jobs({"a": ["Pass", "Pass"]}), n_permutations=20, seed=0)
    assert math.isnan(none["difference_ci_low_pct"]) and math.isnan(none["difference_ci_high_pct"])


def test_repeat_probability_of_retries(toy):
    jobs, attempts = toy
    o, _ = F.attempt_outcomes(jobs, attempts)
    # retries after a failed attempt: j2 a1 (failed), j4 a1, a2 (failed), j7 a1 (passed) -> 3/4
    assert F.repeat_probability(o) == (0.75, 4)
    single = o[o["attempt"] == 0]
    assert F.repeat_probability(single) == (None, 0)


def _logs():
    return pd.DataFrame({
        "log_file": ["a.log", "b.log", "c.log", "d.log", "e.log"],
        "jobid": ["j2", "j4", "missing-job", "j3", "j1"],
        "reason": ["gpu_out_of_memory", "gpu_out_of_memory", "gpu_out_of_memory", "mpi_runtime_failure",
                   "no_signature"],
        "label": ["GPU out of memory"] * 3 + ["MPI runtime failure", "no signature"],
        "category": ["user"] * 3 + ["infrastructure", "unknown"],
        "retryable": [False, False, False, True, True],
    })


def test_map_logs_and_failure_table(toy):
    jobs, attempts = toy
    mapped, note = F.map_logs_to_trace(_logs(), jobs, attempts)
    assert note == "mapped 4 of 5 logs to trace jobs by jobid"
    m = mapped.set_index("log_file")
    assert m.loc["a.log", "user"] == "u1" and m.loc["a.log", "size_bucket"] == "2-4"
    assert m.loc["a.log", "rtf_s"] == 40.0   # j2's last attempt
    assert m.loc["b.log", "rtf_s"] == 30.0   # j4's last attempt
    assert pd.isna(m.loc["c.log", "user"])
    t = F.failure_table(mapped).set_index("reason")
    row = t.loc["gpu_out_of_memory"]
    assert (row["trials"], row["jobs"], row["users"]) == (3, 3, 2)
    assert row["rtf_p50_s"] == pytest.approx(35.0)
    assert (row["gpus_1"], row["gpus_2-4"], row["gpus_5-8"], row["gpus_>8"]) == (0, 1, 0, 1)


def test_unmapped_logs_say_so(toy):
    jobs, attempts = toy
    mapped, note = F.map_logs_to_trace(_logs().drop(columns="jobid"), jobs, attempts)
    assert note.startswith("not mapped")
    t = F.failure_table(mapped).set_index("reason")
    assert np.isnan(t.loc["gpu_out_of_memory", "users"]) and np.isnan(t.loc["gpu_out_of_memory", "gpus_>8"])


def test_fit_failure_model_matches_the_simulator_format(toy):
    from dlcluster.sim.failures import FailureModel

    jobs, attempts = toy
    o, _ = F.attempt_outcomes(jobs, attempts)
    mapped, _ = F.map_logs_to_trace(_logs(), jobs, attempts)
    spec = F.fit_failure_model(mapped, o, jobs, share_source="toy logs", min_failures_per_class=2)
    classes = spec["classes"]
    # P(job fails) = 2 failed of 5 final; classified logs: 3 GPU OOM, 1 MPI (no signature spread over them)
    assert classes["GPU out of memory"]["probability"] == pytest.approx(0.4 * 3 / 4)
    assert classes["MPI runtime failure"]["probability"] == pytest.approx(0.4 * 1 / 4)
    oom_rtf = classes["GPU out of memory"]["rtf"]["samples_s"]
    assert (oom_rtf[0], oom_rtf[-1]) == (30.0, 40.0)           # its two mapped logs
    mpi_rtf = classes["MPI runtime failure"]["rtf"]["samples_s"]
    assert (mpi_rtf[0], mpi_rtf[-1]) == (5.0, 50.0)            # only one mapped log: trace-wide RTFs
    assert classes["MPI runtime failure"]["repeat_probability"] == 0.75
    assert "repeat_probability" not in classes["GPU out of memory"]
    assert spec["notes"]["no_signature_logs"] == 1
    model = FailureModel.from_dict(spec)
    assert {c.name for c in model.classes} == {"GPU out of memory", "MPI runtime failure"}


def test_public_trace_shares_match_the_records(public_trace):
    # The complete records hold only Pass and Failed; the shares must add up to the rows.
    dre = public_trace.jobs_of("dre")
    u = F.unsuccessful_share(public_trace.jobs)
    assert u["jobs"] == len(dre)
    assert u["unsuccessful_jobs"] == int((dre["status"] == "Failed").sum())
    assert u["killed_jobs_pct"] == 0.0
    assert u["left_out"] == {"no status in the source": len(public_trace.jobs_of("pollux"))}
