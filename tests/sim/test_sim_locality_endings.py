"""Fragmentation as the paper meant it, from the simulator's own state (sim/engine.py): the time a job's VC had the
GPUs but no placement met its locality, split by how each stretch ended (the relax timeout, a placement freeing up,
the GPUs gone), and kept apart from the time a back-off timer alone held the job. Hand-timed scenarios on one rack of
two 4-GPU servers (s0, s1); no quotas, so the VC may take every free GPU."""

from __future__ import annotations

from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec

TWO_BY_FOUR = topology_from_spec(1, 2, 4)
SPLIT = ["held_by_timer_s", "locality_relaxed_s", "locality_placed_s", "locality_contended_s"]


def run(rows, policy):
    workload = make_workload(rows)
    result = simulate(workload, TWO_BY_FOUR, policy, slowdown=None)
    check_invariants(result, workload, TWO_BY_FOUR)
    return result


def test_a_gang_that_waits_out_the_timeout_ends_its_fragmentation_there():
    # A and B leave one GPU free on each server from 0: G (2 GPUs, one server wanted) has 2 free GPUs but no server
    # with 2; after 30 s it relaxes to the rack and starts on 1+1
    r = run([("A", 0, 3, 100), ("B", 0, 3, 100), ("G", 5, 2, 10)], PhillyPolicy(relax_after_s=30))
    g = job(r, "G")
    assert g[["first_start_s", "num_servers", "delay_backoff_s"]].tolist() == [35, 2, 30]
    assert g[SPLIT].tolist() == [0, 30, 0, 0]


def test_a_gang_that_gets_a_whole_server_before_the_timeout_ends_its_fragmentation_at_the_placement():
    # B ends at 20 and frees s1: G starts there, on one server, 15 s after it arrived, before its timeout
    r = run([("A", 0, 3, 100), ("B", 0, 3, 20), ("G", 5, 2, 10)], PhillyPolicy(relax_after_s=30))
    g = job(r, "G")
    assert g[["first_start_s", "num_servers", "delay_backoff_s"]].tolist() == [20, 1, 15]
    assert g[SPLIT].tolist() == [0, 0, 15, 0]


def test_fragmentation_ends_when_the_gpus_go_and_the_rest_is_fair_share():
    # C takes one of the two free GPUs at 10: from then G (2 GPUs) lacks GPUs, not locality, until A and B end at 100
    r = run([("A", 0, 3, 100), ("B", 0, 3, 100), ("G", 5, 2, 10), ("C", 10, 1, 200)], PhillyPolicy(relax_after_s=30))
    g = job(r, "G")
    assert g[["first_start_s", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [100, 90, 5]
    assert g[SPLIT].tolist() == [0, 0, 0, 5]


def test_time_held_by_a_back_off_timer_alone_is_not_fragmentation():
    # backoff="every": J (1 GPU) could not start at 10 (no GPU free) and is held one timeout, to 40, although s1 is
    # free from 20; a 1-GPU job always has a placement once a GPU is free: 20 s held, none of it fragmentation
    rows = [("B1", 0, 4, 100), ("B2", 0, 4, 20), ("J", 10, 1, 10)]
    j = job(run(rows, PhillyPolicy(relax_after_s=30, backoff="every")), "J")
    assert j[["first_start_s", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [40, 10, 20]
    assert j[SPLIT].tolist() == [20, 0, 0, 0]


def test_strict_locality_has_no_timeout_to_end_at():
    # strict: G never relaxes; its fragmentation (5..100) ends when A and B end and free whole servers
    r = run([("A", 0, 3, 100), ("B", 0, 3, 100), ("G", 5, 2, 10)], PhillyPolicy(locality="strict"))
    g = job(r, "G")
    assert g[["first_start_s", "num_servers", "delay_fragmentation_s"]].tolist() == [100, 1, 95]
    assert g[SPLIT].tolist() == [0, 0, 95, 0]
