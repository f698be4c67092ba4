"""Figures shared by the experiments: points with confidence intervals per arm and load."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .common import METRIC_LABELS, TIME_METRICS

LOAD_COLORS = ("#4C72B0", "#DD8452", "#C44E52", "#8172B2", "#55A868")


def load_colors(loads) -> dict:
    """A colour per load, in order; past five loads the palette repeats (no load is left undrawn)."""
    return {load: LOAD_COLORS[i % len(LOAD_COLORS)] for i, load in enumerate(loads)}


POLICY_COLORS = {"FIFO": "#8C8C8C", "Philly": "#4C72B0", "Tiresias 2D-LAS": "#55A868",
                 "Tiresias Gittins": "#DD8452", "SRTF (oracle bound)": "#C44E52"}


TIME_FLOOR_S = 1.0


def plot_points(ax, summary: pd.DataFrame, metric: str, x: str, hue: str, x_order: list, hue_order: list,
                colors: dict, width: float = 0.7) -> None:
    """Mean (marker) and CI (bar) of ``metric`` per (x, hue); hues side by side within each x position.

    Time metrics go on a log axis, values below 1 s drawn at 1 s.
    """
    rows = summary[summary["metric"] == metric]
    step = width / max(len(hue_order), 1)
    is_time = metric in TIME_METRICS
    means = []
    for k, h in enumerate(hue_order):
        part = rows[rows[hue] == h].set_index(x).reindex(x_order)
        xs = np.arange(len(x_order)) - width / 2 + step * (k + 0.5)
        mean, low, high = (part[c].to_numpy(float) for c in ("mean", "ci_low", "ci_high"))
        if is_time:
            mean, low, high = (np.maximum(v, TIME_FLOOR_S) for v in (mean, low, high))
        err = np.vstack([np.where(np.isnan(low), 0, mean - low), np.where(np.isnan(high), 0, high - mean)])
        ax.errorbar(xs, mean, yerr=err, fmt="o", ms=5, capsize=2, color=colors.get(h, "0.3"), label=str(h))
        means.extend(mean[np.isfinite(mean)])
    ax.set_xticks(range(len(x_order)), [str(v) for v in x_order])
    ax.grid(False, axis="x")
    ax.grid(alpha=0.3, axis="y")
    if not means:
        return
    # the axis follows the means; an interval reaching past it is cut at the edge
    lo, hi = min(means), max(means)
    if is_time:
        ax.set_yscale("log")
        ticks = [1, 60, 3600, 86400, 604800, 6048000]
        ax.set_yticks(ticks, ["1s", "1m", "1h", "1d", "1w", "10w"])
        ax.set_ylim(max(lo / 4, 0.7), hi * 4)
    else:
        pad = 0.15 * (hi - lo) if hi > lo else 0.1 * max(abs(hi), 1e-9)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_ylabel(METRIC_LABELS.get(metric, metric))


def metric_grid(summary: pd.DataFrame, metrics: list[str], loads: list[str], x: str, hue: str, x_order: list,
                hue_order: list, colors: dict, title: str, legend_title: str = "", panel_width: float = 5.0):
    """Rows = load settings, columns = metrics; each panel a :func:`plot_points`. Intervals past the
    panel's range (set by the means) are cut at its edge."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(loads), len(metrics), figsize=(panel_width * len(metrics), 3.3 * len(loads) + 1),
                             squeeze=False, sharex=True)
    for r, load in enumerate(loads):
        for c, metric in enumerate(metrics):
            ax = axes[r][c]
            plot_points(ax, summary[summary["load_label"] == load], metric, x, hue, x_order, hue_order, colors)
            ax.set_title(f"{METRIC_LABELS.get(metric, metric)} · {load}", fontsize=9)
            if r == len(loads) - 1:
                ax.tick_params(axis="x", labelrotation=35)
                for label in ax.get_xticklabels():
                    label.set_horizontalalignment("right")
    handles, labels = axes[0][0].get_legend_handles_labels()
    top = 1 - 0.9 / fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1, top))
    fig.suptitle(title, y=1 - 0.15 / fig.get_figheight(), fontsize=11)
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.35 / fig.get_figheight()), title=legend_title, title_fontsize=9)
    return fig
