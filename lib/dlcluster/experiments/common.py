"""What the five experiments share: inputs, resampling and load scaling, measures, confidence intervals, wording."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats

from ..analysis.delays import format_seconds
from ..sim import (
    Topology,
    Workload,
    quotas_from_table,
    topology_from_machines,
    workload_from_trace,
)
from ..trace.schema import BUCKET_KEYS as SIZE_BUCKET_KEYS
from ..trace.schema import SIZE_BUCKETS, size_bucket

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
    #: simulator options every cell starts from (the validated replay: its calibrated lending and placement)
    options: dict = field(default_factory=dict)
    #: options of the Philly policy (the validated replay: its calibrated locality and relax timeout)
    philly: dict = field(default_factory=dict)
    #: the jobs measured (None: all); the others only warm the cluster up
    measured: np.ndarray | None = None
    #: load scaling keeps this arrival time fixed (None: the first arrival)
    anchor_s: float | None = None
    #: how well the replay was validated (held-out figures), None for an unvalidated replay
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
        kept = {name for name, rack in zip(topology.server_names, topology.server_rack) if rack < racks}
        smaller = topology_from_machines(tr.machines[tr.machines["machine"].isin(kept)])
        quotas = {vc: int(round(q * smaller.total_gpus / topology.total_gpus)) for vc, q in quotas.items()}
        topology = smaller
    occ = tr.occupancy[tr.occupancy["total"] > 0]
    label = tr.describe_source("pollux")["label"] if trace == "public" else f"trace {trace!r}"
    return Inputs(workload=workload, topology=topology, quotas=quotas,
                  real_occupancy=float((occ["active"] / occ["total"]).mean()),
                  occupancy_window=(occ["time"].min(), occ["time"].max()), data_label=label)


@dataclass(frozen=True)
class ValidatedReplay:
    """Experiments on the validated replay: the calibration's inputs (notebook 05's) and the measurement windows.

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
    calibration_trials: int = 60            # the calibration's search (dlcluster.validation.calibration)
    window_days: float = 10.0
    window_warmup_days: float = 14.0
    vc_seed: int = 0                        # VC draws for RFold jobs no data names a VC for

    def cell(self) -> dict:
        """JSON form (a cell parameter)."""
        return json.loads(json.dumps(asdict(self)))

    @classmethod
    def from_cell(cls, value: dict) -> "ValidatedReplay":
        return cls(**value)

    def calibration(self, trace: str, cache_dir=None):
        """The cached calibration these experiments run on (:func:`dlcluster.validation.calibration.calibrated_params`)."""
        from ..validation.calibration import calibrated_params
        return calibrated_params(trace, self.fit_days, self.vc_seed, None, self.calibration_trials,
                                 self.replay_days, self.warmup_days, cache_dir=cache_dir)


@functools.lru_cache(maxsize=8)
def validated_inputs(trace: str, spec: ValidatedReplay, window: int, cache_dir: str | None = None) -> Inputs:
    """Measurement window ``window`` of the validated RFold replay, set up as the calibration set it up.

    Machines in the calibrated rack size, the calibrated quotas (those of the
    VCs without a public node count shared by the calibration's workload),
    lending and placement as simulator options, Philly's calibrated locality
    and relax timeout, the scheduler latency added to every arrival
    (:func:`dlcluster.validation.calibrate.replay_setup`). At the real arrival rate.
    """
    from ..validation.calibrate import real_occupancy, replay_setup
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
    label = (f"window {window}: jobs submitted {begin:%Y-%m-%d %H:%M}..{end:%Y-%m-%d %H:%M} UTC of the validated "
             f"replay of RFold's real jobs ({len(calibration.full_replay.workload):,}, every status)")
    return Inputs(workload=w, topology=setup.topology, quotas=setup.quotas, real_occupancy=float(real.mean()),
                  occupancy_window=(begin, end), data_label=label,
                  options=dict(setup.options),   # lending, placement, and no slowdown model: the real durations hold it
                  philly={"locality": params.locality, "relax_after_s": params.relax_after_s, "backoff": params.backoff},
                  measured=(submitted_s >= start_s) & (submitted_s < end_s), anchor_s=start_s + float(np.median(setup.latency_s)),
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
    return replace(workload, jobid=np.array([f"{j}~{k}" for j, k in zip(workload.jobid[index], position)],
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
    failed_jobs, wasted_gpu_hours (failed attempts), prerun_gpu_hours,
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


def seed_ci(values, confidence: float = 0.95, method: str = "t", n_boot: int = 2000, seed: int = 0):
    """Mean and confidence interval of per-seed values: Student t (``"t"``) or percentile bootstrap.

    Returns ``(mean, low, high, n)``; the interval is NaN with fewer than 2 values
    (or collapses to the mean when all values are equal).
    """
    v = pd.Series(values, dtype="float64").dropna().to_numpy()
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), float("nan"), 0
    mean = float(v.mean())
    if n < 2:
        return mean, float("nan"), float("nan"), n
    if method == "t":
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1) * v.std(ddof=1) / math.sqrt(n))
        return mean, mean - half, mean + half, n
    if method == "bootstrap":
        means = np.random.default_rng(seed).choice(v, size=(n_boot, n), replace=True).mean(axis=1)
        low, high = np.quantile(means, [(1 - confidence) / 2, (1 + confidence) / 2])
        return mean, float(low), float(high), n
    raise ValueError(f"method must be 't' or 'bootstrap', got {method!r}")


def summarize(table: pd.DataFrame, by: list[str], metrics: list[str], method: str = "t") -> pd.DataFrame:
    """Mean and CI across seeds of each metric, per group: columns ``by + [metric, mean, ci_low, ci_high, n]``."""
    rows = []
    for key, group in table.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        for metric in metrics:
            mean, low, high, n = seed_ci(group[metric], method=method)
            rows.append({**dict(zip(by, key)), "metric": metric, "mean": mean, "ci_low": low, "ci_high": high,
                         "n": n})
    return pd.DataFrame(rows, columns=[*by, "metric", "mean", "ci_low", "ci_high", "n"])


def paired_change(table: pd.DataFrame, arm: str, baseline, metric: str, keys: list[str],
                  relative: bool = False, method: str = "t") -> pd.DataFrame:
    """Per-seed change of ``metric`` against the baseline arm (same seed and ``keys``), then its mean and CI.

    ``relative``: the change as a share of the baseline value. Columns
    ``keys + [arm, mean, ci_low, ci_high, n]`` for every arm but the baseline.
    """
    base = table[table[arm] == baseline].set_index([*keys, "seed"])[metric]
    rows = []
    others = table[table[arm] != baseline]
    for key, group in others.groupby([*keys, arm], sort=False, dropna=False):
        values = group.set_index([*keys, "seed"])[metric]
        matched = base.reindex(values.index)
        change = values - matched
        if relative:
            change = (change / matched).replace([np.inf, -np.inf], np.nan)
        mean, low, high, n = seed_ci(change, method=method)
        rows.append({**dict(zip([*keys, arm], key)), "mean": mean, "ci_low": low, "ci_high": high, "n": n})
    return pd.DataFrame(rows, columns=[*keys, arm, "mean", "ci_low", "ci_high", "n"])


# --------------------------------------------------------------------------- arms


def short_duration(seconds: float) -> str:
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            value = seconds / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{seconds:g} s"


def arm_order(table: pd.DataFrame) -> list[str]:
    """Arms in grid order (the order cells were listed)."""
    return list(dict.fromkeys(table.sort_values("cell")["arm"]))


def load_order(table: pd.DataFrame) -> list[str]:
    """Load labels from the lightest to the heaviest."""
    return list(dict.fromkeys(table.sort_values(["load", "cell"])["load_label"]))


# --------------------------------------------------------------------------- per-experiment summaries

#: What each measured column means, for tables and axes.
METRIC_LABELS = {
    "queue_mean_s": "mean queueing delay", "jct_mean_s": "mean JCT", "jct_p99_s": "p99 JCT",
    "jct_p95_s": "p95 JCT", "useful_share": "useful share of GPU time", "speed_mean": "mean speed",
    "frag_delay_mean_s": "mean fragmentation delay", "spread_share": "share of jobs spread over servers",
    "waited_share": "share of jobs that ever waited for GPUs",
}
TIME_METRICS = {"queue_mean_s", "jct_mean_s", "jct_p99_s", "jct_p95_s", "frag_delay_mean_s"}


def rows_of(table: pd.DataFrame, experiment: str, population: str = "all jobs") -> pd.DataFrame:
    """One experiment's rows of the sweep table (with arms), for one population."""
    rows = table[(table["experiment"] == experiment) & (table["population"] == population)]
    if rows.empty:
        raise ValueError(f"the sweep table has no rows for experiment {experiment!r}, population {population!r}")
    return rows


# --------------------------------------------------------------------------- sentences


def change_verb(before: float, after: float, up: str = "raised", down: str = "cut", rel_tol: float = 0.005) -> str:
    """How ``after`` compares with ``before``: up, down or 'left unchanged' (within ``rel_tol``)."""
    if not (np.isfinite(before) and np.isfinite(after)):
        return "changed (not computable)"
    if abs(after - before) <= rel_tol * max(abs(before), abs(after), 1e-12):
        return "left unchanged"
    return up if after > before else down


def paired_ci(rows: pd.DataFrame, base_arm: str, arm: str, metric: str,
            relative: bool = True) -> tuple[float, float, float]:
    """Change of ``metric`` from ``base_arm`` to ``arm`` over matched seeds (relative, or in the metric's
    unit): mean, CI low, CI high; NaN where a seed has no value (or a zero baseline, for a relative change)."""
    part = rows[rows["arm"].isin([base_arm, arm])]
    change = paired_change(part, "arm", base_arm, metric, [], relative=relative)
    seeds = part.loc[part["arm"] == arm, "seed"].nunique()
    if change.empty or change.iloc[0]["n"] < max(seeds, 2):
        return float("nan"), float("nan"), float("nan")
    row = change.iloc[0]
    return float(row["mean"]), float(row["ci_low"]), float(row["ci_high"])


def signed_duration(seconds: float) -> str:
    return ("+" if seconds >= 0 else "−") + format_seconds(abs(seconds))


def delay_change_text(before: float, after: float, paired) -> str:
    """'1.0 min → 1.1 h, +1.1 h [95% CI +20.0 min, +1.9 h]': a change of a delay, in time (delays can be 0)."""
    text = f"{format_seconds(before)} → {format_seconds(after)}"
    mean, low, high = paired
    if np.isfinite(mean):
        text += f", {signed_duration(mean)}"
        if np.isfinite(low) and np.isfinite(high):
            text += f" [95% CI {signed_duration(low)}, {signed_duration(high)}]"
    return text


def change_text(before: float, after: float, paired=None) -> str:
    """'2.1 h → 1.5 h, −29% [95% CI −35%, −22%]': both means, and the paired relative change where known."""
    text = f"{format_seconds(before)} → {format_seconds(after)}"
    mean, low, high = paired if paired is not None else (float("nan"),) * 3
    if not np.isfinite(mean) and np.isfinite(before) and np.isfinite(after) and before > 0:
        mean = (after - before) / before
    if np.isfinite(mean):
        text += f", {percent_text(mean)}"
        if np.isfinite(low) and np.isfinite(high):
            text += f" [95% CI {percent_text(low)}, {percent_text(high)}]"
    return text


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
    means = rows[~rows["arm"].isin(exclude)].groupby("arm", sort=False)[metric].mean().dropna()
    return (means.idxmin(), float(means.min())) if len(means) else (None, float("nan"))


# --------------------------------------------------------------------------- figures


