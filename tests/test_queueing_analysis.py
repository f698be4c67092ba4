"""Known-answer tests for the queueing analyses (delays, timeline, Table 2) and the replay on hand-made trace tables.

Times in the fixtures are minutes after BASE; every expected value below was
worked out by hand from the fixture (see the comments next to each).
"""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis.delays import (Trend, delay_summary, fig4_finding, first_attempt_locality, fittable_buckets,
                                       format_seconds, job_waits, servers_trend)
from dlcluster.analysis.table2 import (attribute_waits, causes_by_bucket, per_job_agreement, share_agreement,
                                       table2_finding, time_over_quota)
from dlcluster.analysis.timeline import ClusterTimeline, build_cluster_timeline
from dlcluster.validation.replay import compare_delays

BASE = pd.Timestamp("2017-10-01 00:00:00", tz="UTC")


def minute(m):
    return pd.NaT if m is None else BASE + pd.Timedelta(minutes=m)


def make_jobs(rows):
    """rows: (jobid, vc, submitted minute, num_gpus)."""
    return pd.DataFrame({
        "jobid": [r[0] for r in rows],
        "vc": [r[1] for r in rows],
        "submitted": [minute(r[2]) for r in rows],
        "num_gpus": [r[3] for r in rows],
        "source": "test",
    })


def make_attempts(rows):
    """rows: (jobid, attempt, start, end, num_gpus, num_servers, requeue_delay_s, running)."""
    return pd.DataFrame({
        "jobid": [r[0] for r in rows],
        "attempt": [r[1] for r in rows],
        "start": pd.Series([minute(r[2]) for r in rows], dtype="datetime64[us, UTC]"),
        "end": pd.Series([minute(r[3]) for r in rows], dtype="datetime64[us, UTC]"),
        "num_gpus": [r[4] for r in rows],
        "num_servers": [r[5] for r in rows],
        "requeue_delay_s": [np.nan if r[6] is None else float(r[6]) for r in rows],
        "running": [r[7] for r in rows],
    })


def make_placements(rows):
    """rows: (jobid, attempt, machine, [gpu indices])."""
    out = [(j, a, m, g) for j, a, m, gpus in rows for g in gpus]
    return pd.DataFrame(out, columns=["jobid", "attempt", "machine", "gpu"])


# ------------------------------------------------------------------ job_waits


def test_job_waits_counts_every_requeue_and_every_dropped_wait():
    jobs = make_jobs([
        ("a", "v1", 0, 2),      # waits 10 min, runs 10-20, re-queued, waits 5 min, runs 25-30
        ("b", "v1", 0, 1),      # no attempt at all
        ("c", "v2", 0, 9),      # attempt without a start
        ("d", "v2", 0, 4),      # second attempt after an attempt with unknown end
        ("e", "v2", 30, 4),     # starts before it was submitted
        ("f", "v2", 30, 16),    # starts the moment it is submitted: a zero wait, kept
    ])
    attempts = make_attempts([
        ("a", 0, 10, 20, 2, 1, 600, False),
        ("a", 1, 25, 30, 2, 2, 300, False),
        ("c", 0, None, None, 9, 2, None, False),
        ("d", 0, 5, None, 4, 1, 300, False),
        ("d", 1, 40, 50, 4, 1, None, False),
        ("e", 0, 20, 40, 4, 1, -600, False),
        ("f", 0, 30, 90, 16, 2, 0, False),
    ])
    waits = job_waits(jobs, attempts)
    t = waits.table
    assert list(zip(t["jobid"], t["attempt"], t["delay_s"], strict=True)) == [
        ("a", 0, 600.0), ("a", 1, 300.0), ("d", 0, 300.0), ("f", 0, 0.0)]
    assert list(t["bucket"].astype(str)) == ["2-4", "2-4", "2-4", ">8"]
    # the re-queue wait of 'a' runs from the end of attempt 0 (minute 20) to minute 25
    a1 = t[(t["jobid"] == "a") & (t["attempt"] == 1)].iloc[0]
    assert a1["wait_end"] - a1["wait_begin"] == 300.0
    assert a1["wait_begin"] == (minute(20) - pd.Timestamp(0, tz="UTC")).total_seconds()
    assert waits.dropped.to_dict() == {
        "job has no attempt in the data": 1,
        "attempt start unknown": 1,
        "submit time or previous attempt end unknown": 1,
        "negative wait (start before submit or before previous end)": 1,
    }


def test_job_waits_rejects_attempts_of_unknown_jobs():
    jobs = make_jobs([("a", "v1", 0, 2)])
    attempts = make_attempts([("zz", 0, 10, 20, 2, 1, 600, False)])
    with pytest.raises(ValueError, match=r"belong to no job.*'zz'"):
        job_waits(jobs, attempts)


def test_delay_summary_median_p90_and_zero_share():
    waits = pd.DataFrame({"bucket": ["1"] * 5 + ["5-8"] * 2,
                          "delay_s": [0, 60, 120, 180, 240, 10, 30]})
    s = delay_summary(waits)
    assert s.loc["1", "waits"] == 5
    assert s.loc["1", "median_s"] == 120
    assert s.loc["1", "p90_s"] == pytest.approx(216)  # 180 + 0.6 * 60 (linear interpolation)
    assert s.loc["1", "zero_share"] == pytest.approx(0.2)
    assert s.loc["5-8", "median_s"] == 20
    assert s.loc["5-8", "p90_s"] == pytest.approx(28)


# ------------------------------------------------------------------ Figure 4 trend


def _locality_jobs(slope, seed=0):
    rng = np.random.default_rng(seed)
    servers = np.repeat([1, 2, 3, 4], 40)
    log_delay = 3.0 + slope * servers + rng.normal(0, 0.1, len(servers))
    return pd.DataFrame({
        "jobid": [f"j{i}" for i in range(len(servers))],
        "vc": "v",
        "num_gpus": 8,
        "num_servers": servers,
        "queueing_delay_s": 10 ** log_delay - 1,
    })


def test_servers_trend_recovers_a_negative_slope_and_supports_the_claim():
    loc = first_attempt_locality(_locality_jobs(-0.5)).table
    trend = servers_trend(loc, "5-8")
    assert trend.jobs == 160
    assert trend.server_counts == {1: 40, 2: 40, 3: 40, 4: 40}
    assert trend.slope == pytest.approx(-0.5, abs=0.03)
    assert trend.ci_low < -0.5 < trend.ci_high
    assert trend.p_negative < 1e-10
    assert trend.median_slope == pytest.approx(-0.5, abs=0.05)
    assert trend.spearman_rho < -0.9
    assert trend.supports_claim()


def test_servers_trend_rejects_the_claim_when_delay_grows_with_servers():
    loc = first_attempt_locality(_locality_jobs(+0.3)).table
    trend = servers_trend(loc, "5-8")
    assert trend.slope == pytest.approx(0.3, abs=0.03)
    assert trend.p_negative > 0.99
    assert not trend.supports_claim()


def test_servers_trend_compares_jobs_of_the_same_size():
    # 32-GPU jobs need more servers (4-6) than 16-GPU jobs (2-4) and wait 100x longer, so
    # pooled, delay rises with servers; within each size every extra server cuts log10 delay by 0.2.
    rng = np.random.default_rng(1)
    rows = []
    for gpus, servers, base in ((16, (2, 3, 4), 2.0), (32, (4, 5, 6), 4.0)):
        for k in servers:
            for _ in range(30):
                rows.append((gpus, k, base - 0.2 * (k - servers[0]) + rng.normal(0, 0.05)))
    jobs = pd.DataFrame(rows, columns=["num_gpus", "num_servers", "log_delay"])
    jobs = jobs.assign(jobid=[f"j{i}" for i in range(len(jobs))], vc="v",
                       queueing_delay_s=10 ** jobs["log_delay"] - 1).drop(columns="log_delay")
    loc = first_attempt_locality(jobs).table
    pooled = np.polyfit(loc["num_servers"], loc["log_delay"], 1)[0]
    assert pooled > 0
    trend = servers_trend(loc, ">8")
    assert trend.slope == pytest.approx(-0.2, abs=0.02)
    assert trend.supports_claim()


def test_first_attempt_locality_keeps_known_rows_of_the_buckets_and_counts_every_other():
    jobs = pd.DataFrame({
        "jobid": ["a", "b", "c", "d", "e", "f", "g", "h"], "vc": "v",
        "num_gpus": [8, 16, 4, 8, 8, 8, np.nan, 1],
        "num_servers": [1, 2, 1, pd.NA, 2, 1, 1, 1],
        "queueing_delay_s": [99.0, 0.0, 5.0, 7.0, np.nan, -3.0, 1.0, 1.0],
    })
    locality = first_attempt_locality(jobs)
    assert list(locality.table["jobid"]) == ["a", "b"]
    assert list(locality.table["log_delay"]) == [2.0, 0.0]  # log10(1 + 99), log10(1 + 0)
    assert locality.dropped.to_dict() == {
        "job GPU count unknown": 1,                                          # g
        "job size outside the buckets studied (5-8, >8 GPUs)": 2,            # c (4 GPUs), h (1 GPU)
        "servers of the first attempt unknown": 1,                           # d
        "queueing delay unknown (no first start or submit time)": 1,         # e
        "negative queueing delay (first start before submit)": 1,            # f
    }
    assert locality.rows_read == len(jobs)  # every row loaded or counted
    assert first_attempt_locality(jobs, buckets=("2-4", "5-8")).dropped[
        "job size outside the buckets studied (2-4, 5-8 GPUs)"] == 2  # b (16 GPUs), h (1 GPU); c (4 GPUs) is in


def test_servers_trend_needs_two_server_counts():
    loc = first_attempt_locality(_locality_jobs(0.0)).table.assign(num_servers=1)
    with pytest.raises(ValueError, match="2 server counts"):
        servers_trend(loc, "5-8")


# ------------------------------------------------------------------ Table 2 attribution

# Two 8-GPU servers m1, m2 and a 2-GPU server m3 (never used). Quotas: VC a 8 GPUs, VC b 16, VC c none.
#   X (a, 4 GPUs) runs on m1[0-3]   0-60
#   Y (b, 6 GPUs) runs on m2[0-5]   0-30
#   W (a, 6 GPUs) submitted 10, runs on m1[0-5] 70-105
#   Z (b, 8 GPUs) submitted 20, runs on m2[0-7] 45-100
#   V (b, 12 GPUs) submitted 50, attempt 0 on m1[0-5]+m2[0-5] 110-120, attempt 1 130-140
#   U (c, 1 GPU)  submitted 0, runs on m1[7] 5-6 (its VC has no quota)
# Hand-computed splits (minutes):
#   W wait 10-70: 10-60 VC a holds 4, 4+6 > 8 -> fair 50; 60-70 quota ok, m1 all free -> other 10
#   Z wait 20-45: b holds 6, 6+8 <= 16; 20-30 m1 has 4 free, m2 2, m3 2 (8 in all) -> fragmentation 10;
#                 30-45 m2 all free -> other 15
#   V wait 50-110: 50-100 b holds 8 (Z), 8+12 > 16 -> fair 50; 100-105 m1 2 free (W), m2 8, m3 2:
#                 12 free, but the best two servers hold 10 < 12 -> fragmentation 5; 105-110 -> other 5
#   V re-queue 120-130: empty cluster -> other 10
#   X, Y: zero waits


@pytest.fixture
def tiny_trace():
    jobs = make_jobs([("X", "a", 0, 4), ("Y", "b", 0, 6), ("W", "a", 10, 6), ("Z", "b", 20, 8),
                      ("V", "b", 50, 12), ("U", "c", 0, 1)])
    attempts = make_attempts([
        ("X", 0, 0, 60, 4, 1, 0, False),
        ("Y", 0, 0, 30, 6, 1, 0, False),
        ("W", 0, 70, 105, 6, 1, 3600, False),
        ("Z", 0, 45, 100, 8, 1, 1500, False),
        ("V", 0, 110, 120, 12, 2, 3600, False),
        ("V", 1, 130, 140, 12, 2, 600, False),
        ("U", 0, 5, 6, 1, 1, 300, False),
    ])
    placements = make_placements([
        ("X", 0, "m1", range(4)), ("Y", 0, "m2", range(6)), ("W", 0, "m1", range(6)),
        ("Z", 0, "m2", range(8)), ("V", 0, "m1", range(6)), ("V", 0, "m2", range(6)),
        ("V", 1, "m1", range(6)), ("V", 1, "m2", range(6)), ("U", 0, "m1", [7]),
    ])
    machines = pd.DataFrame({"machine": ["m1", "m2", "m3"], "num_gpus": [8, 8, 2]})
    quotas = pd.DataFrame({"vc": ["a", "b"], "nodes": [1, 2], "gpus": [8, 16]})
    return jobs, attempts, placements, machines, quotas


def test_attribute_waits_splits_each_wait_as_computed_by_hand(tiny_trace):
    jobs, attempts, placements, machines, quotas = tiny_trace
    waits = job_waits(jobs, attempts).table
    att = attribute_waits(waits, jobs, attempts, placements, machines, quotas)
    got = {(r.jobid, r.attempt): (r.fair_share_s / 60, r.fragmentation_s / 60, r.other_s / 60)
           for r in att.table.itertuples()}
    assert got == {
        ("X", 0): (0, 0, 0),
        ("Y", 0): (0, 0, 0),
        ("W", 0): (50, 0, 10),
        ("Z", 0): (0, 10, 15),
        ("V", 0): (50, 5, 5),
        ("V", 1): (0, 0, 10),
    }
    assert att.dropped.to_dict() == {"VC has no quota": 1}


def test_attribute_waits_with_lending_counts_only_a_full_cluster_as_fair_share(tiny_trace):
    # VCs may borrow idle GPUs: fair-share only while the cluster has fewer free GPUs than the job needs.
    #   W (6 GPUs) 10-30: 18 - 10 = 8 free, but no server with 6 -> fragmentation 20;
    #     30-45: m2 free -> other 15; 45-60: X + Z hold 12, 6 free (m1 4, m3 2) -> fragmentation 15;
    #     60-70: other 10
    #   V (12 GPUs) 50-100: at most 6 (50-60), 10 (60-70), 4 (70-100) free -> fair 50 (was quota);
    #     100-105 fragmentation 5, 105-110 other 5
    #   U's VC has no quota, which does not matter with lending: its 5-minute wait (m1 fits it) is other
    jobs, attempts, placements, machines, quotas = tiny_trace
    waits = job_waits(jobs, attempts).table
    att = attribute_waits(waits, jobs, attempts, placements, machines, quotas, lending=True)
    got = {(r.jobid, r.attempt): (r.fair_share_s / 60, r.fragmentation_s / 60, r.other_s / 60)
           for r in att.table.itertuples()}
    assert got[("W", 0)] == (0, 35, 25)
    assert got[("V", 0)] == (50, 5, 5)
    assert got[("Z", 0)] == (0, 10, 15)
    assert got[("U", 0)] == (0, 0, 5)
    assert att.dropped.empty


def test_time_over_quota(tiny_trace):
    jobs, attempts, placements, machines, _ = tiny_trace
    origin = (minute(0) - pd.Timestamp(0, tz="UTC")).total_seconds()
    tl = build_cluster_timeline(jobs, attempts, placements, machines, origin=origin)
    over = time_over_quota(tl, {"a": 4, "b": 8})
    # 0-140 minutes; a holds 6 > 4 while W runs (70-105): 35/140; b holds 12 > 8 while V runs (20 min)
    assert over.loc["a", "time_over_quota"] == pytest.approx(35 / 140)
    assert over.loc["b", "time_over_quota"] == pytest.approx(20 / 140)
    assert over.loc["b", "peak_gpus"] == 12
    assert math.isnan(over.loc["c", "time_over_quota"])


def test_causes_by_bucket_shares_and_frequencies(tiny_trace):
    jobs, attempts, placements, machines, quotas = tiny_trace
    waits = job_waits(jobs, attempts).table
    table = causes_by_bucket(attribute_waits(waits, jobs, attempts, placements, machines, quotas).table)
    # 5-8 GPUs: W (50/0/10) + Z (0/10/15) + Y (0 wait) = 85 minutes
    assert table.loc["5-8", "waits"] == 3
    assert table.loc["5-8", "wait_h"] == pytest.approx(85 / 60)
    assert table.loc["5-8", "fair_share_share"] == pytest.approx(50 / 85)
    assert table.loc["5-8", "fragmentation_share"] == pytest.approx(10 / 85)
    assert table.loc["5-8", "other_share"] == pytest.approx(25 / 85)
    assert table.loc["5-8", "waited"] == 2                                    # Y did not wait
    assert table.loc["5-8", "fair_share_frequency"] == pytest.approx(1 / 2)   # W, of the two that waited
    assert table.loc["5-8", "other_frequency"] == pytest.approx(1 / 2)        # Z
    assert table.loc["5-8", "fragmentation_frequency"] == 0
    # >8 GPUs: V's two waits (50/5/5) and (0/0/10) = 70 minutes
    assert table.loc[">8", "fair_share_share"] == pytest.approx(50 / 70)
    assert table.loc[">8", "fragmentation_share"] == pytest.approx(5 / 70)
    assert table.loc[">8", "other_share"] == pytest.approx(15 / 70)
    # 2-4 GPUs: X's zero wait only -> shares undefined, never a made-up 0
    assert math.isnan(table.loc["2-4", "fragmentation_share"])
    assert "1" not in table.index  # U's VC had no quota: not attributed


def test_causes_by_bucket_reads_a_simulators_own_columns():
    truth = pd.DataFrame({"num_gpus": [1, 1, 16],
                          "fs": [10.0, 0.0, 5.0], "frag": [0.0, 30.0, 15.0], "backoff": [0.0, 10.0, 0.0]})
    table = causes_by_bucket(truth, {"fair_share": "fs", "fragmentation": "frag", "other": "backoff"})
    assert table.loc["1", "fragmentation_share"] == pytest.approx(30 / 50)
    assert table.loc["1", "fair_share_frequency"] == pytest.approx(0.5)
    assert table.loc[">8", "fragmentation_share"] == pytest.approx(0.75)


def test_timeline_step_functions(tiny_trace):
    jobs, attempts, placements, machines, _ = tiny_trace
    tl = build_cluster_timeline(jobs, attempts, placements, machines)

    def at(m):
        return np.searchsorted(tl.times, (minute(m) - pd.Timestamp(0, tz="UTC")).total_seconds(), "right") - 1

    assert tl.server_size == 8
    assert tl.usage_of("b")[at(50)] == 8            # Z
    assert tl.usage_of("b")[at(115)] == 12          # V attempt 0
    assert tl.usage_of("b")[at(125)] == 0           # between V's attempts
    assert tl.usage_of("nobody")[at(50)] == 0
    # minute 20: m1 has 4 free (X), m2 has 2 free (Y), m3 2
    assert list(tl.servers_with_free[:, at(20)]) == [3, 3, 1, 1, 0, 0, 0, 0]
    # minute 5.5: U also holds m1[7] -> m1 has 3 free
    assert list(tl.servers_with_free[:, at(5.5)]) == [3, 3, 1, 0, 0, 0, 0, 0]
    assert tl.dropped.empty and tl.notes.empty


def test_timeline_running_attempt_holds_gpus_forever_and_unknown_ends_are_counted():
    jobs = make_jobs([("r", "a", 0, 2), ("k", "a", 0, 2)])
    attempts = make_attempts([("r", 0, 10, None, 2, 1, 600, True),
                              ("k", 0, 10, None, 2, 1, 600, False)])
    placements = make_placements([("r", 0, "m1", [0, 1]), ("k", 0, "m9", [0, 3])])
    machines = pd.DataFrame({"machine": ["m1"], "num_gpus": [2]})
    tl = build_cluster_timeline(jobs, attempts, placements, machines)
    assert tl.usage_of("a")[-1] == 2
    assert list(tl.servers_with_free[:, -1]) == [0, 0]     # m1 full forever
    assert tl.dropped.to_dict() == {"attempt end unknown and not running": 1}
    # m9 is not in the machine list; it appears only through the dropped attempt
    assert tl.notes.empty


def test_timeline_sizes_servers_from_placements_and_clips_overcommit():
    jobs = make_jobs([("p", "a", 0, 4), ("q", "a", 0, 4)])
    attempts = make_attempts([("p", 0, 0, 10, 4, 1, 0, False), ("q", 0, 5, 15, 4, 1, 300, False)])
    # m1 listed with 2 GPUs but p uses gpu0-3; m7 is in no list; q overlaps p on m1
    placements = make_placements([("p", 0, "m1", [0, 1, 2, 3]), ("q", 0, "m1", [0, 1]),
                                  ("q", 0, "m7", [0, 1])])
    machines = pd.DataFrame({"machine": ["m1"], "num_gpus": [2]})
    origin = (minute(-1) - pd.Timestamp(0, tz="UTC")).total_seconds()
    tl = build_cluster_timeline(jobs, attempts, placements, machines, origin=origin)
    assert tl.server_size == 4
    assert tl.notes.to_dict() == {
        "servers only in placements (size taken from placements)": 1,
        "servers whose placements exceed their listed size (size raised)": 1,
        "servers overcommitted at some time (free GPUs clipped at 0)": 1,
    }
    # before anything (the origin segment): m1 4 free, m7 2 free (its size from gpu index 1)
    assert tl.times[0] == origin
    assert list(tl.servers_with_free[:, 0]) == [2, 2, 1, 1]
    # minutes 5-10: m1 holds 4 + 2 > 4 GPUs -> 0 free, not -2; m7 0 free
    assert list(tl.servers_with_free[:, 2]) == [0, 0, 0, 0]
    # minutes 10-15: p has ended, m1 holds q's 2 -> 2 free
    assert list(tl.servers_with_free[:, 3]) == [1, 1, 0, 0]
    assert list(tl.usage_of("a")) == [0, 4, 8, 4, 0]


def test_local_placement_rule_uses_the_fewest_servers():
    # servers with 8, 4 and 2 free GPUs -> N_k = servers with >= k free
    n_k = np.array([3, 3, 2, 2, 1, 1, 1, 1])[:, None]
    tl = ClusterTimeline(times=np.array([0.0]), vcs=np.array([], dtype=object),
                         vc_usage=np.zeros((0, 1), dtype=np.int64), servers_with_free=n_k,
                         server_size=8, dropped=pd.Series(dtype="int64"), notes=pd.Series(dtype="int64"))
    assert tl.local_placement_exists(8)[0]          # one server: the one with 8 free
    assert tl.local_placement_exists(12)[0]         # two servers: 8 + 4 = 12
    assert not tl.local_placement_exists(13)[0]     # two servers hold at most 12
    assert not tl.local_placement_exists(17)[0]     # three servers: 8 + 4 + 2 = 14 < 17
    empty = ClusterTimeline(times=np.array([0.0]), vcs=np.array([], dtype=object),
                            vc_usage=np.zeros((0, 1), dtype=np.int64),
                            servers_with_free=np.array([3, 3, 3, 3, 0, 0, 0, 0])[:, None],
                            server_size=8, dropped=pd.Series(dtype="int64"), notes=pd.Series(dtype="int64"))
    assert empty.local_placement_exists(4)[0]
    assert not empty.local_placement_exists(5)[0]   # 12 free GPUs in all, but no server with 5


# ------------------------------------------------------------------ findings


def _table(frag, fair, other):
    buckets = ["1", "2-4", "5-8", ">8"][: len(frag)]
    return pd.DataFrame({"fragmentation_share": frag, "fair_share_share": fair, "other_share": other},
                        index=pd.Index(buckets, name="bucket"))


def test_table2_finding_reads_the_table():
    grows = _table([0.1, 0.2, 0.4, 0.7], [0.6, 0.5, 0.3, 0.2], [0.3, 0.3, 0.3, 0.1])
    assert table2_finding(grows) == (
        "Fragmentation's share of waiting time is 10% (1 GPU), 20% (2-4 GPUs), 40% (5-8 GPUs), "
        "70% (>8 GPUs): it grows with job size; for >8-GPU jobs the largest cause is fragmentation (70%).")
    falls = _table([0.5, 0.1], [0.2, 0.6], [0.3, 0.3])
    assert "it does not grow with job size" in table2_finding(falls)
    assert "for 2-4-GPU jobs the largest cause is fair-share (60%)" in table2_finding(falls)
    bumpy = _table([0.1, 0.5, 0.3], [0.3, 0.3, 0.3], [0.6, 0.2, 0.4])
    assert "larger for the largest jobs than for the smallest, but not steadily" in table2_finding(bumpy)


def _trend(bucket, factor, low, high, p_neg, median_p_neg):
    """A Trend whose slope is log10 of the per-server delay factor."""
    return Trend(bucket=bucket, jobs=100, server_counts={1: 50, 2: 50}, slope=math.log10(factor),
                 ci_low=math.log10(low), ci_high=math.log10(high), p_two_sided=2 * min(p_neg, 1 - p_neg),
                 p_negative=p_neg, median_p_negative=median_p_neg, median_slope=math.log10(factor),
                 spearman_rho=0.0, model=None)


def test_fig4_finding_says_whether_the_claim_holds():
    down = _trend("5-8", 0.5, 0.4, 0.6, 0.001, 0.01)
    up = _trend(">8", 2.0, 1.5, 2.5, 0.999, 0.99)
    median_disagrees = _trend(">8", 0.5, 0.4, 0.6, 0.001, 0.2)
    assert fig4_finding([down]) == (
        "Jobs spread over more servers waited less: 5-8 GPUs: -50% delay per extra server "
        "(95% CI -60%..-40%, one-sided p=0.001, significant).")
    assert fig4_finding([up]) == (
        "Our data does not show that jobs spread over more servers waited less: >8 GPUs: +100% delay "
        "per extra server (95% CI +50%..+150%, one-sided p=1, not significant).")
    assert fig4_finding([down, up]).startswith("Jobs spread over more servers waited less only for 5-8 GPUs: ")
    assert not median_disagrees.supports_claim()


def test_fig4_interval_and_verdict_follow_alpha():
    # the interval's level is the trend's 1 - alpha, and the verdict its alpha, not a fixed 95% / 0.05
    loose = replace(_trend("5-8", 0.5, 0.4, 0.6, 0.07, 0.08), alpha=0.1)
    assert fig4_finding([loose]) == (
        "Jobs spread over more servers waited less: 5-8 GPUs: -50% delay per extra server "
        "(90% CI -60%..-40%, one-sided p=0.07, significant).")
    assert loose.supports_claim() and not loose.supports_claim(0.05)
    assert "(97.5% CI " in fig4_finding([replace(loose, alpha=0.025)])
    loc = first_attempt_locality(_locality_jobs(-0.5)).table
    at95, at90 = servers_trend(loc, "5-8"), servers_trend(loc, "5-8", alpha=0.1)
    assert (at95.ci_level, at90.ci_level) == (0.95, 0.9)
    assert at95.ci_low < at90.ci_low < at90.slope < at90.ci_high < at95.ci_high
    assert "(90% CI " in fig4_finding([at90]) and "(95% CI " in fig4_finding([at95])


def test_format_seconds():
    assert [format_seconds(s) for s in (45, 750, 11520, 181440, float("nan"), None)] == [
        "45 s", "12.5 min", "3.2 h", "2.1 d", "n/a", "n/a"]
    # negative durations (changes, CI bounds) keep their unit: the experiments' sentences print them
    assert [format_seconds(s) for s in (-45, -750, -5400, -2.5 * 86400)] == ["-45 s", "-12.5 min", "-1.5 h", "-2.5 d"]


def test_rack_rule_needs_one_rack_for_multi_server_jobs():
    # m1, m2 in rack r0, m3 in rack r1 (8 GPUs each). Job B holds m2 from minute 0 to 60;
    # job G (12 GPUs) waits from 10 to 70.
    jobs = make_jobs([("B", "a", 0, 8), ("G", "a", 10, 12)])
    attempts = make_attempts([("B", 0, 0, 60, 8, 1, 0, False), ("G", 0, 70, 80, 12, 2, 3600, False)])
    placements = make_placements([("B", 0, "m2", range(8)), ("G", 0, "m1", range(8)), ("G", 0, "m2", range(4))])
    machines = pd.DataFrame({"machine": ["m1", "m2", "m3"], "num_gpus": [8, 8, 8]})
    racks = {"m1": "r0", "m2": "r0", "m3": "r1"}
    waits = job_waits(jobs, attempts).table
    quotas = {"a": 100}
    # minutes 10-60: free m1 8, m2 0, m3 8. Two servers hold 16 >= 12 (fewest_servers: fits),
    # but r0 has 8 free and r1 8: no rack holds 12 (rack: fragmentation). 60-70: r0 has 16 free.
    fewest = attribute_waits(waits, jobs, attempts, placements, machines, quotas)
    by_rack = attribute_waits(waits, jobs, attempts, placements, machines, quotas, locality="rack", racks=racks)
    g_fewest = fewest.table.set_index("jobid").loc["G"]
    g_rack = by_rack.table.set_index("jobid").loc["G"]
    assert (g_fewest.fragmentation_s, g_fewest.other_s) == (0.0, 3600.0)
    assert (g_rack.fragmentation_s, g_rack.other_s) == (3000.0, 600.0)
    tl = by_rack.timeline
    assert list(tl.rack_size) == [16, 8]
    # segments start at minutes 0 (B starts), 60 (B ends), 70 (G starts on m1 + 4 of m2), 80 (G ends)
    assert [list(tl.rack_free[:, i]) for i in range(len(tl.times))] == [[8, 8], [16, 8], [4, 8], [16, 8]]
    # 17 GPUs exceed any rack: 17 free GPUs anywhere will do (16, 24, 12, 24 free in the segments)
    assert list(tl.local_placement_exists(17, "rack")) == [False, True, False, True]
    # 12 GPUs: a rack with 12 free (only r0 in segments 1 and 3)
    assert list(tl.local_placement_exists(12, "rack")) == [False, True, False, True]
    assert list(tl.local_placement_exists(5, "rack")) == [True, True, True, True]  # m3 is always free
    with pytest.raises(ValueError, match="needs racks"):
        attribute_waits(waits, jobs, attempts, placements, machines, quotas, locality="rack")


def test_share_agreement_is_one_minus_total_variation():
    est = _table([0.1, 0.5], [0.6, 0.2], [0.3, 0.3]).assign(wait_h=[1.0, 1.0])
    truth = _table([0.1, 0.3], [0.6, 0.7], [0.3, 0.0]).assign(wait_h=[3.0, 3.0])
    agree = share_agreement(est, truth)
    assert agree.loc["1", "agreement"] == pytest.approx(1.0)
    # 2-4: |0.5-0.3| + |0.2-0.7| + |0.3-0| = 1.0 -> 1 - 0.5
    assert agree.loc["2-4", "agreement"] == pytest.approx(0.5)
    assert agree.loc["2-4", "fragmentation_truth"] == pytest.approx(0.3)


def test_compare_delays_medians_and_ks():
    real = pd.DataFrame({"bucket": ["5-8"] * 4 + [">8"] * 3, "delay_s": [1, 2, 3, 4, 10, 20, 30]})
    sim = pd.DataFrame({"bucket": ["5-8"] * 4 + ["1"], "delay_s": [1, 2, 3, 4, 7]})
    cmp = compare_delays(real, sim)
    assert cmp.loc["5-8", "ks_statistic"] == 0.0 and cmp.loc["5-8", "ks_p"] == pytest.approx(1.0)
    assert cmp.loc["5-8", "real_median_s"] == 2.5
    assert cmp.loc[">8", "simulated_n"] == 0 and math.isnan(cmp.loc[">8", "ks_statistic"])
    assert cmp.loc["1", "simulated_median_s"] == 7 and cmp.loc["1", "real_n"] == 0
    assert list(cmp.index) == ["1", "5-8", ">8"]


def test_causes_by_bucket_adds_up_listed_columns():
    truth = pd.DataFrame({"num_gpus": [8, 8], "fs": [9.0, 0.0], "frag": [5.0, 0.0], "backoff": [5.0, 20.0]})
    table = causes_by_bucket(truth, {"fair_share": "fs", "fragmentation": ["frag", "backoff"]})
    assert table.loc["5-8", "fragmentation_share"] == pytest.approx(30 / 39)
    assert table.loc["5-8", "fragmentation_frequency"] == pytest.approx(1.0)  # 9 fair-share < 5 + 5 in job 1


def test_share_agreement_is_undefined_without_waiting_time():
    est = _table([0.5], [0.5], [0.0]).assign(wait_h=[0.0])
    truth = _table([0.5], [0.5], [0.0]).assign(wait_h=[2.0])
    assert math.isnan(share_agreement(est, truth).loc["1", "agreement"])


def test_per_job_agreement_matches_seconds_cause_by_cause():
    attributed = pd.DataFrame({"jobid": ["a", "a", "b"], "fair_share_s": [10.0, 0.0, 0.0],
                               "fragmentation_s": [0.0, 20.0, 5.0], "other_s": [0.0, 0.0, 5.0]})
    truth = pd.DataFrame({"jobid": ["a", "b", "c"], "delay_fair_share_s": [10.0, 0.0, 0.0],
                          "locality_relaxed_s": [5.0, 0.0, 0.0], "locality_placed_s": [15.0, 10.0, 0.0],
                          "locality_contended_s": [0.0, 0.0, 0.0], "held_by_timer_s": [0.0, 0.0, 4.0]})
    # a: fair 10/10, fragmentation 20 vs 5 + 15 -> 30 matched; b: fragmentation 5 vs 10 -> 5, other 5 vs 0;
    # c: other 0 vs 4 (a back-off timer alone held it: other, not fragmentation)
    # totals: estimate 40, truth 44 -> 35 / 44
    assert per_job_agreement(attributed, truth) == pytest.approx(35 / 44)


def test_fittable_buckets_and_the_finding_without_any():
    loc = first_attempt_locality(_locality_jobs(-0.5)).table
    assert fittable_buckets(loc) == ["5-8"]
    assert fittable_buckets(loc.assign(num_servers=1)) == []
    assert fittable_buckets(loc.head(4)) == []
    assert fig4_finding([]).startswith("Not computable: no 5-8 or >8 GPU bucket has 5 or more jobs")
