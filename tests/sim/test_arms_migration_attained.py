"""Consolidation by attained service (``Migration(min_attained_s=...)``): a spread job moves only once it has run
that long, which a scheduler knows, where ``min_remaining_s`` asks for the work left, which it does not."""

from __future__ import annotations

import pytest
from sim_helpers import attempts_of, check_invariants, make_workload

from dlcluster.sim import Migration, PhillyPolicy, simulate, topology_from_spec

TWO_BY_FOUR = topology_from_spec(1, 2, 4)
# A (3 GPUs, 30 s) and B (3 GPUs, 100 s) take s0 and s1 at 0; C (2 GPUs, 100 s) arrives at 1, relaxes at 11 and
# runs spread over the last free GPU of each server (as in test_sim_golden's consolidation)
ROWS = [("A", 0, 3, 30), ("B", 0, 3, 100), ("C", 1, 2, 100)]


def run(migration):
    """No slowdown model: a spread job runs at full speed, so the times are the work's."""
    workload = make_workload(ROWS)
    result = simulate(workload, TWO_BY_FOUR, PhillyPolicy(relax_after_s=10), migration=migration, slowdown=None)
    check_invariants(result, workload, TWO_BY_FOUR)
    return result


def test_a_spread_job_moves_only_once_it_has_run_min_attained_s():
    # A ends at 30: s0 could hold C, which has run 19 s (11..30). At a threshold of 19 s it moves then (5 s pause,
    # 81 s left): ends 116
    r = run(Migration(cost_s=5, defragment=False, min_remaining_s=0, min_attained_s=19))
    assert attempts_of(r, "C") == [(11, 30, "migrated"), (30, 116, "finished")]
    # at 20 s it is too young at 30; capacity is next freed when B ends at 100: C has run 89 s, moves to a whole
    # server (11 s left after a 5 s pause): ends 116
    r = run(Migration(cost_s=5, defragment=False, min_remaining_s=0, min_attained_s=20))
    assert attempts_of(r, "C") == [(11, 100, "migrated"), (100, 116, "finished")]
    # the oracle asks for 90 s of work left: C has 81 s left at 30 and never moves (ends 11 + 100 = 111)
    r = run(Migration(cost_s=5, defragment=False, min_remaining_s=90))
    assert attempts_of(r, "C") == [(11, 111, "finished")]
    # the default asks nothing of the attained service: the consolidation of test_sim_golden
    assert Migration().min_attained_s == 0.0
    with pytest.raises(ValueError, match="min_attained_s must be >= 0"):
        Migration(min_attained_s=-1)
