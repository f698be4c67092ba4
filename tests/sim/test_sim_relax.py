"""Relax timeouts per job size (sim/relax.py) on a hand-timed scenario: a gang larger than a server holds out for
its own timeout, a job that fits a server relaxes after the common one."""

from __future__ import annotations

import pytest
from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec

#: racks {s0, s1} and {s2, s3} of 8-GPU servers; A, B, C, D take 4 GPUs of each server (the most free first) until
#: 1000: no rack holds G (16 GPUs at 25, tightest level a rack), 16 GPUs are free anywhere. J (6 GPUs, at 200, after
#: G ran) fits no server's 4 free GPUs: it waits the common timeout, then spreads.
ROWS = [("A", 0, 4, 1000), ("B", 0, 4, 1000), ("C", 0, 4, 1000), ("D", 0, 4, 1000), ("G", 25, 16, 10),
        ("J", 200, 6, 10)]


def run(policy):
    topology = topology_from_spec(2, 2, 8)
    workload = make_workload(ROWS)
    result = simulate(workload, topology, policy, slowdown=None, placement="most_free")
    check_invariants(result, workload, topology)
    return result


def test_a_gang_larger_than_a_server_holds_out_for_its_own_timeout():
    common = run(PhillyPolicy(relax_after_s=30))
    assert job(common, "G")[["first_start_s", "delay_backoff_s"]].tolist() == [55, 30]
    gangs = run(PhillyPolicy(relax_after_s=30, gang_relax_after_s=100))
    assert job(gangs, "G")[["first_start_s", "delay_backoff_s"]].tolist() == [125, 100]
    # J fits a server: the common timeout, whatever the gangs'
    assert job(common, "J")["first_start_s"] == job(gangs, "J")["first_start_s"] == 230


def test_the_gang_timeout_is_checked():
    with pytest.raises(ValueError, match="gang_relax_after_s must be > 0"):
        PhillyPolicy(gang_relax_after_s=0)
