"""Preemption's restart overhead (``simulate(..., restart_overhead_s=...)``, issue 48): a preempted job holds its GPUs
without progress for the overhead on every restart, and a job's first start pays nothing. Start and end times by
hand; ``slowdown=None``."""

from __future__ import annotations

import pytest
from sim_helpers import attempts_of, check_invariants, job, make_workload

from dlcluster.experiments.restart import RESTART_OVERHEADS_S, restart_options
from dlcluster.sim import LasPolicy, simulate, topology_from_spec


def run(rows, topology, overhead_s):
    workload = make_workload(rows)
    result = simulate(workload, topology, LasPolicy(thresholds_gpu_s=(100,)), slowdown=None,
                      **restart_options({"restart_overhead_s": overhead_s}))
    check_invariants(result, workload, topology)
    return result


@pytest.mark.parametrize("overhead_s", [0.0, 60.0])
def test_a_preempted_job_pays_the_overhead_when_it_restarts(overhead_s):
    # one GPU. A (300 s) crosses 100 GPU-s at 100 and is demoted; B (queue 0) arrives at 150 and preempts it (A has
    # done 150 s, 150 left). B runs 150-200 (its first start: no overhead). A restarts at 200, holds the GPU
    # `overhead` s without progress, then runs its 150 s: ends 350 + overhead
    r = run([("A", 0, 1, 300), ("B", 150, 1, 50)], topology_from_spec(1, 1, 1), overhead_s)
    assert attempts_of(r, "A") == [(0, 150, "preempted"), (200, 350 + overhead_s, "finished")]
    assert job(r, "A")[["jct_s", "wait_s", "num_preemptions"]].tolist() == [350 + overhead_s, 50, 1]
    assert job(r, "B")[["first_start_s", "jct_s"]].tolist() == [150, 50]


def test_every_restart_pays_even_one_cut_short():
    # test_sim_golden's LAS scenario (4 GPUs): A (4 GPUs, 100 s) is demoted at 25 and preempted by B (25-55); it
    # restarts at 55 and is preempted again by C at 60, still inside its 60 s overhead (no work done: 75 s left); C
    # runs 60-70; A restarts at 70, pays 60 s again, then runs 75 s: ends 205 (140 without the overhead)
    rows = [("A", 0, 4, 100), ("B", 10, 2, 30), ("C", 60, 1, 10)]
    free = run(rows, topology_from_spec(1, 1, 4), 0.0)
    assert attempts_of(free, "A") == [(0, 25, "preempted"), (55, 60, "preempted"), (70, 140, "finished")]
    paid = run(rows, topology_from_spec(1, 1, 4), 60.0)
    assert attempts_of(paid, "A") == [(0, 25, "preempted"), (55, 60, "preempted"), (70, 205, "finished")]
    assert job(paid, "B")[["first_start_s", "end_s"]].tolist() == [25, 55]
    assert job(paid, "C")[["first_start_s", "end_s"]].tolist() == [60, 70]


def test_the_named_overheads_and_a_cells_option():
    assert RESTART_OVERHEADS_S == (0.0, 60.0, 300.0)
    assert restart_options({}) == {"restart_overhead_s": 0.0}
    assert restart_options({"restart_overhead_s": 300}) == {"restart_overhead_s": 300.0}
