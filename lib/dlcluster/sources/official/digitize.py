"""Read the official notebook's CDF figures back into numbers, with a flag on every point.

:func:`digitize_cdf_figure` finds the axes frame and fits each axis to its tick marks, finds the legend and
reads from it which series the figure holds (and, for Figure 3, the order they were drawn in), then follows each
series column by column by its colour (two black series apart by their line style). Each pixel column the curve
crosses gives one row: the CDF values it spans there (``cdf_low``..``cdf_high``; equal where the line is flat)
and a flag:

* ``observed``: the series' own ink is in this column;
* ``interpolated``: a gap no longer than the series' dash gap, bridged linearly between the ink either side;
* ``hidden``: no ink of its own, but a line drawn later covers the only place the curve can be (between its
  ink either side: a CDF never decreases): the row gives that line's extent there (``hidden_by``). Columns
  where the series touches another series' ink are flagged ``near_other`` (its visible ink there may be
  partly covered), and those touching the top or bottom of the axes frame ``hidden_by = "frame"`` (the spine
  covers up to half the line there). The columns next to the left and right spines, half covered by them,
  give no row.

No point is invented: a gap that is neither a dash gap nor covered (the legend box, the curve's start or end
beyond the visible ink) gives no row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import ndimage

from .figures import COLORS, DASH_GAP_PX, FigureSpec, Series
from .pixels import DigitizeError, Frame, composite_on_white, find_frame, find_legend, fit_axes, ink

LINE_WIDTH_PX = 1.5
COVERAGE_MIN = 0.2         # a pixel counts as a series' ink from this share covered
RUN_COVERAGE_MIN = 0.6     # a run of ink in a column must add up to this (a stray blended pixel does not)
MAX_RELATIVE_RESIDUAL = 0.3
FLAGS = ("observed", "interpolated", "hidden")
POINT_COLUMNS = ["figure", "panel", "series", "x", "x_left", "x_right", "x_scale", "cdf", "cdf_low", "cdf_high",
                 "flag", "hidden_by", "near_other", "column"]


@dataclass
class Band:
    """The rows a curve spans in one pixel column (row coordinates, top < bottom), and how it was found."""

    top: float
    bottom: float
    centre: float
    flag: str = "observed"
    hidden_by: str = ""
    near_other: bool = False


@dataclass(frozen=True)
class Digitized:
    """One figure read back: its points (``POINT_COLUMNS``), the fitted frame, the legend box, the series found."""

    spec: FigureSpec
    points: pd.DataFrame
    frame: Frame
    legend: tuple | None
    series: tuple


# --------------------------------------------------------------------------- ink per series


def classify_ink(rgb: np.ndarray, colors: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel: the index into ``colors`` of the line it belongs to (-1: none) and its coverage (0..1).

    A pixel belongs to the colour whose white blend explains it best, if that blend is close (relative
    residual); a pixel dark enough to be ink but explained by no single colour is ``-2`` (two lines blended), and
    so is a purple pixel between red and blue ones (red half over blue looks purple).
    """
    coverage = np.zeros(rgb.shape[:2])
    best = np.full(rgb.shape[:2], -1, dtype=int)
    best_rel = np.full(rgb.shape[:2], np.inf)
    darkness = np.linalg.norm(255.0 - rgb, axis=-1)
    for k, name in enumerate(colors):
        a, residual = ink(rgb, COLORS[name])
        rel = residual / np.maximum(darkness, 1.0)
        better = (rel < best_rel) & (rel <= MAX_RELATIVE_RESIDUAL) & (a >= COVERAGE_MIN)
        best[better], best_rel[better], coverage[better] = k, rel[better], a[better]
    best[(best == -1) & (darkness > 60)] = -2
    if {"red", "blue", "purple"} <= set(colors):
        # red drawn half over blue is purple: a purple pixel with red and blue pixels next to it is such a blend
        red, blue, purple = (best == colors.index(c) for c in ("red", "blue", "purple"))
        near = np.ones((3, 3), dtype=bool)
        blend = purple & ndimage.binary_dilation(red, near) & ndimage.binary_dilation(blue, near)
        best[blend] = -2
    return best, coverage


def _runs(column_cov: np.ndarray, first_row: int, max_gap: int,
          bridge: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Runs of ink down one column (rows, coverages): runs closer than ``max_gap`` empty rows are merged, and so
    are runs whose gap is filled by ``bridge`` (another line drawn over this one) but for ``max_gap`` rows."""
    rows = np.flatnonzero(column_cov > 0)
    if len(rows) == 0:
        return []
    gaps = np.diff(rows) - 1
    if bridge is not None:
        covered = np.concatenate([[0], np.cumsum(bridge.astype(int))])
        gaps = gaps - (covered[rows[1:]] - covered[rows[:-1] + 1])
    splits = np.flatnonzero(gaps > max_gap) + 1
    return [(first_row + part, column_cov[part]) for part in np.split(rows, splits)]


def _band(rows: np.ndarray, cov: np.ndarray) -> Band:
    """The stroke's extent in a column from its ink: flat lines by their centroid, steep ones by their ends."""
    centre = float(np.sum(rows * cov) / np.sum(cov))
    top_edge = rows[0] + 0.5 - cov[0]           # ink covers this share of its end pixels
    bottom_edge = rows[-1] - 0.5 + cov[-1]
    if bottom_edge - top_edge <= LINE_WIDTH_PX + 1.0:
        return Band(centre, centre, centre)
    return Band(top_edge + LINE_WIDTH_PX / 2, bottom_edge - LINE_WIDTH_PX / 2, centre)


def trace_series(cov: np.ndarray, frame: Frame, usable: np.ndarray, over: np.ndarray | None = None) -> dict[int, Band]:
    """Follow one series' ink left to right: the non-decreasing path through its runs of ink that holds the most.

    ``cov``: the series' coverage (0 elsewhere); ``usable``: pixels inside the axes, off the legend; ``over``:
    other ink (lines crossing or covering this one): a run broken only by it is one run. Each column's runs are
    candidates; a path may step from one to a later column's run when that run is not below it (rows grow
    downwards: its centre at most a pixel lower, its lowest ink no lower than the earlier run's top plus a
    line width). The path with the most ink wins (dynamic programming), so stray pixels of blended lines,
    however early, never pull the curve off its own ink.
    """
    top, bottom = frame.top + 1, frame.bottom - 1
    found = []
    for col in range(frame.left + 2, frame.right - 1):
        column = np.where(usable[top:bottom + 1, col], cov[top:bottom + 1, col], 0.0)
        bridge = None if over is None else over[top:bottom + 1, col]
        for rows, c in _runs(column, top, max_gap=4, bridge=bridge):
            if c.sum() >= RUN_COVERAGE_MIN:
                found.append((col, _band(rows, c), float(c.sum())))
    if not found:
        return {}
    cols = np.array([f[0] for f in found])
    tops = np.array([f[1].top for f in found])
    bottoms = np.array([f[1].bottom for f in found])
    centres = np.array([f[1].centre for f in found])
    weights = np.array([f[2] for f in found])
    score = weights.copy()
    previous = np.full(len(found), -1)
    for j in range(len(found)):
        allowed = np.flatnonzero((cols[:j] < cols[j]) & (bottoms[j] <= tops[:j] + LINE_WIDTH_PX + 1.0)
                                 & (centres[j] <= centres[:j] + 1.0))
        if len(allowed):
            best = allowed[np.argmax(score[allowed])]
            score[j] = weights[j] + score[best]
            previous[j] = best
    bands: dict[int, Band] = {}
    j = int(np.argmax(score))
    while j >= 0:
        bands[int(cols[j])] = found[j][1]
        j = int(previous[j])
    return bands


# --------------------------------------------------------------------------- gaps and cover


def _other_ink_band(owner: np.ndarray, cov: np.ndarray, col: int, row_lo: float, row_hi: float, covering: set,
                    usable: np.ndarray) -> tuple[Band | None, int]:
    """Ink of a later-drawn series (or of two blended lines) in ``col`` between rows row_lo..row_hi."""
    lo, hi = int(np.floor(row_lo - LINE_WIDTH_PX)), int(np.ceil(row_hi + LINE_WIDTH_PX))
    lo, hi = max(lo, 0), min(hi, owner.shape[0] - 1)
    who = owner[lo:hi + 1, col]
    hit = np.isin(who, list(covering)) & usable[lo:hi + 1, col]
    if not hit.any():
        return None, -1
    rows = np.arange(lo, hi + 1)[hit]
    weights = np.where(who[hit] == -2, 1.0, cov[lo:hi + 1, col][hit])
    band = _band(rows, np.maximum(weights, 1e-3))
    # the covered curve can only be where the covering ink is AND between its own ink either side
    band.top, band.bottom = max(band.top, row_lo), min(band.bottom, row_hi)
    if band.top > band.bottom:
        band.top = band.bottom = float(np.clip(band.centre, row_lo, row_hi))
    band.centre = float(np.clip(band.centre, band.top, band.bottom))
    values, counts = np.unique(who[hit][who[hit] >= 0], return_counts=True)
    return band, int(values[np.argmax(counts)]) if len(values) else -2


def fill_gaps(bands: dict[int, Band], style: str, owner: np.ndarray, cov: np.ndarray, covering: set,
              usable: np.ndarray, names: list[str]) -> dict[int, Band]:
    """Bridge the gaps between a series' observed columns: a dash gap by interpolation, a covered stretch by the
    covering line's extent; anything else stays a gap (no row)."""
    cols = sorted(bands)
    out = dict(bands)
    max_gap = DASH_GAP_PX[style] + LINE_WIDTH_PX
    for c1, c2 in zip(cols[:-1], cols[1:], strict=True):
        if c2 - c1 <= 1:
            continue
        b1, b2 = bands[c1], bands[c2]
        path = np.hypot(c2 - c1 - 1, max(0.0, b1.top - b2.bottom))
        if path <= max_gap:
            for col in range(c1 + 1, c2):
                f = (col - c1) / (c2 - c1)
                centre = b1.top + f * (b2.bottom - b1.top)
                out[col] = Band(centre, centre, centre, flag="interpolated")
            continue
        filled = {}
        for col in range(c1 + 1, c2):
            band, who = _other_ink_band(owner, cov, col, b2.top, b1.bottom, covering, usable)
            if band is None:
                filled = None
                break
            band.flag, band.hidden_by = "hidden", names[who] if who >= 0 else "another line"
            filled[col] = band
        if filled:
            out.update(filled)
    return out


def mark_neighbours(bands: dict[int, Band], owner: np.ndarray, own: int, frame: Frame) -> None:
    """Flag columns where other ink touches the series' band (``near_other``) or the band touches the frame."""
    for col, band in bands.items():
        if band.flag == "hidden":
            continue
        lo, hi = int(np.floor(band.top - 2)), int(np.ceil(band.bottom + 2))
        window = owner[max(lo, 0):hi + 1, max(col - 1, 0):col + 2]
        if np.any((window >= 0) & (window != own)) or np.any(window == -2):
            band.near_other = True
        if band.top - LINE_WIDTH_PX <= frame.top + 0.5 or band.bottom + LINE_WIDTH_PX >= frame.bottom - 0.5:
            band.hidden_by = band.hidden_by or "frame"


# --------------------------------------------------------------------------- the legend


def legend_series(rgb: np.ndarray, legend: tuple, spec: FigureSpec, where: str) -> list[Series]:
    """The series the legend lists, top to bottom (= drawing order); same-coloured series in the spec's order."""
    top, bottom, left, right = legend
    handles = rgb[top + 2:bottom - 1, left + 3:min(left + 32, right)]
    found = []
    for name in dict.fromkeys(s.color for s in spec.series):
        a, residual = ink(handles, COLORS[name])
        hit = (a > 0.35) & (residual < 40)
        if hit.sum() >= 6:
            rows = np.flatnonzero(hit.any(axis=1))
            same = [s for s in spec.series if s.color == name]
            if len(same) == 1:
                found.append((float(rows.mean()), same[0]))
            else:   # several series of one colour: one handle each, in the spec's order
                groups = np.split(rows, np.flatnonzero(np.diff(rows) > 2) + 1)
                if len(groups) != len(same):
                    raise DigitizeError(f"{where}: expected {len(same)} legend handles of colour {name}, "
                                        f"found {len(groups)}")
                found += [(float(g.mean()), s) for g, s in zip(groups, same, strict=True)]
    if not found:
        raise DigitizeError(f"{where}: the legend box holds no handle of the expected colours "
                            f"{[s.color for s in spec.series]}")
    order = [s for _, s in sorted(found, key=lambda t: t[0])]
    if not spec.order_from_legend:
        expected = [s for s in spec.series if s in order]
        if order != expected:
            raise DigitizeError(f"{where}: legend order {[s.name for s in order]} is not the notebook's drawing "
                                f"order {[s.name for s in expected]}")
    return order


# --------------------------------------------------------------------------- two series of one colour


def _split_same_colour(cov: np.ndarray, frame: Frame, usable: np.ndarray) -> tuple[dict, dict]:
    """Two curves of one colour that never cross (as in Figures 6 and 7): the lower and the upper one.

    Columns with exactly two runs of ink are clear: the lower run is the lower curve's. Elsewhere each curve's
    position is predicted from the clear columns either side, and the ink goes to the curve it fits: a run at
    both predictions goes to both (the curves meet there); a run standing on the lower curve's prediction and
    rising far above it is the upper curve's steep stretch (the lower curve at its foot is not told apart: no
    row); a curve is only given ink a non-decreasing curve can pass through, between its clear columns.
    """
    top, bottom = frame.top + 1, frame.bottom - 1
    per_column = {}
    for col in range(frame.left + 2, frame.right - 1):
        column = np.where(usable[top:bottom + 1, col], cov[top:bottom + 1, col], 0.0)
        runs = [(rows, c) for rows, c in _runs(column, top, max_gap=3) if c.sum() >= RUN_COVERAGE_MIN]
        if runs:
            per_column[col] = runs
    lower, upper = {}, {}
    clear = [col for col, runs in per_column.items() if len(runs) == 2]
    for col in clear:
        (r_up, c_up), (r_low, c_low) = per_column[col]
        upper[col], lower[col] = _band(r_up, c_up), _band(r_low, c_low)
    if not clear:
        return lower, upper
    known = np.array(clear, dtype=float)
    predict_low = np.array([lower[c].centre for c in clear])
    predict_up = np.array([upper[c].centre for c in clear])
    near = 2.0 + LINE_WIDTH_PX
    nearly_full = float(frame.y.to_pixel(98.5))

    def can_be(rows_known, band, col):
        """A non-decreasing curve is here no lower than at its clear column before, no higher than after."""
        before, after = np.flatnonzero(known <= col), np.flatnonzero(known >= col)
        ok_before = len(before) == 0 or band.top <= rows_known[before[-1]] + near
        ok_after = len(after) == 0 or band.bottom >= rows_known[after[0]] - near
        return ok_before and ok_after

    for col, runs in per_column.items():
        if col in lower:
            continue
        p_low, p_up = np.interp(col, known, predict_low), np.interp(col, known, predict_up)
        if len(runs) == 1:
            only = _band(*runs[0])
            fits_low, fits_up = can_be(predict_low, only, col), can_be(predict_up, only, col)
            before = np.flatnonzero(known <= col)
            if (fits_low and fits_up and len(before) and predict_up[before[-1]] <= nearly_full
                    and abs(only.centre - p_up) > near):
                fits_up = False   # the upper curve was at ~100 % already (then under the spine): ink is the lower's
            if fits_low != fits_up:
                (lower if fits_low else upper)[col] = only
                continue
            if not fits_low:
                continue
        if len(runs) > 2:   # a dashed line's gap split one curve's steep run: each run to the nearer curve
            mine_low = [(r, c) for r, c in runs if abs(_band(r, c).centre - p_low) <= abs(_band(r, c).centre - p_up)]
            mine_up = [(r, c) for r, c in runs if (r, c) not in mine_low]
            for target, mine in ((lower, mine_low), (upper, mine_up)):
                if mine:
                    target[col] = _band(np.concatenate([r for r, _ in mine]), np.concatenate([c for _, c in mine]))
            continue
        rows, c = runs[0]
        band = _band(rows, c)
        spans_low = band.top - near <= p_low <= band.bottom + near
        spans_up = band.top - near <= p_up <= band.bottom + near
        if spans_low and band.bottom - band.top > 2 * near:
            upper[col] = band   # the upper curve's steep stretch; the lower one, at its foot, cannot be told from it
        elif spans_low and spans_up:
            lower[col], upper[col] = band, Band(band.top, band.bottom, band.centre)
        elif spans_low:
            lower[col] = band
        elif spans_up or abs(band.centre - p_up) < abs(band.centre - p_low):
            upper[col] = band
        else:
            lower[col] = band
    full = float(frame.y.to_pixel(100.0))
    return _drop_islands(_monotone(lower, full)), _drop_islands(_monotone(upper, full))


def _drop_islands(bands: dict[int, Band], most: int = 3, apart: int = 10) -> dict[int, Band]:
    """Without stretches of at most ``most`` columns lying ``apart`` columns or more from the rest of the curve:
    where two curves of one colour meet, a few columns of the other curve's ink can fit either."""
    cols = np.array(sorted(bands))
    if len(cols) == 0:
        return bands
    pieces = np.split(cols, np.flatnonzero(np.diff(cols) >= apart) + 1)
    if len(pieces) == 1:
        return bands
    keep = np.concatenate([p for p in pieces if len(p) > most] or [cols])
    return {int(c): bands[int(c)] for c in keep}


def _monotone(bands: dict[int, Band], full_row: float) -> dict[int, Band]:
    """Only the bands a non-decreasing curve can pass through, left to right: none lower than the curve so far,
    and none below the top once the curve has reached 100 % (the top spine)."""
    out, last_top = {}, np.inf
    for col in sorted(bands):
        band = bands[col]
        if band.bottom <= last_top + LINE_WIDTH_PX + 1.0:
            out[col] = band
            last_top = min(last_top, band.top)
            if last_top <= full_row + 0.9:   # at 100 % (half the line under the spine): nothing lower can follow
                last_top = full_row - LINE_WIDTH_PX
    return out


def gap_share(bands: dict[int, Band], cov: np.ndarray) -> float:
    """Share of a curve's path without its own ink: columns with no band in gaps of up to 4 columns, and
    within a steep band the rows without ink (a dashed line's gaps fall across columns where it is flat,
    down a column where it is steep)."""
    if len(bands) < 2:
        return 0.0
    cols = sorted(bands)
    skips = np.diff(cols) - 1
    missing = int(skips[skips <= 4].sum())     # longer gaps are covered or hidden stretches, not dash gaps
    rows_total = rows_empty = 0
    for col in cols:
        band = bands[col]
        rows = np.arange(int(np.round(band.top)), int(np.round(band.bottom)) + 1)
        rows_total += len(rows)
        rows_empty += int((cov[rows, col] < 0.3).sum())
    return (missing + rows_empty) / (missing + rows_total)


# --------------------------------------------------------------------------- the figure


def _points(spec: FigureSpec, series: Series, bands: dict[int, Band], frame: Frame) -> pd.DataFrame:
    cols = np.array(sorted(bands), dtype=float)
    top = np.array([bands[c].top for c in cols.astype(int)])
    bottom = np.array([bands[c].bottom for c in cols.astype(int)])
    centre = np.array([bands[c].centre for c in cols.astype(int)])
    def clip(values):
        return np.clip(values, 0.0, 100.0)

    return pd.DataFrame({
        "figure": spec.figure, "panel": spec.panel, "series": series.name,
        "x": frame.x.to_value(cols), "x_left": frame.x.to_value(cols - 0.5), "x_right": frame.x.to_value(cols + 0.5),
        "x_scale": spec.x_scale,
        "cdf": clip(frame.y.to_value(centre)), "cdf_low": clip(frame.y.to_value(bottom)),
        "cdf_high": clip(frame.y.to_value(top)),
        "flag": [bands[c].flag for c in cols.astype(int)],
        "hidden_by": [bands[c].hidden_by for c in cols.astype(int)],
        "near_other": [bands[c].near_other for c in cols.astype(int)],
        "column": cols.astype(int),
    })


def digitize_cdf_figure(png, spec: FigureSpec, where: str | None = None) -> Digitized:
    """Read one CDF figure (a path, PNG bytes or an RGB array) into points with flags (module doc)."""
    where = where or (str(png) if not isinstance(png, (bytes, np.ndarray)) else spec.file)
    rgb = png if isinstance(png, np.ndarray) else composite_on_white(png)
    frame = find_frame(rgb, where)
    frame = fit_axes(rgb, frame, spec.x_ticks, spec.y_ticks, spec.x_scale == "log", where)
    legend = find_legend(rgb, frame, spec.legend)
    if legend is None:
        raise DigitizeError(f"{where}: no legend box found in the {spec.legend} of the axes")
    drawn = legend_series(rgb, legend, spec, where)
    usable = np.zeros(rgb.shape[:2], dtype=bool)
    usable[frame.top + 1:frame.bottom, frame.left + 1:frame.right] = True
    lt, lb, ll, lr = legend
    usable[lt - 1:lb + 2, ll - 1:lr + 2] = False
    colors = list(dict.fromkeys(s.color for s in drawn))
    owner, cov = classify_ink(rgb, colors)
    darkness = np.linalg.norm(255.0 - rgb, axis=-1)
    traced: dict[Series, dict] = {}
    for k, color in enumerate(colors):
        same = [s for s in drawn if s.color == color]
        own_cov = np.where(owner == k, cov, 0.0)
        if len(same) == 1:
            # a run of this series' ink broken only by other ink (lines crossing or covering it) is one run
            traced[same[0]] = trace_series(own_cov, frame, usable, over=(owner != k) & (darkness > 30))
        elif len(same) == 2:
            lower, upper = _split_same_colour(own_cov, frame, usable)
            solid_first = sorted(same, key=lambda s: DASH_GAP_PX[s.style])
            # the curve with fewer gaps is the solid one
            if gap_share(lower, own_cov) < gap_share(upper, own_cov):
                traced[solid_first[0]], traced[solid_first[1]] = lower, upper
            else:
                traced[solid_first[0]], traced[solid_first[1]] = upper, lower
        else:
            raise DigitizeError(f"{where}: {len(same)} series share the colour {color}; at most two can be told apart")
    series_of_colour = ["/".join(s.name for s in drawn if s.color == c) for c in colors]
    frames = []
    for i, series in enumerate(drawn):
        k = colors.index(series.color)
        later = {colors.index(s.color) for s in drawn[i + 1:] if s.color != series.color} | {-2}
        same_colour_later = any(s.color == series.color for s in drawn[i + 1:])
        bands = fill_gaps(traced[series], series.style, owner, cov, later, usable, series_of_colour)
        mark_neighbours(bands, owner, k, frame)
        if same_colour_later:
            other = next(s for s in drawn[i + 1:] if s.color == series.color)
            for col, band in bands.items():
                twin = traced[other].get(col)
                if twin is not None and band.flag == "observed" and abs(twin.centre - band.centre) < 0.5:
                    band.flag, band.hidden_by = "hidden", other.name
        frames.append(_points(spec, series, bands, frame))
    points = pd.concat(frames, ignore_index=True)[POINT_COLUMNS]
    return Digitized(spec, points, frame, legend, tuple(drawn))
