"""Lending limited per VC (sim/lending.py): a VC lends at most a share of its idle quota, on hand-timed scenarios.

Topology 1x2x4: servers s0, s1 of 4 GPUs in one rack (8 GPUs).
"""

from __future__ import annotations

import pytest
from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec
from dlcluster.sim.lending import LendingLimit
from dlcluster.validation import calibrate as vc

TWO_BY_FOUR = topology_from_spec(1, 2, 4)


def run(rows, vcs, quotas, share=None, **options):
    workload = make_workload(rows, vcs=vcs)
    limit = None if share is None else LendingLimit(share)
    result = simulate(workload, TWO_BY_FOUR, PhillyPolicy(relax_after_s=30), slowdown=None, quotas=quotas,
                      lending_limit=limit, **options)
    check_invariants(result, workload, TWO_BY_FOUR)
    return result


def test_a_vc_lends_its_share_of_the_idle_quota_floored():
    limit = LendingLimit(0.5)
    assert limit.lendable(8, 0) == 4
    assert limit.lendable(8, 3) == 2          # half of 5 idle, floored
    assert limit.lendable(8, 10) == 0         # above its quota: nothing idle
    assert LendingLimit(1.0).lendable(8, 3) == 5


# A owns the 8 GPUs and runs nothing until 5; B has no quota and borrows
BORROW = [("B1", 0, 4, 10), ("B2", 0, 4, 10), ("A1", 5, 4, 10)]
BORROW_VCS = ["B", "B", "A"]


def test_without_a_limit_every_idle_gpu_is_lent():
    r = run(BORROW, BORROW_VCS, {"A": 8})
    assert [job(r, n)["first_start_s"] for n in ("B1", "B2", "A1")] == [0, 0, 10]


def test_a_vc_with_quota_8_idle_8_and_share_half_lends_at_most_4():
    r = run(BORROW, BORROW_VCS, {"A": 8}, share=0.5)
    # B1 borrows 4 of A's 8 idle GPUs at 0; B2 may not (nothing left to lend) although 4 GPUs are free
    assert job(r, "B1")["first_start_s"] == 0
    # A1 takes its own 4 free GPUs at 5; nothing is taken back from B1 (over-lent: A now has 4 idle, lends 2)
    assert job(r, "A1")["first_start_s"] == 5 and job(r, "B1")["end_s"] == 10
    # B1 ends at 10: A lends 2 of its 4 idle, too few for B2; at 15 A1 ends, A lends 4 again and B2 starts
    b2 = job(r, "B2")
    assert b2[["first_start_s", "delay_fair_share_s", "delay_fragmentation_s", "delay_backoff_s"]].tolist() == \
        [15, 15, 0, 0]   # held back by the lending limit: fair share (its VC may not have those GPUs)


def test_gpus_in_no_quota_are_lent_in_full():
    # A's quota is 4 of the 8 GPUs; with share 0 A lends nothing, but the 4 GPUs of no quota go to B
    r = run([("B1", 0, 4, 10), ("B2", 0, 1, 10)], ["B", "B"], {"A": 4}, share=0.0)
    assert job(r, "B1")["first_start_s"] == 0
    assert job(r, "B2")["first_start_s"] == 10


def test_a_vc_uses_its_own_idle_quota_whatever_it_lends():
    # share 0: A lends nothing, and its own jobs still get its whole quota
    r = run([("A1", 0, 4, 10), ("A2", 0, 4, 10)], ["A", "A"], {"A": 8}, share=0.0)
    assert [job(r, n)["first_start_s"] for n in ("A1", "A2")] == [0, 0]


def test_share_one_is_unlimited_lending():
    rows = [(f"J{i}", 3 * i, 1 + i % 4, 7 + 5 * (i % 3)) for i in range(30)]
    vcs = ["A", "B", "C"] * 10
    quotas = {"A": 4, "B": 2}
    free = run(rows, vcs, quotas).jobs
    full = run(rows, vcs, quotas, share=1.0).jobs
    assert free[["first_start_s", "end_s", "wait_s", "delay_fair_share_s"]].equals(
        full[["first_start_s", "end_s", "wait_s", "delay_fair_share_s"]])


def test_the_limit_is_checked():
    with pytest.raises(ValueError, match="share"):
        LendingLimit(1.5)
    with pytest.raises(ValueError, match="lending_limit"):
        run([("A1", 0, 1, 1)], ["A"], None, share=0.5)
    with pytest.raises(ValueError, match="lending_limit"):
        run([("A1", 0, 1, 1)], ["A"], {"A": 8}, share=0.5, lending=False)


def test_replay_params_give_the_limit_only_with_lending():
    params = vc.ReplayParams(lending_share=0.5)
    assert vc.sharing_options(params, {"a": 64}, 3205, ["a"]) == {"lending": True,
                                                                   "lending_limit": LendingLimit(0.5)}
    assert vc.sharing_options(vc.ReplayParams(lending=False, lending_share=0.5), {"a": 64}, 3205, ["a"]) == \
        {"lending": False}
    assert vc.ReplayParams().lending_share is None
    assert "lends at most 50% of its idle quota" in params.ingredients()
