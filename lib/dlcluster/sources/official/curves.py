"""Numbers read off digitized curves, and the distance from a digitized curve to a sample of ours.

A digitized series is one row per pixel column it crosses (:data:`.digitize.POINT_COLUMNS`): the CDF values it
spans there, ``cdf_low``..``cdf_high``. Everything here uses the rows flagged ``observed`` or ``interpolated``
(a dash gap); rows ``hidden`` under another line are left out unless a function says otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

VISIBLE = ("observed", "interpolated")
#: The one-sample Kolmogorov-Smirnov 5% critical value is KS_CRITICAL_95 / sqrt(n) (as a share; x100 in points).
KS_CRITICAL_95 = 1.358


def visible(points: pd.DataFrame) -> pd.DataFrame:
    return points[points["flag"].isin(VISIBLE)]


def crossing(points: pd.DataFrame, level: float) -> float:
    """The x where the curve first reaches ``level`` (CDF points): the first column whose span reaches it.

    NaN when the curve never reaches it within the axes (e.g. a 90th percentile beyond the x limit) or when
    the curve is already above it at its first visible column (the crossing is left of the axes or hidden).
    """
    part = visible(points).sort_values("x", kind="stable")
    if part.empty:
        return float("nan")
    reached = np.flatnonzero(part["cdf_high"].to_numpy() >= level)
    if len(reached) == 0 or (reached[0] == 0 and part["cdf_low"].iloc[0] > level):
        return float("nan")
    return float(part["x"].iloc[reached[0]])


def value_at(points: pd.DataFrame, x: float) -> float:
    """The curve's CDF value (centre of its span) at ``x``, interpolated between columns (NaN outside them)."""
    part = visible(points).sort_values("x", kind="stable")
    if part.empty or x < part["x"].iloc[0] or x > part["x"].iloc[-1]:
        return float("nan")
    return float(np.interp(x, part["x"], part["cdf"]))


def mean_bounds(points: pd.DataFrame) -> tuple[float, float]:
    """Bounds on the mean of a 0..100 % quantity from its digitized CDF: integral over x of (1 - F(x)).

    Every row counts (hidden ones too: under the covering line is where the curve is), gaps between columns are
    bridged linearly. Before the first column the CDF is only known to lie in [0, F(first)] and after the last
    in [F(last), 100] (a CDF never decreases): those stretches give the bounds' width.
    """
    part = points.sort_values("x", kind="stable")
    if part.empty:
        return float("nan"), float("nan")
    x = part["x"].to_numpy()
    f = np.maximum.accumulate(np.clip(part["cdf"].to_numpy(), 0.0, 100.0)) / 100.0
    inner = float(np.trapezoid(1.0 - f, x))
    head_low, head_high = x[0] * (1.0 - f[0]), x[0]
    tail_low, tail_high = 0.0, (100.0 - x[-1]) * (1.0 - f[-1])
    return inner + head_low + tail_low, inner + head_high + tail_high


def mean_percent(points: pd.DataFrame, max_width: float = 2.0) -> float:
    """The middle of :func:`mean_bounds` (Figures 5-7), NaN when the bounds are wider than ``max_width`` points."""
    low, high = mean_bounds(points)
    return (low + high) / 2 if high - low <= max_width else float("nan")


def column_slack(points: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Each row's x span widened by one pixel column either side: a 1.5 px line spills into the next column, so
    the raster places a steep stretch only to within a column."""
    left, right = points["x_left"].to_numpy(dtype=float), points["x_right"].to_numpy(dtype=float)
    log = (points["x_scale"] == "log").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        wide_left = np.where(log, left * left / right, 2 * left - right)
        wide_right = np.where(log, right * right / left, 2 * right - left)
    return wide_left, wide_right


def ks_distance(points: pd.DataFrame, sample, weights=None) -> tuple[float, float]:
    """Largest vertical gap (CDF points) between a digitized curve and a sample's empirical CDF, and its x.

    Per pixel column, the sample's CDF over the column's x span widened by a column either side
    (:func:`column_slack`; [F(x_left-), F(x_right)]) is set against the curve's span there; the gap is the
    distance between the two intervals (0 where they overlap), so a curve is never penalised for where within
    its line's width a steep stretch lies. Only visible rows count.
    """
    part = visible(points)
    if part.empty:
        return float("nan"), float("nan")
    values = np.asarray(sample, dtype=float)
    w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)
    keep = np.isfinite(values) & (w > 0)
    values, w = values[keep], w[keep]
    if len(values) == 0:
        return float("nan"), float("nan")
    order = np.argsort(values, kind="stable")
    values, cum = values[order], np.cumsum(w[order])
    total = cum[-1]

    def cdf(x, strict):
        idx = np.searchsorted(values, x, side="left" if strict else "right")
        return 100.0 * np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0) / total

    wide_left, wide_right = column_slack(part)
    ours_low = cdf(wide_left, strict=True)
    ours_high = cdf(wide_right, strict=False)
    gap = np.maximum(0.0, np.maximum(part["cdf_low"].to_numpy() - ours_high, ours_low - part["cdf_high"].to_numpy()))
    i = int(np.argmax(gap))
    return float(gap[i]), float(part["x"].iloc[i])


def sampling_margin(n: float) -> float:
    """The KS distance (CDF points) a sample of ``n`` drawn from the curve itself exceeds 5% of the time."""
    return float(100.0 * KS_CRITICAL_95 / np.sqrt(n)) if n and n > 0 else float("nan")


def within_margin(ks: float, n: float, digitization_pp: float) -> tuple[bool | None, float, str]:
    """(within, allowed distance, text): whether the KS distance is within the digitization's worst error plus the
    5% sampling margin of our sample's size (None: no distance or no sample). The test only: the verdict it gives
    is decided by :func:`dlcluster.report.verdicts.judge` (``dlcluster.analysis.official.compare``)."""
    allowed = digitization_pp + sampling_margin(n)
    if not np.isfinite(ks) or not np.isfinite(allowed):
        return None, allowed, "no overlap between the curves" if not np.isfinite(ks) else "no sample"
    if ks <= allowed:
        return True, allowed, (f"KS {ks:.1f} <= {allowed:.1f} points (digitization {digitization_pp:.1f} + "
                               f"5% sampling margin {allowed - digitization_pp:.1f} for n={int(n):,})")
    margin = allowed - digitization_pp
    return False, allowed, (f"KS {ks:.1f} points, {ks - allowed:.1f} beyond the {allowed:.1f} allowed "
                            f"(digitization {digitization_pp:.1f} + sampling {margin:.1f}, n={int(n):,})")


def summarize(points: pd.DataFrame) -> pd.DataFrame:
    """Per figure, panel and series: rows by flag, the CDF at the left and right ends, median and 90th percentile,
    and (on 0-100 % axes) the mean."""
    rows = []
    for (figure, panel, series), part in points.groupby(["figure", "panel", "series"], sort=False):
        seen = visible(part).sort_values("x", kind="stable")
        percent = figure >= 5
        rows.append({
            "figure": figure, "panel": panel, "series": series, "columns": len(part),
            "observed": int((part["flag"] == "observed").sum()),
            "interpolated": int((part["flag"] == "interpolated").sum()),
            "hidden": int((part["flag"] == "hidden").sum()),
            "x_first": float(seen["x"].iloc[0]) if len(seen) else np.nan,
            "cdf_first": float(seen["cdf"].iloc[0]) if len(seen) else np.nan,
            "x_last": float(seen["x"].iloc[-1]) if len(seen) else np.nan,
            "cdf_last": float(seen["cdf"].iloc[-1]) if len(seen) else np.nan,
            "median": crossing(part, 50.0), "p90": crossing(part, 90.0),
            "mean": mean_percent(part) if percent else np.nan,
        })
    return pd.DataFrame(rows)
