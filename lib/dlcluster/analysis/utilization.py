"""GPU and host utilization of jobs (section 3.2 of the study: Figures 5-6, Table 3).

Two kinds of input carry per-minute utilization, and the samples that count as
"the job's" are found differently in each:

* the public DRE windows (trace ``"public"``, column ``minute``): per-GPU minutes
  relative to each job's start, -10..3. Only minutes >= 0 are after the start, so
  a job contributes at most 4 minutes per GPU, early in its run (start-up
  included) -- see :func:`minutes_per_job`;
* the full trace (trace ``"philly"``, column ``time``): per-GPU minutes with
  absolute times. A sample belongs to an attempt when its GPU is in the
  attempt's placement and ``start <= time < end``; every minute of every attempt
  counts. The join is one ``merge_asof`` per table (no loop over minutes).

Nothing is dropped silently: every function that filters returns a ``dropped``
table (``table``, ``reason``, ``rows``), zero counts included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

TABLE3_SIZES = (1, 4, 8, 16)
DEFAULT_GRID = np.linspace(0.0, 100.0, 201)
# Stand-in end for an attempt still running at the end of the trace.
_OPEN_END = pd.Timestamp("2262-01-01", tz="UTC")
_TIME_DTYPE = "datetime64[ns, UTC]"  # one resolution on both sides of merge_asof

SAMPLE_COLUMNS = ["jobid", "attempt", "machine", "gpu", "minute", "time", "util", "num_gpus", "status"]
HOST_SAMPLE_COLUMNS = ["jobid", "attempt", "machine", "minute", "time", "cpu_util", "mem_util",
                       "num_gpus", "status"]


@dataclass(frozen=True)
class Samples:
    """Utilization minutes attributed to jobs, with what was left out and why.

    ``basis`` is ``"window"`` (minutes relative to start, public DRE data) or
    ``"time"`` (absolute minutes joined to attempts, full trace).
    """

    frame: pd.DataFrame
    dropped: pd.DataFrame
    basis: str


class _Drops:
    """Counts of rows left out, by table and reason (zero counts kept: they say 'checked')."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, int]] = []

    def add(self, table: str, reason: str, mask_or_count) -> None:
        count = int(np.sum(mask_or_count)) if not np.isscalar(mask_or_count) else int(mask_or_count)
        self.rows.append((table, reason, count))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["table", "reason", "rows"])


def utilization_basis(util: pd.DataFrame, table: str = "gpu_util") -> str:
    """``"window"`` if ``util`` holds minutes relative to job start, ``"time"`` if absolute times."""
    has_minute = "minute" in util.columns and util["minute"].notna().any()
    has_time = "time" in util.columns and util["time"].notna().any()
    if has_minute and has_time:
        raise ValueError(f"{table}: rows carry both 'minute' (relative) and 'time' (absolute); "
                         "expected one kind per table")
    if not (has_minute or has_time):
        raise ValueError(f"{table}: no row has a 'minute' or a 'time'; nothing to attribute to jobs")
    return "window" if has_minute else "time"


def _job_columns(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs[["jobid", "num_gpus", "status"]].drop_duplicates("jobid")


def _attach_jobs(frame: pd.DataFrame, jobs: pd.DataFrame, drops: _Drops, table: str) -> pd.DataFrame:
    out = frame.merge(_job_columns(jobs), on="jobid", how="left", indicator=True)
    missing = out["_merge"] == "left_only"
    drops.add(table, "job not in the jobs table", missing)
    return out[~missing].drop(columns="_merge")


def _attempt_spans(attempts: pd.DataFrame, drops: _Drops) -> pd.DataFrame:
    """Attempts with a usable [start, end); a still-running attempt is open-ended."""
    spans = attempts[["jobid", "attempt", "start", "end", "running"]].copy()
    spans[["start", "end"]] = spans[["start", "end"]].astype(_TIME_DTYPE)
    no_start = spans["start"].isna()
    drops.add("attempts", "attempt start unknown", no_start)
    spans = spans[~no_start]
    running = spans["running"].fillna(False).astype(bool)
    no_end = spans["end"].isna() & ~running
    drops.add("attempts", "attempt end unknown (not running)", no_end)
    spans = spans[~no_end].copy()
    spans.loc[spans["end"].isna(), "end"] = _OPEN_END
    backwards = spans["end"] < spans["start"]
    drops.add("attempts", "attempt ends before it starts", backwards)
    return spans[~backwards].drop(columns="running")


def _overlapping_spans(spans: pd.DataFrame, keys: list[str]) -> pd.Series:
    """True for a span that starts before an earlier span on the same key has ended."""
    spans = spans.sort_values([*keys, "start"], kind="stable")
    prior_end = spans.groupby(keys, sort=False)["end"].cummax().groupby(
        [spans[k] for k in keys], sort=False).shift()
    return (spans["start"] < prior_end).reindex(spans.index)


def _attribute(samples: pd.DataFrame, spans: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Give each sample the span on the same ``keys`` that started last at or before its time,
    and keep it only if the span has not ended. Where spans overlap (should not happen for a
    GPU) the later-started span gets the sample; callers count overlaps beforehand."""
    left = samples.astype({"time": _TIME_DTYPE}).sort_values("time", kind="stable")
    right = spans.sort_values("start", kind="stable")
    joined = pd.merge_asof(left, right, left_on="time", right_on="start", by=keys, direction="backward")
    inside = joined["start"].notna() & (joined["time"] < joined["end"])
    return joined[inside].drop(columns=["start", "end"]).astype({"attempt": "int64"})


def gpu_minutes(gpu_util: pd.DataFrame, jobs: pd.DataFrame, placements: pd.DataFrame,
                attempts: pd.DataFrame | None = None) -> Samples:
    """Per-GPU utilization minutes of jobs, each with the job's size and final status.

    Window data keeps minutes >= 0 of GPUs in the job's placement; time data keeps
    the minutes inside an attempt on a GPU of that attempt's placement (needs
    ``attempts``). Samples with missing utilization are dropped and counted.
    """
    drops = _Drops()
    basis = utilization_basis(gpu_util)
    util = gpu_util.astype({"gpu": "int64"})
    placed = placements[["jobid", "attempt", "machine", "gpu"]].astype({"gpu": "int64"})

    missing = util["util"].isna()
    drops.add("gpu_util", "utilization missing (NA or empty cell)", missing)
    util = util[~missing]

    if basis == "window":
        before = util["minute"] < 0
        drops.add("gpu_util", "before the job started (minute < 0)", before)
        util = util[~before]
        duplicated = placed.duplicated(["jobid", "machine", "gpu"])
        if duplicated.any():
            row = placed[duplicated].iloc[0]
            raise ValueError(f"placements: GPU {row['machine']}/gpu{row['gpu']} appears in more than "
                             f"one attempt of job {row['jobid']}; window samples cannot be assigned")
        out = util.merge(placed, on=["jobid", "machine", "gpu"], how="left", indicator=True)
        outside = out["_merge"] == "left_only"
        drops.add("gpu_util", "GPU not in the job's placement", outside)
        out = out[~outside].drop(columns="_merge")
        out["time"] = pd.NaT
    else:
        if attempts is None:
            raise ValueError("gpu_util has absolute times: pass the attempts table to join them")
        util = util.drop(columns=[c for c in ("jobid", "attempt") if c in util.columns])
        spans = _attempt_spans(attempts, drops).merge(placed, on=["jobid", "attempt"], how="inner")
        drops.add("attempts", "GPU-attempt spans overlapping an earlier span on the same GPU "
                  "(samples go to the later start)", _overlapping_spans(spans, ["machine", "gpu"]))
        total = len(util)
        out = _attribute(util, spans, ["machine", "gpu"])
        drops.add("gpu_util", "GPU minute outside every attempt (idle or unattributed)", total - len(out))
        out["minute"] = pd.NA

    out = _attach_jobs(out, jobs, drops, "gpu_util")
    return Samples(out[SAMPLE_COLUMNS].reset_index(drop=True), drops.frame(), basis)


def host_minutes(host_util: pd.DataFrame, jobs: pd.DataFrame, placements: pd.DataFrame,
                 attempts: pd.DataFrame | None = None, only: pd.DataFrame | None = None) -> Samples:
    """Per-server CPU and memory utilization minutes of jobs' servers.

    ``only`` (columns jobid, attempt) restricts to those attempts before the join:
    pass dedicated-server attempts so that no server is shared and each sample has
    exactly one owner. On shared servers (time data) a sample goes to the attempt
    that started last; overlaps are counted in ``dropped``.
    """
    drops = _Drops()
    basis = utilization_basis(host_util, "host_util")
    servers = placements[["jobid", "attempt", "machine"]].drop_duplicates()
    selected = servers if only is None else servers.merge(
        only[["jobid", "attempt"]].drop_duplicates(), on=["jobid", "attempt"])
    util = host_util
    empty = util["cpu_util"].isna() & util["mem_util"].isna()
    drops.add("host_util", "CPU and memory utilization both missing", empty)
    util = util[~empty]

    if basis == "window":
        before = util["minute"] < 0
        drops.add("host_util", "before the job started (minute < 0)", before)
        util = util[~before]
        shared = servers.duplicated(["jobid", "machine"])
        if shared.any():
            row = servers[shared].iloc[0]
            raise ValueError(f"placements: server {row['machine']} appears in more than one attempt of "
                             f"job {row['jobid']}; window samples cannot be assigned")
        out = util.merge(servers, on=["jobid", "machine"], how="left", indicator=True)
        outside = out["_merge"] == "left_only"
        drops.add("host_util", "server not in the job's placement", outside)
        out = out[~outside].drop(columns="_merge")
        if only is not None:
            kept = out.merge(selected[["jobid", "attempt"]].drop_duplicates(), on=["jobid", "attempt"])
            drops.add("host_util", "attempt not selected", len(out) - len(kept))
            out = kept
        out["time"] = pd.NaT
    else:
        if attempts is None:
            raise ValueError("host_util has absolute times: pass the attempts table to join them")
        util = util.drop(columns=[c for c in ("jobid", "attempt") if c in util.columns])
        spans = _attempt_spans(attempts, drops).merge(selected, on=["jobid", "attempt"], how="inner")
        drops.add("attempts", "server-attempt spans overlapping an earlier span on the same server "
                  "(samples go to the later start)", _overlapping_spans(spans, ["machine"]))
        total = len(util)
        out = _attribute(util, spans, ["machine"])
        drops.add("host_util", "server minute outside the selected attempts", total - len(out))
        out["minute"] = pd.NA

    out = _attach_jobs(out, jobs, drops, "host_util")
    return Samples(out[HOST_SAMPLE_COLUMNS].reset_index(drop=True), drops.frame(), basis)


def minutes_per_job(samples: Samples) -> pd.DataFrame:
    """Per job: distinct minutes, GPU-minutes, GPUs observed and mean utilization.

    The columns of ``job_util.job_gpu_util(per="job")`` (the out-of-core join of the
    full trace), so :func:`mean_utilization_by_size` takes either.
    """
    frame = samples.frame
    minute_key = "minute" if samples.basis == "window" else "time"
    keyed = frame.assign(gpu_key=frame["machine"].astype(str) + "/" + frame["gpu"].astype(str))
    return (keyed.groupby("jobid", sort=True)
            .agg(num_gpus=("num_gpus", "first"), status=("status", "first"),
                 gpu_minutes=("util", "size"), minutes=(minute_key, "nunique"),
                 gpus_observed=("gpu_key", "nunique"), mean_util=("util", "mean"))
            .reset_index())


def value_counts(frame: pd.DataFrame, by=("status", "num_gpus"), value: str = "util") -> pd.DataFrame:
    """Samples per (``by``..., value): the exact distribution in few rows, NaN values left out.

    The form of ``job_util.job_gpu_util(per="value_counts")``; CDFs and
    quantiles below take it, weighting each value by ``samples``.
    """
    by = list(by)
    present = frame[frame[value].notna()]
    return (present.groupby([*by, value], sort=True, observed=True).size().rename("samples")
            .reset_index())


def ecdf(values, grid=DEFAULT_GRID, weights=None) -> np.ndarray:
    """Percent of ``values`` (each counted ``weights`` times) that are <= each grid point.

    NaN grid-wide if there are no values.
    """
    values = np.asarray(values, dtype=float)
    weights = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)
    grid = np.asarray(grid, dtype=float)
    if values.size == 0 or weights.sum() == 0:
        return np.full(grid.shape, np.nan)
    order = np.argsort(values, kind="stable")
    cumulative = np.concatenate([[0.0], np.cumsum(weights[order])])
    return 100.0 * cumulative[np.searchsorted(values[order], grid, side="right")] / cumulative[-1]


def weighted_quantile(values, weights, q: float) -> float:
    """The smallest value whose cumulative weight reaches ``q`` of the total (inverted CDF)."""
    values = np.asarray(values, dtype=float)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(np.asarray(weights, dtype=float)[order])
    return float(values[order][np.searchsorted(cumulative, q * cumulative[-1], side="left")])


def utilization_cdfs(counts: pd.DataFrame, sizes=TABLE3_SIZES, grid=DEFAULT_GRID,
                     by: str = "status", value: str = "util") -> pd.DataFrame:
    """CDF of per-minute ``value`` for each ``by`` group and job size (Figure 5), from :func:`value_counts`.

    Long format: ``by``, num_gpus, util_pct, cdf_pct, samples. A size with no
    sample in a group has no rows.
    """
    grid = np.asarray(grid, dtype=float)
    chosen = counts[counts["num_gpus"].isin(list(sizes))]
    parts = [pd.DataFrame({by: group, "num_gpus": int(size), "util_pct": grid,
                           "cdf_pct": ecdf(part[value], grid, part["samples"]),
                           "samples": int(part["samples"].sum())})
             for (group, size), part in chosen.groupby([by, "num_gpus"], sort=True)]
    columns = [by, "num_gpus", "util_pct", "cdf_pct", "samples"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def mean_utilization_by_size(per_job: pd.DataFrame, sizes=TABLE3_SIZES) -> pd.DataFrame:
    """Table 3: mean GPU utilization per job size and over all jobs, from a per-job table.

    ``mean_util_pct`` weighs every GPU-minute equally (GPU-time weighted);
    ``job_mean_util_pct`` averages per-job means (every job counts once). The
    ``all`` row covers every job, including sizes not listed. ``per_job`` has
    jobid, num_gpus, gpu_minutes, mean_util (:func:`minutes_per_job`).
    """
    rows = []
    for label, part in [*((str(s), per_job[per_job["num_gpus"] == s]) for s in sizes), ("all", per_job)]:
        minutes = part["gpu_minutes"].sum()
        rows.append({"size": label, "jobs": len(part), "gpu_minutes": int(minutes),
                     "mean_util_pct": float((part["mean_util"] * part["gpu_minutes"]).sum() / minutes)
                     if minutes else np.nan,
                     "job_mean_util_pct": float(part["mean_util"].mean()) if len(part) else np.nan})
    return pd.DataFrame(rows)


def dedicated_attempts(placements: pd.DataFrame, machines: pd.DataFrame) -> pd.DataFrame:
    """Per attempt: GPUs, servers, and whether it holds every GPU of each of its servers.

    A server missing from ``machines`` makes the attempt not dedicated, flagged in
    ``unknown_server`` so the reader can count it.
    """
    per_server = (placements.groupby(["jobid", "attempt", "machine"]).size()
                  .rename("gpus_used").reset_index())
    sizes = machines[["machine", "num_gpus"]].rename(columns={"num_gpus": "server_gpus"})
    per_server = per_server.merge(sizes, on="machine", how="left")
    per_server["whole_server"] = (per_server["gpus_used"] == per_server["server_gpus"]).fillna(False)
    per_server["unknown_server"] = per_server["server_gpus"].isna()
    return (per_server.groupby(["jobid", "attempt"], sort=True)
            .agg(num_gpus=("gpus_used", "sum"), num_servers=("machine", "size"),
                 dedicated=("whole_server", "all"), unknown_server=("unknown_server", "any"))
            .reset_index())


def dedicated_comparison(samples: pd.DataFrame, dedicated: pd.DataFrame,
                         sizes=(8, 16)) -> pd.DataFrame:
    """Samples of attempts on dedicated servers with the given GPU counts (Figure 6).

    Adds ``num_servers``. Works for GPU and host samples alike (joined on jobid, attempt).
    """
    chosen = dedicated[dedicated["dedicated"] & dedicated["num_gpus"].isin(list(sizes))]
    return samples.merge(chosen[["jobid", "attempt", "num_servers"]], on=["jobid", "attempt"], how="inner")


def summarize(counts: pd.DataFrame, by: str, value: str) -> pd.DataFrame:
    """Samples, mean and quartiles (inverted CDF) of ``value`` per ``by`` group, from :func:`value_counts`."""
    rows = []
    for group, part in counts.groupby(by, sort=True):
        weights = part["samples"].to_numpy(float)
        values = part[value].to_numpy(float)
        rows.append({by: group, "samples": int(weights.sum()),
                     "mean": float(np.average(values, weights=weights)),
                     **{name: weighted_quantile(values, weights, q)
                        for name, q in (("p25", 0.25), ("median", 0.5), ("p75", 0.75))}})
    return pd.DataFrame(rows, columns=[by, "samples", "mean", "p25", "median", "p75"])


def cdf_from_quantiles(cdf_table: pd.DataFrame, grid=DEFAULT_GRID) -> np.ndarray:
    """Evaluate a published quantile table (gpu_util_percent, cdf_percent) as a step CDF on ``grid``."""
    table = cdf_table.sort_values(["gpu_util_percent", "cdf_percent"], kind="stable")
    x = table["gpu_util_percent"].to_numpy(float)
    y = table["cdf_percent"].to_numpy(float)
    idx = np.searchsorted(x, np.asarray(grid, dtype=float), side="right") - 1
    return np.where(idx >= 0, y[np.clip(idx, 0, None)], 0.0)


def mean_from_quantiles(cdf_table: pd.DataFrame) -> float:
    """Mean utilization implied by a quantile table: sum of value x probability step."""
    table = cdf_table.sort_values(["cdf_percent", "gpu_util_percent"], kind="stable")
    steps = np.diff(table["cdf_percent"].to_numpy(float), prepend=0.0) / 100.0
    return float(np.sum(table["gpu_util_percent"].to_numpy(float) * steps) / steps.sum())


def cdf_max_gap(cdf_a: np.ndarray, cdf_b: np.ndarray) -> float:
    """Largest vertical distance between two CDFs on the same grid (percentage points)."""
    return float(np.nanmax(np.abs(np.asarray(cdf_a) - np.asarray(cdf_b))))
