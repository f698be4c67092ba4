"""Known-answer tests of dlcluster.analysis.utilization on hand-made tables."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis import utilization as ut

T0 = pd.Timestamp("2017-10-01 00:00", tz="UTC")


def minute(m, s=0):
    return T0 + pd.Timedelta(minutes=m, seconds=s)


def drops(samples):
    return dict(zip(samples.dropped["reason"], samples.dropped["rows"], strict=True))


@pytest.fixture
def jobs():
    return pd.DataFrame({"jobid": ["j1", "j2", "j3"], "num_gpus": [2, 4, 1],
                         "status": ["Pass", "Failed", "Killed"]})


@pytest.fixture
def window_tables(jobs):
    placements = pd.DataFrame({
        "jobid": ["j1", "j1", "j2", "j2", "j2", "j2", "jX"],
        "attempt": [0] * 7,
        "machine": ["m1", "m1", "m2", "m2", "m2", "m2", "m3"],
        "gpu": [0, 1, 0, 1, 2, 3, 0]})
    rows = [("j1", "m1", 0, -1, 99.0), ("j1", "m1", 0, 0, 10.0), ("j1", "m1", 0, 1, 20.0),
            ("j1", "m1", 1, 0, 30.0), ("j1", "m1", 1, 1, np.nan),
            ("j2", "m2", 0, 0, 40.0), ("j2", "m2", 1, 0, 50.0), ("j2", "m2", 2, 0, 60.0),
            ("j2", "m2", 3, 0, 70.0), ("j2", "m9", 0, 0, 5.0),
            ("jX", "m3", 0, 0, 1.0)]
    gpu_util = pd.DataFrame(rows, columns=["jobid", "machine", "gpu", "minute", "util"])
    gpu_util["time"] = pd.NaT
    return gpu_util, jobs, placements


def test_window_samples_keep_minutes_after_start_on_placed_gpus(window_tables):
    s = ut.gpu_minutes(*window_tables)
    assert s.basis == "window"
    assert sorted(s.frame["util"]) == [10, 20, 30, 40, 50, 60, 70]
    d = drops(s)
    assert d["before the job started (minute < 0)"] == 1
    assert d["utilization missing (NA or empty cell)"] == 1
    assert d["GPU not in the job's placement"] == 1
    assert d["job not in the jobs table"] == 1
    assert set(s.frame["status"]) == {"Pass", "Failed"}


def test_minutes_per_job_counts_distinct_minutes_and_gpus(window_tables):
    per_job = ut.minutes_per_job(ut.gpu_minutes(*window_tables)).set_index("jobid")
    assert per_job.loc["j1", ["minutes", "gpu_minutes", "gpus_observed", "mean_util"]].tolist() == [2, 3, 2, 20.0]
    assert per_job.loc["j2", ["minutes", "gpu_minutes", "gpus_observed", "mean_util"]].tolist() == [1, 4, 4, 55.0]


def test_table3_means_weight_minutes_and_jobs(window_tables):
    per_job = ut.minutes_per_job(ut.gpu_minutes(*window_tables))
    t3 = ut.mean_utilization_by_size(per_job, sizes=(1, 2, 4)).set_index("size")
    assert t3.loc["2", "mean_util_pct"] == pytest.approx(20.0)
    assert t3.loc["4", "mean_util_pct"] == pytest.approx(55.0)
    assert t3.loc["all", "mean_util_pct"] == pytest.approx(40.0)
    assert t3.loc["all", "job_mean_util_pct"] == pytest.approx(37.5)
    assert t3.loc["1", "jobs"] == 0 and np.isnan(t3.loc["1", "mean_util_pct"])
    assert t3.loc["all", "gpu_minutes"] == 7


def test_window_rejects_gpu_in_two_attempts(window_tables):
    gpu_util, jobs, placements = window_tables
    twice = pd.concat([placements, placements.iloc[[0]].assign(attempt=1)])
    with pytest.raises(ValueError, match=r"m1/gpu0.*job j1"):
        ut.gpu_minutes(gpu_util, jobs, twice)


@pytest.fixture
def time_tables(jobs):
    attempts = pd.DataFrame({
        "jobid": ["j1", "j1", "j2", "j3", "j3"],
        "attempt": [0, 1, 0, 0, 1],
        "start": [minute(0), minute(4, 30), minute(4), pd.NaT, minute(1)],
        "end": [minute(3), pd.NaT, minute(6), minute(2), pd.NaT],
        "running": [False, True, False, False, False]})
    placements = pd.DataFrame({"jobid": ["j1", "j1", "j2", "j3", "j3"], "attempt": [0, 1, 0, 0, 1],
                               "machine": ["m1"] * 5, "gpu": [0, 1, 0, 1, 1]})
    times = [minute(m) for m in range(8)]
    gpu_util = pd.DataFrame({
        "machine": "m1", "gpu": [0] * 8 + [1] * 8, "time": times * 2,
        "util": [float(m) for m in range(8)] + [100.0 + m for m in range(8)]})
    gpu_util.loc[14, "util"] = np.nan  # m1/gpu1 at 00:06
    gpu_util["minute"] = pd.NA
    return gpu_util, jobs, placements, attempts


def test_time_join_assigns_minutes_inside_each_attempt(time_tables):
    s = ut.gpu_minutes(*time_tables[:3], attempts=time_tables[3])
    assert s.basis == "time"
    got = s.frame.sort_values(["jobid", "attempt", "time"])
    assert list(zip(got["jobid"], got["attempt"], got["util"], strict=True)) == [
        ("j1", 0, 0.0), ("j1", 0, 1.0), ("j1", 0, 2.0),     # [00:00, 00:03)
        ("j1", 1, 105.0), ("j1", 1, 107.0),                 # from 00:04:30, still running; 00:06 NA
        ("j2", 0, 4.0), ("j2", 0, 5.0)]                     # [00:04, 00:06)
    d = drops(s)
    assert d["attempt start unknown"] == 1
    assert d["attempt end unknown (not running)"] == 1
    assert d["utilization missing (NA or empty cell)"] == 1
    # 15 non-NA samples, 7 attributed
    assert d["GPU minute outside every attempt (idle or unattributed)"] == 8
    assert ut.minutes_per_job(s).set_index("jobid").loc["j1", "minutes"] == 5


def test_time_join_counts_overlapping_attempts_and_gives_later_start(jobs):
    attempts = pd.DataFrame({"jobid": ["j1", "j2"], "attempt": [0, 0],
                             "start": [minute(0), minute(2)], "end": [minute(3), minute(5)],
                             "running": [False, False]})
    placements = pd.DataFrame({"jobid": ["j1", "j2"], "attempt": [0, 0], "machine": ["m1", "m1"],
                               "gpu": [0, 0]})
    gpu_util = pd.DataFrame({"machine": "m1", "gpu": 0, "time": [minute(m) for m in range(4)],
                             "util": [1.0, 2.0, 3.0, 4.0], "minute": pd.NA})
    s = ut.gpu_minutes(gpu_util, jobs, placements, attempts)
    assert drops(s)["GPU-attempt spans overlapping an earlier span on the same GPU "
                    "(samples go to the later start)"] == 1
    assert dict(zip(s.frame["util"], s.frame["jobid"], strict=True)) == {1.0: "j1", 2.0: "j1", 3.0: "j2", 4.0: "j2"}


def test_time_data_needs_attempts(time_tables):
    with pytest.raises(ValueError, match="attempts"):
        ut.gpu_minutes(*time_tables[:3])


def test_basis_rejects_mixed_and_empty():
    mixed = pd.DataFrame({"minute": [0, pd.NA], "time": [pd.NaT, T0]})
    with pytest.raises(ValueError, match="both"):
        ut.utilization_basis(mixed)
    with pytest.raises(ValueError, match="no row"):
        ut.utilization_basis(pd.DataFrame({"minute": [pd.NA], "time": [pd.NaT]}))


def test_host_window_samples_only_selected_attempts(jobs):
    placements = pd.DataFrame({"jobid": ["j1", "j1", "j2"], "attempt": [0, 0, 0],
                               "machine": ["m1", "m2", "m3"], "gpu": [0, 0, 0]})
    host = pd.DataFrame({"jobid": ["j1", "j1", "j1", "j2", "j2"], "machine": ["m1", "m2", "m7", "m3", "m3"],
                         "minute": [0, 1, 0, -2, 0], "cpu_util": [10.0, 20.0, 1.0, 5.0, 30.0],
                         "mem_util": [50.0, np.nan, 1.0, 5.0, 60.0], "time": pd.NaT})
    s = ut.host_minutes(host, jobs, placements, only=pd.DataFrame({"jobid": ["j1"], "attempt": [0]}))
    assert sorted(s.frame["cpu_util"]) == [10.0, 20.0]
    d = drops(s)
    assert d["server not in the job's placement"] == 1
    assert d["before the job started (minute < 0)"] == 1
    assert d["attempt not selected"] == 1


def test_host_time_join_uses_server_spans(jobs):
    attempts = pd.DataFrame({"jobid": ["j1"], "attempt": [0], "start": [minute(1)], "end": [minute(3)],
                             "running": [False]})
    placements = pd.DataFrame({"jobid": ["j1"] * 2, "attempt": [0, 0], "machine": ["m1", "m1"], "gpu": [0, 1]})
    host = pd.DataFrame({"machine": "m1", "time": [minute(m) for m in range(5)],
                         "cpu_util": [1.0, 2.0, 3.0, 4.0, 5.0], "mem_util": 9.0, "minute": pd.NA})
    s = ut.host_minutes(host, jobs, placements, attempts)
    assert s.frame["cpu_util"].tolist() == [2.0, 3.0]
    assert drops(s)["server minute outside the selected attempts"] == 3


def test_dedicated_attempts_need_every_gpu_of_every_server():
    machines = pd.DataFrame({"machine": ["m1", "m2", "m3"], "num_gpus": [8, 8, 4]})
    rows = ([("A", "m1", g) for g in range(8)]
            + [("B", "m1", g) for g in range(8)] + [("B", "m2", g) for g in range(8)]
            + [("C", "m2", g) for g in range(4)] + [("C", "m3", g) for g in range(4)]
            + [("D", "m3", g) for g in range(4)] + [("E", "m9", g) for g in range(2)])
    placements = pd.DataFrame(rows, columns=["jobid", "machine", "gpu"]).assign(attempt=0)
    ded = ut.dedicated_attempts(placements, machines).set_index("jobid")
    assert ded["dedicated"].to_dict() == {"A": True, "B": True, "C": False, "D": True, "E": False}
    assert ded["num_gpus"].to_dict() == {"A": 8, "B": 16, "C": 8, "D": 4, "E": 2}
    assert ded["num_servers"].to_dict() == {"A": 1, "B": 2, "C": 2, "D": 1, "E": 1}
    assert ded["unknown_server"].to_dict() == {"A": False, "B": False, "C": False, "D": False, "E": True}

    samples = pd.DataFrame({"jobid": list("ABCDE"), "attempt": 0, "util": [1.0, 2.0, 3.0, 4.0, 5.0]})
    chosen = ut.dedicated_comparison(samples, ded.reset_index(), sizes=(8, 16))
    assert dict(zip(chosen["jobid"], chosen["num_servers"], strict=True)) == {"A": 1, "B": 2}


def test_ecdf_weighted_and_cdfs_by_status_and_size():
    assert ut.ecdf([1, 2, 2, 3], [0, 1, 2, 2.5, 3, 4]).tolist() == [0, 25, 75, 75, 100, 100]
    assert ut.ecdf([3, 1, 2], [0, 1, 2, 2.5, 3, 4], weights=[1, 1, 2]).tolist() == [0, 25, 75, 75, 100, 100]
    assert np.isnan(ut.ecdf([], [0, 1])).all()
    frame = pd.DataFrame({"jobid": ["a", "a", "b", "c", "c"], "status": ["Pass", "Pass", "Pass", "Failed", "Failed"],
                          "num_gpus": [4, 4, 4, 8, 8], "util": [10.0, 30.0, 10.0, 70.0, np.nan]})
    counts = ut.value_counts(frame)
    assert counts.values.tolist() == [["Failed", 8, 70.0, 1], ["Pass", 4, 10.0, 2], ["Pass", 4, 30.0, 1]]
    cdfs = ut.utilization_cdfs(counts, sizes=(4, 8), grid=[0, 10, 30, 100])
    pass4 = cdfs[(cdfs["status"] == "Pass") & (cdfs["num_gpus"] == 4)]
    assert pass4["cdf_pct"].tolist() == pytest.approx([0, 200 / 3, 100, 100])
    assert pass4["samples"].iloc[0] == 3
    assert set(zip(cdfs["status"], cdfs["num_gpus"], strict=True)) == {("Pass", 4), ("Failed", 8)}


def test_summarize_weighted_quartiles_match_inverted_cdf():
    counts = pd.DataFrame({"grp": [1, 1, 1, 1, 2], "util": [0.0, 10.0, 20.0, 30.0, 5.0], "samples": [1, 1, 1, 1, 3]})
    out = ut.summarize(counts, "grp", "util").set_index("grp")
    assert out.loc[1, ["samples", "mean", "p25", "median", "p75"]].tolist() == [4, 15, 0, 10, 20]
    assert out.loc[2, ["samples", "mean", "median"]].tolist() == [3, 5, 5]
    values, weights = np.array([3.0, 1.0, 2.0, 7.0]), np.array([2, 5, 1, 4])
    expanded = np.repeat(values, weights)
    for q in (0.1, 0.25, 0.5, 0.9):
        assert ut.weighted_quantile(values, weights, q) == np.quantile(expanded, q, method="inverted_cdf")


def test_published_quantile_table_as_step_cdf_and_mean():
    table = pd.DataFrame({"gpu_util_percent": [0, 0, 10, 20], "cdf_percent": [0, 50, 75, 100]})
    assert ut.cdf_from_quantiles(table, [0, 5, 10, 15, 20]).tolist() == [50, 50, 75, 75, 100]
    assert ut.mean_from_quantiles(table) == pytest.approx(7.5)
    assert ut.cdf_max_gap(np.array([0, 50, 100]), np.array([10, 20, 100])) == 30


def test_full_trace_format_through_the_loader(raw_small):
    """The raw-format fixture: absolute-time samples joined to attempts by the loader's tables."""
    from dlcluster.trace import load_trace

    tr = load_trace(raw_small)
    s = ut.gpu_minutes(tr.gpu_util, tr.jobs, tr.placements, tr.attempts)
    assert s.basis == "time"
    by_job = s.frame.groupby("jobid")["util"].apply(sorted).to_dict()
    assert by_job == {"application_1_0001": [10, 20, 30, 40, 50, 60],  # m1+m2 gpu0-1, 07:10-08:10 UTC
                      "application_1_0006": [11, 22]}  # m2 gpu4 at 01:30 PDT and 01:30 PST on 2017-11-05
    assert drops(s)["attempt start unknown"] == 1
    host = ut.host_minutes(tr.host_util, tr.jobs, tr.placements, tr.attempts)
    assert host.frame[["jobid", "cpu_util"]].values.tolist() == [["application_1_0001", 12.5]]
    # m1 hosts job 0001 and the first attempt of job 0002 at the same time
    assert drops(host)["server-attempt spans overlapping an earlier span on the same server "
                       "(samples go to the later start)"] == 1
