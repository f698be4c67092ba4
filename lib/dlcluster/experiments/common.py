"""What the five experiments share: inputs, resampling and load scaling, measures, confidence intervals, wording."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd

from ..analysis.delays import format_seconds
from ..ordering import decision_value
from ..sim import (
    Topology,
    Workload,
    quotas_from_table,
    topology_from_machines,
    workload_from_trace,
)
from ..trace.schema import BUCKET_KEYS as SIZE_BUCKET_KEYS
from ..trace.schema import SIZE_BUCKETS, size_bucket
from .intervals import Interval, changed, difference_interval, direction, mean_interval, ratio_interval

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
    """Experiments on the calibrated replay: the calibration's inputs (notebook 05's) and the measurement windows.

    Cell ``seed`` ``k`` measures the jobs submitted in the ``k``-th window of
    ``window_days`` from the start of the held-out span (the part of the real
    record the calibration never saw), warm-started ``window_warmup_days``
    before; the seed also drives the failure and convergence draws. Windows
    must end before RFold's completeness horizon (where it still holds the
    whole demand).
    """

    fit_days: float = 35
    replay_days: float | None = None
    warmup_days: float | None = None        # the calibration's warm-up (None: every RFold job)
    calibration_trials: int = 24            # the calibration's search (dlcluster.validation.calibration.DEFAULT_TRIALS)
    window_days: float = 10.0
    window_warmup_days: float = 14.0
    vc_seed: int = 0                        # VC draws for RFold jobs no data names a VC for

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
def replay_window_inputs(trace: str, spec: CalibratedReplay, window: int, cache_dir: str | None = None) -> Inputs:
    """Measurement window ``window`` of the calibrated RFold replay, set up as the calibration set it up.

    Machines in the calibrated rack size, the calibrated quotas (those of the
    VCs without a public node count shared by the calibration's workload),
    lending and placement as simulator options, Philly's calibrated locality
    and relax timeout, the scheduler latency added to every arrival
    (:func:`dlcluster.validation.calibrate.replay_setup`). At the real arrival rate.
    """
    from ..validation.calibrate import replay_setup
    from ..validation.measures import real_occupancy
    from ..validation.workload import measurement_window

    calibration = spec.calibration(trace, cache_dir)
    tr = cached_trace(trace)
    # measured where the replay holds the whole real demand: the held-out span up to RFold's completeness horizon
    held_begin = calibration.spans["held_out"][0]
    held_end = min(calibration.spans["held_out"][1], calibration.held_out["complete_until"])
    if int(window) != window or window < 0:
        raise ValueError(f"window (the cell's seed) must be a non-negative integer, got {window!r}")
    begin = held_begin + pd.Timedelta(days=spec.window_days * window)
    end = begin + pd.Timedelta(days=spec.window_days)
    if end > held_end:
        raise ValueError(f"measurement window {window} ({begin:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M}) ends after the "
                         f"held-out span up to RFold's completeness horizon ({held_begin:%Y-%m-%d %H:%M}.."
                         f"{held_end:%Y-%m-%d %H:%M}): use fewer seeds or a shorter window_days")
    replay = measurement_window(calibration.full_replay, begin, spec.window_days, spec.window_warmup_days)
    params = calibration.params
    setup = replay_setup(replay, tr.machines, tr.vc_quotas, params, quota_workload=calibration.replay.workload)
    w = setup.workload
    # measured: the jobs submitted in the window (by their real submit, before the scheduler latency)
    start_s = (begin - w.epoch) / pd.Timedelta(seconds=1)
    end_s = (end - w.epoch) / pd.Timedelta(seconds=1)
    submitted_s = replay.workload.arrival_s
    real = real_occupancy(tr.occupancy)
    real = real[(real.index >= begin) & (real.index < end)]
    label = (f"window {window}: jobs submitted {begin:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M} UTC of the calibrated "
             f"replay of RFold's real jobs ({len(calibration.full_replay.workload):,}, every status)")
    return Inputs(workload=w, topology=setup.topology, quotas=setup.quotas, real_occupancy=float(real.mean()),
                  occupancy_window=(begin, end), data_label=label,
                  options=dict(setup.options),   # lending, placement, and no slowdown model: the real durations hold it
                  philly={"locality": params.locality, "relax_after_s": params.relax_after_s,
                          "backoff": params.backoff, "gang_relax_after_s": params.gang_relax_after_s},
                  measured=(submitted_s >= start_s) & (submitted_s < end_s),
                  anchor_s=start_s + float(np.median(setup.latency_s)),
                  validation=calibration.summary())


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
    (first wait), waited_share (share of the jobs that ran which waited for GPUs at all: behind other jobs, for
    a quota or cap, or for locality), frag_delay_mean (waiting with quota left but no placement
    meeting locality, back-off included, as the paper counts it),
    fair_share_delay_mean, gpu_hours (held), useful_share (GPU time of finished
    work at ideal speed / GPU time held), speed_mean (work / run time of jobs
    that finished with one run: slowdown from spread and colocation, migration
    pauses included), spread_share (first full attempt on > 1 server),
    failed_jobs, wasted_gpu_hours (failed attempts), prerun_gpu_hours, prerun_caught_jobs (a failure struck during
    the 1-GPU pre-run),
    quality_lost_mean (early stop). Cluster columns, the same on every row:
    busy_server_share and allocated_gpu_share over the arrival span, and
    busy_server_share_dates over ``dates_window`` (NaN without one).
    ``measured``: only these jobs are counted, and the arrival span is theirs
    (the others warm the cluster up).
    """
    extras = extras or {}
    jobs = result.jobs
    n = len(jobs)
    att = result.attempts
    gpu_s = (att["end_s"] - att["start_s"]) * att["num_gpus"]
    failed_s = gpu_s.where(att["outcome"] == "failed", 0.0).groupby(att["jobid"]).sum()
    prerun_s = gpu_s.where(att["prerun"], 0.0).groupby(att["jobid"]).sum()
    had_prerun = att.loc[att["prerun"], "jobid"].unique()
    caught_in_prerun = att.loc[att["prerun"] & (att["outcome"] == "failed"), "jobid"].unique()
    work = workload.service_s.astype(float)
    if workload.converge_frac is not None:
        work = work * np.where(jobs["early_stopped"].to_numpy(), workload.converge_frac, 1.0)
    passed = (jobs["status"] == "Pass").to_numpy()
    clean = passed & (jobs["num_failures"] == 0).to_numpy() & (jobs["num_preemptions"] == 0).to_numpy() \
        & ~jobs["jobid"].isin(had_prerun).to_numpy()
    frame = pd.DataFrame({
        "bucket": size_bucket(jobs["num_gpus"]).astype(str).to_numpy(),
        "ran": jobs["first_start_s"].notna().to_numpy(),
        "jct": jobs["jct_s"].to_numpy(float), "queue": jobs["queueing_delay_s"].to_numpy(float),
        "frag": (jobs["delay_fragmentation_s"] + jobs["delay_backoff_s"]).to_numpy(float),
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
    })
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
                "waited_share": float((ran["queue"] > 0).mean()) if len(ran) else np.nan,
                "frag_delay_mean_s": ran["frag"].mean(), "fair_share_delay_mean_s": ran["fair"].mean(),
                "gpu_hours": sel["gpu_s"].sum() / 3600.0,
                "useful_share": sel["useful_s"].sum() / sel["gpu_s"].sum() if sel["gpu_s"].sum() > 0 else np.nan,
                "speed_mean": sel["speed"].mean(), "spread_share": ran["spread"].mean(),
                "failed_jobs": int(sel["failed"].sum()), "wasted_gpu_hours": sel["wasted_s"].sum() / 3600.0,
                "prerun_gpu_hours": sel["prerun_s"].sum() / 3600.0, "quality_lost_mean": sel["quality_lost"].mean(),
                "prerun_caught_jobs": int(sel["prerun_caught"].sum()),
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


def summarize(table: pd.DataFrame, by: list[str], metrics: list[str]) -> pd.DataFrame:
    """Mean and 95% interval across seeds of each metric, per group, on the metric's own scale
    (:func:`metric_quantity`, :func:`.intervals.mean_interval`): columns ``by + [metric, mean, ci_low, ci_high, n,
    method]``."""
    rows = []
    for key, group in table.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            ci = mean_interval(group[metric], metric_quantity(metric))
            rows.append({**dict(zip(by, key, strict=True)), "metric": metric, "mean": ci.mean, "ci_low": ci.low,
                         "ci_high": ci.high, "n": ci.n, "method": ci.method})
    return pd.DataFrame(rows, columns=[*by, "metric", "mean", "ci_low", "ci_high", "n", "method"])


def paired_change(table: pd.DataFrame, arm: str, baseline, metric: str, keys: list[str],
                  relative: bool = False) -> pd.DataFrame:
    """Per-seed change of ``metric`` against the baseline arm (same seed and ``keys``), then its mean and interval.

    ``relative``: the change as a share of the baseline value, on the log scale of the per-seed ratios
    (:func:`.intervals.ratio_interval`: a reduction stays above -100%); else the paired difference in the
    metric's unit (:func:`.intervals.difference_interval`). Columns ``keys + [arm, mean, ci_low, ci_high, n,
    method]`` for every arm but the baseline.
    """
    base = table[table[arm] == baseline].set_index([*keys, "seed"])[metric]
    rows = []
    others = table[table[arm] != baseline]
    for key, group in others.groupby([*keys, arm], sort=False, dropna=False):
        values = group.set_index([*keys, "seed"])[metric]
        matched = base.reindex(values.index)
        ci = ratio_interval(values, matched) if relative else difference_interval(values, matched)
        rows.append({**dict(zip([*keys, arm], key, strict=True)), "mean": ci.mean, "ci_low": ci.low,
                     "ci_high": ci.high, "n": ci.n, "method": ci.method})
    return pd.DataFrame(rows, columns=[*keys, arm, "mean", "ci_low", "ci_high", "n", "method"])


# --------------------------------------------------------------------------- arms


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
    "queue_mean_s": "mean queueing delay", "jct_mean_s": "mean JCT", "jct_p99_s": "p99 JCT",
    "jct_p95_s": "p95 JCT", "useful_share": "useful share of GPU time", "speed_mean": "mean speed",
    "frag_delay_mean_s": "mean fragmentation delay", "spread_share": "share of jobs spread over servers",
    "waited_share": "share of jobs that ever waited for GPUs",
}
TIME_METRICS = {"queue_mean_s", "jct_mean_s", "jct_p99_s", "jct_p95_s", "frag_delay_mean_s"}


def metric_quantity(metric: str) -> str:
    """What kind of quantity a measured column is, for its interval (:data:`.intervals.QUANTITIES`): times are
    durations, ``*_share`` columns shares, GPU-hours, speeds and quality losses positive; anything else real."""
    if metric in TIME_METRICS or metric.endswith("_s"):
        return "duration"
    if metric.endswith("_share") or metric.endswith("_share_dates"):
        return "share"
    if metric in ("speed_mean", "quality_lost_mean") or metric.endswith("gpu_hours") or metric.endswith("_jobs"):
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
    """Relative change of ``metric`` from ``base_arm`` to ``arm`` over matched seeds
    (:func:`.intervals.ratio_interval`); no interval unless every seed of ``arm`` has a ratio."""
    part = rows[rows["arm"].isin([base_arm, arm])]
    base = part[part["arm"] == base_arm].groupby("seed")[metric].mean()
    other = part[part["arm"] == arm].groupby("seed")[metric].mean()
    ci = ratio_interval(other, base.reindex(other.index))
    if ci.n < max(len(other), 2):
        return Interval(ci.mean, float("nan"), float("nan"), ci.n, ci.method)
    return ci


def ratio_text(change: float, as_factor: bool = False) -> str:
    """A relative change as a signed percentage ('+12%', '−3%', '±0%'), or as a factor ('×14', '×0.8')."""
    if not np.isfinite(change):
        return "n/a"
    return f"×{change + 1:,.2g}" if as_factor else percent_text(change)


def change_text(before: float, after: float, change: Interval | None = None, fmt=format_seconds) -> str:
    """'2.1 h → 1.5 h, −29% [95% CI −35%, −22%]': both means (``fmt``), and the paired relative change with its
    interval; as factors ('×14 [95% CI ×3, ×60]') where any of them is a doubling or more."""
    text = f"{fmt(before)} → {fmt(after)}"
    if change is not None and np.isfinite(change.mean):
        shown = [v for v in (change.mean, change.low, change.high) if np.isfinite(v)]
        as_factor = max(shown) >= 1.0
        text += f", {ratio_text(change.mean, as_factor)}"
        if change.known:
            text += f" [95% CI {ratio_text(change.low, as_factor)}, {ratio_text(change.high, as_factor)}]"
    return text


def compare_arms(rows: pd.DataFrame, base_arm: str, arm: str, metric: str, what: str, fmt=format_seconds,
                 up: str = "raised", down: str = "cut") -> str:
    """'cut their mean JCT (2.1 d → 1.5 d, −29% [95% CI −35%, −22%])', or 'made no significant difference at 3
    seeds to their mean JCT (...)': ``arm`` against ``base_arm`` in ``rows``, paired by seed
    (:func:`paired_ratio`), the direction named only outside the interval (:func:`.intervals.changed`)."""
    before, after = (mean_where(rows, metric, arm=a) for a in (base_arm, arm))
    ci = paired_ratio(rows, base_arm, arm, metric)
    return f"{changed(ci, what, up, down)} ({change_text(before, after, ci, fmt)})"


def judged_change(rows: pd.DataFrame, base_arm: str, arm: str, metric: str, fmt=format_seconds,
                  up: str = "higher", down: str = "lower") -> str:
    """'2.1 d → 1.5 d, −29% [95% CI −35%, −22%]: lower', or '...: no significant difference at 3 seeds'."""
    before, after = (mean_where(rows, metric, arm=a) for a in (base_arm, arm))
    ci = paired_ratio(rows, base_arm, arm, metric)
    return f"{change_text(before, after, ci, fmt)}: {direction(ci, up, down)}"


def percent_text(share: float) -> str:
    """A signed whole percentage: '+12%', '−3%', '±0%'."""
    value = round(100 * share)
    return "±0%" if value == 0 else f"{value:+d}%".replace("-", "−")


def mean_where(rows: pd.DataFrame, metric: str, **where) -> float:
    sel = rows
    for column, value in where.items():
        sel = sel[sel[column] == value]
    return float(sel[metric].mean()) if len(sel) else float("nan")


def focus_bucket(rows: pd.DataFrame, candidates=("5-8", ">8", "2-4")) -> str:
    """The first of ``candidates`` with jobs in these rows (by default 5-8 GPUs: the largest gangs that fit on
    one server, so the ones locality and fragmentation matter most for)."""
    present = rows[rows["jobs"] > 0]["bucket"].unique()
    for bucket in candidates:
        if bucket in present:
            return bucket
    return "all"


def best_arm(rows: pd.DataFrame, metric: str, exclude=()) -> tuple[str | None, float]:
    """The arm with the lowest mean ``metric`` and that mean; equal means (to :data:`~dlcluster.ordering.
    DECISION_DIGITS` digits) go to the arm that comes first in the rows."""
    means = rows[~rows["arm"].isin(exclude)].groupby("arm", sort=False)[metric].mean().dropna()
    if not len(means):
        return None, float("nan")
    rounded = means.map(decision_value)
    best = rounded.index[int(np.flatnonzero(rounded.to_numpy() == rounded.min())[0])]
    return best, float(means[best])


# --------------------------------------------------------------------------- figures


