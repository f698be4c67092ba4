"""One calibration per input, cached: notebooks 05 and 06 share it (:func:`calibrated_params`).

The calibration (:mod:`.search`) runs tens of replays of the real workload on
the fit span; the design experiments of notebook 06 run on its outcome. The
outcome is kept as ``calibration-<key>.json`` in the cache folder
(:func:`dlcluster.paths.cache_dir`: ``reports/.sweep-cache`` unless
``DLCLUSTER_CACHE_DIR`` names another), ``key`` covering the arguments,
every input table and the code that made it; the Optuna study beside it
(``calibration-<key>.db``) lets an interrupted calibration resume.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from ..sim.pools import pool_shares
from .calibrate import ReplayParams, real_placement_shares, run_replay
from .heldout import held_out_figures
from .latency import fit_overhead_latency
from .measures import evaluate, in_span, spans
from .ingredients import fit_attempt_split
from .replay import Replay
from .scorecard import scorecard, scorecard_text
from .search import DEFAULT_SPACE, best_trial, check_space, constraint_summary, polish, search
from .workload import ReplayWorkload

#: Modules whose source is the code version of a cached calibration.
CALIBRATION_CODE = ("dlcluster.validation", "dlcluster.sim", "dlcluster.trace")
#: Trials of the search at default parameters (each a replay of the fit span, ~7 s on one core): the 6 start points,
#: then TPE's, at random up to the 10th. With 60 the best was start point 4, which 56 more trials never beat; 24
#: keep the calibration within the budget of ``make reports`` (15 minutes on 2 cores) and find the same best.
DEFAULT_TRIALS = 24
#: The figures of the held-out validation a calibration keeps (the scorecard's and a few more); the Figure 3 ones are
#: NaN where the digitized full-trace figure is not available.
HELD_OUT_KEYS = ("busy_servers_mae_pp", "busy_servers_mae_pp_complete", "gpu_allocated_share",
                 "gpu_allocation_shortfall_pp", "max_median_ratio", "max_p90_ratio", "max_ks", "servers_spanned_max_ks",
                 "latency_only_wait_share", "fig3_cells", "fig3_median_ks", "fig3_max_ks", "fig3_share_3min_within")


@dataclass(frozen=True)
class Calibration:
    """A calibration's outcome: the fitted parameters, every trial, the spans, the held-out headline figures.

    ``replay``: the workload it was fitted on; ``full_replay``: every RFold job
    (not cut to the warm-up and ``replay_days``). Neither is stored with the
    calibration: each is built on first use, once per process
    (:func:`replay_workloads`). :meth:`calibrated_replay`: the replay of
    ``replay`` with ``params``, stored beside the calibration in ``folder``.
    """

    params: ReplayParams
    trials: pd.DataFrame
    spans: dict
    held_out: dict
    settings: dict
    key: str
    folder: str | None = None
    # the one-at-a-time check on the fit span (:func:`.search.polish`'s last round): every single move of a fitted value
    optimality: pd.DataFrame | None = None
    # how close the kept set came to the placement constraint on the fit span (:func:`.search.constraint_summary`)
    constraint: dict | None = None

    def calibrated_replay(self) -> Replay:
        """The replay the held-out figures were measured on: ``replay`` with ``params`` on the trace's machines and
        quotas, as the calibration ran it (read from its store, ~1 s, instead of a 15-s replay); replayed if absent."""
        if self.folder is not None:
            stored = _replay_path(Path(self.folder), self.key)
            if stored.exists():
                return pickle.loads(stored.read_bytes())
        from ..trace import load_trace
        pub = load_trace(self.settings["trace"], with_util=False)
        return run_replay(self.replay, pub.machines, pub.vc_quotas, self.params)

    @property
    def replay(self) -> ReplayWorkload:
        return self.workloads().replay

    @property
    def full_replay(self) -> ReplayWorkload:
        return self.workloads().full

    def workloads(self) -> ReplayWorkloads:
        """What the calibration replayed (:func:`replay_workloads`), once per process: read from its store (~0.3 s)
        where the calibration kept it, else built (~6 s: every notebook and sweep worker on this calibration asks)."""
        return _stored_workloads(self.folder, self.key, **self._workload_args())

    def _workload_args(self) -> dict:
        return {k: self.settings[k] for k in ("trace", "seed", "replay_days", "warmup_days")}

    def summary(self) -> str:
        """The validation in one clause: how many targets are met, each figure beside its target."""
        return scorecard_text(scorecard(self.held_out))


def official_fig3_or_none():
    """The digitized Figure 3 of the full trace (:func:`.fig3.official_fig3`), or None where it is not built."""
    from .fig3 import official_fig3

    try:
        return official_fig3()
    except (ImportError, FileNotFoundError):
        return None


def fit_span_replay(replay: ReplayWorkload, fit_span: tuple) -> ReplayWorkload:
    """The jobs a replay of the fit span needs: those submitted before its end (later ones cannot change it)."""
    end_s = (fit_span[1] - replay.workload.epoch) / pd.Timedelta(seconds=1)
    return replay.take(replay.workload.arrival_s < end_s)


def start_params(waits: pd.DataFrame, fit_span: tuple, placements: pd.DataFrame | None = None,
                 machines: pd.DataFrame | None = None) -> ReplayParams:
    """Where the search starts: Philly's relax-after-3-minutes locality, only the scheduler's own overhead as
    latency (:func:`.latency.fit_overhead_latency` on the fit span's real waits), the jobs split into the attempts
    the DRE records show (:func:`.ingredients.fit_attempt_split`), the fit span as the span caps from demand
    are read on, and (with ``placements`` and ``machines``) the GPU-type pool shares of the fit span's DRE records
    (:func:`dlcluster.sim.pools.pool_shares`; pools stay off until the search switches them on), and the servers
    those records used, kept in service first where the servers in service are searched (:mod:`dlcluster.sim.service`;
    the held-out span's placements stay unseen); and the slowdown model in the replay, each job charged relative to
    its real placement, DRE's per-size placement shares read on the fit span only (:func:`.calibrate.replay_slowdown`:
    one cluster for notebooks 05 and 06)."""
    fit_records = in_span(waits, fit_span)
    shares = () if placements is None else pool_shares(placements, machines, fit_records)
    seen = () if placements is None else tuple(sorted(
        map(str, placements.loc[placements["jobid"].isin(set(fit_records["jobid"])), "machine"].unique())))
    return ReplayParams(locality="relax", relax_after_s=180.0, latency_mixture=fit_overhead_latency(waits, fit_span),
                        attempt_split=fit_attempt_split(waits), demand_span=tuple(str(t) for t in fit_span),
                        pool_shares=shares, servers_seen=seen, slowdown=True,
                        real_placement_shares=real_placement_shares(fit_records))


@dataclass(frozen=True)
class ReplayWorkloads:
    """What a calibration replays: RFold's jobs on the calendar, and the real first waits it is held against."""

    alignment: object          # RFold's arrival offsets on the calendar (:func:`.jobsets.align_offsets`)
    full: ReplayWorkload       # every RFold job
    replay: ReplayWorkload     # cut to the warm-up and replay_days
    waits: pd.DataFrame        # the DRE records' first-attempt waits (:func:`.workload.dre_first_waits`)


@lru_cache(maxsize=4)
def replay_workloads(trace: str, seed: int, replay_days: float | None, warmup_days: float | None) -> ReplayWorkloads:
    """:class:`ReplayWorkloads` of a trace, built once per process (the alignment of RFold to the calendar takes a
    few seconds, and notebook 06 asks for it per measurement window)."""
    from ..trace import load_trace
    from . import jobsets
    from .workload import dre_first_waits, first_days, rfold_replay_workload

    pub = load_trace(trace, with_util=False)
    rfold, pollux = pub.rfold_jobs, pub.jobs_of("pollux")
    if rfold is None:
        raise ValueError(f"calibrated_params: trace {trace!r} has no rfold_jobs table (the public data has it)")
    alignment = jobsets.align_offsets(rfold["arrival_offset_s"], rfold["num_gpus"], rfold["duration_s"],
                                      pollux["submitted"], pollux["num_gpus"], pollux["run_time_s"])
    full = rfold_replay_workload(pub, alignment, seed=seed)
    warm = full if warmup_days is None else rfold_replay_workload(pub, alignment, seed=seed, warmup_days=warmup_days)
    waits, _ = dre_first_waits(warm, pub.jobs_of("dre"))
    return ReplayWorkloads(alignment, full, first_days(warm, replay_days), waits)


def _canonical(value):
    """JSON-ready ``value`` with every whole float as an int, so that 60 and 60.0 give one cache key."""
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def calibration_key(settings: dict) -> str:
    """The cache key of a calibration: sha256 of its settings (numbers canonical), the code that makes it
    (:data:`CALIBRATION_CODE`), the installed environment and the trace's input files; computed without
    loading the trace."""
    from ..codeversion import code_version, environment_version
    from ..sources.official import official_dir
    from ..trace import trace_fingerprint

    digest = hashlib.sha256(json.dumps(_canonical(settings), sort_keys=True).encode())
    digest.update(code_version(CALIBRATION_CODE).encode())
    digest.update(environment_version().encode())
    digest.update(trace_fingerprint(settings["trace"]).encode())
    # the full trace's Figure 3, which the held-out figures are scored against (inside data/public for "public")
    manifest = official_dir() / "manifest.json"
    if settings["trace"] != "public" and manifest.exists():
        digest.update(manifest.read_bytes())
    return digest.hexdigest()[:20]


def calibrated_params(trace: str = "public", fit_days: float = 35, seed: int = 0, space: dict | None = None,
                      n_trials: int = DEFAULT_TRIALS, replay_days: float | None = None,
                      warmup_days: float | None = None, top_vcs: int = 5, cache_dir=None) -> Calibration:
    """:func:`.search.search` on the first ``fit_days`` of the occupancy data, with the held-out figures; cached.

    The same inputs as notebook 05: RFold's jobs on the calendar (VC draws
    seeded with ``seed``), cut to ``replay_days`` with ``warmup_days`` of
    warm-up, the DRE records' first-attempt waits. ``space``: the search space
    (None: :data:`.search.DEFAULT_SPACE`); ``n_trials`` replays of the fit span.
    The result is kept in ``cache_dir`` (default :func:`dlcluster.paths.cache_dir`)
    as ``calibration-<key>.json`` (:func:`calibration_key`), looked up before
    anything is loaded, so notebooks 05 and 06 share one calibration per input
    and any change of data, code or installed packages recalibrates.
    """
    from ..atomic import exclusive_lock
    from ..paths import cache_dir as default_cache_dir
    from ..report.progress import emit as emit_progress

    space = check_space(DEFAULT_SPACE if space is None else space)
    settings = {"trace": str(trace), "fit_days": fit_days, "seed": int(seed), "n_trials": int(n_trials),
                "space": json.loads(json.dumps(space)), "replay_days": replay_days, "warmup_days": warmup_days,
                "top_vcs": int(top_vcs)}
    key = calibration_key(settings)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"calibration-{key}.json"
    if not path.exists():
        # one search per key at a time: a second process (another notebook, another test worker) waits for the
        # first one's result instead of running trials into the same study beside it
        # (a notebook that waits says so: `dlcluster reports` lends its core to the next notebook meanwhile)
        with exclusive_lock(folder / f"calibration-{key}.lock", on_wait=lambda waits: emit_progress(
                {"event": "waiting", "for": "the calibration", "waiting": waits})):
            if not path.exists():
                _calibrate(settings, key, path)
    stored = json.loads(path.read_text())
    return Calibration(ReplayParams.from_dict(stored["params"]), pd.DataFrame(stored["trials"]),
                       {k: tuple(pd.Timestamp(t) for t in v) for k, v in stored["spans"].items()},
                       {**stored["held_out"], "complete_until": pd.Timestamp(stored["held_out"]["complete_until"])},
                       settings, key, str(folder), pd.DataFrame(stored["optimality"]), stored.get("constraint"))


def _replay_path(folder: Path, key: str) -> Path:
    return folder / f"calibration-{key}.replay.pickle"


def _workloads_path(folder: Path, key: str) -> Path:
    return folder / f"calibration-{key}.workloads.pickle"


@lru_cache(maxsize=4)
def _stored_workloads(folder: str | None, key: str, trace: str, seed: int, replay_days: float | None,
                      warmup_days: float | None) -> ReplayWorkloads:
    stored = _workloads_path(Path(folder), key) if folder is not None else None
    if stored is not None and stored.exists():
        return pickle.loads(stored.read_bytes())
    return replay_workloads(trace, seed, replay_days, warmup_days)


def _calibrate(settings: dict, key: str, path: Path) -> None:
    """Run the search of :func:`calibrated_params` and write its result to ``path``."""
    from ..atomic import atomic_write_bytes, atomic_write_text
    from ..trace import load_trace
    from . import jobsets

    trace, fit_days, seed, space = settings["trace"], settings["fit_days"], settings["seed"], settings["space"]
    replay_days, warmup_days = settings["replay_days"], settings["warmup_days"]
    n_trials, top_vcs, folder = settings["n_trials"], settings["top_vcs"], path.parent
    pub = load_trace(trace, with_util=False)
    if pub.cluster_gpu_util_cdf is None:
        raise ValueError(f"calibrated_params: trace {trace!r} has no cluster GPU utilization CDF "
                         "(the GPU allocation's lower bound)")
    fig3_table = official_fig3_or_none()
    inputs = replay_workloads(str(trace), int(seed), replay_days, warmup_days)
    replay, waits = inputs.replay, inputs.waits
    span = spans(pub.occupancy, fit_days, replay_days)
    fit_part = fit_span_replay(replay, span["fit"])

    def objective(params: ReplayParams):
        rep = run_replay(fit_part, pub.machines, pub.vc_quotas, params, quota_workload=replay.workload)
        return evaluate(rep, pub.occupancy, waits, span["fit"], pub.cluster_gpu_util_cdf)

    folder.mkdir(parents=True, exist_ok=True)
    best, trials = search(objective, start_params(waits, span["fit"], pub.placements, pub.machines), space, n_trials,
                          folder / f"calibration-{key}.db", key, seed)
    # a search that reaches its optimum: the best moved one value at a time until no single move improves it (the
    # best as the search ranks it: feasible placement first, then the objective)
    kept = best_trial(trials)
    best, optimality = polish(objective, best, space, best_objective=float(kept["objective"]),
                              best_violation=float(kept["violation"]))
    # how close the polished best came to the placement constraint (its evaluation: the polish's row "best" if no move
    # improved, else the move taken, whose parts are evaluated once more here only if it was not a trial)
    constraint = constraint_summary(trials, _evaluation_fields(objective, best, trials, space))
    rfold = pub.rfold_jobs
    horizon = jobsets.completeness_horizon(jobsets.offsets_to_utc(rfold["arrival_offset_s"],
                                                                  inputs.alignment.origin_local),
                                           rfold["num_gpus"], rfold["duration_s"], span["fit"])
    # the full trace's Figure 3 is measured on the calibrated replay only now: no trial above has seen it
    calibrated = run_replay(replay, pub.machines, pub.vc_quotas, best)
    figures = held_out_figures(calibrated, pub.occupancy, waits, span["held_out"], pub.cluster_gpu_util_cdf,
                               top_vcs=top_vcs, complete_until=horizon["horizon"], fig3_table=fig3_table)
    # kept for the notebooks that show it (a pickle: a cache of this machine's own objects, never shared data);
    # written before the JSON, whose presence marks the calibration complete
    atomic_write_bytes(_replay_path(folder, key), pickle.dumps(calibrated, protocol=pickle.HIGHEST_PROTOCOL))
    atomic_write_bytes(_workloads_path(folder, key), pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL))
    held = {k: float(figures.get(k, np.nan)) for k in HELD_OUT_KEYS}
    held["complete_until"] = horizon["horizon"]
    atomic_write_text(path, json.dumps({
        "params": asdict(best), "trials": trials.replace({np.nan: None}).to_dict(orient="list"),
        "spans": {k: [str(t) for t in v] for k, v in span.items()},
        "optimality": optimality.replace({np.nan: None}).to_dict(orient="list"), "constraint": constraint,
        "held_out": {**held, "complete_until": str(held["complete_until"])}, "settings": settings}, indent=1))


def _evaluation_fields(objective, best: ReplayParams, trials: pd.DataFrame, space: dict) -> dict:
    """The placement fields of ``best``'s evaluation: read from the trial with the same parameters, else evaluated."""
    names = [n for n in space if n in trials.columns]
    for row in trials.to_dict(orient="records"):
        if all(_same(row[n], getattr(best, n)) for n in names):
            return row
    return asdict(objective(best))


def _same(a, b) -> bool:
    if a is None or b is None or (isinstance(a, float) and np.isnan(a)):
        return (a is None or (isinstance(a, float) and np.isnan(a))) and b is None
    return a == b


def calibrated_replay_inputs(trace: str = "public", cache_dir=None):
    """The calibrated replay as ``dlcluster simulate`` runs it by default (:class:`dlcluster.sim.cli.CalibratedInputs`).

    Every RFold job, with notebook 05's default calibration (the same cache: computed once, then read) and
    the scheduler overhead added to each arrival; the description names the workload, the parameters and the
    held-out validation figures they carry.
    """
    from ..sim.cli import CalibratedInputs
    from ..trace import load_trace
    from .calibrate import replay_setup

    calibration = calibrated_params(trace, cache_dir=cache_dir)
    tr = load_trace(trace, with_util=False)
    setup = replay_setup(calibration.full_replay, tr.machines, tr.vc_quotas, calibration.params,
                         quota_workload=calibration.replay.workload)
    held = {k: v for k, v in calibration.held_out.items() if k != "complete_until"}
    description = {
        "workload": f"calibrated replay: {len(setup.workload):,} real RFold jobs (every status) on the calendar, "
                    "scheduler overhead added to each arrival",
        "calibrated_parameters": calibration.params.label(),
        "calibration": {"key": calibration.key, "fit_span": [str(t) for t in calibration.spans["fit"]],
                        "trials": len(calibration.trials)},
        "validation_held_out": {**held, "summary": calibration.summary()},
    }
    return CalibratedInputs(setup.workload, setup.topology, setup.quotas, dict(setup.options),
                            calibration.params.locality, calibration.params.relax_after_s, description,
                            calibration.params.backoff, calibration.params.relax_clock)
