"""Confidence intervals that respect the quantity, and the rule for naming a direction.

The experiments measure a handful of seeds (measurement windows of the held-out span, three by default), so
every interval is a 95% interval over seeds that must be able to be true:

* a **duration** or any other **positive** quantity: Student t on the log scale (the interval never reaches 0);
* a **share**: Student t on the logit scale (the interval stays inside [0, 1]);
* a **change between two arms**: paired seed by seed (the same window under both arms), as the ratio
  after / before, Student t on the log scale of the per-seed ratios (a reduction stays above -100%);
* wherever such a scale is not defined (a seed with a wait of exactly 0, a share of exactly 0 or 1), a percentile
  bootstrap of the mean (:func:`scipy.stats.bootstrap`), which cannot leave the range of the values.

On the **block design** (one replay per arm, measured in consecutive time blocks: :func:`pooled_interval`,
:func:`pooled_ratio_interval`) the replicates are the blocks, which are not independent (a backlog carries over
from one week into the next). Their intervals are a **circular moving-block bootstrap** (Politis & Romano 1992):
runs of :func:`block_length` neighbouring blocks drawn with replacement, so that the dependence within a run is
kept. The value is **pooled** over the blocks (a mean JCT is the sum of the jobs' JCTs over their count, a ratio of
sums), so that every job weighs the same whatever its block; each resample recomputes it, so a share stays in
[0, 1] and a ratio above 0 (a percentile interval of a pooled value cannot leave the quantity's range).

A sentence names a direction ("cut", "raised") only when the interval of the change excludes no change
(:func:`direction`); otherwise it says there was no significant difference at that many seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special, stats

CONFIDENCE = 0.95
QUANTITIES = ("duration", "positive", "share", "real")
#: resamples of the bootstrap where no scale fits (seeded: the same values give the same interval)
BOOTSTRAP_RESAMPLES = 9999


@dataclass(frozen=True)
class Interval:
    """A point estimate and its interval over ``n`` seeds; ``method`` says how the interval was made."""

    mean: float
    low: float
    high: float
    n: int
    method: str
    #: the smallest relative change this comparison could detect (80% power, 5% two-sided), NaN where not computed
    detectable: float = float("nan")
    #: what the replicates are worth as independent ones (:func:`effective_n`; runs x effective blocks for
    #: :func:`combine_runs`), NaN where not computed
    effective_n: float = float("nan")

    @property
    def known(self) -> bool:
        """A point and both ends (an end may be infinite: a ratio interval without an upper bound)."""
        return not any(math.isnan(v) for v in (self.mean, self.low, self.high))

    def above(self, value: float) -> bool:
        return self.known and self.low > value

    def below(self, value: float) -> bool:
        return self.known and self.high < value


def _values(values) -> np.ndarray:
    return pd.Series(values, dtype="float64").replace([np.inf, -np.inf], np.nan).dropna().to_numpy()


def _t_interval(v: np.ndarray, confidence: float) -> tuple[float, float]:
    """Student-t interval of the mean of ``v`` (collapses to the mean when every value is the same)."""
    mean, sd = float(v.mean()), float(v.std(ddof=1))
    if sd == 0:
        return mean, mean
    low, high = stats.t.interval(confidence, df=len(v) - 1, loc=mean, scale=sd / math.sqrt(len(v)))
    return float(low), float(high)


def _bootstrap_interval(v: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile bootstrap of the mean of ``v`` (scipy), inside the range of the values."""
    if np.ptp(v) == 0:
        return float(v[0]), float(v[0])
    res = stats.bootstrap((v,), np.mean, confidence_level=confidence, n_resamples=BOOTSTRAP_RESAMPLES,
                          method="percentile", rng=np.random.default_rng(0))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def mean_interval(values, quantity: str = "real", confidence: float = CONFIDENCE) -> Interval:
    """Mean of per-seed ``values`` and its interval on the scale of ``quantity`` (one of :data:`QUANTITIES`).

    ``duration`` / ``positive``: log scale where every value is > 0; ``share``: logit scale where every value
    is inside (0, 1); ``real``: Student t. Else a percentile bootstrap. NaN with fewer than 2 values.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
    v = _values(values)
    n = len(v)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "no value")
    mean = float(v.mean())
    if n < 2:
        return Interval(mean, float("nan"), float("nan"), n, "one value")
    if quantity in ("duration", "positive") and (v > 0).all():
        with np.errstate(over="ignore"):
            low, high = np.exp(_t_interval(np.log(v), confidence))
        method = "Student t on the log scale"
    elif quantity == "share" and ((v > 0) & (v < 1)).all():
        low, high = special.expit(_t_interval(special.logit(v), confidence))
        method = "Student t on the logit scale"
    elif quantity == "real":
        low, high = _t_interval(v, confidence)
        method = "Student t"
    else:
        low, high = _bootstrap_interval(v, confidence)
        method = "percentile bootstrap"
    # a transformed interval is around the geometric mean (or the logit mean); the arithmetic mean shown beside it
    # can sit just outside when the seeds disagree a lot: widen to include it rather than show an interval without
    # its own estimate
    return Interval(mean, min(float(low), mean), max(float(high), mean), n, method)


def ratio_interval(after, before, confidence: float = CONFIDENCE) -> Interval:
    """The relative change from ``before`` to ``after`` (paired, seed by seed): ``after / before - 1``.

    Student t on the log of the per-seed ratios, so the point is the geometric mean of the ratios minus 1 and a
    reduction stays above -100%; where a ratio is 0 (an ``after`` of 0), a percentile bootstrap of the per-seed
    changes. Seeds with a ``before`` of 0 or a missing value have no ratio and are left out.
    """
    a, b = (pd.Series(np.asarray(x, dtype=float)) for x in (after, before))
    if len(a) != len(b):
        raise ValueError(f"ratio_interval: {len(a)} values after but {len(b)} before (they are paired by seed)")
    ratio = _values((a / b.where(b > 0)).where(a >= 0))
    n = len(ratio)
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "no ratio")
    if n < 2:
        return Interval(float(ratio[0] - 1), float("nan"), float("nan"), 1, "one ratio")
    if (ratio > 0).all():
        logs = np.log(ratio)
        low, high = _t_interval(logs, confidence)
        with np.errstate(over="ignore"):   # an upper end past the float range is infinite, not an error
            ends = np.exp([logs.mean(), low, high]) - 1
        return Interval(float(ends[0]), float(ends[1]), float(ends[2]), n,
                        "paired by seed, Student t on the log of the ratios")
    change = ratio - 1
    low, high = _bootstrap_interval(change, confidence)
    return Interval(float(change.mean()), low, high, n, "paired by seed, percentile bootstrap of the changes")


def difference_interval(after, before, confidence: float = CONFIDENCE) -> Interval:
    """The paired difference ``after - before``, seed by seed: Student t of the differences."""
    a, b = (pd.Series(np.asarray(x, dtype=float)) for x in (after, before))
    if len(a) != len(b):
        raise ValueError(f"difference_interval: {len(a)} values after but {len(b)} before (paired by seed)")
    d = _values(a - b)
    if len(d) < 2:
        return Interval(float(d[0]) if len(d) else float("nan"), float("nan"), float("nan"), len(d),
                        "fewer than 2 paired seeds")
    low, high = _t_interval(d, confidence)
    return Interval(float(d.mean()), low, high, len(d), "paired by seed, Student t of the differences")


def not_significant(n: int, unit: str = "seed") -> str:
    """The words for a change whose interval includes no change (``unit``: what the replicates are)."""
    return f"no significant difference at {n} {unit}{'' if n == 1 else 's'}"


def replicate_unit(change: Interval) -> str:
    """What the replicates of an interval are: blocks of one replay (the block design) or seeds."""
    return "block" if "block" in change.method else "seed"


def direction(change: Interval, up: str = "raised", down: str = "cut", no_change: float = 0.0) -> str:
    """``up`` or ``down`` only when the interval of ``change`` excludes ``no_change``; else
    :func:`not_significant` (or 'not computable' without an interval)."""
    if not change.known:
        return f"changed (no interval: fewer than 2 {replicate_unit(change)}s with a value)"
    if change.above(no_change):
        return up
    if change.below(no_change):
        return down
    return not_significant(change.n, replicate_unit(change))


def changed(change: Interval, what: str, up: str = "raised", down: str = "cut") -> str:
    """'cut their mean JCT', or 'made no significant difference at 3 seeds to their mean JCT'."""
    verb = direction(change, up, down)
    if verb.startswith("no significant"):
        return f"made {verb} to {what}"
    return f"{verb} {what}"


# --------------------------------------------------------------------------- the block design

#: resamples of the block bootstrap (seeded: the same values give the same interval)
BLOCK_RESAMPLES = 4999
#: z of a two-sided 5% test plus z of 80% power: the smallest detectable change is this many standard errors
DETECTABLE_Z = float(stats.norm.ppf(0.975) + stats.norm.ppf(0.80))


def block_length(n_blocks: int) -> int:
    """Neighbouring blocks drawn together: n^(1/3), rounded (the rate that balances the bootstrap's bias and
    variance for a mean, Hall, Horowitz & Jing 1995): 2 for the 7 weekly blocks of the default, 2 for 12 days."""
    return max(1, int(round(n_blocks ** (1 / 3))))


def circular_block_samples(n_blocks: int, resamples: int = BLOCK_RESAMPLES, length: int | None = None,
                           seed: int = 0) -> np.ndarray:
    """``resamples`` x ``n_blocks`` block indices: runs of ``length`` consecutive blocks (wrapping around the end)
    from uniformly drawn starts, concatenated and cut to ``n_blocks``."""
    length = block_length(n_blocks) if length is None else int(length)
    runs = -(-n_blocks // length)
    starts = np.random.default_rng(seed).integers(0, n_blocks, size=(resamples, runs))
    index = (starts[:, :, None] + np.arange(length)[None, None, :]) % n_blocks
    return index.reshape(resamples, -1)[:, :n_blocks]


def _pooled(values: np.ndarray, weights: np.ndarray, index=None) -> np.ndarray:
    v, w = (values, weights) if index is None else (values[index], weights[index])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (v * w).sum(axis=-1) / w.sum(axis=-1)


def _block_arrays(values, weights) -> tuple[np.ndarray, np.ndarray]:
    v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    if v.shape != w.shape:
        raise ValueError(f"{v.size} block values but {w.size} weights")
    # a block without a value (no job of the kind in it) weighs nothing
    w = np.where(np.isfinite(v) & np.isfinite(w), w, 0.0)
    return np.where(w > 0, v, 0.0), w


def pooled_interval(values, weights, confidence: float = CONFIDENCE) -> Interval:
    """The pooled value of per-block ``values`` (sum of ``weights`` x values over the sum of weights: the jobs'
    mean over every block when the weights are the blocks' job counts) and its circular block bootstrap
    interval. ``values`` in time order."""
    v, w = _block_arrays(values, weights)
    n = int((w > 0).sum())
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "no value")
    point = float(_pooled(v, w))
    if n < 2:
        return Interval(point, float("nan"), float("nan"), n, "one block")
    samples = _pooled(v, w, circular_block_samples(len(v)))
    low, high = np.nanquantile(samples, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(point, min(float(low), point), max(float(high), point), n,
                    f"pooled over {n} blocks, circular block bootstrap (runs of {block_length(len(v))})")


def pooled_ratio_interval(after, after_weights, before, before_weights, confidence: float = CONFIDENCE) -> Interval:
    """The relative change ``pooled(after) / pooled(before) - 1`` of two arms measured on the same blocks (the same
    jobs), with its circular block bootstrap interval: both arms resampled on the same blocks, so the pairing
    holds. For a mean JCT this is the ratio of the sums of JCT (per job), not a mean of per-block ratios.
    ``detectable``: the smallest change the comparison could detect (80% power, 5% two-sided), from the
    bootstrap's standard error of the log ratio."""
    a, wa = _block_arrays(after, after_weights)
    b, wb = _block_arrays(before, before_weights)
    if a.shape != b.shape:
        raise ValueError(f"pooled_ratio_interval: {a.size} blocks after but {b.size} before (paired by block)")
    n = int(((wa > 0) & (wb > 0)).sum())
    point_b = float(_pooled(b, wb))
    if n == 0 or not point_b > 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "no ratio")
    point = float(_pooled(a, wa)) / point_b - 1
    if n < 2:
        return Interval(point, float("nan"), float("nan"), n, "one block")
    index = circular_block_samples(len(a))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = _pooled(a, wa, index) / _pooled(b, wb, index)
    ratios = ratios[np.isfinite(ratios)]
    low, high = np.quantile(ratios, [(1 - confidence) / 2, (1 + confidence) / 2]) - 1
    positive = ratios[ratios > 0]
    detectable = float(np.expm1(DETECTABLE_Z * np.log(positive).std(ddof=1))) if len(positive) > 1 else float("nan")
    return Interval(point, min(float(low), point), max(float(high), point), n,
                    f"paired by block, ratio of pooled values, circular block bootstrap (runs of "
                    f"{block_length(len(a))})", detectable, effective_n(block_log_ratios(a, wa, b, wb)))


def block_log_ratios(after, after_weights, before, before_weights) -> np.ndarray:
    """The per-block log ratios ``log(after / before)`` of the blocks where both arms have a positive value: the
    series whose dependence :func:`effective_n` measures for a paired change."""
    a, wa = _block_arrays(after, after_weights)
    b, wb = _block_arrays(before, before_weights)
    keep = (wa > 0) & (wb > 0) & (a > 0) & (b > 0)
    return np.log(a[keep] / b[keep])


def pooled_difference_interval(after, after_weights, before, before_weights,
                               confidence: float = CONFIDENCE) -> Interval:
    """``pooled(after) - pooled(before)`` over the same blocks, with its circular block bootstrap interval."""
    a, wa = _block_arrays(after, after_weights)
    b, wb = _block_arrays(before, before_weights)
    n = int(((wa > 0) & (wb > 0)).sum())
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "no value")
    point = float(_pooled(a, wa) - _pooled(b, wb))
    if n < 2:
        return Interval(point, float("nan"), float("nan"), n, "one block")
    index = circular_block_samples(len(a))
    diffs = _pooled(a, wa, index) - _pooled(b, wb, index)
    low, high = np.nanquantile(diffs, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(point, min(float(low), point), max(float(high), point), n,
                    f"paired by block, difference of pooled values, circular block bootstrap (runs of "
                    f"{block_length(len(a))})")


# --------------------------------------------------------------------------- dependence and steady state

def lag1_autocorrelation(values) -> float:
    """The lag-1 sample autocorrelation of a series (its mean removed; NaN with fewer than 3 values or none of
    them different)."""
    v = _values(values)
    if len(v) < 3:
        return float("nan")
    d = v - v.mean()
    denominator = float((d * d).sum())
    return float((d[:-1] * d[1:]).sum() / denominator) if denominator > 0 else float("nan")


def effective_n(values) -> float:
    """How many independent replicates a series of ``n`` per-block values is worth: ``n (1 - r1) / (1 + r1)``,
    ``r1`` its lag-1 autocorrelation, clipped to [1, n].

    Why: blocks of one run are not independent (a backlog carries over from one week into the next). Under an AR(1)
    dependence the variance of the mean is that of ``n (1 - r1) / (1 + r1)`` independent values (the AR(1)
    variance inflation: Bayley & Hammersley 1946, J. R. Stat. Soc. Suppl. 8, 184; Zwiers & von Storch 1995, J. Climate
    8, 336, who also show that with few values ``r1`` is biased low, so that this errs high). A negative ``r1`` would
    claim more than ``n``: clipped to ``n``. Fewer than 3 values, or a constant series, leave ``n`` (no correlation
    can be estimated)."""
    n = len(_values(values))
    r1 = lag1_autocorrelation(values)
    if not np.isfinite(r1):
        return float(n)
    if r1 >= 1:
        return 1.0
    return float(min(max(n * (1 - r1) / (1 + r1), 1.0), n))


#: A queue is unstable only when its fitted line ends at least this many times where it starts: a wait that
#: doubles over the run changes any ratio taken over it by far more than the ±10-point target.
GROWTH_FACTOR = 2.0
#: ... and grows by at least this much over the run (an hour, seconds): a wait that grows from 10 s to 40 s is a
#: trend, not a queue without a steady state that a JCT of hours would notice.
MIN_GROWTH_S = 3600.0
#: The one-sided level of the trend test (growth is the only direction that makes an arm unstable).
TREND_LEVEL = 0.05
WEEK_DAYS = 7.0


@dataclass(frozen=True)
class Stability:
    """Whether an arm's queue has a steady state over its blocks (:func:`stability`), with the growth behind it.

    Durations in seconds; growth per week (from the blocks' length)."""

    stable: bool
    #: the least-squares slope of the per-block mean total wait, per week
    growth_per_week_s: float
    #: its one-sided 95% lower bound (AR(1)-adjusted, Santer et al. 2000): > 0 means the wait grows
    growth_lower_s: float
    #: the slope's t statistic (on the adjusted standard error)
    t: float
    #: the same slope and lower bound for the mean JCT (shown, not part of the rule)
    jct_growth_per_week_s: float
    jct_growth_lower_s: float
    #: the fitted line's mean total wait at the first and at the last block
    start_s: float
    end_s: float
    #: blocks with a value, and what they are worth as independent replicates (the residuals' :func:`effective_n`)
    n: int
    effective_n: float
    reason: str
    #: the reason in a few words, without the numbers (a table's column beside the growth columns)
    why: str = ""

    @property
    def factor(self) -> float:
        """How many times the fitted line ends where it starts (inf from a start at or below 0)."""
        if not (np.isfinite(self.start_s) and np.isfinite(self.end_s)):
            return float("nan")
        return self.end_s / self.start_s if self.start_s > 0 else float("inf")

    @property
    def growth_text(self) -> str:
        """'10.4 h per week': the mean wait's growth in words."""
        return f"{hours_text(self.growth_per_week_s)} per week"


def hours_text(seconds: float) -> str:
    """A duration in hours above an hour, else minutes or seconds, one decimal: '10.4 h', '12.0 min', '30 s'."""
    if not np.isfinite(seconds):
        return "n/a"
    sign, s = ("−" if seconds < 0 else ""), abs(seconds)
    if s >= 3600:
        return f"{sign}{s / 3600:.1f} h"
    if s >= 60:
        return f"{sign}{s / 60:.1f} min"
    return f"{sign}{s:.0f} s"


def trend(x, y, level: float = TREND_LEVEL) -> tuple[float, float, float, float, float]:
    """Least-squares slope of ``y`` on ``x`` with its one-sided ``1 - level`` lower bound, its t statistic and the
    effective n of the residuals: ``(slope, lower, t, effective_n, intercept)``.

    The standard error is adjusted for lag-1 autocorrelation of the residuals as Santer et al. (2000, J. Geophys.
    Res. 105(D6), 7337) do for a trend in a short autocorrelated series: the residual variance over
    ``n_e - 2`` and a t with ``n_e - 2`` degrees of freedom, ``n_e`` the residuals' :func:`effective_n`. Fewer than 3
    points, or ``n_e <= 2``: no lower bound (-inf)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    if n < 2:
        return float("nan"), float("-inf"), float("nan"), float(n), float("nan")
    xc = x - x.mean()
    sxx = float((xc * xc).sum())
    slope = float((xc * (y - y.mean())).sum() / sxx) if sxx > 0 else float("nan")
    intercept = float(y.mean() - slope * x.mean())
    if n < 3 or not np.isfinite(slope):
        return slope, float("-inf"), float("nan"), float(n), intercept
    residuals = y - (intercept + slope * x)
    n_e = effective_n(residuals)
    if n_e <= 2:
        return slope, float("-inf"), float("nan"), n_e, intercept
    se = math.sqrt(float((residuals * residuals).sum()) / (n_e - 2) / sxx)
    if se == 0:
        return slope, slope, float("inf") if slope > 0 else float("nan"), n_e, intercept
    lower = slope - float(stats.t.ppf(1 - level, n_e - 2)) * se
    return slope, lower, slope / se, n_e, intercept


def _one_arm_blocks(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-block rows of one arm: its 'all' bucket of all jobs where the table has buckets and populations,
    in block order, the first row of a block that appears more than once (another cell seed of the same replay, as
    :func:`.common.paired_interval` pairs them); an error for the rows of more than one arm."""
    if "bucket" in rows.columns:
        rows = rows[rows["bucket"] == "all"]
    if "population" in rows.columns and (rows["population"] == "all jobs").any():
        rows = rows[rows["population"] == "all jobs"]
    if "arm" in rows.columns and rows["arm"].nunique() > 1:
        raise ValueError(f"stability: the rows of {rows['arm'].nunique()} arms (pass the rows of one arm)")
    block = "block" if "block" in rows.columns else "seed"
    rows = rows.sort_values(block, kind="stable").drop_duplicates(block, keep="first")
    return rows.assign(_block=lambda r: r[block].astype(float))


def stability(rows: pd.DataFrame, metric: str = "wait_total_mean_s") -> Stability:
    """Whether one arm's queue has a steady state over the run, from its per-block rows (the block design: one
    replay per arm measured in consecutive blocks; columns ``block`` (or ``seed``), ``block_days``, ``metric``,
    ``jct_mean_s``).

    **The rule.** An arm is *unstable* when its per-block mean total wait grows with the block index, all three:

    1. the least-squares slope's one-sided 95% lower bound is above 0, its standard error adjusted for the
       residuals' lag-1 autocorrelation (Santer et al. 2000; :func:`trend`): a trend the blocks' noise and their
       dependence cannot explain;
    2. the fitted line ends at least :data:`GROWTH_FACTOR` (2) times where it starts (or starts at or below 0): the
       growth is large against the wait's own level, so a ratio taken over the run depends on how long it lasts;
    3. the fitted line grows by at least :data:`MIN_GROWTH_S` (an hour) over the run.

    A fitted line, not the first and last blocks themselves, so that one busy block at either end decides nothing;
    a single spike anywhere inflates the residuals and fails (1). One-sided: a queue that shrinks is draining
    toward a steady state, not away from one. Not a block design (independent seeds), or fewer than 3 blocks with a
    value: stable, with the reason. The mean JCT's slope is reported beside it, not used.
    """
    if "block_days" not in rows.columns or not (rows["block_days"].fillna(0) > 0).any():
        return _no_test(len(rows), "not a block design: the replicates are independent seeds, not consecutive blocks")
    blocks = _one_arm_blocks(rows)
    per_week = WEEK_DAYS / float(blocks["block_days"].median())
    have = blocks[np.isfinite(blocks[metric].to_numpy(float))]
    n = len(have)
    if n < 3:
        return _no_test(n, f"{n} block{'s' if n != 1 else ''} with a value: no trend can be tested")
    x, y = have["_block"].to_numpy(float), have[metric].to_numpy(float)
    slope, lower, t, n_e, intercept = trend(x, y)
    start, end = intercept + slope * x.min(), intercept + slope * x.max()
    jct = have[np.isfinite(have["jct_mean_s"].to_numpy(float))] if "jct_mean_s" in have.columns else have.iloc[:0]
    jct_slope, jct_lower, *_ = trend(jct["_block"], jct["jct_mean_s"]) if len(jct) >= 3 else (np.nan, np.nan)
    grows = lower > 0
    factor_ok = start <= 0 or end >= GROWTH_FACTOR * start
    large = end - start >= MIN_GROWTH_S
    fitted = (f"fitted {hours_text(start)} to {hours_text(end)} over {n} blocks"
              + (f", ×{end / start:.1f}" if start > 0 else ""))
    growth = f"{hours_text(slope * per_week)} per week (one-sided 95% lower bound {hours_text(lower * per_week)})"
    if grows and factor_ok and large:
        why = "grows block after block"
        reason = f"unstable: the mean wait grows {growth}, {fitted}"
    elif not grows:
        why = "no growth beyond the blocks' noise"
        reason = f"stable: no growth the blocks' noise cannot explain ({growth})"
    elif not factor_ok:
        why = f"grows by less than ×{GROWTH_FACTOR:g}"
        reason = f"stable: the mean wait grows by less than ×{GROWTH_FACTOR:g} over the run ({fitted})"
    else:
        why = f"grows by less than {hours_text(MIN_GROWTH_S)}"
        reason = f"stable: the mean wait grows by less than {hours_text(MIN_GROWTH_S)} over the run ({fitted})"
    return Stability(bool(not (grows and factor_ok and large)), slope * per_week, lower * per_week, t,
                     jct_slope * per_week, jct_lower * per_week, start, end, n, n_e, reason, why)


def _no_test(n: int, reason: str) -> Stability:
    nan = float("nan")
    return Stability(True, nan, nan, nan, nan, nan, nan, nan, n, float(n), f"stable: {reason}",
                     "not tested: " + reason.split(":")[0])


# --------------------------------------------------------------------------- several whole runs

#: A run's log-ratio variance at or below this is none: every block gives the same ratio (up to rounding)
ZERO_LOG_VARIANCE = 1e-20
#: One whole run of a paired comparison on the block design: per-block ``(after, after_weights, before,
#: before_weights)``, in time order (:func:`pooled_ratio_interval`'s arguments).
RunBlocks = tuple


def _run_estimate(run, confidence: float) -> tuple[float, float, float, int]:
    """One run's log ratio, its variance, its effective n and its block count. From blocks: the log of the pooled
    ratio, the variance of the circular block bootstrap's log ratios, :func:`effective_n` of the per-block log
    ratios. From an :class:`Interval` (of a relative change): the log of 1 + its point, the variance from its ends
    on the log scale (a normal interval there), its ``effective_n`` (else ``n``)."""
    z = float(stats.norm.ppf((1 + confidence) / 2))
    if isinstance(run, Interval):
        if not run.known or run.low <= -1 or not np.isfinite(run.high):
            raise ValueError(f"combine_runs: an interval without finite ends above -100% ({run})")
        se = (math.log1p(run.high) - math.log1p(run.low)) / (2 * z)
        n_e = run.effective_n if np.isfinite(run.effective_n) else float(run.n)
        return math.log1p(run.mean), se * se, n_e, run.n
    a, wa = _block_arrays(run[0], run[1])
    b, wb = _block_arrays(run[2], run[3])
    if a.shape != b.shape:
        raise ValueError(f"combine_runs: {a.size} blocks after but {b.size} before (paired by block)")
    n = int(((wa > 0) & (wb > 0)).sum())
    point_b = float(_pooled(b, wb))
    if n < 2 or not point_b > 0 or not float(_pooled(a, wa)) > 0:
        raise ValueError("combine_runs: a run needs 2 paired blocks and a positive pooled value in both arms")
    index = circular_block_samples(len(a))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = _pooled(a, wa, index) / _pooled(b, wb, index)
    logs = np.log(ratios[np.isfinite(ratios) & (ratios > 0)])
    return (math.log(float(_pooled(a, wa)) / point_b), float(logs.var(ddof=1)),
            effective_n(block_log_ratios(a, wa, b, wb)), n)


def combine_runs(runs, confidence: float = CONFIDENCE) -> Interval:
    """The relative change ``after / before - 1`` of a paired comparison measured in several whole runs (the same
    arms under different draws: VC or latency draws, another failure seed), combined.

    Why: the blocks of one run are not independent replicates (a backlog carries over), and a draw that moves a whole
    run moves every block of it; runs under different draws are. Each run (its per-block values, :data:`RunBlocks`,
    or its :class:`Interval`) gives a log ratio with its variance from the circular block bootstrap within it
    (:func:`pooled_ratio_interval`'s); the runs are independent and are combined on the log scale by inverse variance
    with the DerSimonian & Laird (1986, Control. Clin. Trials 7, 177) between-run variance (0 when the runs agree
    within their blocks' noise: the fixed-effect combination; larger when a draw moves the answer more than the
    blocks explain). The interval is on the log scale, so a reduction stays above -100%: normal when the runs agree;
    with a between-run variance above 0, Hartung-Knapp's (Student t on ``R - 1`` degrees of freedom, the variance
    scaled by the runs' weighted spread, never below 1: Röver, Knapp & Friede 2015, BMC Med. Res. Methodol. 15, 99),
    since with few runs the between-run variance is itself uncertain and a normal interval would cover too little.
    ``effective_n``: runs x effective blocks, the sum of each run's :func:`effective_n`. A run whose blocks all give
    the same ratio has no variance: then the runs' log ratios decide alone (their Student t, or the point itself when
    they agree).
    """
    estimates = [_run_estimate(run, confidence) for run in runs]
    if not estimates:
        return Interval(float("nan"), float("nan"), float("nan"), 0, "no run")
    theta, var, n_e, blocks = (np.array(x, dtype=float) for x in zip(*estimates, strict=True))
    r = len(theta)
    method = f"{r} runs × blocks, circular block bootstrap within each run"
    n_eff = float(n_e.sum())
    if (var <= ZERO_LOG_VARIANCE).any():
        # a run without block noise: its ratio is exact, and only the runs' disagreement is left
        if np.ptp(theta) == 0 or r < 2:
            ends = np.expm1([theta.mean()] * 3)
            return Interval(float(ends[0]), float(ends[1]), float(ends[2]), int(blocks.sum()),
                            f"{method}; every block gives the same ratio", effective_n=n_eff)
        low, high = _t_interval(theta, confidence)
        ends = np.expm1([theta.mean(), low, high])
        return Interval(float(ends[0]), float(ends[1]), float(ends[2]), int(blocks.sum()),
                        f"{method}; Student t of the runs' log ratios", effective_n=n_eff)
    w = 1 / var
    fixed = float((w * theta).sum() / w.sum())
    q = float((w * (theta - fixed) ** 2).sum())
    tau2 = max(0.0, (q - (r - 1)) / float(w.sum() - (w * w).sum() / w.sum())) if r > 1 else 0.0
    w_star = 1 / (var + tau2)
    mean = float((w_star * theta).sum() / w_star.sum())
    if tau2 > 0:
        scale = max(1.0, float((w_star * (theta - mean) ** 2).sum()) / (r - 1))
        half = float(stats.t.ppf((1 + confidence) / 2, r - 1)) * math.sqrt(scale / float(w_star.sum()))
    else:
        half = float(stats.norm.ppf((1 + confidence) / 2)) / math.sqrt(float(w_star.sum()))
    with np.errstate(over="ignore"):
        ends = np.expm1([mean, mean - half, mean + half])
    between = (f"; between-run variance {tau2:.3g} (DerSimonian-Laird), Hartung-Knapp t on {r - 1} df" if tau2 > 0
               else "; runs agree within their blocks' noise (fixed effect)")
    detectable = float(np.expm1(DETECTABLE_Z / math.sqrt(float(w_star.sum()))))
    return Interval(float(ends[0]), float(ends[1]), float(ends[2]), int(blocks.sum()),
                    f"{method}, inverse-variance on the log scale{between}; effective n {n_eff:.1f}",
                    detectable, n_eff)
