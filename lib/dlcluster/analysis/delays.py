"""How long jobs wait, and whether spreading over more servers cuts the wait (paper section 3.1: Figures 3-4).

* :func:`job_waits` lists every wait of every job the way the official trace
  notebook counts them (the wait before the first attempt and each re-queue
  gap before a later attempt); :func:`delay_summary` gives medians and 90th
  percentiles per group.
* :func:`servers_trend` regresses log queueing delay on the number of servers
  of the first attempt and tests the paper's claim one-sidedly (Figure 4).

Why jobs waited (Table 2) is :mod:`.table2`, on the cluster state of :mod:`.timeline`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..report.plotting import SIZE_COLORS, seconds_axis
from ..trace.schema import size_bucket



def bucket_label(bucket: str) -> str:
    """'1 GPU', '2-4 GPUs', ... for prose."""
    return f"{bucket} GPU" if bucket == "1" else f"{bucket} GPUs"


_EPOCH = pd.Timestamp(0, tz="UTC")


def epoch_seconds(times: pd.Series) -> np.ndarray:
    """UTC timestamps as float seconds since the epoch (NaN for NaT)."""
    return ((times - _EPOCH) / pd.Timedelta(seconds=1)).to_numpy(dtype=float, na_value=np.nan)


def reason_counts(reasons: dict[str, int]) -> pd.Series:
    """Drop reasons as a Series, keeping only reasons that happened."""
    series = pd.Series(reasons, dtype="int64", name="rows")
    series.index.name = "reason"
    return series[series > 0]


def require_columns(table: pd.DataFrame, columns: list[str], name: str) -> None:
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
    require_columns(jobs, ["jobid", "vc", "source", "num_gpus"], "jobs")
    require_columns(attempts, ["jobid", "attempt", "start", "num_servers", "requeue_delay_s"], "attempts")
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

    dropped = reason_counts({
        "job has no attempt in the data": jobs_without_attempts,
        "attempt start unknown": int(start_unknown.sum()),
        "submit time or previous attempt end unknown": int(delay_unknown.sum()),
        "job GPU count unknown": int(gpus_unknown.sum()),
        "negative wait (start before submit or before previous end)": int(negative.sum()),
    })

    out = rows.loc[keep].copy()
    out["num_gpus"] = out["num_gpus"].astype("int64")
    out["delay_s"] = out["requeue_delay_s"].astype(float)
    out["wait_end"] = epoch_seconds(out["start"])
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
    correlation of servers and delay, not adjusted for job size. ``alpha``: the
    significance level of the claim test, and ``ci_*`` the ``1 - alpha``
    interval (:attr:`ci_level`).
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
    alpha: float = 0.05

    @property
    def ci_level(self) -> float:
        """Coverage of the ``ci_low``..``ci_high`` interval: ``1 - alpha``."""
        return 1.0 - self.alpha

    def supports_claim(self, alpha: float | None = None) -> bool:
        """True when both the mean and the median trend are significantly negative (at the trend's ``alpha``)."""
        alpha = self.alpha if alpha is None else alpha
        return bool(self.p_negative < alpha and self.median_p_negative < alpha)


def percent_label(share: float) -> str:
    """0.95 -> '95%', 0.975 -> '97.5%': a confidence level for prose."""
    return f"{round(100 * share, 6):g}%"


@dataclass(frozen=True)
class Locality:
    """Jobs of the studied size buckets with a known first-attempt delay and server count, and every other
    job of the input counted under the reason it was left out (``dropped``: reason -> jobs)."""

    table: pd.DataFrame
    dropped: pd.Series

    @property
    def rows_read(self) -> int:
        return len(self.table) + int(self.dropped.sum())


def first_attempt_locality(jobs: pd.DataFrame, buckets=("5-8", ">8")) -> Locality:
    """Jobs of the given size buckets with a known first-attempt delay and server count (Figure 4's input).

    Every job of ``jobs`` is either in ``table`` or counted in ``dropped`` under
    the first reason that applies: GPU count unknown; size outside ``buckets``;
    servers of the first attempt unknown; queueing delay unknown; negative
    queueing delay (first start before submit).
    """
    require_columns(jobs, ["jobid", "num_gpus", "num_servers", "queueing_delay_s"], "jobs")
    df = jobs[["jobid", "vc", "num_gpus", "num_servers", "queueing_delay_s"]].copy()
    gpus = pd.to_numeric(df["num_gpus"], errors="coerce").astype(float)
    df["bucket"] = size_bucket(gpus)
    gpus_unknown = ~(gpus >= 1)
    other_size = ~gpus_unknown & ~df["bucket"].isin(buckets)
    servers_unknown = ~gpus_unknown & ~other_size & df["num_servers"].isna()
    rest = ~(gpus_unknown | other_size | servers_unknown)
    delay = pd.to_numeric(df["queueing_delay_s"], errors="coerce").astype(float)
    delay_unknown = rest & delay.isna()
    negative = rest & ~delay_unknown & (delay < 0)
    keep = rest & ~delay_unknown & ~negative
    dropped = reason_counts({
        "job GPU count unknown": int(gpus_unknown.sum()),
        f"job size outside the buckets studied ({', '.join(buckets)} GPUs)": int(other_size.sum()),
        "servers of the first attempt unknown": int(servers_unknown.sum()),
        "queueing delay unknown (no first start or submit time)": int(delay_unknown.sum()),
        "negative queueing delay (first start before submit)": int(negative.sum()),
    })
    df = df[keep].copy()
    df["num_servers"] = df["num_servers"].astype("int64")
    df["num_gpus"] = df["num_gpus"].astype("int64")
    df["log_delay"] = np.log10(1.0 + df["queueing_delay_s"].astype(float))
    return Locality(df.reset_index(drop=True), dropped)


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
    # imported here: statsmodels.api loads all of statsmodels (~1 s), and every notebook kernel and sweep worker
    # imports this module, for the waits, while only notebook 01's trend regresses
    import statsmodels.api as sm

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
        server_counts={int(k): int(v) for k, v in df["num_servers"].value_counts().sort_index(kind="stable").items()},
        slope=float(ols.params["num_servers"]),
        ci_low=float(ci.iloc[0]),
        ci_high=float(ci.iloc[1]),
        p_two_sided=float(ols.pvalues["num_servers"]),
        p_negative=_one_sided_negative(float(ols.tvalues["num_servers"]), float(ols.df_resid)),
        median_slope=float(quant.params["num_servers"]),
        median_p_negative=_one_sided_negative(float(quant.tvalues["num_servers"]), float(quant.df_resid)),
        spearman_rho=float(rho),
        model=ols,
        alpha=float(alpha),
    )


# --------------------------------------------------------------------------- plots


SPARSE_TIME_TICKS = ([1, 60, 3600, 86400, 604800], ["1s", "1m", "1h", "1d", "1w"])


def plot_servers_trend(locality: pd.DataFrame, trend: Trend, ax, seed: int = 0) -> None:
    """Figure 4 panel: each job's delay by server count, and, for the bucket's most common job size, the medians
    per server count and the fitted trend (the fit gives every size its own intercept and one shared slope), so that
    the medians and the line describe the same jobs.
    """
    df = locality[locality["bucket"] == trend.bucket]
    rng = np.random.default_rng(seed)
    delays = np.maximum(df["queueing_delay_s"].to_numpy(float), 1.0)
    ax.scatter(df["num_servers"] + rng.uniform(-0.18, 0.18, len(df)), delays, s=5, alpha=0.25,
               color="0.45", lw=0, label=f"one job ({trend.bucket} GPUs)")
    common_size = int(df["num_gpus"].mode().iloc[0])
    of_size = df[df["num_gpus"] == common_size]
    med = of_size.groupby("num_servers")["queueing_delay_s"].median()
    ax.plot(med.index, np.maximum(med.to_numpy(float), 1.0), "o", color=SIZE_COLORS[trend.bucket], ms=6,
            label=f"median per server count ({common_size}-GPU jobs)")
    params = trend.model.params
    intercept = params["const"] + params.get(f"gpus_{common_size}", 0.0)
    servers_of_size = of_size["num_servers"]
    xs = np.linspace(servers_of_size.min(), servers_of_size.max(), 50)
    fit = 10 ** (intercept + trend.slope * xs) - 1
    ax.plot(xs, np.maximum(fit, 1.0), color="black", lw=2,
            label=f"OLS trend ({common_size}-GPU jobs): x{10 ** trend.slope:.2f} per server")
    seconds_axis(ax, axis="y", label="queueing delay")
    ax.set_xlabel("distinct servers of the first attempt")
    verdict = "supports" if trend.supports_claim() else "does not support"
    ax.set_title(f"{trend.bucket} GPUs (n={trend.jobs}): slope {trend.slope:+.3f} log10/server, "
                 f"one-sided p={trend.p_negative:.2g}\n{verdict} 'more servers, less waiting'", fontsize=9)
    ax.grid(alpha=0.3, linestyle="--")
    ax.legend(fontsize=7, loc="upper right")


def fig4_finding(trends: list[Trend], alpha: float | None = None) -> str:
    """One sentence: does delay fall with the number of servers, bucket by bucket?

    Significance at ``alpha`` (None: each trend's own); each interval is named
    by its own level (``1 - alpha`` of :func:`servers_trend`).
    """
    if not trends:
        return (f"Not computable: no 5-8 or >8 GPU bucket has {MIN_TREND_JOBS} or more jobs with a known "
                "delay spread over two or more different server counts.")
    parts = []
    for t in trends:
        change = 10 ** t.slope - 1
        verdict = "significant" if t.supports_claim(alpha) else "not significant"
        parts.append(f"{t.bucket} GPUs: {change:+.0%} delay per extra server "
                     f"({percent_label(t.ci_level)} CI {10 ** t.ci_low - 1:+.0%}..{10 ** t.ci_high - 1:+.0%}, "
                     f"one-sided p={t.p_negative:.2g}, {verdict})")
    supported = [t.bucket for t in trends if t.supports_claim(alpha)]
    if len(supported) == len(trends):
        head = "Jobs spread over more servers waited less"
    elif supported:
        head = f"Jobs spread over more servers waited less only for {', '.join(supported)} GPUs"
    else:
        head = "Our data does not show that jobs spread over more servers waited less"
    return f"{head}: " + "; ".join(parts) + "."


def format_seconds(seconds: float) -> str:
    """A duration for prose: '45 s', '12.5 min', '3.2 h', '2.1 d', '-1.5 h' ('n/a' for None or NaN).

    The one such helper of the library (the experiments' sentences use it too).
    """
    if seconds is None or not np.isfinite(seconds):
        return "n/a"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def with_first_attempts(jobs: pd.DataFrame, first_waits: pd.DataFrame, tolerance_s: float = 60.0) -> pd.DataFrame:
    """Jobs whose records keep only their last attempt (the DRE records), put back on first-attempt terms.

    ``first_waits``: per jobid, ``recorded_wait_s`` (last start - submit) and ``first_wait_s`` (first start -
    submit, reconstructed: :func:`dlcluster.validation.workload.dre_first_waits`). A job whose two agree within
    ``tolerance_s`` ran once: its record's servers are its first attempt's, and its wait is the first-attempt
    wait. Any other job of those records (retried, or not reconstructed) gets servers unknown, so Figure 4
    counts it as left out; jobs not in those records are unchanged.
    """
    require_columns(first_waits, ["jobid", "recorded_wait_s", "first_wait_s"], "first_waits")
    out = jobs.copy()
    once = first_waits[(first_waits["recorded_wait_s"] - first_waits["first_wait_s"]).abs() <= tolerance_s]
    recorded = out["source"].eq("dre") if "source" in out.columns else out["jobid"].isin(first_waits["jobid"])
    first = out["jobid"].map(once.set_index("jobid")["first_wait_s"])
    out.loc[recorded, "num_servers"] = out.loc[recorded, "num_servers"].where(first[recorded].notna())
    out.loc[recorded, "queueing_delay_s"] = first[recorded]
    return out
