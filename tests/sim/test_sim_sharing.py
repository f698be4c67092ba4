"""Sharing between VCs as YARN's Capacity Scheduler does it (sim/sharing.py): caps and reclaim, times by hand.

Topology 1x2x4: servers s0, s1 of 4 GPUs each. FIFO places best fit, lowest index on ties.
"""

from __future__ import annotations

import pytest
from sim_helpers import attempts_of, check_invariants, job, make_workload

from dlcluster.sim import simulate, topology_from_spec
from dlcluster.sim.sharing import Reclaim

TWO_BY_FOUR = topology_from_spec(1, 2, 4)


def run(rows, vcs, **options):
    workload = make_workload(rows, vcs=vcs)
    result = simulate(workload, TWO_BY_FOUR, "fifo", slowdown=None, **options)
    check_invariants(result, workload, TWO_BY_FOUR)
    return result


def test_a_vc_borrows_only_up_to_its_maximum_capacity():
    rows = [("a1", 0, 4, 100), ("a2", 0, 2, 100), ("a3", 1, 2, 10)]
    r = run(rows, ["a"] * 3, quotas={"a": 4, "b": 4}, max_capacity={"a": 6})
    # a1 (its quota) and a2 (borrowing 2) bring VC a to its cap of 6: a3 waits although 2 GPUs are idle
    assert job(r, "a3")[["first_start_s", "end_s"]].tolist() == [100, 110]
    assert job(r, "a3")["delay_fair_share_s"] == pytest.approx(99)
    # without a cap (unlimited lending, the special case kept) it starts at once
    assert job(run(rows, ["a"] * 3, quotas={"a": 4, "b": 4}), "a3")["first_start_s"] == 1


def test_a_job_larger_than_its_vcs_cap_is_rejected():
    r = run([("a1", 0, 8, 10)], ["a"], quotas={"a": 4}, max_capacity={"a": 6})
    assert job(r, "a1")["status"] == "Rejected"
    assert job(r, "a1")["rejection"] == "needs more GPUs than its VC's maximum capacity"


RECLAIM_ROWS = [("b1", 0, 4, 1000), ("b2", 0, 4, 1000), ("a1", 10, 4, 50)]


@pytest.mark.parametrize("keep_progress, b2_restart", [(False, (105, 1105)), (True, (105, 1050))])
def test_a_vc_below_its_quota_reclaims_lent_gpus_after_the_wait(keep_progress, b2_restart):
    reclaim = Reclaim(max_wait_before_kill_s=30, monitoring_interval_s=15, keep_progress=keep_progress)
    r = run(RECLAIM_ROWS, ["b", "b", "a"], quotas={"a": 4, "b": 4}, reclaim=reclaim)
    # b2 borrowed a's quota. a1 waits from 10; the first check at 25 sees it starved, the one at 55 has seen it
    # starved for 30 s: the youngest borrower (b1 and b2 both started at 0: the later index, b2) is preempted and
    # a1 starts at once on its server.
    a1 = job(r, "a1")
    assert a1[["first_start_s", "end_s", "num_servers"]].tolist() == [55, 105, 1]
    assert a1["delay_fair_share_s"] == pytest.approx(45)
    # b2 queues again as a borrower and restarts when a1 ends; without a checkpoint it redoes its 55 s
    assert attempts_of(r, "b2") == [(0, 55, "preempted"), (*b2_restart, "finished")]
    assert job(r, "b2")["num_preemptions"] == 1
    assert attempts_of(r, "b1") == [(0, 1000, "finished")]


def test_only_vcs_above_their_quota_lose_jobs():
    rows = [("b1", 0, 2, 1000), ("c1", 0, 2, 1000), ("b2", 0, 4, 1000), ("a1", 10, 4, 50)]
    reclaim = Reclaim(max_wait_before_kill_s=0, monitoring_interval_s=5)
    r = run(rows, ["b", "c", "b", "a"], quotas={"a": 4, "b": 2, "c": 2}, reclaim=reclaim)
    # VC b holds 6 > 2, VC c 2 = its quota: only b's borrowing job goes, at the first check (15)
    assert attempts_of(r, "b2")[0] == (0, 15, "preempted")
    assert attempts_of(r, "c1") == [(0, 1000, "finished")] and attempts_of(r, "b1") == [(0, 1000, "finished")]
    assert job(r, "a1")["first_start_s"] == 15


def test_a_borrower_never_reclaims():
    # a1 wants 4 GPUs but VC a's quota is 2: it would borrow, so it waits for b's jobs to end
    reclaim = Reclaim(max_wait_before_kill_s=0, monitoring_interval_s=5)
    r = run(RECLAIM_ROWS, ["b", "b", "a"], quotas={"a": 2, "b": 6}, reclaim=reclaim)
    assert job(r, "a1")["first_start_s"] == 1000
    assert r.summary["preemptions"] == 0


def test_sharing_options_are_checked():
    workload = make_workload([("a1", 0, 1, 1)], vcs=["a"])
    with pytest.raises(ValueError, match="needs quotas and lending=True"):
        simulate(workload, TWO_BY_FOUR, "fifo", quotas={"a": 4}, lending=False, max_capacity={"a": 6})
    with pytest.raises(ValueError, match="needs quotas and lending=True"):
        simulate(workload, TWO_BY_FOUR, "fifo", reclaim=Reclaim())
    with pytest.raises(ValueError, match="cap of 2 GPUs below its quota of 4"):
        simulate(workload, TWO_BY_FOUR, "fifo", quotas={"a": 4}, max_capacity={"a": 2})
    with pytest.raises(ValueError, match="victims must be one of"):
        Reclaim(victims="largest")


def test_a_preemptive_policy_keeps_to_the_caps_too():
    # Tiresias LAS: a2 (same queue as a1: both under the first threshold, FIFO within it) may not take the idle
    # GPUs beyond VC a's cap of 4; it starts when a1 ends
    rows = [("a1", 0, 4, 100), ("a2", 1, 2, 10)]
    r = run(rows, ["a", "a"], quotas={"a": 4, "b": 4}, max_capacity={"a": 4})
    assert job(r, "a2")["first_start_s"] == 100
    workload = make_workload(rows, vcs=["a", "a"])
    las = simulate(workload, TWO_BY_FOUR, "las", slowdown=None, quotas={"a": 4, "b": 4}, max_capacity={"a": 4})
    check_invariants(las, workload, TWO_BY_FOUR)
    assert job(las, "a2")["first_start_s"] == 100 and las.summary["preemptions"] == 0
    # unlimited lending: it takes them at once
    free = simulate(workload, TWO_BY_FOUR, "las", slowdown=None, quotas={"a": 4, "b": 4})
    assert job(free, "a2")["first_start_s"] == 1
