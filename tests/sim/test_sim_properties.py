"""Property-based tests: invariants over random small clusters, workloads and options."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_helpers import check_invariants, make_workload

from dlcluster.sim import (POLICIES, FailureModel, Migration, RetryPolicy, Topology, default_failure_model,
                           simulate)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def topologies(draw):
    racks = draw(st.integers(1, 2))
    gpus, rack = [], []
    for r in range(racks):
        for _ in range(draw(st.integers(1, 3))):
            gpus.append(draw(st.sampled_from([1, 2, 4, 8])))
            rack.append(r)
    return Topology(server_names=tuple(f"m{i}" for i in range(len(gpus))), server_gpus=tuple(gpus),
                    server_rack=tuple(rack))


@st.composite
def scenarios(draw):
    topology = draw(topologies())
    n = draw(st.integers(1, 14))
    rows = [(f"j{i}", draw(st.integers(0, 300)), draw(st.sampled_from([1, 1, 2, 3, 4, 8, 16])),
             draw(st.sampled_from([0, 1, 30, 100, 500, 2000]))) for i in range(n)]
    vcs = [draw(st.sampled_from(["a", "b", "c"])) for _ in range(n)]
    quotas = draw(st.none() | st.fixed_dictionaries({"a": st.integers(0, 16), "b": st.integers(0, 8)}))
    workload = make_workload(rows, vcs=vcs, converge_frac=[draw(st.sampled_from([0.3, 1.0, float("nan")]))
                                                           for _ in range(n)])
    options = {
        "quotas": quotas,
        "lending": draw(st.booleans()),
        "slowdown": draw(st.sampled_from([None, "default"])),
        "failures": draw(st.sampled_from([None, "default"])),
        "retry": draw(st.sampled_from(["philly", "adaptive", "prerun"])),
        "early_stop": draw(st.booleans()),
        "migration": draw(st.sampled_from([None, Migration(cost_s=7, min_remaining_s=0)])),
        "restart_overhead_s": draw(st.sampled_from([0.0, 3.0])),
        "seed": draw(st.integers(0, 3)),
    }
    if options["failures"] == "default":
        options["failures"] = default_failure_model()
    policy = draw(st.sampled_from(sorted(POLICIES)))
    return workload, topology, policy, options


def test_property_tests_draw_the_same_examples_on_every_run():
    drawn = []

    @settings(max_examples=15, deadline=None)  # inherits the conftest profile, as SETTINGS does
    @given(topologies(), st.integers(0, 10**9))
    def probe(topology, number):
        drawn[-1].append((topology, number))

    for _ in range(2):
        drawn.append([])
        probe()
    assert drawn[0] == drawn[1] and len({repr(d) for d in drawn[0]}) > 1
    assert SETTINGS.derandomize  # the module's own settings inherit the profile too


@SETTINGS
@given(scenarios())
def test_invariants_hold(scenario):
    workload, topology, policy, options = scenario
    result = simulate(workload, topology, policy, **options)
    check_invariants(result, workload, topology)
    ts = result.timeseries
    assert (ts["allocated_gpus"] <= topology.total_gpus).all()
    assert (ts["allocated_gpus"] + ts["free_gpus"] == topology.total_gpus).all()
    if options["quotas"] is not None and not options["lending"]:
        for vc, quota in options["quotas"].items():
            if f"vc_{vc}" in ts:
                assert (ts[f"vc_{vc}"] <= quota).all()


@SETTINGS
@given(scenarios())
def test_identical_output_for_identical_seed(scenario):
    workload, topology, policy, options = scenario
    first = simulate(workload, topology, policy, **options)
    second = simulate(workload, topology, policy, **options)
    pd.testing.assert_frame_equal(first.jobs, second.jobs)
    pd.testing.assert_frame_equal(first.attempts, second.attempts)
    pd.testing.assert_frame_equal(first.timeseries, second.timeseries)
    assert first.attempt_gpus == second.attempt_gpus


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_work_is_conserved_at_ideal_speed(scenario):
    workload, topology, policy, options = scenario
    options.update(slowdown=None, failures=None, migration=None, restart_overhead_s=0.0, early_stop=False)
    result = simulate(workload, topology, policy, **options)
    att = result.attempts[~result.attempts["prerun"]]
    ran = (att["end_s"] - att["start_s"]).groupby(att["jobid"]).sum()
    passed = result.jobs[result.jobs["status"] == "Pass"].set_index("jobid")
    assert np.allclose(ran.reindex(passed.index).fillna(0.0), passed["service_s"], atol=1e-6)
    assert set(result.jobs["status"]) <= {"Pass", "Rejected"}


@settings(max_examples=30, deadline=None)
@given(scenarios())
def test_slowdown_only_stretches_running_time(scenario):
    workload, topology, policy, options = scenario
    options.update(slowdown="default", failures=None, early_stop=False)
    result = simulate(workload, topology, policy, **options)
    att = result.attempts[~result.attempts["prerun"]]
    ran = (att["end_s"] - att["start_s"]).groupby(att["jobid"]).sum()
    passed = result.jobs[result.jobs["status"] == "Pass"].set_index("jobid")
    assert (ran.reindex(passed.index).fillna(0.0) >= passed["service_s"] - 1e-6).all()


def test_failure_model_draws_are_seeded_and_follow_probabilities():
    model = FailureModel.from_dict({"classes": {
        "x": {"category": "user", "probability": 0.3, "rtf": {"dist": "exponential", "mean_s": 10},
              "retryable": False},
        "y": {"category": "infrastructure", "probability": 0.2,
              "rtf": {"dist": "weibull", "scale_s": 100, "shape": 0.7}, "retryable": True,
              "repeat_probability": 0.5}}})
    a = model.draws(20000, 4, seed=1)
    b = model.draws(20000, 4, seed=1)
    assert (a.job_class == b.job_class).all() and np.array_equal(a.rtf_s, b.rtf_s)
    share = np.bincount(a.job_class + 1, minlength=3) / 20000
    assert np.allclose(share, [0.5, 0.3, 0.2], atol=0.015)
    assert np.isclose(a.rtf_s[a.job_class == 0].mean(), 10, rtol=0.05)
    assert np.isinf(a.rtf_s[a.job_class == -1]).all()
    c = model.draws(10, 4, seed=1, given=["y"] + [None] * 9)
    assert c.job_class[0] == 1


def test_retry_policy_and_failure_model_validation():
    import pytest
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match=r"rtf\.median_s"):
        FailureModel.from_dict({"classes": {"x": {"category": "user", "probability": 0.1,
                                                  "rtf": {"dist": "lognormal", "sigma": 1}, "retryable": False}}})
    with pytest.raises(ValueError, match="category"):
        FailureModel.from_dict({"classes": {"x": {"category": "gpu", "probability": 0.1,
                                                  "rtf": {"dist": "exponential", "mean_s": 1},
                                                  "retryable": False}}})
    with pytest.raises(ValueError, match="sum to"):
        FailureModel.from_dict({"classes": {
            n: {"category": "user", "probability": 0.6, "rtf": {"dist": "exponential", "mean_s": 1},
                "retryable": False} for n in "ab"}})
    with pytest.raises(ValueError, match="missing field 'retryable'"):
        FailureModel.from_dict({"classes": {"x": {"category": "user", "probability": 0.1,
                                                  "rtf": {"dist": "exponential", "mean_s": 1}}}})
