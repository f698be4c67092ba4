"""Queueing delay, its link to locality, and its causes (paper section 3.1: Figures 3-4, Table 2).

Three questions, one function family each:

* How long do jobs wait?  :func:`job_waits` lists every wait of every job the
  way the official trace notebook counts them (the wait before the first attempt
  and each re-queue gap before a later attempt), and :func:`delay_summary` gives
  medians and 90th percentiles per group.
* Do jobs spread over more servers wait less?  :func:`servers_trend` regresses
  log queueing delay on the number of servers of the first attempt and tests the
  paper's claim one-sidedly.
* Why did they wait?  :func:`attribute_waits` replays the cluster from the trace
  itself (per-VC GPUs in use and per-server free GPUs, as step functions built
  from attempt start/end events) and splits each wait into fair-share,
  fragmentation and other time; :func:`causes_by_bucket` turns that (or a
  simulator's ground truth) into Table 2.

Attribution rule (documented here because Table 2 depends on it). At each
instant of a wait of a job of ``g`` GPUs in VC ``v``:

1. **fair-share** if fewer GPUs that VC ``v`` may use are free than ``g``: its
   quota is used up (``usage(v) + g > quota(v)``), or the whole cluster has
   fewer than ``g`` free GPUs (its quota is held by others). With
   ``lending=True`` a VC may borrow idle GPUs beyond its quota (as the
   simulator's default does), so only the second condition applies;
2. else **fragmentation** if no placement meets the locality requirement
   (the tightest placement the job's size allows on this cluster). Two rules:

   * ``"fewest_servers"`` (default; the trace names no racks): the job must fit
     on ``m = ceil(g / S)`` servers, ``S`` the largest server size (8 on
     Philly). The best ``m`` servers hold ``sum_k min(N_k, m)`` free GPUs,
     ``N_k`` being the number of servers with at least ``k`` free GPUs;
     locality is met when that is ``>= g``. For ``g <= 8``: one server with
     ``g`` free GPUs; ``g = 16``: two whole free 8-GPU servers; ``g = 12``: two
     servers with 12 free GPUs between them.
   * ``"rack"`` (given a server -> rack map, e.g. the simulator's topology):
     one server with ``g`` free GPUs if ``g <= S``; else one rack with ``g``
     free GPUs if some rack is that large; else ``g`` free GPUs anywhere.
3. else **other**: quota and a local placement were both available, yet the job
   waited (scheduler back-off before relaxing locality, queue order, anything
   the trace cannot see).

Fair-share is checked first, so a wait that was blocked by both counts as
fair-share. Time before the first event in the trace sees an empty cluster.
These are the simulator's causes (:mod:`dlcluster.sim.engine`) with its
back-off counted as fragmentation, as the paper's two-way split does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats

from dlcluster.plotting import SIZE_COLORS, plot_cdf, seconds_axis
from dlcluster.trace.schema import SIZE_BUCKETS, size_bucket

#: results.json-safe spelling of each size bucket (``>`` does not belong in a key).
BUCKET_KEYS = {"1": "1", "2-4": "2-4", "5-8": "5-8", ">8": "gt8"}

CAUSES = ("fair_share", "fragmentation", "other")


def bucket_label(bucket: str) -> str:
    """'1 GPU', '2-4 GPUs', ... for prose."""
    return f"{bucket} GPU" if bucket == "1" else f"{bucket} GPUs"


_EPOCH = pd.Timestamp(0, tz="UTC")


def _seconds(times: pd.Series) -> np.ndarray:
    """UTC timestamps as float seconds since the epoch (NaN for NaT)."""
    return ((times - _EPOCH) / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan)


def _count(reasons: dict[str, int]) -> pd.Series:
    """Drop reasons as a Series, keeping only reasons that happened."""
    series = pd.Series(reasons, dtype="int64", name="rows")
    series.index.name = "reason"
    return series[series > 0]


def _require(table: pd.DataFrame, columns: list[str], name: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name} lacks the column(s) {missing}; it has {list(table.columns)}")


# --------------------------------------------------------------------------- waits


@dataclass(frozen=True)
class Waits:
    """Every wait of every job, and how many possible waits were not counted, by reason."""

    table: pd.DataFrame
    dropped: pd.Series


def job_waits(jobs: pd.DataFrame, attempts: pd.DataFrame) -> Waits:
    """One row per wait, counting every re-queue as the official trace notebook does.

    The wait before attempt 0 is ``start - submitted``; the wait before attempt
    ``k > 0`` is ``start - end of attempt k-1`` (``attempts.requeue_delay_s``).
    Unlike the official notebook we keep zero-length waits (its
    ``filter(None, ...)`` drops them) and never repeat a stale delay when a time
    is missing; such waits are counted in ``dropped`` instead.

    Columns: jobid, vc, source, num_gpus (the job's gang size), bucket, attempt,
    num_servers (of that attempt), wait_begin, wait_end (float seconds since the
    epoch, UTC), delay_s. Jobs without any attempt (e.g. the public pollux
    records, which have no start times) are counted in ``dropped``.
    """
    _require(jobs, ["jobid", "vc", "source", "num_gpus"], "jobs")
    _require(attempts, ["jobid", "attempt", "start", "num_servers", "requeue_delay_s"], "attempts")
    if jobs["jobid"].duplicated().any():
        dup = jobs.loc[jobs["jobid"].duplicated(), "jobid"].iloc[0]
        raise ValueError(f"jobs: jobid {dup!r} appears more than once")

    job_cols = jobs[["jobid", "vc", "source", "num_gpus"]]
    rows = attempts[["jobid", "attempt", "start", "num_servers", "requeue_delay_s"]].merge(
        job_cols, on="jobid", how="left", indicator=True)
    orphans = rows["_merge"] == "left_only"
    if orphans.any():
        raise ValueError(f"attempts: {int(orphans.sum())} attempt rows belong to no job in jobs "
                         f"(first jobid {rows.loc[orphans, 'jobid'].iloc[0]!r})")
    rows = rows.drop(columns="_merge")

    jobs_without_attempts = int((~jobs["jobid"].isin(attempts["jobid"])).sum())
    start_unknown = rows["start"].isna()
    delay = rows["requeue_delay_s"].astype(float)
    delay_unknown = ~start_unknown & delay.isna()
    gpus = pd.to_numeric(rows["num_gpus"], errors="coerce").astype(float)
    gpus_unknown = ~start_unknown & ~delay_unknown & ~(gpus >= 1)
    negative = ~start_unknown & ~delay_unknown & ~gpus_unknown & (delay < 0)
    keep = ~(start_unknown | delay_unknown | gpus_unknown | negative)

    dropped = _count({
        "job has no attempt in the data": jobs_without_attempts,
        "attempt start unknown": int(start_unknown.sum()),
        "submit time or previous attempt end unknown": int(delay_unknown.sum()),
        "job GPU count unknown": int(gpus_unknown.sum()),
        "negative wait (start before submit or before previous end)": int(negative.sum()),
    })

    out = rows.loc[keep].copy()
    out["num_gpus"] = out["num_gpus"].astype("int64")
    out["delay_s"] = out["requeue_delay_s"].astype(float)
    out["wait_end"] = _seconds(out["start"])
    out["wait_begin"] = out["wait_end"] - out["delay_s"]
    out["bucket"] = size_bucket(out["num_gpus"])
    out = out[["jobid", "vc", "source", "num_gpus", "bucket", "attempt", "num_servers",
               "wait_begin", "wait_end", "delay_s"]]
    return Waits(out.sort_values(["jobid", "attempt"], kind="stable").reset_index(drop=True), dropped)


def delay_summary(waits: pd.DataFrame, by: list[str] | str = "bucket") -> pd.DataFrame:
    """Count, median, 90th percentile and share of zero waits per group (seconds)."""
    by = [by] if isinstance(by, str) else list(by)
    grouped = waits.groupby(by, observed=True)["delay_s"]
    out = pd.DataFrame({
        "waits": grouped.size(),
        "median_s": grouped.median(),
        "p90_s": grouped.quantile(0.9),
        "zero_share": grouped.agg(lambda s: float((s == 0).mean())),
    })
    return out


# --------------------------------------------------------------------------- Figure 4


@dataclass(frozen=True)
class Trend:
    """Slope of log10(1 + queueing delay) per extra server, and the one-sided claim test.

    ``slope``/``ci_*``/``p_*`` come from OLS with one intercept per job size;
    ``median_*`` from the median regression; ``spearman_rho`` is the plain rank
    correlation of servers and delay, not adjusted for job size.
    """

    bucket: str
    jobs: int
    server_counts: dict
    slope: float
    ci_low: float
    ci_high: float
    p_two_sided: float
    p_negative: float
    median_slope: float
    median_p_negative: float
    spearman_rho: float
    model: object

    def supports_claim(self, alpha: float = 0.05) -> bool:
        """True when both the mean and the median trend are significantly negative."""
        return bool(self.p_negative < alpha and self.median_p_negative < alpha)


def first_attempt_locality(jobs: pd.DataFrame, buckets=("5-8", ">8")) -> pd.DataFrame:
    """Jobs of the given size buckets with a known first-attempt delay and server count."""
    _require(jobs, ["jobid", "num_gpus", "num_servers", "queueing_delay_s"], "jobs")
    df = jobs[["jobid", "vc", "num_gpus", "num_servers", "queueing_delay_s"]].copy()
    df["bucket"] = size_bucket(pd.to_numeric(df["num_gpus"], errors="coerce").astype(float))
    df = df[df["bucket"].isin(buckets)]
    known = df["num_servers"].notna() & df["queueing_delay_s"].notna() & (df["queueing_delay_s"] >= 0)
    df = df[known].copy()
    df["num_servers"] = df["num_servers"].astype("int64")
    df["num_gpus"] = df["num_gpus"].astype("int64")
    df["log_delay"] = np.log10(1.0 + df["queueing_delay_s"].astype(float))
    return df.reset_index(drop=True)


MIN_TREND_JOBS = 5


def fittable_buckets(locality: pd.DataFrame, buckets=("5-8", ">8")) -> list[str]:
    """The buckets with enough jobs (>= 5) over >= 2 server counts for :func:`servers_trend`."""
    out = []
    for b in buckets:
        rows = locality[locality["bucket"] == b]
        if len(rows) >= MIN_TREND_JOBS and rows["num_servers"].nunique() >= 2:
            out.append(b)
    return out


def _one_sided_negative(t_value: float, df_resid: float) -> float:
    return float(stats.t.cdf(t_value, df_resid))


def servers_trend(locality: pd.DataFrame, bucket: str, alpha: float = 0.05) -> Trend:
    """Regress log10(1 + delay) on servers (controlling for GPUs) within one size bucket.

    OLS with heteroscedasticity-robust (HC3) errors gives the slope, its
    ``1 - alpha`` interval and a one-sided p-value for "slope < 0" (the paper's
    claim that spreading over more servers waits less); a median (quantile)
    regression checks that a few extreme waits do not drive it. Where the
    bucket holds several job sizes, each size gets its own intercept (fixed
    effects), so the slope compares jobs of the same size spread differently
    rather than large jobs (which need more servers) with small ones.
    """
    df = locality[locality["bucket"] == bucket]
    if len(df) < MIN_TREND_JOBS or df["num_servers"].nunique() < 2:
        raise ValueError(f"bucket {bucket!r}: need >= 5 jobs over >= 2 server counts for a trend; "
                         f"have {len(df)} jobs, server counts {sorted(df['num_servers'].unique())}")
    size_effects = pd.get_dummies(df["num_gpus"], prefix="gpus", drop_first=True, dtype=float)
    x = sm.add_constant(pd.concat([df[["num_servers"]].astype(float), size_effects], axis=1),
                        has_constant="add")
    y = df["log_delay"].astype(float)
    ols = sm.OLS(y, x).fit(cov_type="HC3", use_t=True)
    ci = ols.conf_int(alpha=alpha).loc["num_servers"]
    quant = sm.QuantReg(y, x).fit(q=0.5)
    rho = stats.spearmanr(df["num_servers"], df["queueing_delay_s"]).statistic
    return Trend(
        bucket=bucket,
        jobs=len(df),
        server_counts={int(k): int(v) for k, v in df["num_servers"].value_counts().sort_index().items()},
        slope=float(ols.params["num_servers"]),
        ci_low=float(ci.iloc[0]),
        ci_high=float(ci.iloc[1]),
        p_two_sided=float(ols.pvalues["num_servers"]),
        p_negative=_one_sided_negative(float(ols.tvalues["num_servers"]), float(ols.df_resid)),
        median_slope=float(quant.params["num_servers"]),
        median_p_negative=_one_sided_negative(float(quant.tvalues["num_servers"]), float(quant.df_resid)),
        spearman_rho=float(rho),
        model=ols,
    )


# --------------------------------------------------------------------------- Table 2


@dataclass(frozen=True)
class ClusterTimeline:
    """The cluster's state as step functions over ``times`` (segment starts, seconds).

    Segment ``i`` covers ``[times[i], times[i+1])``; the last one runs forever.
    ``vc_usage[v, i]`` is the GPUs VC ``vcs[v]`` holds; ``servers_with_free[k, i]``
    the servers with at least ``k + 1`` free GPUs; ``rack_free[r, i]`` (only
    when racks were given) the free GPUs of rack ``r``, of ``rack_size[r]``.
    """

    times: np.ndarray
    vcs: np.ndarray
    vc_usage: np.ndarray
    servers_with_free: np.ndarray
    server_size: int
    dropped: pd.Series
    notes: pd.Series
    rack_free: np.ndarray | None = None
    rack_size: np.ndarray | None = None

    def usage_of(self, vc: str) -> np.ndarray:
        """GPUs held by ``vc`` on each segment (zeros for a VC that never ran)."""
        idx = np.flatnonzero(self.vcs == vc)
        return self.vc_usage[idx[0]] if len(idx) else np.zeros(len(self.times), dtype=np.int64)

    def local_placement_exists(self, num_gpus: int, rule: str = "fewest_servers") -> np.ndarray:
        """Per segment: does a placement of ``num_gpus`` meet the locality ``rule`` (module docstring)?"""
        if rule == "fewest_servers":
            fewest_servers = math.ceil(num_gpus / self.server_size)
            return np.minimum(self.servers_with_free, fewest_servers).sum(axis=0) >= num_gpus
        if rule != "rack":
            raise ValueError(f"locality rule must be 'fewest_servers' or 'rack', got {rule!r}")
        if self.rack_free is None:
            raise ValueError("locality rule 'rack' needs a timeline built with racks")
        if num_gpus <= self.server_size:
            return self.servers_with_free[num_gpus - 1] > 0
        if num_gpus <= self.rack_size.max():
            return self.rack_free.max(axis=0) >= num_gpus
        return self.servers_with_free.sum(axis=0) >= num_gpus


def build_cluster_timeline(jobs: pd.DataFrame, attempts: pd.DataFrame, placements: pd.DataFrame,
                           machines: pd.DataFrame, origin: float | None = None,
                           racks: pd.Series | dict | None = None) -> ClusterTimeline:
    """Per-VC GPUs in use and per-server free GPUs over time, from attempt start/end events.

    Event-based: each attempt adds its GPUs at its start and removes them at its
    end; cumulative sums over the sorted event times give the step functions. An
    attempt still running at the end of the trace (``running``) holds its GPUs
    forever; an attempt without a start, or without an end while not running,
    cannot be placed in time and is counted in ``dropped``.

    A server's size is its GPU count in ``machines``, raised to the highest GPU
    index placed on it + 1 where placements show more GPUs (and taken from the
    placements alone for servers missing from ``machines``); both cases are
    counted in ``notes``. Free GPUs are clipped to ``[0, size]`` where
    overlapping attempts would overcommit a server (counted in ``notes``).
    ``origin`` (seconds) adds an earlier segment with the empty cluster.
    ``racks`` (server -> rack) adds per-rack free GPUs; a server missing from it
    forms a rack of its own (counted in ``notes``).
    """
    _require(attempts, ["jobid", "attempt", "start", "end", "running", "num_gpus"], "attempts")
    _require(placements, ["jobid", "attempt", "machine", "gpu"], "placements")
    _require(machines, ["machine", "num_gpus"], "machines")

    att = attempts[["jobid", "attempt", "start", "end", "running", "num_gpus"]].merge(
        jobs[["jobid", "vc"]], on="jobid", how="left", indicator=True)
    orphans = att["_merge"] == "left_only"
    if orphans.any():
        raise ValueError(f"attempts: {int(orphans.sum())} attempt rows belong to no job in jobs "
                         f"(first jobid {att.loc[orphans, 'jobid'].iloc[0]!r})")
    att = att.drop(columns="_merge")
    att["t_start"] = _seconds(att["start"])
    att["t_end"] = _seconds(att["end"])
    running = att["running"].fillna(False).astype(bool)
    no_start = np.isnan(att["t_start"].to_numpy())
    no_end = np.isnan(att["t_end"].to_numpy()) & ~running.to_numpy()
    gpus = pd.to_numeric(att["num_gpus"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    no_gpus = ~(gpus >= 1) & ~no_start & ~no_end
    usable = ~(no_start | no_end | no_gpus)
    dropped = _count({
        "attempt start unknown": int(no_start.sum()),
        "attempt end unknown and not running": int((no_end & ~no_start).sum()),
        "attempt GPU count unknown": int(no_gpus.sum()),
    })
    att = att.loc[usable].copy()
    att["t_end"] = att["t_end"].fillna(np.inf)
    att["num_gpus"] = att["num_gpus"].astype("int64")

    # --- servers: size and per-attempt GPUs on each
    per_server = (placements.merge(att[["jobid", "attempt", "t_start", "t_end"]], on=["jobid", "attempt"])
                  .groupby(["jobid", "attempt", "machine"], observed=True)
                  .agg(gpus=("gpu", "size"), top_gpu=("gpu", "max"), t_start=("t_start", "first"),
                       t_end=("t_end", "first"))
                  .reset_index())
    listed = machines.set_index("machine")["num_gpus"]
    listed = pd.to_numeric(listed, errors="coerce").fillna(0).astype("int64")
    seen_top = per_server.groupby("machine")["top_gpu"].max().astype("int64") + 1
    sizes = pd.concat([listed, seen_top], axis=1, keys=["listed", "seen"]).fillna(0).astype("int64")
    in_list = sizes.index.isin(listed.index)
    notes = _count({
        "servers only in placements (size taken from placements)": int((~in_list).sum()),
        "servers whose placements exceed their listed size (size raised)":
            int(((sizes["seen"] > sizes["listed"]) & in_list).sum()),
    })
    sizes = sizes.max(axis=1)
    sizes = sizes[sizes > 0]
    server_size = int(sizes.max()) if len(sizes) else 1

    # --- event grid
    vc_times = np.concatenate([att["t_start"].to_numpy(), att["t_end"].to_numpy()])
    srv_times = np.concatenate([per_server["t_start"].to_numpy(), per_server["t_end"].to_numpy()])
    extra = [np.array([origin], dtype=float)] if origin is not None else []
    all_times = np.concatenate([vc_times, srv_times, *extra])
    times = np.unique(all_times[np.isfinite(all_times)])
    if len(times) == 0:
        times = np.array([0.0 if origin is None else float(origin)])

    def grid_index(t: np.ndarray) -> np.ndarray:
        return np.searchsorted(times, t)  # exact: every finite event time is on the grid

    # --- per-VC usage
    vcs = np.array(sorted(att["vc"].dropna().unique()), dtype=object)
    vc_idx = np.searchsorted(vcs, att["vc"].to_numpy()) if len(vcs) else np.zeros(0, dtype=int)
    usage = np.zeros((len(vcs), len(times)), dtype=np.int64)
    g = att["num_gpus"].to_numpy()
    np.add.at(usage, (vc_idx, grid_index(att["t_start"].to_numpy())), g)
    ends = np.isfinite(att["t_end"].to_numpy())
    np.add.at(usage, (vc_idx[ends], grid_index(att["t_end"].to_numpy()[ends])), -g[ends])
    usage = np.cumsum(usage, axis=1)

    # --- per-server free GPUs -> servers with >= k free
    ev = pd.DataFrame({
        "machine": np.concatenate([per_server["machine"].to_numpy(), per_server["machine"].to_numpy()]),
        "t": np.concatenate([per_server["t_start"].to_numpy(), per_server["t_end"].to_numpy()]),
        "delta": np.concatenate([per_server["gpus"].to_numpy(), -per_server["gpus"].to_numpy()]),
    })
    ev = ev[np.isfinite(ev["t"])].sort_values(["machine", "t", "delta"], kind="stable").reset_index(drop=True)
    cap = sizes.reindex(ev["machine"]).to_numpy()
    used = ev.groupby("machine", sort=False)["delta"].cumsum().to_numpy()
    raw_free = cap - used
    free = np.clip(raw_free, 0, cap)
    prev = pd.Series(free).groupby(ev["machine"].to_numpy(), sort=False).shift(1)
    prev = prev.fillna(pd.Series(cap)).to_numpy().astype(np.int64)
    levels = np.arange(1, server_size + 1)
    change = (free[:, None] >= levels).astype(np.int64) - (prev[:, None] >= levels).astype(np.int64)
    with_free = np.zeros((server_size, len(times)), dtype=np.int64)
    with_free[:, 0] = (sizes.to_numpy()[:, None] >= levels).sum(axis=0)
    idx = grid_index(ev["t"].to_numpy())
    for k in range(server_size):
        np.add.at(with_free[k], idx, change[:, k])
    with_free = np.cumsum(with_free, axis=1)

    overcommitted = int(pd.Series(raw_free < 0).groupby(ev["machine"].to_numpy()).any().sum()) if len(ev) else 0
    notes = pd.concat([notes, _count({"servers overcommitted at some time (free GPUs clipped at 0)": overcommitted})])

    rack_free = rack_size = None
    if racks is not None:
        rack_of = pd.Series(racks).astype(object).reindex(sizes.index)
        unracked = rack_of.isna()
        rack_of[unracked] = [("own rack", m) for m in sizes.index[unracked]]
        notes = pd.concat([notes, _count({"servers without a rack (each forms its own)": int(unracked.sum())})])
        rack_codes, rack_names = pd.factorize(rack_of, sort=False)
        rack_size = np.bincount(rack_codes, weights=sizes.to_numpy(), minlength=len(rack_names)).astype(np.int64)
        rack_free = np.zeros((len(rack_names), len(times)), dtype=np.int64)
        rack_free[:, 0] = rack_size
        ev_rack = rack_codes[sizes.index.get_indexer(ev["machine"])]
        np.add.at(rack_free, (ev_rack, idx), free - prev)
        rack_free = np.cumsum(rack_free, axis=1)
    return ClusterTimeline(times=times, vcs=vcs, vc_usage=usage, servers_with_free=with_free,
                           server_size=server_size, dropped=dropped, notes=notes,
                           rack_free=rack_free, rack_size=rack_size)


def _time_where(times: np.ndarray, blocked: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Seconds of each ``[begin, end)`` during which the step function ``blocked`` is True."""
    seg_len = np.diff(times)
    cum = np.concatenate([[0.0], np.cumsum(blocked[:-1] * seg_len)])

    def integral(t):
        i = np.searchsorted(times, t, side="right") - 1
        i = np.clip(i, 0, len(times) - 1)
        return cum[i] + blocked[i] * (t - times[i])

    return integral(end) - integral(begin)


def _quota_map(quotas) -> dict:
    if isinstance(quotas, pd.DataFrame):
        _require(quotas, ["vc", "gpus"], "quotas")
        return dict(zip(quotas["vc"], quotas["gpus"].astype(float)))
    return {k: float(v) for k, v in dict(quotas).items()}


@dataclass(frozen=True)
class Attribution:
    """Each wait split into seconds of fair-share, fragmentation and other delay."""

    table: pd.DataFrame
    dropped: pd.Series
    timeline: ClusterTimeline


def attribute_waits(waits: pd.DataFrame, jobs: pd.DataFrame, attempts: pd.DataFrame,
                    placements: pd.DataFrame, machines: pd.DataFrame, quotas,
                    locality: str = "fewest_servers", racks: pd.Series | dict | None = None,
                    lending: bool = False) -> Attribution:
    """Split every wait into fair-share / fragmentation / other time (rules: module docstring).

    ``quotas`` maps VC -> GPUs (a dict, or a DataFrame with ``vc`` and ``gpus``
    such as ``trace.vc_quotas``). Without lending, waits of VCs without a quota
    cannot be judged for fair-share and are left out, counted in ``dropped``.
    ``locality`` is ``"fewest_servers"`` or ``"rack"`` (which needs ``racks``:
    server -> rack). ``lending``: VCs may borrow idle GPUs beyond their quota.
    """
    if locality not in ("fewest_servers", "rack"):
        raise ValueError(f"locality must be 'fewest_servers' or 'rack', got {locality!r}")
    if locality == "rack" and racks is None:
        raise ValueError("locality='rack' needs racks (a server -> rack mapping)")
    quota = _quota_map(quotas)
    has_quota = waits["vc"].isin(list(quota)) | lending
    dropped = _count({"VC has no quota": int((~has_quota).sum())})
    w = waits.loc[has_quota].copy()
    origin = float(w["wait_begin"].min()) if len(w) else None
    timeline = build_cluster_timeline(jobs, attempts, placements, machines, origin=origin, racks=racks)

    fair = np.zeros(len(w))
    frag = np.zeros(len(w))
    begin = w["wait_begin"].to_numpy()
    end = w["wait_end"].to_numpy()
    total_free = timeline.servers_with_free.sum(axis=0)
    fits_cache: dict[int, np.ndarray] = {}
    for (vc, gpus), pos in w.groupby(["vc", "num_gpus"], sort=True).indices.items():
        gpus = int(gpus)
        if gpus not in fits_cache:
            fits_cache[gpus] = timeline.local_placement_exists(gpus, locality)
        no_gpus_for_vc = total_free < gpus
        if not lending:
            no_gpus_for_vc |= timeline.usage_of(vc) + gpus > quota[vc]
        no_local_placement = ~no_gpus_for_vc & ~fits_cache[gpus]
        fair[pos] = _time_where(timeline.times, no_gpus_for_vc, begin[pos], end[pos])
        frag[pos] = _time_where(timeline.times, no_local_placement, begin[pos], end[pos])
    w["fair_share_s"] = fair
    w["fragmentation_s"] = frag
    w["other_s"] = np.clip(w["delay_s"].to_numpy() - fair - frag, 0.0, None)
    return Attribution(table=w.reset_index(drop=True), dropped=dropped, timeline=timeline)


def time_over_quota(timeline: ClusterTimeline, quotas) -> pd.DataFrame:
    """Per VC: quota, peak GPUs held, and the share of time it held more than its quota.

    Time runs from the timeline's first to its last event. A VC that often
    holds more than its quota shows that the cluster lent idle GPUs beyond
    quotas, i.e. that ``lending=True`` describes it better.
    """
    quota = _quota_map(quotas)
    seg_len = np.diff(timeline.times)
    span = float(seg_len.sum())
    rows = []
    for v, vc in enumerate(timeline.vcs):
        usage = timeline.vc_usage[v]
        q = quota.get(vc, np.nan)
        over = float((seg_len * (usage[:-1] > q)).sum() / span) if span > 0 and np.isfinite(q) else np.nan
        rows.append({"vc": vc, "quota_gpus": q, "peak_gpus": int(usage.max()), "time_over_quota": over})
    return pd.DataFrame(rows).set_index("vc")


def causes_by_bucket(table: pd.DataFrame, cause_columns: dict[str, str | list[str]] | None = None) -> pd.DataFrame:
    """Table 2: per size bucket, waiting time and each cause's share of it.

    ``table`` has ``bucket`` (or ``num_gpus``) and seconds columns per cause;
    ``cause_columns`` maps cause name -> column, or list of columns to add up
    (default the columns written by :func:`attribute_waits`), so a simulator's
    ground truth goes through the same code. ``<cause>_share`` is the cause's
    share of all waiting seconds in the bucket; ``<cause>_frequency`` the share
    of rows (waits, or jobs) in which it is the largest part (rows with no
    waiting time count under none).
    """
    cause_columns = cause_columns or {c: f"{c}_s" for c in CAUSES}
    cause_columns = {c: [cols] if isinstance(cols, str) else list(cols) for c, cols in cause_columns.items()}
    df = table.copy()
    if "bucket" not in df.columns:
        df["bucket"] = size_bucket(df["num_gpus"])
    _require(df, [col for cols in cause_columns.values() for col in cols], "cause table")
    seconds = pd.DataFrame({c: df[cols].astype(float).sum(axis=1) for c, cols in cause_columns.items()})
    total = seconds.sum(axis=1)
    dominant = seconds.idxmax(axis=1).where(total > 0)
    rows = []
    for bucket in SIZE_BUCKETS:
        in_bucket = (df["bucket"] == bucket).to_numpy()
        if not in_bucket.any():
            continue
        sec = seconds[in_bucket].sum()
        bucket_total = float(sec.sum())
        row = {"bucket": bucket, "waits": int(in_bucket.sum()), "wait_h": bucket_total / 3600.0}
        for cause in cause_columns:
            row[f"{cause}_share"] = float(sec[cause] / bucket_total) if bucket_total > 0 else np.nan
        for cause in cause_columns:
            row[f"{cause}_frequency"] = float((dominant[in_bucket] == cause).mean())
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")


# --------------------------------------------------------------------------- plots


SPARSE_TIME_TICKS = ([1, 60, 3600, 86400, 604800], ["1s", "1m", "1h", "1d", "1w"])


def plot_delay_cdfs(waits: pd.DataFrame, vcs: list[str], axes, floor_s: float = 1.0) -> None:
    """Figure 3: one panel per VC, one CDF per size bucket (delays below ``floor_s`` drawn at it)."""
    for ax, vc in zip(np.ravel(axes), vcs):
        in_vc = waits[waits["vc"] == vc]
        for bucket in SIZE_BUCKETS:
            delays = in_vc.loc[in_vc["bucket"] == bucket, "delay_s"].to_numpy(float)
            plot_cdf(ax, np.maximum(delays, floor_s), label=f"{bucket} GPU", color=SIZE_COLORS[bucket])
        seconds_axis(ax)
        ax.set_xticks(*SPARSE_TIME_TICKS)  # narrow panels: 10 h and 1 d would overlap
        ax.set_title(f"VC {vc}", fontsize=10)
        ax.set_xlabel("queueing delay")
        ax.legend(fontsize=7, loc="lower right")
    np.ravel(axes)[0].set_ylabel("CDF of waits")


def plot_servers_trend(locality: pd.DataFrame, trend: Trend, ax, seed: int = 0) -> None:
    """Figure 4 panel: each job's delay by server count, medians, and the fitted trend.

    The trend line is the OLS fit for the bucket's most common job size (the
    fit gives every size its own intercept and one shared slope).
    """
    df = locality[locality["bucket"] == trend.bucket]
    rng = np.random.default_rng(seed)
    delays = np.maximum(df["queueing_delay_s"].to_numpy(float), 1.0)
    ax.scatter(df["num_servers"] + rng.uniform(-0.18, 0.18, len(df)), delays, s=5, alpha=0.25,
               color="0.45", lw=0, label="one job")
    med = df.groupby("num_servers")["queueing_delay_s"].median()
    ax.plot(med.index, np.maximum(med.to_numpy(float), 1.0), "o", color=SIZE_COLORS[trend.bucket], ms=6,
            label="median per server count")
    common_size = int(df["num_gpus"].mode().iloc[0])
    params = trend.model.params
    intercept = params["const"] + params.get(f"gpus_{common_size}", 0.0)
    servers_of_size = df.loc[df["num_gpus"] == common_size, "num_servers"]
    xs = np.linspace(servers_of_size.min(), servers_of_size.max(), 50)
    fit = 10 ** (intercept + trend.slope * xs) - 1
    ax.plot(xs, np.maximum(fit, 1.0), color="black", lw=2,
            label=f"OLS trend ({common_size}-GPU jobs): x{10 ** trend.slope:.2f} per server")
    seconds_axis(ax, axis="y")
    ax.set_xlabel("servers of the first attempt")
    ax.set_ylabel("queueing delay")
    verdict = "supports" if trend.supports_claim() else "does not support"
    ax.set_title(f"{trend.bucket} GPUs (n={trend.jobs}): slope {trend.slope:+.3f} log10/server, "
                 f"one-sided p={trend.p_negative:.2g}\n{verdict} 'more servers, less waiting'", fontsize=9)
    ax.grid(alpha=0.3, linestyle="--")
    ax.legend(fontsize=7, loc="upper right")


def fig4_finding(trends: list[Trend], alpha: float = 0.05) -> str:
    """One sentence: does delay fall with the number of servers, bucket by bucket?"""
    if not trends:
        return (f"Not computable: no 5-8 or >8 GPU bucket has {MIN_TREND_JOBS} or more jobs with a known "
                "delay spread over two or more different server counts.")
    parts = []
    for t in trends:
        change = 10 ** t.slope - 1
        verdict = "significant" if t.supports_claim(alpha) else "not significant"
        parts.append(f"{t.bucket} GPUs: {change:+.0%} delay per extra server "
                     f"(95% CI {10 ** t.ci_low - 1:+.0%}..{10 ** t.ci_high - 1:+.0%}, "
                     f"one-sided p={t.p_negative:.2g}, {verdict})")
    supported = [t.bucket for t in trends if t.supports_claim(alpha)]
    if len(supported) == len(trends):
        head = "Jobs spread over more servers waited less"
    elif supported:
        head = f"Jobs spread over more servers waited less only for {', '.join(supported)} GPUs"
    else:
        head = "Our data does not show that jobs spread over more servers waited less"
    return f"{head}: " + "; ".join(parts) + "."


def table2_finding(table: pd.DataFrame) -> str:
    """One sentence: how fragmentation's share of waiting changes with job size."""
    shares = table["fragmentation_share"].dropna()
    if shares.empty:
        return "No waiting time to attribute."
    listed = ", ".join(f"{s:.0%} ({bucket_label(b)})" for b, s in shares.items())
    if len(shares) == 1:
        trend = "only one size bucket has waiting time"
    elif shares.is_monotonic_increasing and shares.iloc[-1] > shares.iloc[0]:
        trend = "it grows with job size"
    elif shares.iloc[-1] > shares.iloc[0]:
        trend = "it is larger for the largest jobs than for the smallest, but not steadily"
    else:
        trend = "it does not grow with job size"
    largest = shares.index[-1]
    causes = table.loc[largest, [f"{c}_share" for c in CAUSES if f"{c}_share" in table.columns]]
    top = causes.idxmax().removesuffix("_share").replace("_", "-")
    return (f"Fragmentation's share of waiting time is {listed}: {trend}; "
            f"for {largest}-GPU jobs the largest cause is {top} ({causes.max():.0%}).")


def format_seconds(seconds: float) -> str:
    """A duration for prose: '45 s', '12.5 min', '3.2 h', '2.1 d'."""
    if seconds is None or not np.isfinite(seconds):
        return "n/a"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


CAUSE_COLORS = {"fair_share": "#DD8452", "fragmentation": "#C44E52", "other": "#8C8C8C"}


def plot_causes(table: pd.DataFrame, ax, title: str = "") -> None:
    """Table 2 as stacked bars: each cause's share of the waiting time, per size bucket."""
    causes = [c for c in CAUSE_COLORS if f"{c}_share" in table.columns]
    left = np.zeros(len(table))
    labels = [f"{b} GPU\n({n:,} waits)" for b, n in zip(table.index, table["waits"])]
    for cause in causes:
        share = table[f"{cause}_share"].fillna(0).to_numpy()
        ax.barh(labels, share, left=left, color=CAUSE_COLORS[cause], label=cause.replace("_", "-"))
        for y, (x0, w) in enumerate(zip(left, share)):
            if w >= 0.06:
                ax.text(x0 + w / 2, y, f"{w:.0%}", ha="center", va="center", color="white", fontsize=8)
        left += share
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of waiting time")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=len(causes), frameon=False)


def share_agreement(estimate: pd.DataFrame, truth: pd.DataFrame, causes=("fair_share", "fragmentation", "other")
                    ) -> pd.DataFrame:
    """Per size bucket: each cause's share in two Table 2s, and how far apart they are.

    ``agreement`` is 1 minus the total-variation distance between the two
    splits (1 = identical split of the waiting time, 0 = disjoint); NaN where
    either table has no waiting time in the bucket. A cause missing from one
    table counts as a share of 0 there.
    """
    buckets = [b for b in SIZE_BUCKETS if b in estimate.index and b in truth.index]
    rows = []
    for b in buckets:
        row = {"bucket": b}
        distance = 0.0
        judged = estimate.loc[b, "wait_h"] > 0 and truth.loc[b, "wait_h"] > 0
        for c in causes:
            est = float(estimate.loc[b].get(f"{c}_share", 0.0)) if judged else np.nan
            tru = float(truth.loc[b].get(f"{c}_share", 0.0)) if judged else np.nan
            row[f"{c}_estimate"], row[f"{c}_truth"] = est, tru
            distance += abs(est - tru)
        row["agreement"] = 1.0 - distance / 2.0
        rows.append(row)
    return pd.DataFrame(rows).set_index("bucket")


def per_job_agreement(attributed: pd.DataFrame, truth: pd.DataFrame,
                      cause_columns: dict[str, str | list[str]] = None) -> float:
    """Share of all waiting seconds put under the same cause, job by job, in two attributions.

    ``attributed`` has one row per wait (``jobid`` and the ``<cause>_s``
    columns of :func:`attribute_waits`); ``truth`` one row per job (``jobid``
    and the columns named by ``cause_columns``, default the simulator's).
    Per job and cause the smaller of the two amounts matches; the result is
    the matched seconds over the larger of the two totals (1 = identical).
    """
    cause_columns = cause_columns or SIM_CAUSE_COLUMNS
    est = attributed.groupby("jobid")[[f"{c}_s" for c in CAUSES]].sum()
    est.columns = list(CAUSES)
    tru = pd.DataFrame({c: truth[[cols] if isinstance(cols, str) else list(cols)].astype(float).sum(axis=1)
                        for c, cols in cause_columns.items()})
    tru.index = truth["jobid"].to_numpy()
    tru = tru.reindex(columns=list(CAUSES), fill_value=0.0)
    est, tru = est.align(tru, join="outer", fill_value=0.0)
    total = max(float(est.to_numpy().sum()), float(tru.to_numpy().sum()))
    return float(np.minimum(est.to_numpy(), tru.to_numpy()).sum() / total) if total > 0 else np.nan


def compare_delays(real: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """Per size bucket: medians, 90th percentiles and a two-sample KS test of two delay samples.

    Both tables have ``bucket`` and ``delay_s``; buckets present in only one are listed with NaNs.
    """
    rows = []
    for b in SIZE_BUCKETS:
        r = real.loc[real["bucket"] == b, "delay_s"].to_numpy(float)
        s = simulated.loc[simulated["bucket"] == b, "delay_s"].to_numpy(float)
        if len(r) == 0 and len(s) == 0:
            continue
        both = len(r) > 0 and len(s) > 0
        ks = stats.ks_2samp(r, s) if both else None
        rows.append({
            "bucket": b, "real_n": len(r), "simulated_n": len(s),
            "real_median_s": np.median(r) if len(r) else np.nan,
            "simulated_median_s": np.median(s) if len(s) else np.nan,
            "real_p90_s": np.quantile(r, 0.9) if len(r) else np.nan,
            "simulated_p90_s": np.quantile(s, 0.9) if len(s) else np.nan,
            "ks_statistic": float(ks.statistic) if both else np.nan,
            "ks_p": float(ks.pvalue) if both else np.nan,
        })
    return pd.DataFrame(rows).set_index("bucket")


# --------------------------------------------------------------------------- simulated replay

#: The simulator's per-job delay columns as Table 2 causes: the paper's two-way split counts
#: the simulator's back-off (holding out for locality before relaxing it) as fragmentation.
SIM_CAUSE_COLUMNS = {"fair_share": "delay_fair_share_s",
                     "fragmentation": ["delay_fragmentation_s", "delay_backoff_s"]}


@dataclass(frozen=True)
class Replay:
    """A simulated replay of the real Pollux jobs, with what it ran on."""

    result: object          # dlcluster.sim.SimResult
    topology: object        # dlcluster.sim.Topology
    quotas: dict
    lending: bool

    @property
    def racks(self) -> dict:
        """Server -> rack of the simulated cluster (for the 'rack' locality rule)."""
        return dict(zip(self.topology.server_names, self.topology.server_rack))


def replay_public_workload(trace, max_jobs: int | None = None, start: pd.Timestamp | None = None,
                           racks: int | None = None, locality: str = "relax", lending: bool = True,
                           seed: int = 0) -> Replay:
    """Simulate the real Pollux jobs on the real machines with the public VC quotas (Philly policy).

    ``start`` keeps jobs submitted at or after it and ``max_jobs`` the first
    that many of them by submit time (a shorter run; the cluster starts empty).
    ``racks`` keeps only the first that many racks of the real machines (a
    smaller, busier cluster), with every VC quota scaled by the share of GPUs
    kept (rounded). ``locality``: the Philly policy's locality mode
    ("relax": relax after a timeout, "strict", "any"); ``lending``: VCs may
    borrow idle GPUs beyond their quota.
    """
    from dlcluster.sim import PhillyPolicy, public_inputs, simulate, topology_from_machines

    inputs = public_inputs(trace=trace)
    topology, quotas = inputs.topology, inputs.quotas
    if racks is not None:
        if not 1 <= int(racks) <= topology.num_racks:
            raise ValueError(f"racks must be in 1..{topology.num_racks}, got {racks!r}")
        kept = {name for name, rack in zip(topology.server_names, topology.server_rack) if rack < int(racks)}
        smaller = topology_from_machines(trace.machines[trace.machines["machine"].isin(kept)])
        quotas = {vc: int(round(q * smaller.total_gpus / topology.total_gpus)) for vc, q in quotas.items()}
        topology = smaller
    workload = inputs.workload
    order = np.argsort(workload.arrival_s, kind="stable")
    if start is not None:
        from_s = (pd.Timestamp(start) - workload.epoch) / pd.Timedelta(seconds=1)
        order = order[workload.arrival_s[order] >= from_s]
    if max_jobs is not None:
        order = order[: int(max_jobs)]
    if len(order) == 0:
        raise ValueError(f"no Pollux job submitted at or after {start} to replay")
    result = simulate(workload.take(order), topology, PhillyPolicy(locality=locality), quotas=quotas,
                      lending=lending, seed=seed)
    return Replay(result=result, topology=topology, quotas=quotas, lending=lending)


def dre_like(jobs: pd.DataFrame, begin: pd.Timestamp, end: pd.Timestamp,
             min_run_time_s: float = 300.0) -> pd.DataFrame:
    """Jobs chosen as the public DRE records were: multi-GPU, started, run >= 5 min, submitted in [begin, end].

    Returns ``bucket`` and ``delay_s`` (first wait) for :func:`compare_delays`.
    """
    _require(jobs, ["num_gpus", "submitted", "run_time_s", "queueing_delay_s"], "jobs")
    gpus = pd.to_numeric(jobs["num_gpus"], errors="coerce").astype(float)
    keep = ((gpus >= 2) & jobs["queueing_delay_s"].notna() & (jobs["run_time_s"] >= min_run_time_s)
            & (jobs["submitted"] >= begin) & (jobs["submitted"] <= end))
    picked = jobs.loc[keep]
    return pd.DataFrame({"bucket": size_bucket(gpus[keep]).to_numpy(),
                         "delay_s": picked["queueing_delay_s"].astype(float).to_numpy()})
