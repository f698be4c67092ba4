"""Figure 4 read back: which server counts occur per job size, and the delays they span.

The official Figure 4 puts one marker per job (x: queueing delay in minutes, log axis; y: servers of the first
attempt): black ``+`` for 5-8 GPU jobs, drawn over open red circles for >8 GPU jobs. Thousands of markers fall
on a few server counts, where they merge into solid bands, so how many jobs sit at a server count, or at a
delay, is not in the pixels: neither the share of jobs per server count nor delay quantiles can be recovered.
What can be read, per job size and server count:

* whether any job had that server count (markers at that level);
* the smallest and largest delay (the outermost marker centres; matplotlib places markers on whole pixels, so
  to within half a pixel, a factor ``10 ** (0.5 / px_per_decade)``);
* the delay ranges the markers cover, and the number of markers that stand apart (a lower bound on the jobs).

A red circle's outer end under a black ``+`` may be hidden: such an end is flagged ``end_covered``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .figures import FigureSpec
from .pixels import DigitizeError, Frame, composite_on_white, find_frame, find_legend, fit_axes, ink

#: From a run of a marker's ink (first or last pixel index) to the marker's centre, px: a '+' (s=36 points^2, 6 px,
#: 1.5 px strokes) spans its centre +-3 px; a circle's ring (radius 3 px, 1.5 px line) its centre +-3.75 px.
CENTRE_TO_EDGE_PX = {"5-8": 2.5, ">8": 3.25}
LEVEL_COLUMNS = ["figure", "series", "servers", "delay_min", "delay_max", "covered_ranges", "markers_apart",
                 "min_end_covered", "max_end_covered", "row"]


@dataclass(frozen=True)
class ScatterLevels:
    """Per series (job size) and server count: the delays its markers span (``LEVEL_COLUMNS``)."""

    spec: FigureSpec
    levels: pd.DataFrame
    frame: Frame
    legend: tuple | None
    factor_error: float          # half a pixel on the x axis, as a factor


def _intervals(mask: np.ndarray) -> list[tuple[int, int]]:
    """Runs of True as (first, last) index pairs."""
    padded = np.concatenate([[False], mask, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(a), int(b) - 1) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _merge(runs: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Runs closer than ``gap`` columns joined (a circle's two sides are one marker)."""
    out = []
    for a, b in runs:
        if out and a - out[-1][1] - 1 <= gap:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _black(rgb):
    return rgb.max(axis=-1) < 110


def _red(rgb):
    a, residual = ink(rgb, (255, 0, 0))
    return (a > 0.4) & (residual < 60)


def digitize_scatter(png, spec: FigureSpec, where: str | None = None) -> ScatterLevels:
    """Read Figure 4 (a path, PNG bytes or an RGB array): per series and server count, the delays spanned."""
    where = where or (str(png) if not isinstance(png, (bytes, np.ndarray)) else spec.file)
    rgb = png if isinstance(png, np.ndarray) else composite_on_white(png)
    frame = fit_axes(rgb, find_frame(rgb, where), spec.x_ticks, spec.y_ticks, spec.x_scale == "log", where)
    legend = find_legend(rgb, frame, spec.legend)
    black, red = _black(rgb), _red(rgb)
    inside = np.zeros(rgb.shape[:2], dtype=bool)
    inside[frame.top + 1:frame.bottom, frame.left + 1:frame.right] = True
    if legend is not None:
        lt, lb, ll, lr = legend
        inside[lt - 1:lb + 2, ll - 1:lr + 2] = False
    black &= inside
    red &= inside
    lowest = int(np.ceil(frame.y.to_value(frame.bottom)))
    highest = int(np.floor(frame.y.to_value(frame.top)))
    rows = []
    for servers in range(max(lowest, 1), highest + 1):
        centre = int(np.round(frame.y.to_pixel(servers)))
        # a '+' is a 6 px bar with a 6 px stroke across it; a circle's sides show on the rows centre-2..centre+2,
        # which no marker of the next server count reaches (they are 6.3 px apart)
        stroke = black[centre - 2] & black[centre + 2]
        near_stroke = np.convolve(stroke, np.ones(7), mode="same") > 0
        plus = black[centre - 1:centre + 2].any(axis=0) & near_stroke
        ring = red[centre - 2:centre + 3].any(axis=0)
        for series, present, join in ((">8", ring, 6), ("5-8", plus, 1)):
            runs = _merge(_intervals(present), join)
            if not runs:
                continue
            half = CENTRE_TO_EDGE_PX[series]
            first, last = runs[0][0] + half, runs[-1][1] - half
            covered = [(float(frame.x.to_value(a + half)), float(frame.x.to_value(max(b - half, a + half))))
                       for a, b in runs]
            apart = len(_intervals(stroke)) if series == "5-8" else len(runs)
            other = plus if series == ">8" else np.zeros_like(plus)
            rows.append({
                "figure": 4, "series": series, "servers": servers,
                "delay_min": float(frame.x.to_value(first)), "delay_max": float(frame.x.to_value(max(last, first))),
                "covered_ranges": covered, "markers_apart": int(apart),
                "min_end_covered": bool(other[max(runs[0][0] - 4, 0):runs[0][0] + 1].any()),
                "max_end_covered": bool(other[runs[-1][1]:runs[-1][1] + 5].any()),
                "row": centre,
            })
    if not rows:
        raise DigitizeError(f"{where}: no markers found at any server count")
    levels = pd.DataFrame(rows, columns=LEVEL_COLUMNS)
    return ScatterLevels(spec, levels, frame, legend, float(10 ** (0.5 / frame.x.scale)))
