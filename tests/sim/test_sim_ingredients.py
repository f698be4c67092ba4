"""The replay's candidate ingredients (issue 29), each a model option beside sim/sharing.py, on hand-timed scenarios.

Back-off for every job size (sim/backoff.py), GPUs held by a gang waiting for the rest (sim/gang.py), user limits
within a VC (sim/users.py), each VC's cap from its own demand (sim/capacity.py) and the servers in service
(sim/service.py). Topology 1x2x4: servers s0, s1 of 4 GPUs in one rack, unless a test says otherwise.
"""

from __future__ import annotations

import pytest
from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec

TWO_BY_FOUR = topology_from_spec(1, 2, 4)


def run(rows, policy, topology=TWO_BY_FOUR, vcs=None, users=None, **options):
    workload = make_workload(rows, vcs=vcs, users=users)
    result = simulate(workload, topology, policy, slowdown=None, **options)
    check_invariants(result, workload, topology)
    return result


# ----------------------------------------------------------------------------- back-off for every job size

FULL_THEN_FREE = [("B1", 0, 4, 100), ("B2", 0, 4, 20), ("J", 10, 1, 10), ("G", 12, 2, 10)]


def test_without_back_off_for_every_size_jobs_start_when_gpus_free():
    r = run(FULL_THEN_FREE, PhillyPolicy(relax_after_s=30))
    # B2 frees s1 at 20: J (1 GPU) and G (2 GPUs, one server) start there at once
    assert job(r, "J")[["first_start_s", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [20, 10, 0]
    assert job(r, "G")[["first_start_s", "num_servers"]].tolist() == [20, 1]


def test_back_off_for_every_size_holds_a_job_one_timeout_after_it_could_not_start():
    r = run(FULL_THEN_FREE, PhillyPolicy(relax_after_s=30, backoff="every"))
    # J could not start at 10: held until 40 although s1 is free from 20 (fair share 10-20: no GPU free; back-off
    # 20-40: GPUs free, the timer alone holds it)
    j = job(r, "J")
    assert j[["first_start_s", "end_s", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [40, 50, 10, 20]
    # G likewise from 12 to 42; released one level looser (a rack), it still gets one server: s1 has 3 free
    g = job(r, "G")
    assert g[["first_start_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [42, 1, 8, 22]


def test_a_job_that_starts_at_once_is_never_held():
    r = run([("A", 0, 2, 10), ("B", 5, 1, 10)], PhillyPolicy(relax_after_s=30, backoff="every"))
    assert job(r, "B")[["first_start_s", "wait_s"]].tolist() == [5, 0]


def test_back_off_scope_is_checked():
    with pytest.raises(ValueError, match="backoff must be one of"):
        PhillyPolicy(backoff="sometimes")


# ----------------------------------------------------------------------------- GPUs held by a waiting gang

HOLDING = [("A", 0, 3, 100), ("B", 0, 3, 50), ("G", 5, 2, 100), ("J", 6, 1, 10), ("K", 7, 1, 10)]


def test_without_gang_holds_one_gpu_jobs_take_the_gpus_a_gang_waits_beside():
    r = run(HOLDING, PhillyPolicy(relax_after_s=30))
    # A -> s0, B -> s1 leave 1 + 1 free; G (2 GPUs, one server) waits; J -> s0 at 6, K -> s1 at 7
    assert job(r, "J")["first_start_s"] == 6 and job(r, "K")["first_start_s"] == 7
    assert job(r, "G")[["first_start_s", "num_servers", "held_gpu_s"]].tolist() == [35, 2, 0]


def test_a_waiting_gang_holds_the_free_gpus_it_wants_until_its_timeout():
    r = run(HOLDING, PhillyPolicy(relax_after_s=30), gang_hold=True)
    # G holds s0's free GPU from 5 (the most free server; ties: the lower index): J gets s1's at 6, K finds none
    # (fair share 7-16) and starts when J ends. G's timeout at 35 gives its GPU back and relaxes it: it runs on
    # s0 + s1. It held 1 GPU for 30 s. Its own GPU counts as free to it: back-off 5-6 and 26-35 (2 GPUs for it),
    # fair share 6-26 (J or K holds s1's).
    assert job(r, "J")["first_start_s"] == 6
    assert job(r, "K")[["first_start_s", "delay_fair_share_s"]].tolist() == [16, 9]
    g = job(r, "G")
    assert g[["first_start_s", "num_servers", "held_gpu_s"]].tolist() == [35, 2, 30]
    assert g[["delay_backoff_s", "delay_fair_share_s"]].tolist() == [10, 20]
    # the held GPU is allocated (idle) while G waits: 1 of 8 GPUs for 30 s beyond the attempts' GPU time
    assert r.summary["held_gpu_s"] == 30


def test_a_gang_starts_on_the_gpus_it_holds_when_the_rest_free_up():
    # G holds s0's free GPU; A ends at 20: G gets its 2 GPUs on s0 (its own and A's) before its timeout
    r = run([("A", 0, 3, 20), ("B", 0, 3, 100), ("G", 5, 2, 10)], PhillyPolicy(relax_after_s=30), gang_hold=True)
    assert job(r, "G")[["first_start_s", "num_servers", "held_gpu_s"]].tolist() == [20, 1, 15]


# ----------------------------------------------------------------------------- user limits within a VC

def test_user_limit_factor_keeps_one_user_within_a_share_of_the_vc():
    from dlcluster.sim.users import UserLimits

    rows = [("a1", 0, 2, 100), ("a2", 0, 2, 100), ("a3", 0, 2, 100), ("b1", 1, 2, 10)]
    users = ["u1", "u1", "u1", "u2"]
    free = run(rows, "fifo", vcs=["v"] * 4, users=users, quotas={"v": 8})
    assert job(free, "a3")["first_start_s"] == 0 and job(free, "b1")["first_start_s"] == 1
    # ULF 0.5 of the quota (8): a user may hold 4 GPUs; u1's third job waits for its own first two (fair share),
    # while u2's starts at once beside 2 idle GPUs
    limits = UserLimits(user_limit_factor=0.5, minimum_user_limit_percent=100, min_gpus=1)
    r = run(rows, "fifo", vcs=["v"] * 4, users=users, quotas={"v": 8}, user_limits=limits)
    assert job(r, "a3")[["first_start_s", "delay_fair_share_s"]].tolist() == [100, 100]
    assert job(r, "b1")["first_start_s"] == 1


def test_minimum_user_limit_percent_shares_a_vc_among_its_active_users():
    from dlcluster.sim.users import UserLimits

    rows = [("a1", 0, 2, 100), ("a2", 0, 2, 100), ("a3", 0, 2, 100), ("a4", 0, 2, 100), ("b1", 0, 2, 10)]
    users = ["u1"] * 4 + ["u2"]
    plain = run(rows, "fifo", vcs=["v"] * 5, users=users, quotas={"v": 8})
    assert job(plain, "b1")["first_start_s"] == 100          # u1's sweep takes the whole VC
    # two active users: each may hold max(25% of 8, 8 / 2) = 4 GPUs; b1 starts beside u1's first two (the pass
    # skips u1's blocked jobs for it); when b1 ends u1 is alone again (limit 8) and its last two start
    limits = UserLimits(user_limit_factor=1.0, minimum_user_limit_percent=25, min_gpus=1)
    r = run(rows, "fifo", vcs=["v"] * 5, users=users, quotas={"v": 8}, user_limits=limits)
    assert job(r, "b1")["first_start_s"] == 0
    assert [job(r, n)["first_start_s"] for n in ("a1", "a2", "a3", "a4")] == [0, 0, 10, 10]


def test_user_limits_formula_by_hand():
    from dlcluster.sim.users import UserLimits

    limits = UserLimits(user_limit_factor=2.0, minimum_user_limit_percent=20, min_gpus=8)
    # quota 64, VC using 100 (current capacity 100), 4 users: max(20, 25) = 25, within 2 x 64
    assert limits.limit(64, 100, 4) == 25
    # one user: 100, capped at 2 x 64 = 128 -> 100; VC below its quota: current capacity = the quota
    assert limits.limit(64, 100, 1) == 100 and limits.limit(64, 10, 1) == 64
    # no quota: the floor
    assert limits.limit(0, 0, 3) == 8
    with pytest.raises(ValueError, match="minimum_user_limit_percent"):
        UserLimits(minimum_user_limit_percent=0)


# ----------------------------------------------------------------------------- each VC's cap from its own demand

def test_offered_demand_and_demand_caps_by_hand():
    from dlcluster.sim.capacity import demand_caps, offered_demand

    # VC a: 2 GPUs over [0, 100), 4 GPUs over [50, 150); VC b: 1 GPU over [0, 200)
    w = make_workload([("a1", 0, 2, 100), ("a2", 50, 4, 100), ("b1", 0, 1, 200)], vcs=["a", "a", "b"])
    times = [0, 49, 50, 99, 100, 149, 150]
    assert offered_demand([0, 50], [100, 100], [2, 4], times).tolist() == [2, 2, 6, 6, 4, 4, 0]
    # sampled every 10 s over [0, 200): a holds 2, 6, 4, 0 for 5 samples each
    assert demand_caps(w, 0, 200, 0.5, step_s=10, min_gpus=1) == {"a": 2, "b": 1}
    assert demand_caps(w, 0, 200, 0.9, step_s=10, min_gpus=1) == {"a": 6, "b": 1}
    # never below the VC's quota or the floor
    assert demand_caps(w, 0, 200, 0.5, quotas={"a": 4}, step_s=10, min_gpus=2) == {"a": 4, "b": 2}


# ----------------------------------------------------------------------------- servers in service

def test_servers_in_service_keep_the_size_mix_spread_over_the_machine_order():
    from dlcluster.sim import Topology
    from dlcluster.sim.service import in_service, scale_quotas

    names = tuple(f"m{i}" for i in range(10))
    gpus = (8, 8, 4, 8, 4, 8, 4, 8, 4, 8)          # six 8-GPU servers, four 4-GPU
    topo = Topology(server_names=names, server_gpus=gpus, server_rack=tuple(i // 4 for i in range(10)))
    kept = in_service(topo, 5, rack_size=2)
    # 5 of 10: three of the six 8-GPU servers (their 2nd, 4th, 6th: m1, m5, m9), two of the four 4-GPU (2nd, 4th:
    # m4, m8), in machine order, racks of 2
    assert kept.server_names == ("m1", "m4", "m5", "m8", "m9")
    assert kept.server_rack == (0, 0, 1, 1, 2) and kept.total_gpus == 32
    assert kept.excluded["servers out of service (assumed)"] == 5
    assert in_service(topo, 10, rack_size=4).server_names == names
    assert scale_quotas({"a": 64, "b": 8}, 32, 64) == {"a": 32, "b": 4}
    with pytest.raises(ValueError, match="servers in service"):
        in_service(topo, 11, rack_size=2)


def test_back_off_for_borrowers_holds_a_job_that_would_borrow_beyond_its_quota():
    rows = [("A1", 0, 4, 100), ("A2", 5, 2, 10), ("B1", 10, 2, 10)]
    vcs, quotas = ["a", "a", "b"], {"a": 4, "b": 4}
    plain = run(rows, PhillyPolicy(relax_after_s=30), vcs=vcs, quotas=quotas)
    assert job(plain, "A2")["first_start_s"] == 5            # borrows s1's idle GPUs at once
    r = run(rows, PhillyPolicy(relax_after_s=30, backoff="borrowers"), vcs=vcs, quotas=quotas)
    # A2 would have to borrow (VC a's 4 GPUs are in use): held until 35 although s1 is idle (back-off 30 s);
    # B1 is within VC b's quota and starts at once
    assert job(r, "A2")[["first_start_s", "delay_backoff_s", "delay_fair_share_s"]].tolist() == [35, 30, 0]
    assert job(r, "B1")["first_start_s"] == 10 and job(r, "A1")["first_start_s"] == 0
