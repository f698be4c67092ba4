"""Plots of the validation: demand vs occupancy, replayed vs real occupancy, delay CDFs per VC, the latency fit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..report.plotting import plot_cdf, seconds_axis
from .calibrate import DELAY_BUCKETS, in_span, ks_distance, latency_cdf, latency_row


def plot_demand(table: pd.DataFrame, ax) -> None:
    """Daily offered GPU demand of each job set (share of capacity) beside the real share of busy servers."""
    ax.plot(table.index, 100 * table["real_busy_server_share"], color="black", lw=2,
            label="real: servers with a job (node_sequence)")
    for column in table.columns.drop("real_busy_server_share"):
        ax.plot(table.index, 100 * table[column], lw=1.3,
                label=f"{column.removesuffix('_gpu_share')}: GPUs asked for, no queueing (% of capacity)")
    ax.set_ylabel("% of servers / % of GPUs")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, loc="lower left")


def plot_occupancy(simulated: pd.Series, real: pd.Series, spans: dict, ax) -> None:
    """Replayed (SIMULATED) and real share of servers with a job over time, fit and held-out spans shaded."""
    ax.plot(real.index, 100 * real, color="black", lw=1.0, label="real (node_sequence, monitoring gaps left out)")
    ax.plot(simulated.index, 100 * simulated, color="tab:red", lw=1.0, alpha=0.85, label="SIMULATED replay")
    colors = {"fit": "tab:blue", "held_out": "tab:green"}
    for name, (begin, end) in spans.items():
        ax.axvspan(begin, end, color=colors.get(name, "0.8"), alpha=0.08, label=f"{name.replace('_', '-')} span")
    ax.set_xlim(min(b for b, _ in spans.values()), max(e for _, e in spans.values()))
    ax.set_ylabel("servers with a job (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=8, loc="lower left")


def plot_vc_delay_cdfs(pairs: pd.DataFrame, vcs: list, axes, floor_s: float = 1.0) -> None:
    """Per VC: CDF of the real first-attempt wait and of the same jobs' wait in the replay (SIMULATED), with KS."""
    for ax, vc in zip(np.ravel(axes)[:len(vcs)], vcs, strict=True):  # spare panels of the grid: the caller's
        part = pairs[pairs["vc"] == vc]
        plot_cdf(ax, np.maximum(part["real_s"].to_numpy(float), floor_s), label="real (DRE records)", color="black")
        plot_cdf(ax, np.maximum(part["simulated_s"].to_numpy(float), floor_s), label="SIMULATED replay",
                 color="tab:red")
        seconds_axis(ax)
        ax.set_title(f"VC {vc}: {len(part)} jobs, KS {ks_distance(part['real_s'], part['simulated_s']):.2f}",
                     fontsize=9)
        ax.set_xlabel("queueing delay (s)")
    np.ravel(axes)[0].legend(fontsize=8)
    np.ravel(axes)[0].set_ylabel("CDF")


def plot_latency_fit(real_waits: pd.DataFrame, spans: dict, mixture: tuple, axes, floor_s: float = 1.0) -> None:
    """Per size bucket: real first-attempt waits in the fit and held-out spans
    beside the latency model fitted on the fit span."""
    seconds = np.logspace(0, 6.5, 400)
    for ax, bucket in zip(np.ravel(axes), DELAY_BUCKETS, strict=True):
        for name, style in (("fit", {"color": "black"}), ("held_out", {"color": "0.55", "ls": "--"})):
            part = in_span(real_waits[real_waits["bucket"] == bucket], spans[name])
            plot_cdf(ax, np.maximum(part["first_wait_s"].to_numpy(float), floor_s),
                     label=f"real, {name.replace('_', '-')} span", **style)
        row = latency_row(mixture, bucket)
        ax.plot(seconds, latency_cdf(row, seconds), color="tab:red", lw=1.5,
                label=f"latency model ({row[0]} row, fitted on the fit span)")
        ax.axhline(0.5, color="0.8", lw=0.8)
        seconds_axis(ax)
        ax.set_title(f"{bucket} GPUs", fontsize=9)
        ax.set_xlabel("first-attempt wait (s)")
    np.ravel(axes)[0].legend(fontsize=7, loc="upper left")
    np.ravel(axes)[0].set_ylabel("CDF")
