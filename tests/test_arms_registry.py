"""Each experiment owns its arms: the grid's registry names every experiment's cells, options and arm label."""

import numpy as np
import pandas as pd
import pytest

from dlcluster import experiments as E
from dlcluster.experiments import early_stop, failures, grid, locality, policies
from dlcluster.sim.workload import Workload

EPOCH = pd.Timestamp("2017-10-03 07:00:00", tz="UTC")


def _workload(n=4):
    return Workload(jobid=np.array([f"j{i}" for i in range(n)], dtype=object), vc=np.array(["vc"] * n, dtype=object),
                    user=np.array(["u"] * n, dtype=object), arrival_s=np.arange(n, dtype=float),
                    num_gpus=np.ones(n, dtype=np.int64), service_s=np.full(n, 100.0), epoch=EPOCH)


def test_every_experiment_is_in_the_registry_in_grid_order():
    assert tuple(grid.ARMS) == E.EXPERIMENTS
    assert grid.ARMS["locality"].options is locality.options and grid.ARMS["failures"].cells is failures.cells
    assert grid.ARMS["early_stop"].options is early_stop.options and grid.ARMS["policy"].cells is policies.cells
    # the grid lists each experiment's cells in registry order, and the calibration lists its own
    cells = E.experiment_cells(E.grid_spec("small"), "public", "fp", [0], default_relax_s=60.0)
    order = list(dict.fromkeys(c["experiment"] for c in cells))
    assert order == ["locality", "interference", "failures", "early_stop", "policy"]


def test_simulation_options_dispatches_to_the_experiments_module():
    w = _workload()
    policy, options, same, extras = grid.simulation_options(
        {"experiment": "policy", "policy": "fifo"}, w, {"relax_after_s": 60.0})
    assert policy.name == "fifo" and options == {} and same is w and extras == {}
    # Philly's arm keeps the calibrated options
    policy, _, _, _ = grid.simulation_options({"experiment": "policy", "policy": "philly"}, w,
                                              {"relax_after_s": 60.0})
    assert policy.relax_after_s == 60.0
    policy, options, _, _ = grid.simulation_options(
        {"experiment": "locality", "locality": "relax", "relax_after_s": 900.0, "long_jobs": "as-others"}, w, {},
        "replay-slowdown")
    assert policy.relax_after_s == 900.0 and options == {"slowdown": "replay-slowdown"}
    _, options, stopped, extras = grid.simulation_options(
        {"experiment": "early_stop", "tolerance": 0.01, "curve_source": "pollux", "seed": 0}, w, {})
    assert options == {"early_stop": True} and stopped.converge_frac.shape == (4,) and len(extras["quality_lost"]) == 4
    with pytest.raises(ValueError, match="unknown experiment"):
        grid.simulation_options({"experiment": "nope"}, w)
