"""The sweep of the five experiments: grids, the cells, running one cell, load calibration."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from ..report.plotting import duration_axis, place_legend
from ..sim import Workload, make_policy, simulate
from ..sim.slowdown import REAL_FROM_RECORD
from . import early_stop, failures, locality, policies
from .common import (
    EXPERIMENTS,
    ArmCells,
    Inputs,
    CalibratedReplay,
    cached_trace,
    load_inputs,
    load_key,
    load_label,
    job_measures,
    measure,
    measure_jobs,
    resample_periods,
    scale_load,
    replay_block_inputs,
)
from .early_stop import early_stop_arm, early_stop_points
from .failures import failures_arm, fitted_failure_spec
from .restart import RESTART_OVERHEADS_S
from .interference import INTERFERENCE_ARMS, interference_arm, interference_options
from .locality import locality_arm
from .plots import TIME_FLOOR_S
from .policies import POLICY_NAMES, policy_arm


def inputs_fingerprint(trace: str, max_jobs: int | None = None, racks: int | None = None,
                       start: str | None = None, curve_source: str = "pollux",
                       replay: CalibratedReplay | None = None, cache_dir: str | None = None) -> str:
    """sha256 of everything a cell reads besides code: jobs, machines, quotas, occupancy, failure fit, curves.

    Put it in every cell so that the sweep cache notices changed data. With
    ``replay`` (the calibrated replay), the jobs, machines and parameters are
    those the calibration's cache key covers.
    """
    digest = hashlib.sha256()
    if replay is not None:
        digest.update(replay.calibration(trace, cache_dir).key.encode())
    else:
        inputs = load_inputs(trace, max_jobs, racks, start)
        inputs.workload.update_digest(digest)
        digest.update(json.dumps([inputs.topology.server_gpus, inputs.topology.server_rack, inputs.quotas,
                                  inputs.real_occupancy], sort_keys=True).encode())
    digest.update(json.dumps(fitted_failure_spec(trace), sort_keys=True, default=str).encode())
    digest.update(pd.util.hash_pandas_object(early_stop_points(curve_source, 0.001)).to_numpy().tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class GridSpec:
    """How big a sweep is: the values each experiment sweeps (``small`` for CI, ``full`` for reports)."""

    start: str | None
    max_jobs: int | None
    racks: int | None
    resample_block_days: float
    calibration_loads: tuple[float, ...]
    relax_after_s: tuple[float, ...]
    tolerances: tuple[float, ...]
    failure_models: tuple[str, ...]
    policies: tuple[str, ...]
    # load settings: 'real' (x1), 'calibrated' (to the real occupancy) or a scaled factor
    experiment_loads: tuple  # experiments 1-4
    policy_loads: tuple      # experiment 5
    oracle_loads: tuple      # the loads at which SRTF runs (its preemptions make heavy loads slow to simulate)
    #: the calibrated replay (real load, calibrated parameters); None: the Pollux jobs, load calibrated by compression
    replay: CalibratedReplay | None = None
    #: extra scaled loads for some of experiments 1-4, a sensitivity axis: ((experiment, (factor, ...)), ...)
    sensitivity: tuple = ()
    #: whether experiment 2 runs the everyone-on-dedicated-servers construction (interference.DEDICATED_ARM)
    dedicated_arm: bool = False
    #: preemption's restart overheads (s) the preemptive policies also run under (experiments.restart; 0: free)
    restart_overheads_s: tuple = (0.0,)


GRIDS = {
    # the block design: every arm replays notebook 05's calibrated replay whole (every RFold job at the real
    # arrival rate, no warm-up of its own), measured in the 7 whole weeks from the occupancy record's start to
    # RFold's completeness horizon. One simulation per arm (~5-10 s of CPU each, its 7 blocks measured included; the
    # preemptive policies 1-2 min)
    "full": GridSpec(start=None, max_jobs=None, racks=None, resample_block_days=0.0, calibration_loads=(),
                     relax_after_s=(60.0, 900.0), tolerances=(0.001, 0.01, 0.05),
                     failure_models=("fitted",), policies=tuple(POLICY_NAMES),
                     experiment_loads=("real",), policy_loads=("real",), oracle_loads=("real",),
                     replay=CalibratedReplay(block_days=7.0)),
    # the same with the sensitivity arms the default leaves out: the policies also at load x1.25 (FIFO's and Philly's
    # queues grow week after week there: unstable, never scored; the preemptive policies take ~4-5 min each) and the
    # everyone-on-dedicated-servers construction (its queue grows without bound), and the preemptive policies under
    # each assumed restart overhead (experiments.restart: 60 s and 300 s beside free preemption)
    "full-sensitivity": GridSpec(start=None, max_jobs=None, racks=None, resample_block_days=0.0, calibration_loads=(),
                                 relax_after_s=(60.0, 900.0), tolerances=(0.001, 0.01, 0.05),
                                 failure_models=("fitted",), policies=tuple(POLICY_NAMES),
                                 experiment_loads=("real",), policy_loads=("real", 1.25), oracle_loads=("real",),
                                 replay=CalibratedReplay(block_days=7.0), dedicated_arm=True,
                                 restart_overheads_s=RESTART_OVERHEADS_S),
    # notebook 05's small calibration (7 fit days, 12 days replayed after 7 of warm-up, 4 trials), measured in
    # its 12 daily blocks: a quick run, not a result. The calibrated relax timeout is added to the locality arms
    "small": GridSpec(start=None, max_jobs=None, racks=None, resample_block_days=0.0, calibration_loads=(),
                      relax_after_s=(), tolerances=(0.01,), failure_models=("illustrative",),
                      policies=("fifo", "philly"), experiment_loads=("real",), policy_loads=("real", 1.25),
                      oracle_loads=(),
                      replay=CalibratedReplay(fit_days=7, replay_days=12, warmup_days=7,
                                             calibration_trials=4, block_days=1.0)),
    # before the calibrated replay: the 82,247 Pollux (passed) jobs, arrivals compressed until the simulated
    # occupancy matches the real one. 3,000 jobs from the first day of the occupancy data on 8 racks
    "pollux-small": GridSpec(start="2017-10-03", max_jobs=3000, racks=8, resample_block_days=0.5,
                      calibration_loads=(1.0, 2.0, 4.0, 8.0),
                      relax_after_s=(180.0,), tolerances=(0.01,), failure_models=("illustrative",),
                      policies=("fifo", "philly", "las"), experiment_loads=("calibrated",),
                      policy_loads=("real", "calibrated"), oracle_loads=()),
    "pollux-full": GridSpec(start=None, max_jobs=None, racks=None, resample_block_days=7.0,
                     calibration_loads=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
                     relax_after_s=(60.0, 180.0, 900.0, 3600.0), tolerances=(0.001, 0.01, 0.05),
                     failure_models=("fitted", "illustrative"), policies=tuple(POLICY_NAMES),
                     experiment_loads=("real", "calibrated", 4.0), policy_loads=("real", "calibrated", 6.0),
                     oracle_loads=("real", "calibrated")),
}


def grid_spec(name: str) -> GridSpec:
    if name not in GRIDS:
        raise ValueError(f"grid must be one of {sorted(GRIDS)}, got {name!r}")
    return GRIDS[name]


def _scope(spec: GridSpec, calibration_cache: str | None = None) -> dict:
    if spec.replay is not None:
        return {"replay": spec.replay.cell(), "calibration_cache": calibration_cache}
    return {"start": spec.start, "max_jobs": spec.max_jobs, "racks": spec.racks}


def calibration_cells(spec: GridSpec, trace: str, fingerprint: str) -> list[dict]:
    """Philly-policy replays of the trace as recorded at each calibration load factor."""
    from .sweep import expand_grid
    return expand_grid({"load": list(spec.calibration_loads)},
                       {"experiment": "calibrate", "trace": trace, **_scope(spec), "seed": 0,
                        "resample_block_days": 0, "load_setting": "calibration", "inputs": fingerprint})


#: The interference experiment's scenario when the caller names none: colocation costs nothing.
NO_INTERFERENCE_SCENARIO = {"none": (1.0, 1.0)}
NO_INTERFERENCE_CELL = {"interference": "none", "colocated_one_server": 1.0, "colocated_spread": 1.0}


def experiment_cells(spec: GridSpec, trace: str, fingerprint: str, seeds, calibrated: float | None = None,
                     default_relax_s: float = 180.0, calibration_cache: str | None = None,
                     interference_scenarios: dict | None = None) -> list[dict]:
    """The cells of the five experiments at their load settings.

    ``calibrated``: the load factor calibrated to the real occupancy (the
    Pollux grids); ``default_relax_s``: Philly's relax timeout (the
    calibrated replay's), always among the locality timeouts;
    ``calibration_cache``: where the calibrated replay's calibration is cached;
    ``interference_scenarios``: ``{name: (speed of a one-server job with neighbours, of a spread one)}``, the
    assumed colocation slowdowns the interference experiment runs under (no real data measure them), each a
    scenario of its own (default :data:`NO_INTERFERENCE_SCENARIO`).
    """
    from .sweep import expand_grid

    seeds = [int(s) for s in seeds]
    common = {"trace": trace, **_scope(spec, calibration_cache), "resample_block_days": spec.resample_block_days,
              "inputs": fingerprint}
    cells = []

    def resolve(load):
        if load == "calibrated" and calibrated is None:
            raise ValueError("the grid asks for the calibrated load but no calibrated factor was given")
        if load in ("real", "calibrated"):
            return load, 1.0 if load == "real" else float(calibrated)
        return "scaled", float(load)

    def add(experiment, loads, axes, fixed=None):
        for setting, factor in loads:
            cells.extend(expand_grid({**axes, "seed": seeds},
                                     {**common, **(fixed or {}), "experiment": experiment,
                                      "load_setting": setting, "load": factor}))

    base = [resolve(lo) for lo in spec.experiment_loads]
    extra = dict(spec.sensitivity)
    unknown = set(extra) - set(SENSITIVITY_EXPERIMENTS)
    if unknown:
        raise ValueError(f"sensitivity loads are for experiments 1-4, got {sorted(unknown)}")

    def loads(experiment):
        return base + [resolve(float(f)) for f in extra.get(experiment, ())]

    scenarios = NO_INTERFERENCE_SCENARIO if interference_scenarios is None else interference_scenarios
    for name, experiment in ARMS.items():
        if experiment.cells is not None:
            experiment.cells(spec, ArmCells(name, add, loads(name) if name in SENSITIVITY_EXPERIMENTS else base,
                                            resolve, float(default_relax_s), dict(scenarios)))
    return cells


def calibrated_load(calibration: pd.DataFrame, target: float) -> float:
    """The load factor whose simulated busy-server share meets ``target`` (linear between grid points).

    Uses ``busy_server_share_dates`` (the occupancy data's dates) where every
    calibration row has it, else ``busy_server_share`` (the arrival span).
    Rounded to 0.01. Raises if the target lies outside the measured range.
    """
    rows = calibration[(calibration["bucket"] == "all") & (calibration["population"] == "all jobs")]
    rows = rows.sort_values("load", kind="stable")
    column = "busy_server_share_dates" if rows["busy_server_share_dates"].notna().all() else "busy_server_share"
    x, y = rows["load"].to_numpy(float), rows[column].to_numpy(float)
    for i in range(len(x) - 1):
        if (y[i] - target) * (y[i + 1] - target) <= 0 and y[i] != y[i + 1]:
            return round(float(x[i] + (target - y[i]) * (x[i + 1] - x[i]) / (y[i + 1] - y[i])), 2)
    if len(x) and np.isclose(y, target).any():
        return round(float(x[np.isclose(y, target)][0]), 2)
    raise ValueError(f"the real occupancy {target:.3f} is outside the simulated busy-server shares "
                     f"{np.round(y, 3).tolist()} at load factors {x.tolist()}: widen calibration_loads")


def calibrate_options(cell: dict, workload: Workload, philly: dict, slowdown) -> tuple[object, dict, Workload, dict]:
    """A calibration cell: Philly as calibrated, nothing else."""
    return make_policy("philly", **philly), {}, workload, {}


def interference_cells(spec: GridSpec, arms: ArmCells) -> None:
    """The interference arms (:data:`.interference.INTERFERENCE_ARMS`) under each scenario; the everyone-dedicated
    construction only where the grid asks for it (``spec.dedicated_arm``: its queue grows without bound, by
    construction, and it cost the full grid a sixth of its simulation time)."""
    for name, (one_server, spread) in arms.interference_scenarios.items():
        scenario = {"interference": str(name), "colocated_one_server": float(one_server),
                    "colocated_spread": float(spread)}
        for arm in INTERFERENCE_ARMS:
            if arm["placement"] != "dedicated" or spec.dedicated_arm:
                arms.add({k: [v] for k, v in arm.items()}, scenario)




@dataclass(frozen=True)
class Experiment:
    """One experiment's arms, as its module defines them: ``cells(spec, arms)`` lists its cells (None: the grid
    lists none, e.g. the calibration's own cells), ``options(cell, workload, philly, slowdown)`` gives a cell's policy,
    simulator options, workload and per-job extras, ``arm(row)`` its label."""

    cells: Callable | None
    options: Callable
    arm: Callable


#: Every experiment, in grid order (the order :func:`experiment_cells` lists their cells): the registry the grid
#: runs from; a new experiment is one module with ``cells``, ``options`` and an arm label, and one entry here.
ARMS = {
    "calibrate": Experiment(None, calibrate_options, lambda row: "Philly"),
    "locality": Experiment(locality.cells, locality.options, locality_arm),
    "interference": Experiment(interference_cells, interference_options, interference_arm),
    "failures": Experiment(failures.cells, failures.options, failures_arm),
    "early_stop": Experiment(early_stop.cells, early_stop.options, early_stop_arm),
    "policy": Experiment(policies.cells, policies.options, policy_arm),
}
#: The experiments a grid's ``sensitivity`` may add scaled loads to (experiments 1-4)
SENSITIVITY_EXPERIMENTS = ("locality", "interference", "failures", "early_stop")


def simulation_options(cell: dict, workload: Workload, philly: dict | None = None,
                       slowdown="default") -> tuple[object, dict, Workload, dict]:
    """Policy, simulator options, the workload (possibly with convergence points) and per-job extras: the cell's
    experiment's ``options`` (:data:`ARMS`).

    ``philly``: options of the Philly policy (:attr:`Inputs.philly`: the calibrated replay's calibrated ones).
    ``slowdown``: the replay's own slowdown (:attr:`Inputs.options`'s; on the calibrated replay each job is charged
    relative to its real placement, :func:`dlcluster.validation.calibrate.replay_slowdown`, None where the replay has
    none), or ``"default"`` (the Pollux jobs: the default model). Every arm keeps it, so that each experiment's
    baseline arm is notebook 05's replay (tests/test_experiments.py); the interference experiment adds its
    scenario's assumed colocation slowdown to it.
    """
    experiment = cell["experiment"]
    if experiment not in ARMS:
        raise ValueError(f"unknown experiment {experiment!r}; choose from {EXPERIMENTS}")
    return ARMS[experiment].options(cell, workload, dict(philly or {}), slowdown)


def run_cell(cell: dict) -> pd.DataFrame:
    """Run one cell (the sweep function): simulate and measure. See :data:`EXPERIMENTS` for ``experiment``.

    Common parameters: ``trace``, ``seed``, ``resample_block_days``, ``load``, and either ``replay`` (the
    calibrated replay, :class:`CalibratedReplay` as a dict; ``seed`` picks its measurement window) with
    ``calibration_cache``, or ``max_jobs``, ``racks``, ``start`` (the Pollux jobs).
    """
    inputs = cell_inputs(cell)
    workload = resample_periods(inputs.workload, int(cell["seed"]), float(cell.get("resample_block_days", 0)))
    workload = scale_load(workload, float(cell["load"]), inputs.anchor_s)
    policy, options, workload, extras = simulation_options(cell, workload, inputs.philly,
                                                           inputs.options.get("slowdown", "default"))
    slowdown = {**inputs.options, **options}.get("slowdown")
    if getattr(slowdown, "real_speed", None) is not None:
        # the work at ideal speed in each real duration, and where each real placement came from (job_measures)
        extras["real_speed"] = slowdown.real_speed
        extras["real_from_record"] = np.asarray(slowdown.real_source, dtype=object) == REAL_FROM_RECORD
    result = simulate(workload, inputs.topology, policy, quotas=inputs.quotas, seed=int(cell["seed"]),
                      **{**inputs.options, **options})
    if inputs.blocks is not None:
        return measure_blocks(result, workload, extras, inputs, float(cell["load"]),
                              cached_trace(cell["trace"]).occupancy)
    window = None
    if cell["experiment"] == "calibrate" or cell.get("replay") is not None:
        window = _dates_window(inputs, workload, float(cell["load"]))
    return measure(result, workload, extras, window, inputs.measured)


def measure_blocks(result, workload: Workload, extras: dict, inputs: Inputs, factor: float,
                   occupancy: pd.DataFrame) -> pd.DataFrame:
    """:func:`measure` of each block of the block design (column ``block``, and ``block_start``, ``block_days``); at
    the real load also the busy servers in the record's units per block, as notebook 05 compares them
    (:func:`dlcluster.validation.calibrate.busy_by_period`: ``busy_servers`` simulated, ``busy_servers_real``, the
    record's ``record_servers``)."""
    span_days = inputs.block_days
    busy = None
    if factor == 1.0:
        from ..validation.measures import busy_by_period
        end = inputs.block_starts[-1] + pd.Timedelta(days=span_days)
        busy = busy_by_period(result, occupancy, (inputs.block_starts[0], end),
                              f"{span_days:g}D")
    frames = []
    per_job = job_measures(result, workload, extras)
    for block, start in enumerate(inputs.block_starts):
        lo = (start - workload.epoch) / pd.Timedelta(seconds=1)
        window = _scaled_window(inputs, workload, factor, lo, lo + span_days * 86400.0)
        rows = measure_jobs(per_job, result, workload, extras, window, inputs.blocks == block)
        rows.insert(0, "block", block)
        rows["block_start"] = str(start)
        rows["block_days"] = float(span_days)
        if busy is not None and start in busy.index:
            rows["busy_servers"] = float(busy.loc[start, "simulated_busy"])
            rows["busy_servers_real"] = float(busy.loc[start, "real_busy"])
            rows["record_servers"] = float(busy.loc[start, "record_total"])
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


#: Cells that replay Philly exactly as calibrated, nothing injected or changed: the failures experiment's arm
#: without failures (the arm 'one-attempt' is not: it leaves the replay's attempt split out), early termination's arm
#: without it, the policies' Philly arm (:func:`simulation_options`)
_PHILLY_AS_CALIBRATED = (("failures", "retry", "none"), ("early_stop", "tolerance", None),
                         ("policy", "policy", "philly"))
#: What those three experiments' cells name besides the simulation they share
_ARM_KEYS = ("experiment", "retry", "failure_model", "tolerance", "curve_source", "policy")


def shared_simulations(cells: list[dict]):
    """``run_sweep``'s ``same_as`` for the grid ``cells``: the cell whose simulation each cell runs.

    * A dedicated-servers arm never puts two jobs on one server, so no interference scenario's assumed colocation
      slowdown applies: one simulation (scenario "none") serves every scenario.
    * Philly's replay as calibrated is one simulation at each load and seed, whichever of the failures, early
      termination and policy experiments names it. Early termination's and the policies' cells take the rows of
      the grid's first failures cell without failures where there is one (its rows hold every population the three
      measure: every job, and the jobs its failure model leaves alone), else of the first of them. A failures
      cell keeps its own run: its second population is its own failure model's.
    """
    def shared_key(cell):
        return json.dumps({k: v for k, v in cell.items() if k not in _ARM_KEYS}, sort_keys=True)

    def as_calibrated(cell):
        return any(cell.get("experiment") == e and cell.get(k, None) == v for e, k, v in _PHILLY_AS_CALIBRATED)

    runs: dict[str, dict] = {}
    for cell in sorted((c for c in cells if as_calibrated(c)), key=lambda c: c["experiment"] != "failures"):
        runs.setdefault(shared_key(cell), cell)

    def same_as(cell: dict) -> dict:
        if cell.get("experiment") == "interference" and cell.get("placement") == "dedicated":
            return {**cell, **NO_INTERFERENCE_CELL}
        if not as_calibrated(cell) or cell["experiment"] == "failures":
            return cell
        return runs.get(shared_key(cell), cell)

    return same_as


def cell_inputs(cell: dict) -> Inputs:
    """The inputs a cell replays: the calibrated replay in blocks (``replay`` given) or the Pollux jobs."""
    if cell.get("replay") is not None:
        return replay_block_inputs(cell["trace"], CalibratedReplay.from_cell(cell["replay"]),
                                   cell.get("calibration_cache"))
    return load_inputs(cell["trace"], cell.get("max_jobs"), cell.get("racks"), cell.get("start"))


def _scaled_window(inputs: Inputs, workload: Workload, factor: float, lo: float, hi: float):
    """Simulated times of the real span ``lo``..``hi`` (s) under arrival compression by ``factor`` around the inputs'
    anchor, cut to the arrivals; None if that leaves nothing."""
    first = float(workload.arrival_s.min()) if inputs.anchor_s is None else float(inputs.anchor_s)
    lo, hi = first + (lo - first) / factor, first + (hi - first) / factor
    lo, hi = max(lo, float(workload.arrival_s.min())), min(hi, float(workload.arrival_s.max()))
    return (lo, hi) if hi > lo else None


def _dates_window(inputs: Inputs, workload: Workload, factor: float):
    """Simulated times of the occupancy data's dates (under arrival compression, around the inputs' anchor or
    the first arrival, as :func:`scale_load` compressed them), or None if disjoint."""
    first = float(workload.arrival_s.min()) if inputs.anchor_s is None else float(inputs.anchor_s)
    lo, hi = ((t - workload.epoch) / pd.Timedelta(seconds=1) for t in inputs.occupancy_window)
    lo, hi = first + (lo - first) / factor, first + (hi - first) / factor
    lo, hi = max(lo, first), min(hi, float(workload.arrival_s.max()))
    return (lo, hi) if hi > lo else None


def with_arms(table: pd.DataFrame) -> pd.DataFrame:
    """The sweep table with an ``arm`` label per row (what the experiment varies) and a ``load_label``; on the block
    design ``seed`` becomes the block (the replicate) and the cell's seed ``cell_seed``."""
    out = table.copy()
    if "block" in out.columns and out["block"].notna().all():
        # the block design: the replicate every paired comparison pairs on is the block of the one replay per arm
        # (the cell's seed only seeds the failure and convergence draws)
        out["cell_seed"] = out["seed"]
        out["seed"] = out["block"].astype(int)
    out["arm"] = [ARMS[r["experiment"]].arm(r) for _, r in out.iterrows()]
    out["load_label"] = [load_label(s, f) for s, f in zip(out["load_setting"], out["load"], strict=True)]
    out["load_key"] = [load_key(s, f) for s, f in zip(out["load_setting"], out["load"], strict=True)]
    return out


def plot_calibration(calibration: pd.DataFrame, target: float, factor: float):
    """Simulated busy-server share (and GPU allocation, queueing) against the load factor, with the real occupancy."""
    import matplotlib.pyplot as plt

    rows = calibration[(calibration["bucket"] == "all") & (calibration["population"] == "all jobs")]
    rows = rows.sort_values("load", kind="stable")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    ax = axes[0]
    ax.plot(rows["load"], rows["busy_server_share_dates"], "o-", color="#4C72B0",
            label="servers busy, simulated (dates of the occupancy data)")
    ax.plot(rows["load"], rows["busy_server_share"], "o--", color="#4C72B0", alpha=0.5,
            label="servers busy, simulated (whole arrival span)")
    ax.plot(rows["load"], rows["allocated_gpu_share"], "s-", color="#55A868", label="GPUs allocated, simulated")
    ax.axhline(target, color="k", lw=1, ls=":", label=f"servers busy, real occupancy data ({target:.1%})")
    ax.axvline(factor, color="#C44E52", lw=1.5, label=f"calibrated load x{factor:g}")
    ax.set_xlabel("load factor (inter-arrival times divided by it)")
    ax.set_ylabel("share of the cluster")
    ax.set_ylim(0, 1.02)
    place_legend(ax, fontsize=7)
    ax.set_title("Calibrating the load to the real occupancy", fontsize=10)
    ax = axes[1]
    ax.plot(rows["load"], np.maximum(rows["queue_mean_s"], TIME_FLOOR_S), "o-", color="#8172B2",
            label="mean queueing delay")
    ax.plot(rows["load"], np.maximum(rows["jct_mean_s"], TIME_FLOOR_S), "o-", color="0.4", label="mean JCT")
    ax.axvline(factor, color="#C44E52", lw=1.5)
    duration_axis(ax, "y", "time")
    ax.set_xlabel("load factor")
    place_legend(ax, fontsize=8)
    ax.set_title("Waiting and completion time (Philly policy)", fontsize=10)
    fig.tight_layout()
    return fig


# ---- the ensemble (experiments.members): the arms each implication compares (notebook 06's answers,
# :func:`.implications.implication_answers`) are the only ones that run on the members besides the calibrated replay
# (whose sweep runs every arm). Early termination's arm without it shares the policies' Philly arm's simulation
# (:func:`shared_simulations`).
def _needed(cell: dict) -> bool:
    experiment = cell["experiment"]
    if experiment == "locality":
        return cell.get("long_jobs", "as-others") in ("as-others", "migrate")
    if experiment == "interference":
        return (cell["placement"], bool(cell["migration"])) in (("spread", False), ("pack", False), ("isolate", True))
    return experiment in ("early_stop", "policy")


def _migrates(cell: dict) -> bool:
    return cell.get("long_jobs") in ("migrate", "migrate-attained") or bool(cell.get("migration", False))


def ensemble_cells(spec, trace: str, fingerprint: str, seeds, default_relax_s: float, cache_dir: str | None,
                   scenarios: dict, members: list[str], interference_scenario: str = "paper") -> list[dict]:
    """The cells of every member but the calibrated one (which the main sweep runs): the arms the implications compare
    (:func:`_needed`) at the real load, under the interference scenario the answers read (``interference_scenario``
    where the notebook runs it, else its last), the calibrated relax timeout, the grid's first tolerance."""
    from .members import CALIBRATED, POOLED_SUFFIX

    if spec.replay is None:
        raise ValueError("ensemble_cells: the ensemble is of calibrated replays (a grid with a CalibratedReplay)")
    chosen = interference_scenario if interference_scenario in scenarios else list(scenarios)[-1]
    cells = []
    for member in members:
        if member == CALIBRATED:
            continue
        sub = replace(spec, replay=replace(spec.replay, member=member), relax_after_s=(),
                      tolerances=tuple(spec.tolerances[:1]), policies=("philly",), policy_loads=("real",),
                      oracle_loads=(), failure_models=tuple(spec.failure_models[:1]), experiment_loads=("real",),
                      sensitivity=(), dedicated_arm=False)
        # the simulator cannot migrate under GPU-type pools (a migration moves jobs across the whole cluster): a
        # pooled member runs no migrating arm, and its answers to those implications read 'not in this grid'
        pooled = member.endswith(POOLED_SUFFIX)
        cells += [c for c in experiment_cells(sub, trace, fingerprint, seeds, None, default_relax_s, cache_dir,
                                              {chosen: scenarios[chosen]})
                  if _needed(c) and not (pooled and _migrates(c))]
    return cells
