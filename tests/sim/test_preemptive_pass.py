"""A preemptive pass drops the gangs larger than the free GPUs once no job may preempt for the rest of it
(``Simulator.prunes_after_preemption``): a simulation with the shortcut equals one that tries every group."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_helpers import make_workload
from test_sim_properties import SETTINGS, scenarios

from dlcluster.sim import Topology, simulate
from dlcluster.sim.engine import Simulator

PREEMPTIVE = ("las", "gittins", "srtf")


@st.composite
def crowded_preemptive_scenarios(draw):
    """Gangs of every size on a few 4-GPU servers under a preemptive policy, so that passes run out of victims with
    GPUs still free."""
    servers = draw(st.integers(2, 5))
    topology = Topology(server_names=tuple(f"m{i}" for i in range(servers)), server_gpus=(4,) * servers,
                        server_rack=tuple(i % 2 for i in range(servers)))
    n = draw(st.integers(6, 30))
    rows = [(f"j{i}", draw(st.integers(0, 300)), draw(st.sampled_from([1, 2, 3, 4, 6, 8])),
             draw(st.sampled_from([20, 100, 400, 1500]))) for i in range(n)]
    vcs = [draw(st.sampled_from(["a", "b"])) for _ in range(n)]
    quotas = draw(st.none() | st.fixed_dictionaries({"a": st.integers(0, 8), "b": st.integers(0, 8)}))
    return (make_workload(rows, vcs=vcs), topology, draw(st.sampled_from(PREEMPTIVE)),
            {"quotas": quotas, "slowdown": None})


@SETTINGS
@given(st.one_of(scenarios().filter(lambda s: s[2] in PREEMPTIVE), crowded_preemptive_scenarios()))
def test_dropping_the_gangs_that_cannot_start_never_changes_a_simulation(scenario):
    workload, topology, policy, options = scenario
    pruned = simulate(workload, topology, policy, **options)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Simulator, "prunes_after_preemption", False)
        every = simulate(workload, topology, policy, **options)
    pd.testing.assert_frame_equal(pruned.jobs, every.jobs)
    pd.testing.assert_frame_equal(pruned.attempts, every.attempts)
