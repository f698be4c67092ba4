"""Golden tests: tiny scenarios whose every start and end time is computed by hand.

Topologies are written RxSxG (racks x servers x GPUs); servers s0, s1, ... in
index order. ``slowdown=None`` (ideal speed) unless a test is about speed.
"""

from __future__ import annotations

import pytest
from sim_helpers import attempts_of, check_invariants, job, make_workload

from dlcluster.sim import (FailureModel, FifoPolicy, GittinsPolicy, LasPolicy, Migration, PhillyPolicy, RetryPolicy,
                           SlowdownModel, make_policy, simulate, topology_from_spec)

TWO_BY_FOUR = topology_from_spec(1, 2, 4)


def run(rows, topology, policy, **options):
    workload = make_workload(rows, **{k: options.pop(k) for k in ("vcs", "fail_class", "converge_frac")
                                      if k in options})
    options.setdefault("slowdown", None)
    result = simulate(workload, topology, policy, **options)
    check_invariants(result, workload, topology)
    return result


FRAGMENTING = [
    ("A", 0, 3, 100),  # 3 of s0's 4 GPUs
    ("B", 0, 3, 50),   # 3 of s1's 4 GPUs: now 1 + 1 GPUs free, on different servers
    ("C", 5, 2, 10),   # wants one server with 2 free GPUs
    ("D", 6, 1, 20),   # backfills past C onto s0
    ("E", 55, 4, 10),  # wants a whole server
]


def test_fifo_strict_locality_waits_for_one_server():
    r = run(FRAGMENTING, TWO_BY_FOUR, "fifo")
    # A -> s0 (both servers empty: lowest index), B -> s1 (best fit), D -> s0 at 6 (best fit among 1-free).
    assert job(r, "A")[["first_start_s", "end_s"]].tolist() == [0, 100]
    assert job(r, "B")[["first_start_s", "end_s"]].tolist() == [0, 50]
    assert job(r, "D")[["first_start_s", "end_s"]].tolist() == [6, 26]
    # C: 2 GPUs free but on two servers (fragmentation) 5-6; D takes one, 1 free < 2 (fair share) 6-26;
    # fragmentation again 26-50; B ends at 50 and frees s1: C runs 50-60 on one server.
    c = job(r, "C")
    assert c[["first_start_s", "end_s", "num_servers"]].tolist() == [50, 60, 1]
    assert c["delay_fragmentation_s"] == pytest.approx(1 + 24)
    assert c["delay_fair_share_s"] == pytest.approx(20)
    assert c["delay_backoff_s"] == 0
    # E at 55: 1 (s0) + 2 (s1) free < 4 -> fair share until C ends at 60; runs 60-70 on s1.
    e = job(r, "E")
    assert e[["first_start_s", "end_s", "delay_fair_share_s"]].tolist() == [60, 70, 5]


def test_philly_backs_off_then_relaxes_locality():
    r = run(FRAGMENTING, TWO_BY_FOUR, PhillyPolicy(relax_after_s=30))
    # Same as FIFO until C: a looser (2-server) placement exists, so its wait is back-off: 5-6 and 26-35;
    # 6-26 is fair share (1 free GPU). The 30 s timer (from 5) relaxes C to one rack at 35: it runs
    # 35-45 on s0 + s1.
    c = job(r, "C")
    assert c[["first_start_s", "end_s", "num_servers", "locality"]].tolist() == [35, 45, 2, "rack"]
    assert c["delay_backoff_s"] == pytest.approx(1 + 9)
    assert c["delay_fair_share_s"] == pytest.approx(20)
    assert c["delay_fragmentation_s"] == 0
    # D went to s0 at 6 (most free GPUs: both have 1; lowest index). E at 55: s1 is empty since B
    # ended at 50 -> runs 55-65 at once.
    assert job(r, "D")[["first_start_s", "end_s"]].tolist() == [6, 26]
    assert job(r, "E")[["first_start_s", "end_s", "wait_s"]].tolist() == [55, 65, 0]



def test_philly_times_the_back_off_of_a_job_whose_cause_is_settled_in_its_arrival_pass():
    # J0 and J2 fill s0, J1 holds 2 of s1's 4 GPUs. W (4 GPUs) arrives at 1 and waits for 2 free GPUs. At 10 J0 ends
    # (2 free on s0, 2 on s1) and C (4 GPUs) arrives: the GPUs free to their VC change from 2 to 4 in that pass, so
    # C's cause (back-off: a 2-server placement exists) is derived with the VC's, and W's was so at 1. Their relax
    # timers must still start: W relaxes at 1 + 30 and runs 31-36 on s0 + s1; C waits for it (fair share 31-36) and
    # relaxes at 10 + 30. Before the timer was started for such jobs, both waited for a whole server until 1000.
    rows = [("J0", 0, 2, 10), ("J1", 0, 2, 1000), ("J2", 0, 2, 1000), ("W", 1, 4, 5), ("C", 10, 4, 5)]
    r = run(rows, TWO_BY_FOUR, PhillyPolicy(relax_after_s=30))
    w, c = job(r, "W"), job(r, "C")
    assert w[["first_start_s", "end_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == \
        [31, 36, 2, 9, 21]
    assert c[["first_start_s", "end_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == \
        [40, 45, 2, 5, 25]


def test_slowdown_from_spread_and_colocation():
    model = SlowdownModel(cross_server=0.5, cross_rack=0.25, colocated_one_server=0.8, colocated_spread=0.5)
    rows = [("A", 0, 3, 100), ("B", 0, 3, 100), ("C", 5, 2, 10)]
    r = run(rows, TWO_BY_FOUR, PhillyPolicy(relax_after_s=20), slowdown=model)
    # C is relaxed at 25 and spread over s0 + s1 (one rack), next to A and B: speed 0.5 x 0.5 = 0.25,
    # so 10 s of work take 40 s: 25-65.
    assert job(r, "C")[["first_start_s", "end_s"]].tolist() == pytest.approx([25, 65])
    # A (and B): alone 0-25 (25 done), colocated 25-65 at 0.8 (32 done), alone again: 43 left -> 108.
    assert job(r, "A")["end_s"] == pytest.approx(108)
    assert job(r, "B")["end_s"] == pytest.approx(108)


def test_las_preempts_lower_queue_at_the_demotion_instant():
    r = run([("A", 0, 4, 100), ("B", 10, 2, 30), ("C", 60, 1, 10)], topology_from_spec(1, 1, 4),
            LasPolicy(thresholds_gpu_s=(100,)))
    # A (4 GPUs) crosses 100 GPU-s at 25 -> queue 1; B (queue 0, waiting since 10) preempts it and runs
    # 25-55 (60 GPU-s, never demoted). A resumes 55 with 75 s left; C (queue 0) preempts it at 60
    # (70 left) and runs 60-70; A runs again 70-140.
    assert attempts_of(r, "A") == [(0, 25, "preempted"), (55, 60, "preempted"), (70, 140, "finished")]
    assert job(r, "B")[["first_start_s", "end_s", "delay_fair_share_s"]].tolist() == [25, 55, 15]
    assert job(r, "C")[["first_start_s", "end_s", "wait_s"]].tolist() == [60, 70, 0]
    assert job(r, "A")[["num_preemptions", "wait_s"]].tolist() == [2, 40]


GITTINS_ROWS = [("P", 0, 1, 1000), ("Q", 150, 1, 200), ("R", 320, 1, 20)]


def test_gittins_orders_a_queue_by_index_where_las_uses_arrival():
    one_gpu = topology_from_spec(1, 1, 1)
    # P runs from 0 and is demoted at 100. Q (queue 0) preempts it at 150 (P attained 150); Q is demoted at
    # 250 and keeps running; R preempts Q at 320 (Q attained 170) and runs 320-340. Then P and Q wait in
    # queue 1. With service samples {200, 1000}: G(150) = 2 / (50 + 850) < G(170) = 2 / (30 + 830).
    gittins = run(GITTINS_ROWS, one_gpu, GittinsPolicy(thresholds_gpu_s=(100,), service_samples_gpu_s=[200, 1000]))
    assert job(gittins, "R")[["first_start_s", "end_s"]].tolist() == [320, 340]
    assert attempts_of(gittins, "Q") == [(150, 320, "preempted"), (340, 370, "finished")]  # 30 s left
    assert attempts_of(gittins, "P") == [(0, 150, "preempted"), (370, 1220, "finished")]  # 850 s left
    las = run(GITTINS_ROWS, one_gpu, LasPolicy(thresholds_gpu_s=(100,)))
    assert attempts_of(las, "P") == [(0, 150, "preempted"), (340, 1190, "finished")]  # arrival order
    assert attempts_of(las, "Q") == [(150, 320, "preempted"), (1190, 1220, "finished")]


def test_gittins_index_by_hand():
    policy = GittinsPolicy(service_samples_gpu_s=[200, 1000])

    class Sim:
        workload = None

    policy.prepare(Sim())
    assert policy.gittins_index(150, float("inf")) == pytest.approx(2 / 900)
    # quantum 100 from 150: P(150 < S <= 250) = 1/2; E[min(S - 150, 100)] = (50 + 100) / 2.
    assert policy.gittins_index(150, 100) == pytest.approx(1 / 150)
    assert policy.gittins_index(1000, float("inf")) == 0.0


def test_srtf_preempts_longer_remaining_jobs():
    r = run([("A", 0, 2, 100), ("B", 10, 1, 30), ("C", 20, 1, 50)], topology_from_spec(1, 1, 2), "srtf")
    # B (30 s) preempts A (90 s left) at 10; C fits in the free GPU at 20 (runs 20-70); at 40 A (90 left,
    # needs 2 GPUs) does not preempt C (30 left) and waits until 70: runs 70-160.
    assert attempts_of(r, "A") == [(0, 10, "preempted"), (70, 160, "finished")]
    assert job(r, "B")[["first_start_s", "end_s"]].tolist() == [10, 40]
    assert job(r, "C")[["first_start_s", "end_s"]].tolist() == [20, 70]


MIGRATING = [("A", 0, 3, 10), ("B", 0, 3, 100), ("C", 1, 1, 50), ("D", 2, 1, 13), ("E", 20, 4, 30)]


def test_migration_defragments_a_server():
    # A -> s0, B -> s1, C -> s0 (best fit), D -> s1. A ends 10, D ends 15: s0 has 3 free, s1 1 free.
    # E (4 GPUs, one server) at 20: moving C (1 GPU) off s0 frees it; C goes to s1 and pauses 5 s.
    r = run(MIGRATING, TWO_BY_FOUR, "fifo", migration=Migration(cost_s=5, consolidate=False))
    assert job(r, "E")[["first_start_s", "end_s", "wait_s"]].tolist() == [20, 50, 0]
    # C: 19 s done by 20, 31 left after a 5 s pause: 25 + 31 = 56.
    assert attempts_of(r, "C") == [(1, 20, "migrated"), (20, 56, "finished")]
    assert job(r, "C")["num_migrations"] == 1
    # Without migration E waits (fragmentation: 4 free on two servers) until C ends at 51.
    plain = run(MIGRATING, TWO_BY_FOUR, "fifo")
    assert job(plain, "E")[["first_start_s", "end_s", "delay_fragmentation_s"]].tolist() == [51, 81, 31]


def test_migration_consolidates_a_spread_job():
    rows = [("A", 0, 3, 30), ("B", 0, 3, 100), ("C", 1, 2, 100)]
    r = run(rows, TWO_BY_FOUR, PhillyPolicy(relax_after_s=10),
            migration=Migration(cost_s=5, defragment=False, min_remaining_s=0))
    # C is relaxed at 11 and spread over s0 + s1. A ends at 30: s0 has 4 free, so C moves there
    # (19 s done, 81 left, 5 s pause): ends 35 + 81 = 116.
    assert attempts_of(r, "C") == [(11, 30, "migrated"), (30, 116, "finished")]
    assert r.attempts.set_index(["jobid", "attempt"]).loc[("C", 1), "num_servers"] == 1


def failure_model(retryable=False, rtf_s=40.0, repeat=0.0):
    return FailureModel.from_dict({"classes": {"bad": {
        "category": "user" if not retryable else "infrastructure", "probability": 0.0,
        "rtf": {"dist": "empirical", "samples_s": [rtf_s]}, "retryable": retryable,
        "repeat_probability": repeat}}})


def test_failures_retried_blindly_then_given_up():
    r = run([("A", 0, 1, 100)], TWO_BY_FOUR, "fifo", fail_class=["bad"], failures=failure_model(),
            retry=RetryPolicy(max_retries=2))
    # Every attempt fails 40 s after it starts: 0-40, 40-80, 80-120, then 3 failures > 2 retries.
    assert attempts_of(r, "A") == [(0, 40, "failed"), (40, 80, "failed"), (80, 120, "failed")]
    assert job(r, "A")[["status", "num_failures", "gpu_time_s"]].tolist() == ["Failed", 3, 120]


def test_adaptive_retry_stops_deterministic_errors_and_retries_transient_ones():
    rows = [("A", 0, 1, 100)]
    r = run(rows, TWO_BY_FOUR, "fifo", fail_class=["bad"], failures=failure_model(), retry="adaptive")
    assert attempts_of(r, "A") == [(0, 40, "failed")]
    assert job(r, "A")["status"] == "Failed"
    # A transient class that never repeats: the retry at 40 runs the full 100 s.
    r = run(rows, TWO_BY_FOUR, "fifo", fail_class=["bad"], failures=failure_model(retryable=True),
            retry="adaptive")
    assert attempts_of(r, "A") == [(0, 40, "failed"), (40, 140, "finished")]
    assert job(r, "A")["status"] == "Pass"


def test_prerun_on_one_gpu_catches_early_failures_cheaply():
    prerun = RetryPolicy(max_retries=3, retry_non_retryable=False, prerun_s=60)
    r = run([("A", 0, 4, 100)], TWO_BY_FOUR, "fifo", fail_class=["bad"], failures=failure_model(rtf_s=40),
            retry=prerun)
    # Fails 40 s into its one-GPU pre-run: 40 GPU-seconds wasted instead of 160.
    assert attempts_of(r, "A") == [(0, 40, "failed")]
    assert job(r, "A")[["status", "gpu_time_s"]].tolist() == ["Failed", 40]
    # A failure after 100 s passes the 60 s pre-run, then hits the gang 100 s after it starts (60-160).
    r = run([("A", 0, 4, 200)], TWO_BY_FOUR, "fifo", fail_class=["bad"], failures=failure_model(rtf_s=100),
            retry=prerun)
    assert attempts_of(r, "A") == [(0, 60, "prerun_done"), (60, 160, "failed")]
    assert job(r, "A")["gpu_time_s"] == 60 + 4 * 100
    # Without failures the pre-run costs 60 s before the gang runs its full service.
    r = run([("A", 0, 4, 100)], TWO_BY_FOUR, "fifo", retry=prerun)
    assert attempts_of(r, "A") == [(0, 60, "prerun_done"), (60, 160, "finished")]


def test_early_stop_at_convergence():
    r = run([("A", 0, 1, 100), ("B", 0, 1, 100)], TWO_BY_FOUR, "fifo", converge_frac=[0.4, float("nan")],
            early_stop=True)
    assert job(r, "A")[["end_s", "status", "early_stopped"]].tolist() == [40, "Pass", True]
    assert job(r, "B")[["end_s", "early_stopped"]].tolist() == [100, False]


def test_vc_quota_fair_share_and_lending():
    rows = [("A", 0, 4, 100), ("B", 10, 4, 50), ("C", 20, 4, 10)]
    vcs = ["big", "big", "small"]
    quotas = {"big": 4, "small": 4}
    # Lending: B (over its VC quota) borrows s1 at 10; C (within quota) then finds no GPU: fair share
    # (its quota is lent out) until B ends at 60.
    r = run(rows, TWO_BY_FOUR, "fifo", vcs=vcs, quotas=quotas)
    assert job(r, "B")[["first_start_s", "end_s"]].tolist() == [10, 60]
    assert job(r, "C")[["first_start_s", "end_s", "delay_fair_share_s"]].tolist() == [60, 70, 40]
    # No lending: B waits for its own VC's quota (A ends at 100); C runs at once.
    r = run(rows, TWO_BY_FOUR, "fifo", vcs=vcs, quotas=quotas, lending=False)
    assert job(r, "B")[["first_start_s", "end_s", "delay_fair_share_s"]].tolist() == [100, 150, 90]
    assert job(r, "C")[["first_start_s", "wait_s"]].tolist() == [20, 0]


def test_impossible_jobs_are_rejected_and_reported():
    r = run([("huge", 0, 9, 10), ("ok", 0, 1, 10)], TWO_BY_FOUR, "fifo")
    assert job(r, "huge")["status"] == "Rejected"
    assert "more GPUs than the cluster" in job(r, "huge")["rejection"]
    assert job(r, "ok")["status"] == "Pass"
    r = run([("A", 0, 2, 10)], TWO_BY_FOUR, "fifo", vcs=["nobody"], quotas={}, lending=False)
    assert job(r, "A")["status"] == "Rejected"
    assert r.summary["vcs_without_quota"] == ["nobody"]


def test_delay_by_cause_table_by_job_size():
    table = run(FRAGMENTING, TWO_BY_FOUR, "fifo").delay_by_cause()
    assert list(table.index) == ["1", "2-4", "5-8", ">8"]
    # 2-4 GPUs: A, B, C, E. C waited 25 s (fragmentation) + 20 s (fair share), E 5 s (fair share).
    row = table.loc["2-4"]
    assert row[["jobs", "jobs_waited", "mean_wait_s"]].tolist() == [4, 2, 12.5]
    assert row[["fair_share_share", "fragmentation_share", "paper_fragmentation_share"]].tolist() == [0.5, 0.5, 0.5]
    assert table.loc["1", "jobs_waited"] == 0


def test_progress_bar_can_be_shown(capsys):
    run([("A", 0, 1, 10)], TWO_BY_FOUR, "fifo", progress=True)
    assert "simulating" in capsys.readouterr().err


def test_sjf_starts_the_shortest_waiting_job_first():
    rows = [("A", 0, 8, 100), ("B", 10, 4, 50), ("C", 20, 4, 10), ("D", 30, 4, 30)]
    # A holds both servers until 100; then SJF starts C (10 s) and D (30 s), and B (50 s) when C ends.
    r = run(rows, TWO_BY_FOUR, "sjf")
    assert job(r, "C")[["first_start_s", "end_s"]].tolist() == [100, 110]
    assert job(r, "D")[["first_start_s", "end_s"]].tolist() == [100, 130]
    assert job(r, "B")[["first_start_s", "end_s"]].tolist() == [110, 160]
    # FIFO: B and C at 100, D when C ends.
    r = run(rows, TWO_BY_FOUR, "fifo")
    assert [job(r, n)["first_start_s"] for n in "BCD"] == [100, 100, 110]


def test_fifo_without_backfill_blocks_the_rest_of_a_vcs_queue():
    rows = FRAGMENTING[:4] + [("F", 6, 1, 20)]
    vcs = ["vc", "vc", "vc", "vc", "other"]
    # C (2 GPUs on one server) cannot start at 5 (1 + 1 free GPUs). With backfill D starts at 6 anyway;
    # without, D waits behind C, while F of another VC is not held back: F takes s0's free GPU at 6 (to 26).
    # B ends at 50: C -> s1 (4 free), then D -> s0's free GPU (best fit: 1 free beats s1's 2).
    r = run(rows, TWO_BY_FOUR, FifoPolicy(backfill=False), vcs=vcs)
    assert job(r, "F")[["first_start_s", "end_s"]].tolist() == [6, 26]
    assert job(r, "C")[["first_start_s", "end_s"]].tolist() == [50, 60]
    assert job(r, "D")[["first_start_s", "end_s"]].tolist() == [50, 70]
    assert job(run(rows, TWO_BY_FOUR, "fifo", vcs=vcs), "D")["first_start_s"] == 6


def test_head_of_line_fifo_needs_vcs_decided_on_their_own_gpus():
    workload = make_workload([("A", 0, 1, 10)])
    with pytest.raises(ValueError, match="lending=False"):
        simulate(workload, TWO_BY_FOUR, FifoPolicy(backfill=False), quotas={"vc": 4})
    with pytest.raises(ValueError, match="non-preemptive"):
        make_policy("srtf", backfill=False)


def test_whole_servers_placement_takes_wholly_free_servers():
    three = topology_from_spec(1, 3, 4)
    rows = [("X", 0, 1, 100), ("Y", 0, 6, 50), ("Z", 1, 5, 10)]

    def servers(result, name):
        p = result.placements()
        return sorted(set(p.loc[p["jobid"] == name, "machine"]))

    # X -> m0. Y (6 = 4 + 2): the wholly free m1, and 2 GPUs on the remaining server with the most free
    # (m2: 4 > m0's 3). Z (5 = 4 + 1) needs a wholly free server: none until Y ends at 50 (5 GPUs are free
    # in pieces at 1); then m1 + 1 GPU on m2.
    r = run(rows, three, "fifo", placement="whole_servers")
    assert servers(r, "Y") == ["m1", "m2"]
    assert job(r, "Z")[["first_start_s", "end_s"]].tolist() == [50, 60]
    assert servers(r, "Z") == ["m1", "m2"]
    # best_fit puts Y's last 2 GPUs on the tightest server (m0) and starts Z at once on m0 + m2.
    r = run(rows, three, "fifo")
    assert servers(r, "Y") == ["m0", "m1"]
    assert job(r, "Z")["first_start_s"] == 1
