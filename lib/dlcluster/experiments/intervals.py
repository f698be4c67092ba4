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
                    f"{block_length(len(a))})", detectable)


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
