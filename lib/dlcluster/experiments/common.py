"""What the five experiments share: inputs, resampling and load scaling, measures, confidence intervals, wording."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

import numpy as np
import pandas as pd

from ..analysis.delays import format_seconds
from ..analysis.table2 import SIM_CAUSE_COLUMNS
from ..ordering import decision_value
from ..sim import (
    Topology,
    Workload,
    quotas_from_table,
    topology_from_machines,
    workload_from_trace,
)
from ..sim.slowdown import REAL_FROM_RECORD, REAL_FROM_SHARES
from ..trace.schema import BUCKET_KEYS as SIZE_BUCKET_KEYS
from ..trace.schema import SIZE_BUCKETS, size_bucket
from .intervals import (
    Interval,
    changed,
    difference_interval,
    direction,
    mean_interval,
    pooled_difference_interval,
    pooled_interval,
    pooled_ratio_interval,
    ratio_interval,
)

EXPERIMENTS = ("calibrate", "locality", "interference", "failures", "early_stop", "policy")
BUCKETS = ("all",) + tuple(SIZE_BUCKETS)
#: results.json-safe spelling of each bucket (``>`` does not belong in a key).
BUCKET_KEYS = {"all": "all", **SIZE_BUCKET_KEYS}
#: Modules whose source is the code version of a cell (see dlcluster.experiments.sweep).
CODE_MODULES = ("dlcluster.experiments", "dlcluster.experiments.sweep", "dlcluster.sim", "dlcluster.trace",
                "dlcluster.validation",
                "dlcluster.analysis.failures", "dlcluster.analysis.convergence", "dlcluster.sources.curves",
                "dlcluster.analysis.classify")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Inputs:
    """What every cell replays: the real jobs, the reconstructed machines, the VC quotas, the real occupancy."""

    workload: Workload
    topology: Topology
    quotas: dict
    real_occupancy: float
    occupancy_window: tuple[pd.Timestamp, pd.Timestamp]
    data_label: str
    #: simulator options every cell starts from (the calibrated replay: its calibrated lending and placement)
    options: dict = field(default_factory=dict)
    #: options of the Philly policy (the calibrated replay: its calibrated locality and relax timeout)
    philly: dict = field(default_factory=dict)
    #: the jobs measured (None: all); the others only warm the cluster up
    measured: np.ndarray | None = None
    #: load scaling keeps this arrival time fixed (None: the first arrival)
    anchor_s: float | None = None
    #: the replay's held-out validation (notebook 05's figures), None for a replay without one
    validation: str | None = None
    #: the block design: each job's measurement block (-1: not measured, only warms the cluster up), None otherwise
    blocks: np.ndarray | None = None
    #: the block design: when each block begins (UTC), and its length in days
    block_starts: tuple = ()
    block_days: float | None = None
    #: the calibrated replay's slowdown: the share of the measured jobs whose real placement is their own DRE
    #: record's, and the share that take DRE's per-size shares of the fit span instead (expected; labelled)
    real_placement: dict = field(default_factory=dict)


@functools.lru_cache(maxsize=2)
def cached_trace(trace: str):
    from ..trace import load_trace
    return load_trace(trace, with_util=False)


@functools.lru_cache(maxsize=4)
def load_inputs(trace: str = "public", max_jobs: int | None = None, racks: int | None = None,
                start: str | None = None) -> Inputs:
    """The jobs (those submitted from ``start``, the first ``max_jobs`` of them, or all), machines and quotas.

    ``racks`` keeps only the first that many racks of the reconstructed
    machines (a small cluster for quick runs), every VC quota scaled by the
    share of GPUs kept (rounded), as :func:`dlcluster.validation.replay.replay_public_workload` does.
    """
    tr = cached_trace(trace)
    if tr.vc_quotas is None:
        raise ValueError(f"trace {trace!r} has no vc_quotas table: the experiments need VC quotas")
    if tr.occupancy is None or tr.occupancy.empty:
        raise ValueError(f"trace {trace!r} has no occupancy table: the load calibration needs it")
    workload = workload_from_trace(tr, source="pollux" if trace == "public" else None)
    order = np.argsort(workload.arrival_s, kind="stable")
    if start is not None:
        from_s = (pd.Timestamp(start, tz="UTC") - workload.epoch) / pd.Timedelta(seconds=1)
        order = order[workload.arrival_s[order] >= from_s]
    if max_jobs is not None:
        if int(max_jobs) != max_jobs or max_jobs < 1:
            raise ValueError(f"max_jobs must be a positive integer or None, got {max_jobs!r}")
        order = order[: int(max_jobs)]
    if len(order) == 0:
        raise ValueError(f"trace {trace!r}: no job submitted at or after {start}")
    if len(order) < len(workload):
        workload = workload.take(order)
    topology, quotas = topology_from_machines(tr.machines), quotas_from_table(tr.vc_quotas)
    if racks is not None:
        if int(racks) != racks or not 1 <= racks <= topology.num_racks:
            raise ValueError(f"racks must be an integer in 1..{topology.num_racks} or None, got {racks!r}")
        kept = {name for name, rack in zip(topology.server_names, topology.server_rack, strict=True) if rack < racks}
        smaller = topology_from_machines(tr.machines[tr.machines["machine"].isin(kept)])
        quotas = {vc: int(round(q * smaller.total_gpus / topology.total_gpus)) for vc, q in quotas.items()}
        topology = smaller
    occ = tr.occupancy[tr.occupancy["total"] > 0]
    label = tr.describe_source("pollux")["label"] if trace == "public" else f"trace {trace!r}"
    return Inputs(workload=workload, topology=topology, quotas=quotas,
                  real_occupancy=float((occ["active"] / occ["total"]).mean()),
                  occupancy_window=(occ["time"].min(), occ["time"].max()), data_label=label)


@dataclass(frozen=True)
class CalibratedReplay:
    """Experiments on the calibrated replay: the calibration's inputs (notebook 05's) and the measurement blocks.

    Every arm replays notebook 05's calibrated replay whole, once (:func:`replay_block_inputs`), and is measured in
    consecutive blocks of ``block_days`` of submit time from the replay's first measured minute up to RFold's
    completeness horizon (where it still holds the whole demand) or the end of the replayed days; the blocks are the
    replicates, and there is no warm-up of its own to converge (the replay starts where notebook 05's does). The
    cell's seed drives the failure and convergence draws.
    """

    fit_days: float = 35
    replay_days: float | None = None
    warmup_days: float | None = None        # the calibration's warm-up (None: every RFold job)
    calibration_trials: int = 24            # the calibration's search (dlcluster.validation.calibration.DEFAULT_TRIALS)
    vc_seed: int = 0                        # VC draws for RFold jobs no data names a VC for
    block_days: float = 7.0                 # length of a measurement block (the replicate)
    member: str = "calibrated"              # the replay of the ensemble the data allow (experiments.members)

    def cell(self) -> dict:
        """JSON form (a cell parameter)."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_cell(cls, value: dict) -> "CalibratedReplay":
        return cls(**value)

    def calibration(self, trace: str, cache_dir=None):
        """The cached calibration these experiments run on
        (:func:`dlcluster.validation.calibration.calibrated_params`)."""
        from ..validation.calibration import calibrated_params
        return calibrated_params(trace, self.fit_days, self.vc_seed, None, self.calibration_trials,
                                 self.replay_days, self.warmup_days, cache_dir=cache_dir)


@functools.lru_cache(maxsize=8)
def replay_block_inputs(trace: str, spec: CalibratedReplay, cache_dir: str | None = None) -> Inputs:
    """Notebook 05's calibrated replay, set up as it runs it (:func:`dlcluster.validation.calibrate.replay_setup` of
    the calibration's replay with the calibrated parameters: the simulation :func:`~dlcluster.validation.calibrate.
    run_replay` makes), measured in blocks of ``spec.block_days``.

    Measured: the jobs submitted (by their real submit, before the scheduler latency) from the replay's
    ``measure_start`` up to RFold's completeness horizon or the end of the replayed days, whichever is first, in
    whole blocks; the jobs before only warm the cluster up, as in notebook 05.
    """
    from ..validation.calibrate import replay_setup
    from ..validation.measures import real_occupancy

    if not spec.block_days or spec.block_days <= 0:
        raise ValueError(f"replay_block_inputs needs block_days > 0, got {spec.block_days!r}")
    from ..validation.calibrate import replay_slowdown
    from .members import apply_member

    calibration = spec.calibration(trace, cache_dir)
    tr = cached_trace(trace)
    # the ensemble's member (experiments.members): the calibrated replay, or one the data allow as well
    replay, params, draw, model = apply_member(spec.member, trace, calibration, spec.replay_days, spec.warmup_days)
    setup = replay_setup(replay, tr.machines, tr.vc_quotas, params, seed=draw)
    if model is not None and setup.options.get("slowdown") is not None:
        setup.options["slowdown"] = replay_slowdown(params, replay, model)
    w = setup.workload
    begin = pd.Timestamp(replay.measure_start)
    end = min(calibration.spans["held_out"][1], calibration.held_out["complete_until"])
    n_blocks = int(np.floor((end - begin) / pd.Timedelta(days=spec.block_days) + 1e-9))
    if n_blocks < 2:
        raise ValueError(f"the block design needs at least 2 blocks of {spec.block_days:g} days in "
                         f"{begin:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M} (the replayed span up to RFold's completeness "
                         "horizon): use shorter blocks")
    starts = tuple(begin + k * pd.Timedelta(days=spec.block_days) for k in range(n_blocks))
    submitted_s = replay.workload.arrival_s
    begin_s = (begin - w.epoch) / pd.Timedelta(seconds=1)
    block = np.floor((submitted_s - begin_s) / (spec.block_days * 86400.0))
    block = np.where((submitted_s >= begin_s) & (block < n_blocks), block, -1).astype(int)
    stop = starts[-1] + pd.Timedelta(days=spec.block_days)
    real = real_occupancy(tr.occupancy)
    real = real[(real.index >= begin) & (real.index < stop)]
    label = (f"notebook 05's calibrated replay of RFold's real jobs ({len(replay.workload):,}, every status), "
             f"measured on the {int((block >= 0).sum()):,} jobs submitted "
             f"{begin:%Y-%m-%d %H:%M}..{stop:%Y-%m-%d %H:%M} "
             f"UTC in {n_blocks} blocks of {spec.block_days:g} days")
    slowdown = setup.options.get("slowdown")
    real_placement = {}
    if slowdown is not None:
        # each job charged only the slowdown of its simulated placement relative to its real one
        sources = np.asarray(slowdown.real_source, dtype=object)[block >= 0]
        real_placement = {s: float(np.mean(sources == s)) for s in (REAL_FROM_RECORD, REAL_FROM_SHARES)}
        label += (f"; each job runs at the speed of its simulated placement relative to its real one (its DRE "
                  f"record's for {real_placement[REAL_FROM_RECORD]:.0%} of them, else expected from DRE's per-size "
                  "shares of the fit span)")
    return Inputs(workload=w, topology=setup.topology, quotas=setup.quotas, real_occupancy=float(real.mean()),
                  occupancy_window=(begin, stop), data_label=label,
                  # lending, placement, planned retries, the replay's slowdown (relative to the real placements)
                  options=dict(setup.options), real_placement=real_placement,
                  philly={"locality": params.locality, "relax_after_s": params.relax_after_s,
                          "backoff": params.backoff, "gang_relax_after_s": params.gang_relax_after_s,
                          "relax_clock": params.relax_clock},
                  measured=block >= 0, anchor_s=begin_s + float(np.median(setup.latency_s)),
                  validation=calibration.summary(), blocks=block, block_starts=starts, block_days=spec.block_days)


def resample_periods(workload: Workload, seed: int, block_days: float) -> Workload:
    """A block bootstrap of ``workload``: its span cut into periods of about ``block_days``, drawn with replacement.

    Period ``k`` of the result holds the jobs of a randomly drawn period of the
    original, at the same offsets within it. Job ids get ``~k`` appended
    (a period can be drawn twice). ``block_days <= 0`` returns ``workload``.
    """
    if block_days <= 0:
        return workload
    arrival = workload.arrival_s.astype(float)
    start, span = float(arrival.min()), float(arrival.max() - arrival.min())
    n_blocks = max(1, int(round(span / (block_days * 86400.0))))
    if span == 0 or n_blocks == 1:
        return workload
    length = span / n_blocks
    block = np.minimum(((arrival - start) // length).astype(np.int64), n_blocks - 1)
    members = [np.flatnonzero(block == b) for b in range(n_blocks)]
    picks = np.random.default_rng([seed, 0xB10C]).integers(0, n_blocks, n_blocks)
    index = np.concatenate([members[b] for b in picks])
    position = np.concatenate([np.full(len(members[b]), k) for k, b in enumerate(picks)])
    offset = arrival[index] - start - block[index] * length
    optional = {name: None if getattr(workload, name) is None else getattr(workload, name)[index]
                for name in ("fail_class", "converge_frac")}
    return replace(workload, jobid=np.array([f"{j}~{k}" for j, k in zip(workload.jobid[index], position, strict=True)],
                                            dtype=object),
                   vc=workload.vc[index], user=workload.user[index], arrival_s=start + position * length + offset,
                   num_gpus=workload.num_gpus[index], service_s=workload.service_s[index], **optional,
                   source=f"{workload.source}; {block_days:g}-day periods resampled (seed {seed})")


def scale_load(workload: Workload, factor: float, anchor_s: float | None = None) -> Workload:
    """Inter-arrival times divided by ``factor`` (x2 = twice the jobs per hour); the arrival ``anchor_s`` stays
    (default: the first arrival)."""
    if not factor > 0:
        raise ValueError(f"load factor must be > 0, got {factor!r}")
    if factor == 1:
        return workload
    start = float(workload.arrival_s.min()) if anchor_s is None else float(anchor_s)
    return replace(workload, arrival_s=start + (workload.arrival_s - start) / factor,
                   source=f"{workload.source}; load x{factor:g}")


# --------------------------------------------------------------------------- measures


def _busy_shares(result, topology: Topology, window) -> tuple[float, float]:
    """Time-weighted mean shares of servers with a job and of GPUs allocated over ``window`` (simulated seconds).

    Each timeseries row holds until the next one; a mean over rows would weigh
    busy stretches, which have more events, more.
    """
    ts = result.timeseries
    t = ts["time_s"].to_numpy(float)
    if len(t) == 0:
        return float("nan"), float("nan")
    start = np.clip(t, window[0], window[1])
    end = np.clip(np.append(t[1:], max(window[1], t[-1])), window[0], window[1])
    weight = end - start
    if weight.sum() <= 0:
        return float("nan"), float("nan")
    busy = 1.0 - ts["idle_servers"].to_numpy(float) / topology.num_servers
    allocated = ts["allocated_gpus"].to_numpy(float) / topology.total_gpus
    return float(np.average(busy, weights=weight)), float(np.average(allocated, weights=weight))


def measure(result, workload: Workload, extras: dict | None = None, dates_window=None,
            measured: np.ndarray | None = None) -> pd.DataFrame:
    """Per size bucket (and ``all``) and population: delays, JCT, GPU time, speed, failures; plus cluster load.

    Rows: ``population`` ("all jobs", and "good jobs" when ``extras["good"]``
    marks the jobs without a failure), ``bucket``. Columns (times in seconds,
    GPU time in hours): jobs, rejected, jct_mean/p50/p95/p99, queue_mean/p95
    (first wait), wait_total_mean (every wait: the first and the re-queues after a preemption or a failure, which
    compares across preemptive and non-preemptive policies where the first wait does not), waited_share (share of
    the jobs that ran which waited for GPUs at all: behind other jobs, for a quota or cap, or for locality),
    frag_delay_mean (waiting with quota left but no placement meeting locality, back-off included, as the paper
    counts it),
    fair_share_delay_mean, gpu_hours (held), useful_share (GPU time of finished
    work at ideal speed / GPU time held), speed_mean (work at ideal speed / run time of jobs
    that finished with one run: slowdown from spread and colocation, migration
    pauses included; on a replay of real durations the work at ideal speed is the real duration times the
    speed of the job's real placement, ``extras["real_speed"]``), spread_share (first full attempt on > 1 server),
    failed_jobs, wasted_gpu_hours (failed attempts), prerun_gpu_hours, prerun_caught_jobs (a failure struck during
    the 1-GPU pre-run),
    quality_lost_mean (early stop), real_placement_record_share (the replay's slowdown: the share of the jobs whose
    real placement is their own DRE record's, the others' expected from DRE's per-size shares; NaN without
    ``extras["real_from_record"]``). Cluster columns, the same on every row:
    busy_server_share and allocated_gpu_share over the arrival span, and
    busy_server_share_dates over ``dates_window`` (NaN without one).
    ``measured``: only these jobs are counted, and the arrival span is theirs
    (the others warm the cluster up).
    """
    return measure_jobs(job_measures(result, workload, extras), result, workload, extras, dates_window, measured)


def job_measures(result, workload: Workload, extras: dict | None = None) -> pd.DataFrame:
    """The per-job values :func:`measure` sums up (one row per job): computed once per simulation, however many
    windows or blocks are measured on it."""
    extras = extras or {}
    jobs = result.jobs
    n = len(jobs)
    att = result.attempts
    gpu_s = (att["end_s"] - att["start_s"]) * att["num_gpus"]
    failed_s = gpu_s.where(att["outcome"] == "failed", 0.0).groupby(att["jobid"]).sum()
    prerun_s = gpu_s.where(att["prerun"], 0.0).groupby(att["jobid"]).sum()
    had_prerun = att.loc[att["prerun"], "jobid"].unique()
    caught_in_prerun = att.loc[att["prerun"] & (att["outcome"] == "failed"), "jobid"].unique()
    # the work at ideal speed: a replay of real durations charged relative to each job's real placement
    # (extras["real_speed"], :class:`dlcluster.sim.slowdown.ReplaySlowdown`) holds it at that placement's speed
    work = workload.service_s.astype(float) * np.asarray(extras.get("real_speed", 1.0), dtype=float)
    if workload.converge_frac is not None:
        work = work * np.where(jobs["early_stopped"].to_numpy(), workload.converge_frac, 1.0)
    passed = (jobs["status"] == "Pass").to_numpy()
    clean = passed & (jobs["num_failures"] == 0).to_numpy() & (jobs["num_preemptions"] == 0).to_numpy() \
        & ~jobs["jobid"].isin(had_prerun).to_numpy()
    frame = pd.DataFrame({
        "bucket": size_bucket(jobs["num_gpus"]).astype(str).to_numpy(),
        "ran": jobs["first_start_s"].notna().to_numpy(),
        "jct": jobs["jct_s"].to_numpy(float), "queue": jobs["queueing_delay_s"].to_numpy(float),
        "wait": jobs["wait_s"].to_numpy(float),
        # Table 2's fragmentation: the VC had the GPUs, no placement met the job's locality (a timer alone: not)
        "frag": jobs[SIM_CAUSE_COLUMNS["fragmentation"]].sum(axis=1).to_numpy(float),
        "fair": jobs["delay_fair_share_s"].to_numpy(float),
        "gpu_s": jobs["gpu_time_s"].to_numpy(float),
        "useful_s": np.where(passed, work * jobs["num_gpus"].to_numpy(), 0.0),
        "speed": np.where(clean, work / jobs["run_time_s"].where(jobs["run_time_s"] > 0).to_numpy(float), np.nan),
        "spread": (jobs["num_servers"].astype("Float64") > 1).astype("boolean").to_numpy(dtype=float, na_value=np.nan),
        "failed": (jobs["status"] == "Failed").to_numpy(),
        "wasted_s": failed_s.reindex(jobs["jobid"], fill_value=0.0).to_numpy(float),
        "prerun_s": prerun_s.reindex(jobs["jobid"], fill_value=0.0).to_numpy(float),
        "prerun_caught": jobs["jobid"].isin(caught_in_prerun).to_numpy(),
        "quality_lost": np.asarray(extras.get("quality_lost", np.full(n, np.nan)), dtype=float),
        # 1 where the job's real placement is its own DRE record's, 0 where DRE's per-size shares stand in for it
        "real_from_record": np.asarray(extras.get("real_from_record", np.full(n, np.nan)), dtype=float),
    })
    return frame


def measure_jobs(frame: pd.DataFrame, result, workload: Workload, extras: dict | None = None, dates_window=None,
                 measured: np.ndarray | None = None) -> pd.DataFrame:
    """:func:`measure` from the per-job values of :func:`job_measures` (``frame``)."""
    extras = extras or {}
    n = len(frame)
    counted = np.ones(n, dtype=bool) if measured is None else np.asarray(measured, dtype=bool)
    populations = [("all jobs", counted)]
    if "good" in extras:
        populations.append(("good jobs", counted & np.asarray(extras["good"], dtype=bool)))
    arrival = workload.arrival_s[counted]
    busy, allocated = _busy_shares(result, result.topology, (float(arrival.min()), float(arrival.max())))
    busy_dates = _busy_shares(result, result.topology, dates_window)[0] if dates_window else float("nan")
    rows = []
    for population, mask in populations:
        for bucket in BUCKETS:
            sel = frame[mask & ((frame["bucket"] == bucket).to_numpy() | (bucket == "all"))]
            ran = sel[sel["ran"]]
            rows.append({
                "population": population, "bucket": bucket, "jobs": len(sel), "rejected": int((~sel["ran"]).sum()),
                "jct_mean_s": ran["jct"].mean(), "jct_p50_s": _quantile(ran["jct"], 0.5),
                "jct_p95_s": _quantile(ran["jct"], 0.95), "jct_p99_s": _quantile(ran["jct"], 0.99),
                "queue_mean_s": ran["queue"].mean(), "queue_p95_s": _quantile(ran["queue"], 0.95),
                "wait_total_mean_s": ran["wait"].mean(),
                "waited_share": float((ran["queue"] > 0).mean()) if len(ran) else np.nan,
                "frag_delay_mean_s": ran["frag"].mean(), "fair_share_delay_mean_s": ran["fair"].mean(),
                "gpu_hours": sel["gpu_s"].sum() / 3600.0,
                "useful_share": sel["useful_s"].sum() / sel["gpu_s"].sum() if sel["gpu_s"].sum() > 0 else np.nan,
                "speed_mean": sel["speed"].mean(), "clean_jobs": int(sel["speed"].notna().sum()),
                "spread_share": ran["spread"].mean(),
                "failed_jobs": int(sel["failed"].sum()), "wasted_gpu_hours": sel["wasted_s"].sum() / 3600.0,
                "prerun_gpu_hours": sel["prerun_s"].sum() / 3600.0, "quality_lost_mean": sel["quality_lost"].mean(),
                "prerun_caught_jobs": int(sel["prerun_caught"].sum()),
                "real_placement_record_share": sel["real_from_record"].mean(),
                "busy_server_share": busy, "allocated_gpu_share": allocated, "busy_server_share_dates": busy_dates,
            })
    return pd.DataFrame(rows)


def _quantile(values: pd.Series, q: float) -> float:
    return float(values.quantile(q)) if len(values) else float("nan")


# --------------------------------------------------------------------------- calibration


def load_key(setting: str, factor: float) -> str:
    """A load setting as a results.json key part: 'real', 'calibrated' or 'x4'."""
    return setting if setting in ("real", "calibrated") else f"x{factor:g}".replace(".", "_")


def load_label(setting: str, factor: float) -> str:
    """How a load setting is named in figures and sentences."""
    if setting == "real":
        return "the real load (x1)"
    if setting == "calibrated":
        return f"the load calibrated to the real occupancy (x{factor:g})"
    return f"load x{factor:g} (scaled)"


# --------------------------------------------------------------------------- confidence intervals


def is_block_design(table: pd.DataFrame) -> bool:
    """Whether the rows are blocks of one replay per arm (the block design: ``block`` and ``seed`` = the block)
    rather than independent seeds."""
    return "block_days" in table.columns and bool((table["block_days"].fillna(0) > 0).any())


#: Metrics that are a sum over the block's jobs (pooled with equal weights, so a ratio of pooled values is a
#: ratio of sums) or a share of the cluster over the block's equal span.
SUM_METRICS = ("jobs", "rejected", "gpu_hours", "failed_jobs", "wasted_gpu_hours", "prerun_gpu_hours",
               "prerun_caught_jobs", "busy_server_share", "allocated_gpu_share", "busy_server_share_dates")


def metric_weights(rows: pd.DataFrame, metric: str) -> np.ndarray:
    """What each block's value of ``metric`` weighs when pooled: the jobs it is a mean over (the jobs that ran for a
    JCT, wait or share of jobs; the jobs that ran once without failure for a speed; every job for the quality
    lost), the GPU-hours for the useful share, 1 for a sum or a share of the cluster. Percentiles are pooled as
    the job-weighted mean of the blocks' percentiles (an approximation: a percentile is not a sum)."""
    if metric in SUM_METRICS:
        return np.ones(len(rows))
    if metric in ("useful_share", "wasted_share", "prerun_share"):
        return rows["gpu_hours"].to_numpy(float)
    if metric == "speed_mean" and "clean_jobs" in rows.columns:
        return rows["clean_jobs"].to_numpy(float)
    if metric == "quality_lost_mean":
        return rows["jobs"].to_numpy(float)
    return (rows["jobs"] - rows["rejected"]).to_numpy(float)


def level_interval(rows: pd.DataFrame, metric: str) -> Interval:
    """The value of ``metric`` over replicates and its 95% interval: pooled over the blocks with a block bootstrap
    on the block design (:func:`.intervals.pooled_interval`), else the mean over seeds on the metric's scale."""
    if is_block_design(rows):
        ordered = rows.sort_values("seed", kind="stable")
        return pooled_interval(ordered[metric], metric_weights(ordered, metric))
    return mean_interval(rows[metric], metric_quantity(metric))


def summarize(table: pd.DataFrame, by: list[str], metrics: list[str]) -> pd.DataFrame:
    """Value and 95% interval across replicates of each metric, per group (:func:`level_interval`): columns
    ``by + [metric, mean, ci_low, ci_high, n, method]``."""
    rows = []
    for key, group in table.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            ci = level_interval(group, metric)
            rows.append({**dict(zip(by, key, strict=True)), "metric": metric, "mean": ci.mean, "ci_low": ci.low,
                         "ci_high": ci.high, "n": ci.n, "method": ci.method})
    return pd.DataFrame(rows, columns=[*by, "metric", "mean", "ci_low", "ci_high", "n", "method"])


def paired_interval(after: pd.DataFrame, before: pd.DataFrame, metric: str, relative: bool = True) -> Interval:
    """The change of ``metric`` from ``before`` to ``after`` (rows of two arms, one per replicate ``seed``), paired by
    replicate: on the block design the pooled values' ratio (or difference) with a block bootstrap, else the per-seed
    ratios (:func:`.intervals.ratio_interval`) or differences."""
    a = after.groupby("seed", sort=True).first()
    b = before.groupby("seed", sort=True).first().reindex(a.index)
    if is_block_design(after):
        args = (a[metric], metric_weights(a, metric), b[metric], metric_weights(b, metric))
        return pooled_ratio_interval(*args) if relative else pooled_difference_interval(*args)
    return ratio_interval(a[metric], b[metric]) if relative else difference_interval(a[metric], b[metric])


def paired_change(table: pd.DataFrame, arm: str, baseline, metric: str, keys: list[str],
                  relative: bool = False) -> pd.DataFrame:
    """Change of ``metric`` against the baseline arm (same replicate and ``keys``) and its interval
    (:func:`paired_interval`).

    ``relative``: the change as a share of the baseline value (a reduction stays above -100%); else the paired
    difference in the metric's unit. Columns ``keys + [arm, mean, ci_low, ci_high, n, method, detectable]`` for
    every arm but the baseline.
    """
    rows = []
    base = table[table[arm] == baseline]
    others = table[table[arm] != baseline]
    for key, group in others.groupby([*keys, arm], sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        matched = base
        for column, value in zip(keys, key[:len(keys)], strict=True):
            matched = matched[matched[column] == value] if value == value else matched[matched[column].isna()]
        ci = paired_interval(group, matched, metric, relative)
        rows.append({**dict(zip([*keys, arm], key, strict=True)), "mean": ci.mean, "ci_low": ci.low,
                     "ci_high": ci.high, "n": ci.n, "method": ci.method, "detectable": ci.detectable})
    return pd.DataFrame(rows, columns=[*keys, arm, "mean", "ci_low", "ci_high", "n", "method", "detectable"])


# --------------------------------------------------------------------------- arms


@dataclass
class ArmCells:
    """What an experiment module's ``cells(spec, arms)`` lists its arms with (made by :func:`.grid.experiment_cells`).

    Each experiment owns its arms (the way Gavel keeps one file per policy): its module says which cells it runs and
    how each is simulated, and the grid only runs them. ``add(axes, fixed)`` appends the experiment's cells at its
    loads (every combination of ``axes``, each replicate seed); ``loads`` overrides those loads (the policies run at
    their own).
    """

    experiment: str
    add_cells: Callable
    loads: list
    resolve: Callable
    default_relax_s: float = 180.0
    interference_scenarios: dict = field(default_factory=dict)

    def add(self, axes: dict, fixed: dict | None = None, loads: list | None = None) -> None:
        self.add_cells(self.experiment, self.loads if loads is None else loads, axes, fixed)



def short_duration(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            value = seconds / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{seconds:g} s"


def arm_order(table: pd.DataFrame) -> list[str]:
    """Arms in grid order (the order cells were listed)."""
    return list(dict.fromkeys(table.sort_values("cell", kind="stable")["arm"]))


def load_order(table: pd.DataFrame) -> list[str]:
    """Load labels from the lightest to the heaviest."""
    return list(dict.fromkeys(table.sort_values(["load", "cell"], kind="stable")["load_label"]))


# --------------------------------------------------------------------------- per-experiment summaries

#: What each measured column means, for tables and axes.
METRIC_LABELS = {
    "queue_mean_s": "mean queueing delay", "wait_total_mean_s": "mean total queueing (every wait)",
    "jct_mean_s": "mean JCT", "jct_p99_s": "p99 JCT",
    "jct_p95_s": "p95 JCT", "useful_share": "useful share of GPU time", "speed_mean": "mean speed",
    "frag_delay_mean_s": "mean fragmentation delay", "spread_share": "share of jobs spread over servers",
    "waited_share": "share of jobs that ever waited for GPUs",
}
TIME_METRICS = {"queue_mean_s", "wait_total_mean_s", "jct_mean_s", "jct_p99_s", "jct_p95_s", "frag_delay_mean_s"}


def metric_quantity(metric: str) -> str:
    """What kind of quantity a measured column is, for its interval (:data:`.intervals.QUANTITIES`): times are
    durations; ``*_share`` columns and the speed (work over run time, never above 1) shares, so that their interval
    stays in [0, 1]; GPU-hours and quality losses positive; anything else real."""
    if metric in TIME_METRICS or metric.endswith("_s"):
        return "duration"
    if metric.endswith("_share") or metric.endswith("_share_dates") or metric == "speed_mean":
        return "share"
    if metric == "quality_lost_mean" or metric.endswith("gpu_hours") or metric.endswith("_jobs"):
        return "positive"
    return "real"


def rows_of(table: pd.DataFrame, experiment: str, population: str = "all jobs") -> pd.DataFrame:
    """One experiment's rows of the sweep table (with arms), for one population."""
    rows = table[(table["experiment"] == experiment) & (table["population"] == population)]
    if rows.empty:
        raise ValueError(f"the sweep table has no rows for experiment {experiment!r}, population {population!r}")
    return rows


# --------------------------------------------------------------------------- sentences


def paired_ratio(rows: pd.DataFrame, base_arm: str, arm: str, metric: str) -> Interval:
    """Relative change of ``metric`` from ``base_arm`` to ``arm`` over matched replicates
    (:func:`paired_interval`); no interval unless every replicate of ``arm`` has a ratio."""
    before, after = rows[rows["arm"] == base_arm], rows[rows["arm"] == arm]
    ci = paired_interval(after, before, metric)
    if ci.n < (2 if is_block_design(rows) else max(after["seed"].nunique(), 2)):
        return Interval(ci.mean, float("nan"), float("nan"), ci.n, ci.method)
    return ci


def paired_difference(rows: pd.DataFrame, base_arm: str, arm: str, metric: str) -> Interval:
    """The paired difference of ``metric`` from ``base_arm`` to ``arm`` in its unit (:func:`paired_interval`);
    no interval unless every replicate has a value, as :func:`paired_ratio`."""
    before, after = rows[rows["arm"] == base_arm], rows[rows["arm"] == arm]
    ci = paired_interval(after, before, metric, relative=False)
    if ci.n < (2 if is_block_design(rows) else max(after["seed"].nunique(), 2)):
        return Interval(ci.mean, float("nan"), float("nan"), ci.n, ci.method)
    return ci


def ratio_text(change: float, as_factor: bool = False) -> str:
    """A relative change as a signed percentage ('+12%', '−3%', '±0%'), or as a factor ('×14', '×0.8')."""
    if not np.isfinite(change):
        return "n/a"
    return f"×{change + 1:,.2g}" if as_factor else percent_text(change)


#: A mean duration below this is near zero, and a relative change on it is not shown (:func:`near_zero_reason`): a
#: minute is a few times the scheduler latency notebook 05 fits on the real waits (a median of seconds per job, not
#: minutes), and a ratio of two waits that short swings by factors on seconds no job running for hours notices.
NEAR_ZERO_DURATION_S = 60.0
#: A share below this (one point) is near zero in the same sense: its ratio is a ratio of a handful of jobs.
NEAR_ZERO_SHARE = 0.01
#: A ratio interval whose low end is below this change (x0.05) while its high end lies above no change reaches from
#: next to none of the quantity to more of it: the ratio resolves nothing ('×11 [95% CI ×0, ×34]').
RATIO_TOUCHES_ZERO = -0.95


def near_zero_reason(before: float, change: Interval | None, metric: str) -> str:
    """Why a relative change of ``metric`` from ``before`` says nothing ('' when it can be shown): the base is near
    zero (:data:`NEAR_ZERO_DURATION_S`, :data:`NEAR_ZERO_SHARE`), or the ratio's interval reaches from x0
    (:data:`RATIO_TOUCHES_ZERO`) past no change, or has no upper end."""
    quantity = metric_quantity(metric)
    if quantity == "duration" and np.isfinite(before) and before < NEAR_ZERO_DURATION_S:
        return f"a base under {NEAR_ZERO_DURATION_S:g} s, where a ratio swings by factors on seconds"
    if quantity == "share" and np.isfinite(before) and before < NEAR_ZERO_SHARE:
        return f"a base under {NEAR_ZERO_SHARE:.0%}, where a ratio is one of a handful of jobs"
    if change is not None and change.known and (
            (change.low <= RATIO_TOUCHES_ZERO and change.high > 0) or not np.isfinite(change.high)):
        return "the ratio's interval reaches from ×0 past no change"
    return ""


def difference_text(value: float, metric: str) -> str:
    """A signed difference in the metric's unit: '+12 s', '−1.5 h', '±0 s', '+0.4 points' (a share), '+0.012'."""
    if not np.isfinite(value):
        return "n/a"
    quantity = metric_quantity(metric)
    if quantity == "duration":
        shown = format_seconds(abs(value))
        return ("±" if shown == "0 s" else "+" if value > 0 else "−") + shown
    shown = f"{100 * value:.1f} points" if quantity == "share" else f"{value:.3g}"
    return ("±" if float(shown.split()[0]) == 0 else "+" if value > 0 else "−") + shown.lstrip("-")


def change_text(before: float, after: float, change: Interval | None = None, fmt=format_seconds,
                difference: Interval | None = None, metric: str = "", near_zero: str = "") -> str:
    """'2.1 h → 1.5 h, −29% [95% CI −35%, −22%], smallest detectable change ±9%': both values (``fmt``), and the
    paired relative change with its interval (and, on the block design, the smallest change the comparison could
    detect); as factors ('×14 [95% CI ×3, ×60]') where any of them is a doubling or more.

    ``near_zero`` (:func:`near_zero_reason`): no ratio; the paired ``difference`` in ``metric``'s unit with its
    interval instead ('0 s → 1 s, +1 s [95% CI ±0 s, +3 s]; a difference, not a ratio: a base under 60 s, ...'), or
    the two values alone when there is no difference to show."""
    text = f"{fmt(before)} → {fmt(after)}"
    if near_zero:
        if difference is not None and np.isfinite(difference.mean):
            text += f", {difference_text(difference.mean, metric)}"
            if difference.known:
                text += (f" [95% CI {difference_text(difference.low, metric)}, "
                         f"{difference_text(difference.high, metric)}]")
            text += f"; a difference, not a ratio: {near_zero}"
        else:
            text += f"; no ratio: {near_zero}"
        return text
    if change is not None and np.isfinite(change.mean):
        shown = [v for v in (change.mean, change.low, change.high) if np.isfinite(v)]
        as_factor = max(shown) >= 1.0
        text += f", {ratio_text(change.mean, as_factor)}"
        if change.known:
            text += f" [95% CI {ratio_text(change.low, as_factor)}, {ratio_text(change.high, as_factor)}]"
        if np.isfinite(change.detectable):
            text += f", smallest detectable change ±{100 * change.detectable:.0f}%"
    return text


def arm_change(rows: pd.DataFrame, base_arm: str, arm: str, metric: str, fmt=format_seconds) -> tuple[str, Interval]:
    """``arm`` against ``base_arm`` in words (:func:`change_text`) and the interval a direction is named from: the
    relative change (:func:`paired_ratio`), or, on a near-zero base (:func:`near_zero_reason`), the paired
    difference."""
    before, after = (mean_where(rows, metric, arm=a) for a in (base_arm, arm))
    ci = paired_ratio(rows, base_arm, arm, metric)
    near_zero = near_zero_reason(before, ci, metric)
    if not near_zero:
        return change_text(before, after, ci, fmt), ci
    difference = paired_difference(rows, base_arm, arm, metric)
    return change_text(before, after, ci, fmt, difference, metric, near_zero), difference


def compare_arms(rows: pd.DataFrame, base_arm: str, arm: str, metric: str, what: str, fmt=format_seconds,
                 up: str = "raised", down: str = "cut") -> str:
    """'cut their mean JCT (2.1 d → 1.5 d, −29% [95% CI −35%, −22%])', or 'made no significant difference at 3
    seeds to their mean JCT (...)': ``arm`` against ``base_arm`` in ``rows``, paired by seed
    (:func:`arm_change`), the direction named only outside the interval (:func:`.intervals.changed`)."""
    text, ci = arm_change(rows, base_arm, arm, metric, fmt)
    return f"{changed(ci, what, up, down)} ({text})"


def judged_change(rows: pd.DataFrame, base_arm: str, arm: str, metric: str, fmt=format_seconds,
                  up: str = "higher", down: str = "lower") -> str:
    """'2.1 d → 1.5 d, −29% [95% CI −35%, −22%]: lower', or '...: no significant difference at 3 seeds'."""
    text, ci = arm_change(rows, base_arm, arm, metric, fmt)
    return f"{text}: {direction(ci, up, down)}"


def percent_text(share: float, digits: int = 0) -> str:
    """A signed percentage with ``digits`` decimals: '+12%', '−3%', '−2.4%', '±0%'."""
    value = round(100 * share, digits)
    return "±0%" if value == 0 else f"{value:+.{digits}f}%".replace("-", "−")


def mean_where(rows: pd.DataFrame, metric: str, **where) -> float:
    sel = rows
    for column, value in where.items():
        sel = sel[sel[column] == value]
    if len(sel) and is_block_design(sel) and not sel["seed"].duplicated().any():
        return level_interval(sel, metric).mean   # pooled over the blocks, as its interval is
    return float(sel[metric].mean()) if len(sel) else float("nan")


def focus_bucket(rows: pd.DataFrame, candidates=("5-8", ">8", "2-4")) -> str:
    """The first of ``candidates`` with jobs in these rows (by default 5-8 GPUs: the largest gangs that fit on
    one server, so the ones locality and fragmentation matter most for)."""
    present = rows[rows["jobs"] > 0]["bucket"].unique()
    for bucket in candidates:
        if bucket in present:
            return bucket
    return "all"


def arm_means(rows: pd.DataFrame, metric: str) -> pd.Series:
    """Each arm's value of ``metric`` over its replicates, in the order of the rows: pooled over the blocks on the
    block design (:func:`level_interval`), else the mean over seeds."""
    if is_block_design(rows):
        return pd.Series({arm: level_interval(part, metric).mean
                          for arm, part in rows.groupby("arm", sort=False)}, dtype=float)
    return rows.groupby("arm", sort=False)[metric].mean()


def best_arm(rows: pd.DataFrame, metric: str, exclude=()) -> tuple[str | None, float]:
    """The arm with the lowest ``metric`` (:func:`arm_means`) and that value; equal values (to
    :data:`~dlcluster.ordering.DECISION_DIGITS` digits) go to the arm that comes first in the rows."""
    means = arm_means(rows[~rows["arm"].isin(exclude)], metric).dropna()
    if not len(means):
        return None, float("nan")
    rounded = means.map(decision_value)
    best = rounded.index[int(np.flatnonzero(rounded.to_numpy() == rounded.min())[0])]
    return best, float(means[best])


# --------------------------------------------------------------------------- figures


