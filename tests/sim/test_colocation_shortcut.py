"""The slowdown model's ``colocation`` lets the simulator skip work that cannot change a speed: with no colocation cost
it never re-derives a running job's speed when neighbours come and go, and with one it asks only whether any other job
shares a server, not how many. A simulation with the shortcut equals one with a plain speed function, which the
simulator treats as counting every neighbour."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st
from test_sim_properties import SETTINGS, scenarios

from dlcluster.sim import default_slowdown_model, simulate

MODELS = {
    "no colocation cost": default_slowdown_model(),
    "both kinds of job slowed": default_slowdown_model().with_interference(0.9, 0.8, "test"),
    "spread jobs slowed only": default_slowdown_model().with_interference(1.0, 0.7, "test"),
}


def test_the_model_says_which_neighbours_matter():
    assert MODELS["no colocation cost"].colocation == "none"
    assert MODELS["both kinds of job slowed"].colocation == "any"
    assert MODELS["spread jobs slowed only"].colocation == "any"
    model = MODELS["both kinds of job slowed"]
    # the speed depends on whether there are neighbours, not on how many (what the shortcut relies on)
    for shape, racks in (([4], 1), ([2, 2], 1), ([4, 4], 2)):
        assert model.speed(shape, racks, 1) == model.speed(shape, racks, 5) < model.speed(shape, racks, 0)


@SETTINGS
@given(scenarios(), st.sampled_from(sorted(MODELS)))
def test_the_shortcut_never_changes_a_simulation(scenario, name):
    workload, topology, policy, options = scenario
    model = MODELS[name]
    shortcut = simulate(workload, topology, policy, **{**options, "slowdown": model})
    counted = simulate(workload, topology, policy,
                       **{**options, "slowdown": lambda shape, racks, colocated: model.speed(shape, racks, colocated)})
    pd.testing.assert_frame_equal(shortcut.jobs, counted.jobs)
    pd.testing.assert_frame_equal(shortcut.attempts, counted.attempts)
    pd.testing.assert_frame_equal(shortcut.timeseries, counted.timeseries)
