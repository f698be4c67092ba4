"""Shared plotting helpers: one look for every figure of the study."""

from __future__ import annotations

import numpy as np
import pandas as pd

SIZE_COLORS = {"1": "#4C72B0", "2-4": "#55A868", "5-8": "#C44E52", ">8": "#8172B2"}


def setup_style() -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")


def ecdf(values) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite values and their cumulative fractions (0..1]."""
    v = np.sort(pd.Series(values, dtype="float64").dropna().to_numpy(), kind="stable")
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def plot_cdf(ax, values, label: str | None = None, **kwargs):
    """Step CDF of ``values``; the label gets the sample size appended."""
    x, y = ecdf(values)
    if len(x) == 0:
        return None
    text = f"{label} (n={len(x):,})" if label else None
    return ax.step(x, y, where="post", label=text, **kwargs)


def seconds_axis(ax, axis: str = "x") -> None:
    """Log time axis with ticks at 1 s, 1 min, 10 min, 1 h, 1 d, 1 w."""
    ticks = [1, 60, 600, 3600, 86400, 604800]
    labels = ["1s", "1m", "10m", "1h", "1d", "1w"]
    if axis == "x":
        ax.set_xscale("log")
        ax.set_xticks(ticks, labels)
    else:
        ax.set_yscale("log")
        ax.set_yticks(ticks, labels)
