"""Plots of the validation: demand vs occupancy, replayed vs real occupancy, delay CDFs per VC, the latency fit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..report.plotting import LEGEND_MIN_POINTS, mark_reference, no_data_title, plot_cdf, seconds_axis
from .latency import latency_cdf, latency_row
from .measures import DELAY_BUCKETS, in_span, ks_distance


def plot_demand(table: pd.DataFrame, axes) -> None:
    """Two panels over the same days, one quantity each: the real share of servers with a job (a day the record
    counts no active server is a monitoring gap, drawn as a gap) and each job set's daily offered GPU demand (share
    of the GPUs); the legends are the caller's, once the layout is final
    (:func:`~dlcluster.report.plotting.place_legend`)."""
    servers_ax, gpus_ax = axes
    real = table["real_busy_server_share"]
    servers_ax.plot(table.index, 100 * real.where(real > 0), color="black", lw=2,
                    label="real: servers with a job (node_sequence; monitoring gaps blank)")
    servers_ax.set_ylabel("% of servers")
    for column in table.columns.drop("real_busy_server_share"):
        gpus_ax.plot(table.index, 100 * table[column], lw=1.3,
                     label=f"{column.removesuffix('_gpu_share')}: GPUs asked for, no queueing")
    gpus_ax.set_ylabel("% of GPUs")
    gpus_ax.set_xlabel("day (UTC)")
    for ax in axes:
        ax.set_ylim(0, 105)


def plot_busy_servers(table: pd.DataFrame, spans: dict, servers_in_service: int, ax) -> None:
    """Servers with a job per hour, the replay's (SIMULATED) beside the record's, as counts
    (:func:`.measures.busy_servers`), with the record's total and the replay's servers in service; fit and
    held-out spans shaded."""
    ax.plot(table.index, table["real"], color="black", lw=1.0,
            label="real: active servers (node_sequence, gaps left out)")
    ax.plot(table.index, table["simulated"], color="tab:red", lw=1.0, alpha=0.85,
            label="SIMULATED replay: servers with a job")
    ax.plot(table.index, table["total"], color="0.5", lw=0.8, ls=":", label="the record's total")
    ax.axhline(servers_in_service, color="tab:red", lw=0.8, ls=":",
               label=f"replay's servers in service ({servers_in_service})")
    colors = {"fit": "tab:blue", "held_out": "tab:green"}
    for name, (begin, end) in spans.items():
        ax.axvspan(begin, end, color=colors.get(name, "0.8"), alpha=0.08, label=f"{name.replace('_', '-')} span")
    ax.set_xlim(min(b for b, _ in spans.values()), max(e for _, e in spans.values()))
    ax.set_xlabel("time (UTC, hourly means)")
    ax.set_ylabel("servers")
    ax.set_ylim(0, max(float(table[["real", "simulated", "total"]].max().max()), servers_in_service) * 1.05)
    ax.legend(fontsize=7, loc="lower left", ncol=2)


def plot_fig3_panel(points: pd.DataFrame, waits: pd.DataFrame, cells: pd.DataFrame, vc: str, ax) -> None:
    """One VC of the full trace's Figure 3 (solid, as digitized) beside the replay's delays (dashed), per size bucket,
    in the official axes (log minutes 0.1 .. 10^4); each scored cell's KS in the legend."""
    from .fig3 import VISIBLE, X_RANGE

    simulated = 0
    for bucket in ("1", "2-4", "5-8", ">8"):
        curve = points[(points["vc"] == vc) & (points["bucket"] == bucket) & points["flag"].isin(VISIBLE)]
        mine = waits[(waits["vc"] == vc) & (waits["bucket"] == bucket) & (waits["wait_s"] > 0)]
        color = {"1": "green", "2-4": "blue", "5-8": "red", ">8": "purple"}[bucket]
        if curve.empty and mine.empty:
            continue
        key = (vc, bucket)
        ks = cells.loc[key, "ks"] if key in cells.index and bool(cells.loc[key, "scored"]) else np.nan
        if len(curve):
            curve = curve.sort_values("minutes", kind="stable")
            mark_reference(ax.plot(curve["minutes"], curve["cdf_percent"] / 100, color=color, lw=1.4,
                                   label=f"{bucket} GPU full trace"))
        if len(mine):
            simulated += len(mine)
            x = np.sort(mine["wait_s"].to_numpy(float) / 60.0, kind="stable")
            ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", color=color, lw=1.0, ls="--",
                    label=f"{bucket} GPU replay, n={len(x):,}" + (f", KS {ks:.2f}" if np.isfinite(ks) else ""))
    ax.set(xscale="log", xlim=X_RANGE, ylim=(0, 1))
    no_data_title(ax, f"VC {vc}", simulated > 0)
    ax.axvline(3.0, color="0.8", lw=0.8)
    ax.grid(alpha=0.3, ls="--")
    ax.legend(fontsize=LEGEND_MIN_POINTS, loc="lower right")


def plot_vc_delay_cdfs(pairs: pd.DataFrame, vcs: list, axes, floor_s: float = 1.0) -> None:
    """Per VC: CDF of the real first-attempt wait and of the same jobs' wait in the replay (SIMULATED), with KS."""
    for ax, vc in zip(np.ravel(axes)[:len(vcs)], vcs, strict=True):  # spare panels of the grid: the caller's
        part = pairs[pairs["vc"] == vc]
        plot_cdf(ax, np.maximum(part["real_s"].to_numpy(float), floor_s), label="real (DRE records)", color="black")
        plot_cdf(ax, np.maximum(part["simulated_s"].to_numpy(float), floor_s), label="SIMULATED replay",
                 color="tab:red")
        seconds_axis(ax, label="queueing delay")
        ax.set_title(f"VC {vc}: {len(part)} jobs, KS {ks_distance(part['real_s'], part['simulated_s']):.2f}",
                     fontsize=9)
        if ax.get_subplotspec() is None or ax.get_subplotspec().is_first_col():   # each row of the grid
            ax.set_ylabel("CDF of jobs")
    np.ravel(axes)[0].legend(fontsize=8)


def plot_latency_fit(real_waits: pd.DataFrame, spans: dict, mixture: tuple, axes, floor_s: float = 1.0) -> None:
    """Per size bucket: real first-attempt waits in the fit and held-out spans
    beside the latency model fitted on the fit span; the legend is the caller's, once the layout is final
    (:func:`~dlcluster.report.plotting.place_legend` on the first panel)."""
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
        seconds_axis(ax, label="first-attempt wait")
        ax.set_title(f"{bucket} GPUs", fontsize=9)
    np.ravel(axes)[0].set_ylabel("CDF of jobs")


def grid_of(panels: int, columns: int, panel_in: tuple[float, float] = (4.2, 3.4), **kwargs):
    """A figure of ``panels`` panels in rows of ``columns``, the slots past the last panel hidden (no empty panel);
    returns ``(fig, axes)`` with ``axes`` the ``panels`` visible ones, in reading order."""
    import matplotlib.pyplot as plt

    rows = max(1, -(-panels // columns))
    columns = min(columns, max(panels, 1))
    fig, grid = plt.subplots(rows, columns, figsize=(panel_in[0] * columns, panel_in[1] * rows), squeeze=False,
                             **kwargs)
    slots = list(grid.ravel())
    for ax in slots[panels:]:
        ax.set_visible(False)
    return fig, slots[:panels]


def size_style_legend(fig, colors: dict, reference: str, ours: str, reference_style: dict, ours_style: dict):
    """One legend for a grid of CDF panels, beside it (never over a curve): a colour per job size, and what the two
    line styles are (the reference's, e.g. the full trace's thick faint lines, and ours)."""
    from matplotlib.lines import Line2D

    from ..report.plotting import legend_points

    handles = [Line2D([], [], color=color, lw=2) for color in colors.values()]
    labels = [f"{bucket} GPU" for bucket in colors]
    handles += [Line2D([], [], color="0.3", **reference_style), Line2D([], [], color="0.3", **ours_style)]
    labels += [reference, ours]
    return fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False,
                      fontsize=legend_points(9))
