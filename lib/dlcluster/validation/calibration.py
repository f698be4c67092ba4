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
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .calibrate import ReplayParams, evaluate, fit_overhead_latency, held_out_figures, run_replay, spans
from .scorecard import TARGETS
from .search import DEFAULT_SPACE, check_space, search
from .workload import ReplayWorkload

#: Modules whose source is the code version of a cached calibration.
CALIBRATION_CODE = ("dlcluster.validation", "dlcluster.sim", "dlcluster.trace")
#: Trials of the search at default parameters (each a replay of the fit span: a few seconds).
DEFAULT_TRIALS = 60
#: The figures of the held-out validation a calibration keeps (the scorecard's and a few more).
HELD_OUT_KEYS = ("occupancy_mae_pp", "occupancy_mae_pp_complete", "max_median_ratio", "max_p90_ratio", "max_ks",
                 "servers_spanned_max_ks", "latency_only_wait_share")


@dataclass(frozen=True)
class Calibration:
    """A calibration's outcome: the fitted parameters, every trial, the spans, the held-out headline figures.

    ``replay``: the workload it was fitted on; ``full_replay``: every RFold job
    (not cut to the warm-up and ``replay_days``). Both are rebuilt on each
    call, never cached.
    """

    params: ReplayParams
    trials: pd.DataFrame
    spans: dict
    held_out: dict
    settings: dict
    key: str
    replay: ReplayWorkload
    full_replay: ReplayWorkload

    def summary(self) -> str:
        """The held-out validation in one clause, each figure beside its target."""
        h, target = self.held_out, {key: value for key, (_, value) in TARGETS.items()}
        return (f"held-out occupancy MAE {h['occupancy_mae_pp_complete']:.1f} points up to RFold's completeness "
                f"horizon (target {target['occupancy_mae_pp_complete']:g}), largest median-wait ratio "
                f"{h['max_median_ratio']:.2f} (target {target['max_median_ratio']:g}), largest p90 ratio "
                f"{h['max_p90_ratio']:.2f} (target {target['max_p90_ratio']:g}), largest KS of the "
                f"{self.settings['top_vcs']} largest VCs {h['max_ks']:.2f} (target {target['max_ks']:g}), "
                f"servers spanned KS {h['servers_spanned_max_ks']:.2f} (target {target['servers_spanned_max_ks']:g})")


def fit_span_replay(replay: ReplayWorkload, fit_span: tuple) -> ReplayWorkload:
    """The jobs a replay of the fit span needs: those submitted before its end (later ones cannot change it)."""
    end_s = (fit_span[1] - replay.workload.epoch) / pd.Timedelta(seconds=1)
    return replay.take(replay.workload.arrival_s < end_s)


def start_params(waits: pd.DataFrame, fit_span: tuple) -> ReplayParams:
    """Where the search starts: Philly's relax-after-3-minutes locality, and only the scheduler's own overhead
    as latency (:func:`.calibrate.fit_overhead_latency` on the fit span's real waits)."""
    return ReplayParams(locality="relax", relax_after_s=180.0, latency_mixture=fit_overhead_latency(waits, fit_span))


def calibrated_params(trace: str = "public", fit_days: float = 35, seed: int = 0, space: dict | None = None,
                      n_trials: int = DEFAULT_TRIALS, replay_days: float | None = None,
                      warmup_days: float | None = None, top_vcs: int = 5, cache_dir=None) -> Calibration:
    """:func:`.search.search` on the first ``fit_days`` of the occupancy data, with the held-out figures; cached.

    The same inputs as notebook 05: RFold's jobs on the calendar (VC draws
    seeded with ``seed``), cut to ``replay_days`` with ``warmup_days`` of
    warm-up, the DRE records' first-attempt waits. ``space``: the search space
    (None: :data:`.search.DEFAULT_SPACE`); ``n_trials`` replays of the fit span.
    The result is kept in ``cache_dir`` (default :func:`dlcluster.paths.cache_dir`)
    as ``calibration-<key>.json``, ``key`` = sha256 of the arguments, a
    fingerprint of every input table and the code version (:data:`CALIBRATION_CODE`),
    so notebooks 05 and 06 share one calibration per input and any change of
    data or code recalibrates.
    """
    from ..atomic import atomic_write_text
    from ..codeversion import code_version
    from ..paths import cache_dir as default_cache_dir
    from ..trace import load_trace
    from . import jobsets
    from .workload import dre_first_waits, first_days, rfold_replay_workload

    space = check_space(DEFAULT_SPACE if space is None else space)
    settings = {"trace": str(trace), "fit_days": fit_days, "seed": int(seed), "n_trials": int(n_trials),
                "space": json.loads(json.dumps(space)), "replay_days": replay_days, "warmup_days": warmup_days,
                "top_vcs": int(top_vcs)}
    pub = load_trace(trace, with_util=False)
    rfold, pollux = pub.rfold_jobs, pub.jobs_of("pollux")
    if rfold is None:
        raise ValueError(f"calibrated_params: trace {trace!r} has no rfold_jobs table (the public data has it)")
    alignment = jobsets.align_offsets(rfold["arrival_offset_s"], rfold["num_gpus"], rfold["duration_s"],
                                      pollux["submitted"], pollux["num_gpus"], pollux["run_time_s"])
    full = rfold_replay_workload(pub, alignment, seed=seed)
    warm = full if warmup_days is None else rfold_replay_workload(pub, alignment, seed=seed, warmup_days=warmup_days)
    replay = first_days(warm, replay_days)
    waits, _ = dre_first_waits(warm, pub.jobs_of("dre"))
    digest = hashlib.sha256(_hashed_settings(settings).encode())
    digest.update(code_version(CALIBRATION_CODE).encode())
    replay.workload.update_digest(digest)
    for table in (pub.machines, pub.vc_quotas, pub.occupancy, waits):
        digest.update(pd.util.hash_pandas_object(table, index=False).to_numpy().tobytes())
    key = digest.hexdigest()[:20]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"calibration-{key}.json"
    if path.exists():
        stored = json.loads(path.read_text())
        return Calibration(ReplayParams.from_dict(stored["params"]), pd.DataFrame(stored["trials"]),
                           {k: tuple(pd.Timestamp(t) for t in v) for k, v in stored["spans"].items()},
                           {**stored["held_out"], "complete_until": pd.Timestamp(stored["held_out"]["complete_until"])},
                           stored["settings"], key, replay, full)
    span = spans(pub.occupancy, fit_days, replay_days)
    fit_part = fit_span_replay(replay, span["fit"])

    def objective(params: ReplayParams):
        rep = run_replay(fit_part, pub.machines, pub.vc_quotas, params, quota_workload=replay.workload)
        return evaluate(rep, pub.occupancy, waits, span["fit"])

    folder.mkdir(parents=True, exist_ok=True)
    best, trials = search(objective, start_params(waits, span["fit"]), space, n_trials,
                          folder / f"calibration-{key}.db", key, seed)
    horizon = jobsets.completeness_horizon(jobsets.offsets_to_utc(rfold["arrival_offset_s"], alignment.origin_local),
                                           rfold["num_gpus"], rfold["duration_s"], span["fit"])
    figures = held_out_figures(run_replay(replay, pub.machines, pub.vc_quotas, best), pub.occupancy, waits,
                               span["held_out"], top_vcs=top_vcs, complete_until=horizon["horizon"])
    held = {k: float(figures[k]) for k in HELD_OUT_KEYS}
    held["complete_until"] = horizon["horizon"]
    atomic_write_text(path, json.dumps({
        "params": asdict(best), "trials": trials.replace({np.nan: None}).to_dict(orient="list"),
        "spans": {k: [str(t) for t in v] for k, v in span.items()},
        "held_out": {**held, "complete_until": str(held["complete_until"])}, "settings": settings}, indent=1))
    return Calibration(best, trials, span, held, settings, key, replay, full)


def _hashed_settings(settings: dict) -> str:
    """The settings as the cache key hashes them: every number as a float, so that a value written 60 or 60.0 (the
    same calibration) gives one key."""
    def number(value):
        if isinstance(value, dict):
            return {key: number(v) for key, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [number(v) for v in value]
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    return json.dumps(number(settings), sort_keys=True)


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
                            calibration.params.locality, calibration.params.relax_after_s, description)
