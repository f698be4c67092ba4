"""Workloads, topologies, quotas and the slowdown model: construction and clear errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sim_helpers import EPOCH, make_workload

from dlcluster.sim import (DEFAULT_RACK_SIZE, Simulator, make_policy, SlowdownModel, assign_convergence,
                           convergence_fractions_from_learning_curves, default_slowdown_model, generate_workload,
                           parse_spec, public_inputs, quotas_from_table, simulate, topology_from_machines,
                           topology_from_spec, workload_from_jobs)


def jobs_frame(**overrides):
    frame = pd.DataFrame({
        "jobid": ["a", "b", "c", "d"],
        "vc": ["v1", "v1", "v2", None],
        "user": pd.array(["u1", pd.NA, "u2", "u3"], dtype="string"),
        "submitted": pd.to_datetime(["2017-10-01 10:00:30", "2017-10-01 10:05:00", "2017-10-01 11:00:00",
                                     "2017-10-01 12:00:00"], utc=True),
        "num_gpus": pd.array([1, 4, 2, 1], dtype="Int64"),
        "run_time_s": [100.0, 50.0, np.nan, 10.0],
        "gpu_time_s": [100.0, 400.0, np.nan, 10.0],
        "source": ["pollux", "pollux", "pollux", "pollux"],
    })
    return frame.assign(**overrides)


def test_workload_from_jobs_drops_unreplayable_rows_with_counts():
    w = workload_from_jobs(jobs_frame())
    assert list(w.jobid) == ["a", "b"]
    assert w.excluded == {"unknown VC": 1, "unknown service time (never ran or times missing)": 1}
    assert w.epoch == pd.Timestamp("2017-10-01 10:00:00", tz="UTC")  # first submission, floored to the minute
    assert list(w.arrival_s) == [30.0, 300.0]
    assert list(w.service_s) == [100.0, 100.0]  # gpu_time / gpus: the time the gang held its GPUs
    assert list(w.user) == ["u1", None]


def test_workload_from_jobs_filters_by_source_and_falls_back_to_run_time():
    frame = jobs_frame(source=["pollux", "dre", "pollux", "pollux"], gpu_time_s=np.nan)
    w = workload_from_jobs(frame, source="pollux")
    assert list(w.jobid) == ["a"] and list(w.service_s) == [100.0]
    assert len(workload_from_jobs(frame, source=None)) == 2


@pytest.mark.parametrize("change, message", [
    (lambda f: f.drop(columns="num_gpus"), "missing column"),
    (lambda f: f.drop(columns=["run_time_s", "gpu_time_s"]), "gpu_time_s or run_time_s"),
    (lambda f: f.assign(submitted=f["submitted"].dt.tz_localize(None)), "'submitted' must be timezone-aware"),
    (lambda f: f.assign(vc=None), "no job can be replayed"),
])
def test_workload_from_jobs_errors_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        workload_from_jobs(change(jobs_frame()))


@pytest.mark.parametrize("rows, field", [
    ([("a", 0, 0, 10)], "num_gpus"),
    ([("a", 0, 1, -5)], "service_s"),
    ([("a", float("nan"), 1, 5)], "arrival_s"),
    ([("a", 0, 1, 5), ("a", 1, 1, 5)], "jobid"),
])
def test_workload_validation_names_field_and_job(rows, field):
    with pytest.raises(ValueError, match=f"field '{field}'.*first jobid 'a'"):
        make_workload(rows)


def test_tile_and_take_and_generator():
    w = make_workload([("a", 0, 1, 10), ("b", 100, 2, 10)])
    tiled = w.tile(3)
    assert len(tiled) == 6 and tiled.jobid[2] == "a-copy1"
    assert tiled.arrival_s[2] == 100 + 86400 and tiled.arrival_s[4] == 2 * (100 + 86400)
    assert list(w.take([1]).jobid) == ["b"]
    g1, g2 = generate_workload(500, seed=3), generate_workload(500, seed=3)
    assert np.array_equal(g1.arrival_s, g2.arrival_s) and np.array_equal(g1.num_gpus, g2.num_gpus)
    assert not np.array_equal(g1.service_s, generate_workload(500, seed=4).service_s)
    assert (np.diff(g1.arrival_s) >= 0).all() and set(g1.num_gpus) <= {1, 2, 4, 8, 16, 32}
    with pytest.raises(ValueError, match="num_jobs"):
        generate_workload(0)


def test_topology_from_machines_excludes_zero_gpu_servers_and_groups_racks_by_id():
    machines = pd.DataFrame({"machine": ["m10", "m2", "m3", "m1", "m7"], "num_gpus": [8, 4, 0, 8, 2]})
    topo = topology_from_machines(machines, rack_size=2)
    assert topo.server_names == ("m1", "m2", "m7", "m10")  # numeric id order, m3 (0 GPUs) left out
    assert topo.server_gpus == (8, 4, 2, 8)
    assert topo.server_rack == (0, 0, 1, 1)
    assert topo.excluded == {"servers with 0 GPUs": 1}
    assert topo.total_gpus == 22 and topo.num_racks == 2
    with pytest.raises(ValueError, match="missing column 'num_gpus'"):
        topology_from_machines(machines.drop(columns="num_gpus"))
    with pytest.raises(ValueError, match="rack_size"):
        topology_from_machines(machines, rack_size=0)


def test_topology_spec():
    topo = parse_spec("2x3x8")
    assert topo.num_servers == 6 and topo.server_rack == (0, 0, 0, 1, 1, 1) and topo.total_gpus == 48
    with pytest.raises(ValueError, match="RACKSxSERVERSxGPUS"):
        parse_spec("2x3")
    with pytest.raises(ValueError, match="gpus_per_server"):
        topology_from_spec(1, 1, 0)


def test_quotas_from_table():
    assert quotas_from_table(pd.DataFrame({"vc": ["a", "b"], "nodes": [2, 1], "gpus": [16, 8]})) == \
        {"a": 16, "b": 8}
    with pytest.raises(ValueError, match="'gpus'"):
        quotas_from_table(pd.DataFrame({"vc": ["a"], "gpus": [-1]}))


def test_public_inputs_are_the_real_cluster_and_jobs():
    inputs = public_inputs()
    topo, w = inputs.topology, inputs.workload
    assert len(w) == 82247 and not w.excluded
    assert topo.num_servers == 539 and topo.total_gpus == 3205
    assert topo.excluded == {"servers with 0 GPUs": 13}
    assert topo.num_racks == -(-539 // DEFAULT_RACK_SIZE)
    assert len(inputs.quotas) == 11 and sum(inputs.quotas.values()) == 8 * 352
    assert len(set(w.vc) - set(inputs.quotas)) == 4  # lending-only VCs
    assert np.isclose((w.num_gpus * w.service_s).sum(), 3.52e9, rtol=0.01)


def test_default_slowdown_model_from_measurements():
    """Spread: fitted to the real step times (one factor, within and across racks); colocation: none assumed."""
    import pandas as pd

    from dlcluster.paths import external_dir
    from dlcluster.sim.slowdown import NO_INTERFERENCE

    model = default_slowdown_model()
    # the fit by hand: per model, the median of one-server / multi-server step time (same GPUs and per-GPU batch)
    medians = []
    for file in sorted((external_dir() / "learning_curves").glob("*/placements.csv")):
        t = pd.read_csv(file, dtype={"placement": str})
        t["total"] = t["placement"].map(lambda p: sum(map(int, p)))
        single = t[t["placement"].str.len() == 1].groupby(["total", "local_bsz"])["step_time"].mean()
        multi = t[t["placement"].str.len() > 1]
        ratio = single.reindex(pd.MultiIndex.from_frame(multi[["total", "local_bsz"]])).to_numpy() / multi["step_time"]
        medians.append(np.nanmedian(ratio))
    assert len(medians) == 6
    assert model.cross_server == model.cross_rack == pytest.approx(np.median(medians), rel=1e-12)
    assert 0.5 < model.cross_server < 0.9
    assert (model.colocated_one_server, model.colocated_spread) == tuple(NO_INTERFERENCE.values()) == (1.0, 1.0)
    assert set(model.provenance["spread_per_model"]) == {"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert model.speed([4], 1, 0) == 1.0
    assert model.speed([2, 2], 2, 1) == pytest.approx(model.cross_rack)   # neighbours cost nothing by default
    # an assumed interference scenario is the caller's, and named
    assumed = model.with_interference(0.5, 0.8, "assumed: test")
    assert assumed.speed([2, 2], 1, 1) == pytest.approx(model.cross_server * 0.8) and assumed([1], 1, 3) == 0.5
    assert assumed.provenance["colocated"] == "assumed: test" and "colocated" in model.provenance
    with pytest.raises(ValueError, match="cross_rack"):
        SlowdownModel(cross_server=0.9, cross_rack=1.5, colocated_one_server=0.7, colocated_spread=0.7)


def test_any_callable_can_replace_the_slowdown_model():
    w = make_workload([("a", 0, 2, 100), ("b", 0, 2, 100)])
    topo = topology_from_spec(1, 2, 1)
    r = simulate(w, topo, "fifo", slowdown=lambda per_server, racks, colocated: 0.5 if len(per_server) > 1 else 1.0)
    assert r.jobs.set_index("jobid").loc["a", "end_s"] == 200  # spread over two 1-GPU servers at half speed
    with pytest.raises(ValueError, match="speed"):
        simulate(w, topo, "fifo", slowdown=lambda *args: 2.0)


def test_simulator_option_errors():
    w = make_workload([("a", 0, 1, 10)])
    topo = topology_from_spec(1, 1, 1)
    with pytest.raises(ValueError, match="unknown policy"):
        Simulator(w, topo, "lifo")
    with pytest.raises(ValueError, match="retry: unknown preset"):
        Simulator(w, topo, "fifo", retry="often")
    with pytest.raises(ValueError, match="quotas"):
        Simulator(w, topo, "fifo", quotas={"vc": -1})
    with pytest.raises(ValueError, match="placement strategy"):
        Simulator(w, topo, "fifo", placement="random")
    with pytest.raises(ValueError, match="locality must be one of"):
        Simulator(w, topo, make_policy("philly", locality="nearby"))


def test_convergence_points_from_the_real_learning_curves():
    fractions = convergence_fractions_from_learning_curves()
    # the 40 Pollux validation curves less the 6 two-epoch BERT runs (under min_points=5)
    assert len(fractions) == 34 and ((fractions > 0) & (fractions <= 1)).all()
    w = assign_convergence(make_workload([("a", 0, 1, 10), ("b", 0, 1, 10)]), fractions, seed=1)
    again = assign_convergence(make_workload([("a", 0, 1, 10), ("b", 0, 1, 10)]), fractions, seed=1)
    assert np.array_equal(w.converge_frac, again.converge_frac) and set(w.converge_frac) <= set(fractions)
    assert w.epoch == EPOCH
