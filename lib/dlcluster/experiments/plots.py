"""Figures shared by the experiments: points with confidence intervals per arm and load.

They keep the rules of :mod:`dlcluster.report.plotting`: every interval inside its panel, times on a log axis in
round durations with their unit, arms told apart by marker as well as colour, category labels wrapped (not rotated),
panels stacked when a row would be too wide to read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..report.plotting import duration_axis, wrap_labels
from .common import METRIC_LABELS, TIME_METRICS

LOAD_COLORS = ("#4C72B0", "#DD8452", "#C44E52", "#8172B2", "#55A868")


def load_colors(loads) -> dict:
    """A colour per load, in order; past five loads the palette repeats (no load is left undrawn)."""
    return {load: LOAD_COLORS[i % len(LOAD_COLORS)] for i, load in enumerate(loads)}


POLICY_COLORS = {"FIFO": "#8C8C8C", "Philly": "#4C72B0", "Tiresias 2D-LAS": "#55A868",
                 "Tiresias Gittins": "#DD8452", "SRTF (oracle bound)": "#C44E52"}
#: One marker per hue, so that arms with the same value (FIFO and Philly often tie) stay told apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")

TIME_FLOOR_S = 1.0
#: A time panel spans at most this many decades: values below its floor are drawn at the floor, and the panel says so,
#: so that one arm's weeks of waiting do not stretch the axis down to seconds (an axis from 1 s to a year shows neither
#: end well).
MAX_TIME_DECADES = 5
#: The widest a row of panels may be (inches); a wider grid is stacked, one metric per row.
MAX_ROW_WIDTH_IN = 18.0
#: Horizontal room for one x position (inches), so that wrapped category labels do not collide.
POSITION_WIDTH_IN = 0.95


def metric_unit(metric: str) -> str:
    """The y label of a metric: its name and unit (times are given by their log axis)."""
    label = METRIC_LABELS.get(metric, metric)
    if metric in TIME_METRICS:
        return label
    if metric.endswith("_share"):
        return f"{label} (share)"
    if metric == "speed_mean":
        return f"{label} (work / run time)"
    return label


def plot_points(ax, summary: pd.DataFrame, metric: str, x: str, hue: str, x_order: list, hue_order: list,
                colors: dict, width: float = 0.7) -> None:
    """Mean (marker) and 95% interval (bar) of ``metric`` per (x, hue); hues side by side within each x position,
    each with its own marker. The panel's range holds every interval. Time metrics go on a log axis of at most
    :data:`MAX_TIME_DECADES` decades below the highest end (values below that floor, or below 1 s, drawn at the
    floor, which the panel names)."""
    from ..analysis.delays import format_seconds

    rows = summary[summary["metric"] == metric]
    step = width / max(len(hue_order), 1)
    is_time = metric in TIME_METRICS
    series = []
    for h in hue_order:
        part = rows[rows[hue] == h].set_index(x).reindex(x_order)
        series.append([part[c].to_numpy(float) for c in ("mean", "ci_low", "ci_high")])
    finite = [v for values in series for array in values for v in array if np.isfinite(v)]
    floor = TIME_FLOOR_S
    if is_time and finite:
        floor = max(TIME_FLOOR_S, 1.6 * max(finite) / 10 ** MAX_TIME_DECADES)
    clipped = False
    shown = []
    for k, (h, (mean, low, high)) in enumerate(zip(hue_order, series, strict=True)):
        xs = np.arange(len(x_order)) - width / 2 + step * (k + 0.5)
        if is_time:
            clipped = clipped or bool(np.any(np.isfinite(mean) & (mean < floor)))
            mean, low, high = (np.maximum(v, floor) for v in (mean, low, high))
        err = np.vstack([np.where(np.isnan(low), 0, mean - low), np.where(np.isnan(high), 0, high - mean)])
        ax.errorbar(xs, mean, yerr=err, fmt=MARKERS[k % len(MARKERS)], ms=5, capsize=2,
                    color=colors.get(h, "0.3"), label=str(h), mfc="white" if k % 2 else None)
        shown.extend(v for v in (*mean, *low, *high) if np.isfinite(v))
    ax.set_xticks(range(len(x_order)), wrap_labels(x_order, 12), fontsize=8)
    ax.grid(False, axis="x")
    ax.grid(alpha=0.3, axis="y")
    ax.set_ylabel(metric_unit(metric))
    if not shown:
        return
    lo, hi = min(shown), max(shown)
    if is_time:
        ax.set_yscale("log")
        duration_axis(ax, "y", METRIC_LABELS.get(metric, metric), max(lo / 1.6, 0.7 * floor), hi * 1.6)
        if clipped:
            ax.text(0.01, 0.99, f"means below {format_seconds(floor)} drawn at {format_seconds(floor)}",
                    transform=ax.transAxes, fontsize=7, va="top", ha="left", color="0.35")
    else:
        pad = 0.08 * (hi - lo) if hi > lo else 0.1 * max(abs(hi), 1e-9)
        ax.set_ylim(lo - pad, hi + pad)


def metric_grid(summary: pd.DataFrame, metrics: list[str], loads: list[str], x: str, hue: str, x_order: list,
                hue_order: list, colors: dict, title: str, legend_title: str = "", panel_width: float = 5.0):
    """Rows = load settings, columns = metrics; each panel a :func:`plot_points`. A panel is wide enough for its x
    positions' wrapped labels; a row that would be wider than :data:`MAX_ROW_WIDTH_IN` is stacked (one metric per
    row)."""
    import matplotlib.pyplot as plt

    width = max(panel_width, POSITION_WIDTH_IN * len(x_order) + 1.0)
    stacked = width * len(metrics) > MAX_ROW_WIDTH_IN and len(metrics) > 1
    if stacked:
        width = min(max(width, 8.0), MAX_ROW_WIDTH_IN)
        grid = [(load, metric) for load in loads for metric in metrics]
        fig, axes = plt.subplots(len(grid), 1, figsize=(width, 3.0 * len(grid) + 1.2), squeeze=False)
        cells = [(axes[i][0], load, metric) for i, (load, metric) in enumerate(grid)]
    else:
        fig, axes = plt.subplots(len(loads), len(metrics), figsize=(width * len(metrics), 3.3 * len(loads) + 1.2),
                                 squeeze=False)
        cells = [(axes[r][c], load, metric) for r, load in enumerate(loads) for c, metric in enumerate(metrics)]
    for ax, load, metric in cells:
        plot_points(ax, summary[summary["load_label"] == load], metric, x, hue, x_order, hue_order, colors)
        ax.set_title(f"{METRIC_LABELS.get(metric, metric)} · {load}", fontsize=9)
    handles, labels = cells[0][0].get_legend_handles_labels()
    top = 1 - 0.95 / fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.suptitle(title, y=1 - 0.15 / fig.get_figheight(), fontsize=11)
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 6), frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.38 / fig.get_figheight()), title=legend_title, title_fontsize=9,
               fontsize=8)
    return fig


def plot_paired_changes(changes: pd.DataFrame, panels: list, panel_col: str, arms: list, categories: list,
                        colors: dict, title: str, baseline: str, xlabel: str):
    """Each arm's paired change against ``baseline`` (rows of :func:`.common.paired_change` with ``relative``): one
    panel per value of ``panel_col``, the arms down the y axis, one marker and colour per category (``bucket``) side
    by side, the 95% interval as a bar; x on a log scale of after / before, labelled as a change (a reduction
    stays above -100%), ticks by :func:`ratio_ticks`; one legend beside the panels."""
    import matplotlib.pyplot as plt

    from ..report.plotting import legend_points

    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 0.55 * len(arms) * max(len(categories), 2)
                                                       / 2 + 1.8), squeeze=False, sharey=True)
    step = 0.8 / max(len(categories), 1)
    for ax, panel in zip(axes[0], panels, strict=True):
        part = changes[changes[panel_col] == panel]
        ratios = []
        for k, category in enumerate(categories):
            rows = part[part["bucket"] == category].set_index("arm").reindex(arms)
            y = np.arange(len(arms)) - 0.4 + step * (k + 0.5)
            mean, low, high = (1 + rows[c].to_numpy(float) for c in ("mean", "ci_low", "ci_high"))
            keep = np.isfinite(mean) & (mean > 0)
            if not keep.any():
                continue
            low, high = np.where(np.isfinite(low) & (low > 0), low, mean), np.where(np.isfinite(high), high, mean)
            ax.errorbar(mean[keep], y[keep], xerr=[mean[keep] - low[keep], high[keep] - mean[keep]],
                        fmt=MARKERS[k % len(MARKERS)], color=colors.get(category, "0.3"), ms=5, capsize=2, lw=1.2,
                        label=str(category))
            ratios.extend([*low[keep], *high[keep]])
        ratio_axis(ax, ratios, lw=0.8)
        ax.set_yticks(range(len(arms)), wrap_labels(arms, 22))
        ax.invert_yaxis()
        ax.set_xlabel(xlabel if "log scale" in xlabel else f"{xlabel} (log scale)")
        ax.set_title(str(panel), fontsize=9)
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(f"{title} · change against {baseline}, paired, with its 95% interval", fontsize=10)
    fig.tight_layout()
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:   # one legend for every panel, beside them: never over a panel's points
        more = ax.get_legend_handles_labels()
        for handle, label in zip(*more, strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if handles:
        fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=legend_points(8),
                   title="GPUs per job", title_fontsize=legend_points(8), frameon=False)
    return fig


def ratio_axis(ax, ratios, lw: float = 0.9) -> None:
    """An x axis of after/before ratios: log scale, no change marked, limits around ``ratios`` (and no change),
    ticked in percent (:func:`ratio_ticks`)."""
    from matplotlib.ticker import FixedLocator, NullFormatter

    ax.axvline(1.0, color="k", lw=lw)
    ax.set_xscale("log")
    if len(ratios):
        lo, hi = min(min(ratios), 0.95) / 1.15, max(max(ratios), 1.05) * 1.15
        ax.set_xlim(lo, hi)
        ticks, labels = ratio_ticks(lo, hi)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticklabels(labels)


def ratio_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Ticks of a log axis of after / before from ``lo`` to ``hi``, labelled so they read: a narrow range as changes
    in percent ('-10%', '0', '+25%'), a wide one as ratios ('÷10', 'same', '×10'), since '-99%' and '+9900%' hide that
    the two are the same factor."""
    span = hi / lo
    if span < 6:
        candidates = (0.8, 0.9, 1.0, 1.1, 1.25) if span < 1.8 else (0.5, 0.7, 1.0, 1.5, 2.0)
        ticks = [t for t in candidates if lo <= t <= hi]
        return ticks, [f"{100 * (t - 1):+.0f}%" if t != 1 else "0" for t in ticks]
    # factors 2, 5, 10, 20, ... (or 10, 100, ... where those are too many) each way from 'same', at most seven ticks
    ticks: list[float] = []
    for multiples in ((1, 2, 5), (1,)):
        factors = [m * 10.0 ** d for d in range(0, 16) for m in multiples if m * 10.0 ** d > 1]
        ticks = sorted([1.0] * int(lo <= 1 <= hi) + [f for f in factors if f <= hi]
                       + [1 / f for f in factors if 1 / f >= lo])
        if len(ticks) <= 7:
            break
    else:
        decades = range(int(np.ceil(np.log10(lo))), int(np.floor(np.log10(hi))) + 1)   # those inside the range
        every = max(1, int(np.ceil(len(decades) / 7)))
        ticks = [10.0 ** d for d in decades if d % every == 0]

    def factor(v: float) -> str:
        return f"{round(v):,}" if abs(v - round(v)) < 1e-6 * v else f"{v:g}"

    return ticks, ["same" if t == 1 else f"×{factor(t)}" if t > 1 else f"÷{factor(1 / t)}" for t in ticks]
