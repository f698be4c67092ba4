"""The scheduling cycle (sim/heartbeat.py): passes only at ticks k x period, on hand-timed scenarios.

Topology 1x2x4: servers s0, s1 of 4 GPUs in one rack.
"""

from __future__ import annotations

import pytest
from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec
from dlcluster.sim.heartbeat import Heartbeat
from dlcluster.validation import calibrate as vc

TWO_BY_FOUR = topology_from_spec(1, 2, 4)


def run(rows, period_s=None, vcs=None, **options):
    workload = make_workload(rows, vcs=vcs)
    heartbeat = None if period_s is None else Heartbeat(period_s)
    result = simulate(workload, TWO_BY_FOUR, PhillyPolicy(relax_after_s=30), slowdown=None, heartbeat=heartbeat,
                      **options)
    check_invariants(result, workload, TWO_BY_FOUR)
    return result


def test_next_tick_is_the_first_multiple_of_the_period_at_or_after_now():
    assert Heartbeat(1.0).next_tick(0.4) == 1.0
    assert Heartbeat(1.0).next_tick(2.0) == 2.0
    assert Heartbeat(4.0).next_tick(4.000001) == 8.0
    # a tick computed as k x period is recognised as one (0.3 / 0.1 is 2.9999999999999996 in floating point)
    tick = Heartbeat(0.1).next_tick(0.25)
    assert tick == 3 * 0.1 and Heartbeat(0.1).next_tick(tick) == tick


def test_a_job_arriving_between_ticks_starts_at_the_next_tick_held_meanwhile():
    r = run([("A", 0.4, 1, 10)], period_s=1.0)
    a = job(r, "A")
    assert a[["first_start_s", "end_s"]].tolist() == [1.0, 11.0]
    # its 0.6 s before the tick: no pass tried it, booked as back-off held by a timer (Table 2's "other")
    assert a[["queueing_delay_s", "wait_s", "delay_backoff_s", "held_by_timer_s"]].tolist() == pytest.approx(
        [0.6, 0.6, 0.6, 0.6])
    assert a[["delay_fair_share_s", "delay_fragmentation_s"]].tolist() == [0, 0]


def test_a_job_arriving_on_a_tick_starts_at_once():
    r = run([("A", 2.0, 1, 10)], period_s=1.0)
    assert job(r, "A")[["first_start_s", "wait_s"]].tolist() == [2.0, 0.0]


FREED_BETWEEN_TICKS = [("B1", 0, 4, 10.5), ("B2", 0, 4, 100), ("J", 1, 2, 5)]


def test_without_a_cycle_gpus_freed_are_taken_at_once():
    r = run(FREED_BETWEEN_TICKS)
    assert job(r, "J")[["first_start_s", "delay_fair_share_s"]].tolist() == [10.5, 9.5]


def test_gpus_freed_between_ticks_are_offered_at_the_next_tick():
    # period 1: J arrives on a tick and finds no GPU (fair share from 1); B1 frees s0 at 10.5, offered at 11
    r = run(FREED_BETWEEN_TICKS, period_s=1.0)
    assert job(r, "J")[["first_start_s", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [11, 10, 0]
    # period 4: B1 and B2 start at the tick 0; J arrives at 1, held to the tick 4 (3 s), then fair share until the
    # tick after B1 ends (12): the cause of a job already waiting is re-derived at the tick's pass
    r = run(FREED_BETWEEN_TICKS, period_s=4.0)
    j = job(r, "J")
    assert j[["first_start_s", "delay_fair_share_s", "delay_backoff_s", "held_by_timer_s"]].tolist() == [12, 8, 3, 3]
    assert j["queueing_delay_s"] == 11


def test_a_cycle_adds_at_most_one_period_to_a_job_that_could_start():
    period = 3.0
    rows = [(f"J{i}", 0.37 * i, 1, 1.0) for i in range(40)]
    r = run(rows, period_s=period)
    waits = r.jobs["queueing_delay_s"]
    assert (waits >= 0).all() and (waits < period).all() and waits.max() > 2.5


def test_the_period_is_checked():
    with pytest.raises(ValueError, match="period_s"):
        Heartbeat(0.0)
    with pytest.raises(ValueError, match="period_s"):
        Heartbeat(float("nan"))


def test_replay_params_give_the_simulator_its_cycle_and_leave_it_out_by_default():
    assert vc.ReplayParams().heartbeat_s is None
    assert "scheduling cycle of 2 s" in vc.ReplayParams(heartbeat_s=2.0).ingredients()
    assert vc.ReplayParams().ingredients() == "none"
