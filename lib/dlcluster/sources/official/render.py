"""Draw CDFs the way the official notebook drew them, to measure the digitizer on known answers.

Same figure size, dpi, margins, tight bounding box, transparent figure background, grid, legend place, colours and
line styles as ``analysis/Philly Trace Analysis.ipynb`` run in IPython's inline backend (matplotlib 3.1.1);
:func:`render_cdfs` returns the PNG's pixels composited on white, as the digitizer reads them.
"""

from __future__ import annotations

import io
import warnings

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .figures import FigureSpec
from .pixels import composite_on_white

#: IPython's inline backend settings that the official PNGs were drawn with (on matplotlib's defaults: any style
#: a notebook set, e.g. seaborn's, is set aside while drawing).
INLINE_RC = {
    "figure.figsize": (6.0, 4.0),
    "figure.dpi": 72,
    "savefig.dpi": 72,
    "figure.subplot.bottom": 0.125,
    "font.size": 10,
    "figure.facecolor": (1, 1, 1, 0),
    "figure.edgecolor": (1, 1, 1, 0),
}


def official_cdf(values) -> tuple[np.ndarray, np.ndarray]:
    """The notebook's ``get_cdf``: values sorted, ``p = 100 * arange(n) / (n - 1)`` (a polyline, not a step)."""
    x = np.sort(np.asarray(values, dtype=float), kind="stable")
    return x, 100.0 * np.arange(len(x)) / (len(x) - 1)


def render_cdfs(curves, spec: FigureSpec, title: str | None = None, grid: bool = True) -> np.ndarray:
    """Pixels (H x W x 3, float 0..255 on white) of ``curves``: [(x, cdf_percent, Series), ...] in drawing order."""
    with matplotlib.style.context("default"), matplotlib.rc_context(INLINE_RC):
        fig = Figure()
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(111)
        for x, p, series in curves:
            ax.plot(x, p, label={"cpu": "CPU", "memory": "Memory"}.get(series.name, f"{series.name} GPU"),
                    color=series.color, linestyle=series.style)
        if title:
            ax.set_title(title)
        ax.legend(loc=spec.legend)
        if spec.x_scale == "log":
            ax.set_xscale("log")
        ax.set_xlim(*spec.x_limits)
        ax.set_ylim(*spec.y_limits)
        ax.set_xlabel("Time (min)" if spec.x_unit == "min" else "Utilization (%)")
        ax.set_ylabel("CDF")
        if grid:
            ax.grid(alpha=.3, linestyle="--")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight")
    return composite_on_white(buffer.getvalue())


def render_scatter(points: dict) -> np.ndarray:
    """Pixels of Figure 4 drawn as the notebook drew it: ``points`` maps ">8" and "5-8" to (delays_min, servers),
    drawn in that order (>8 GPU: open red circles; 5-8 GPU: black plus signs on top)."""
    with matplotlib.style.context("default"), matplotlib.rc_context(INLINE_RC):
        fig = Figure()
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(111)
        for name, (x, y) in points.items():
            if name == "5-8":
                with warnings.catch_warnings():   # the notebook's own call: matplotlib uses the facecolor for '+'
                    warnings.simplefilter("ignore", UserWarning)
                    ax.scatter(x, y, label=f"{name} GPU", marker="+", facecolors="black", edgecolors="none")
            else:
                ax.scatter(x, y, label=f"{name} GPU", marker="o", facecolors="none", edgecolors="red")
            ax.legend()
        ax.set_xscale("log")
        ax.set_xlabel("Time (min)")
        ax.set_ylabel("Num. Servers")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", bbox_inches="tight")
    return composite_on_white(buffer.getvalue())
