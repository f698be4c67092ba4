"""One cluster (issue 47 point 3): a replay of real durations charges a job only its simulated placement's speed
relative to its real one (sim/slowdown.py ReplaySlowdown), on hand-timed scenarios.

Topology 1x2x4: servers s0, s1 of 4 GPUs in one rack; the spread factor is 0.5, so every speed is exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, SlowdownModel, simulate, topology_from_spec
from dlcluster.sim.slowdown import (
    REAL_FROM_RECORD,
    REAL_FROM_SHARES,
    ReplaySlowdown,
    real_placement_speeds,
    spread_shape,
)

TWO_BY_FOUR = topology_from_spec(1, 2, 4)
HALF = SlowdownModel(cross_server=0.5, cross_rack=0.5)


def run(rows, real_servers, model=HALF):
    workload = make_workload(rows)
    speed, source = real_placement_speeds(model, workload.num_gpus, real_servers, {"2-4": 0.75, "5-8": 0.5})
    result = simulate(workload, TWO_BY_FOUR, PhillyPolicy(locality="any"), placement="most_free",
                      slowdown=ReplaySlowdown(model, speed, source))
    check_invariants(result, workload, TWO_BY_FOUR)
    return result


def test_spread_shape_splits_the_gpus_evenly():
    assert spread_shape(8, 2) == [4, 4]
    assert spread_shape(5, 2) == [3, 2]
    assert spread_shape(4, 1) == [4]
    assert spread_shape(2, 5) == [1, 1]   # never more servers than GPUs


def test_real_speeds_from_the_record_else_the_expected_speed_of_the_shares():
    gpus = [1, 4, 4, 4, 6, 16, 16]
    servers = [0, 1, 2, 0, 0, 0, 3]
    speed, source = real_placement_speeds(HALF, gpus, servers, {"2-4": 0.75, "5-8": 0.5})
    # with a record: one server 1.0, spread 0.5; without: a 1-GPU job on one server; a 4-GPU job 75% on one server,
    # the speed of the expected duration 1 / (0.75 / 1 + 0.25 / 0.5) = 0.8; 6 GPUs: 1 / (0.5 + 0.5 / 0.5) = 2/3;
    # 16 GPUs spread whatever the shares
    np.testing.assert_allclose(speed, [1.0, 1.0, 0.5, 0.8, 2 / 3, 0.5, 0.5])
    assert list(source) == [REAL_FROM_SHARES, REAL_FROM_RECORD, REAL_FROM_RECORD, REAL_FROM_SHARES,
                            REAL_FROM_SHARES, REAL_FROM_SHARES, REAL_FROM_RECORD]
    with pytest.raises(ValueError, match="no one-server share for 5-8"):
        real_placement_speeds(HALF, [6], [0], {"2-4": 0.75})


def test_a_job_placed_as_in_philly_runs_at_its_real_duration():
    # G needs both servers, as its DRE record did: its real 100 s already hold the spread slowdown
    r = run([("G", 0, 8, 100.0)], [2])
    assert job(r, "G")[["first_start_s", "end_s"]].tolist() == [0.0, 100.0]
    # the same job charged the spread slowdown on top of its real duration (what notebook 06 did): twice as long
    on_top = simulate(make_workload([("G", 0, 8, 100.0)]), TWO_BY_FOUR, PhillyPolicy(locality="any"),
                      placement="most_free", slowdown=HALF)
    assert job(on_top, "G")["end_s"] == 200.0


def test_a_job_placed_better_or_worse_than_in_philly_runs_faster_or_slower():
    # A and B take 2 GPUs of each server, so C (4 GPUs, one server in its record) must spread: speed 0.5 / 1, twice
    # its real duration; D (4 GPUs, spread in its record) gets a whole server after A ends: speed 1 / 0.5, half of it
    rows = [("A", 0, 2, 10.0), ("B", 0, 2, 1000.0), ("C", 1, 4, 100.0), ("D", 500, 4, 100.0)]
    r = run(rows, [1, 1, 1, 2])
    assert job(r, "C")[["first_start_s", "end_s", "num_servers"]].tolist() == [1.0, 201.0, 2]
    assert job(r, "D")[["first_start_s", "end_s", "num_servers"]].tolist() == [500.0, 550.0, 1]
    # A and B, placed as their records say, run their real durations
    assert job(r, "A")["end_s"] == 10.0 and job(r, "B")["end_s"] == 1000.0


def test_one_real_speed_per_job():
    workload = make_workload([("A", 0, 1, 10.0), ("B", 0, 1, 10.0)])
    with pytest.raises(ValueError, match="1 real speeds for 2 jobs"):
        simulate(workload, TWO_BY_FOUR, PhillyPolicy(), slowdown=ReplaySlowdown(HALF, np.ones(1),
                                                                                np.array([REAL_FROM_RECORD])))
    with pytest.raises(ValueError, match="one real speed in"):
        ReplaySlowdown(HALF, np.array([1.2]), np.array([REAL_FROM_RECORD]))


def test_a_gang_holding_gpus_while_it_waits_is_no_running_neighbour():
    # A (4 GPUs) fills s0, B (2 GPUs) half of s1; G (8 GPUs, spread in its record) arrives and holds s1's 2 free GPUs
    # (gang_hold). B's end refreshes its neighbours' speeds (colocation costs something here): G, holding but not
    # running, must get no speed and no end event (it would end, never having started). G starts when A ends, spread
    # as its record was: its real 100 s
    model = SlowdownModel(0.5, 0.5, colocated_one_server=0.9, colocated_spread=0.9)
    workload = make_workload([("A", 0, 4, 100.0), ("B", 0, 2, 50.0), ("G", 1, 8, 100.0)])
    speed, source = real_placement_speeds(model, workload.num_gpus, [1, 1, 2], {})
    result = simulate(workload, TWO_BY_FOUR, PhillyPolicy(relax_after_s=1000.0), placement="most_free",
                      slowdown=ReplaySlowdown(model, speed, source), gang_hold=True)
    check_invariants(result, workload, TWO_BY_FOUR)
    assert job(result, "G")[["first_start_s", "end_s", "num_servers"]].tolist() == [100.0, 200.0, 2]
