"""The cluster's state over time, rebuilt from the trace alone: GPUs each VC holds, free GPUs per server and rack.

Step functions built from attempt start/end events; :mod:`.table2` asks of
them, at each instant of a wait, whether the VC had quota and whether a local
placement existed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .delays import epoch_seconds, reason_counts, require_columns


@dataclass(frozen=True)
class ClusterTimeline:
    """The cluster's state as step functions over ``times`` (segment starts, seconds).

    Segment ``i`` covers ``[times[i], times[i+1])``; the last one runs forever.
    ``vc_usage[v, i]`` is the GPUs VC ``vcs[v]`` holds; ``servers_with_free[k, i]``
    the servers with at least ``k + 1`` free GPUs; ``rack_free[r, i]`` (only
    when racks were given) the free GPUs of rack ``r``, of ``rack_size[r]``.
    """

    times: np.ndarray
    vcs: np.ndarray
    vc_usage: np.ndarray
    servers_with_free: np.ndarray
    server_size: int
    dropped: pd.Series
    notes: pd.Series
    rack_free: np.ndarray | None = None
    rack_size: np.ndarray | None = None

    def usage_of(self, vc: str) -> np.ndarray:
        """GPUs held by ``vc`` on each segment (zeros for a VC that never ran)."""
        idx = np.flatnonzero(self.vcs == vc)
        return self.vc_usage[idx[0]] if len(idx) else np.zeros(len(self.times), dtype=np.int64)

    def local_placement_exists(self, num_gpus: int, rule: str = "fewest_servers") -> np.ndarray:
        """Per segment: does a placement of ``num_gpus`` meet the locality ``rule`` (module docstring)?"""
        if rule == "fewest_servers":
            fewest_servers = math.ceil(num_gpus / self.server_size)
            return np.minimum(self.servers_with_free, fewest_servers).sum(axis=0) >= num_gpus
        if rule != "rack":
            raise ValueError(f"locality rule must be 'fewest_servers' or 'rack', got {rule!r}")
        if self.rack_free is None:
            raise ValueError("locality rule 'rack' needs a timeline built with racks")
        if num_gpus <= self.server_size:
            return self.servers_with_free[num_gpus - 1] > 0
        if num_gpus <= self.rack_size.max():
            return self.rack_free.max(axis=0) >= num_gpus
        return self.servers_with_free.sum(axis=0) >= num_gpus


def build_cluster_timeline(jobs: pd.DataFrame, attempts: pd.DataFrame, placements: pd.DataFrame,
                           machines: pd.DataFrame, origin: float | None = None,
                           racks: pd.Series | dict | None = None) -> ClusterTimeline:
    """Per-VC GPUs in use and per-server free GPUs over time, from attempt start/end events.

    Event-based: each attempt adds its GPUs at its start and removes them at its
    end; cumulative sums over the sorted event times give the step functions. An
    attempt still running at the end of the trace (``running``) holds its GPUs
    forever; an attempt without a start, or without an end while not running,
    cannot be placed in time and is counted in ``dropped``.

    A server's size is its GPU count in ``machines``, raised to the highest GPU
    index placed on it + 1 where placements show more GPUs (and taken from the
    placements alone for servers missing from ``machines``); both cases are
    counted in ``notes``. Free GPUs are clipped to ``[0, size]`` where
    overlapping attempts would overcommit a server (counted in ``notes``).
    ``origin`` (seconds) adds an earlier segment with the empty cluster.
    ``racks`` (server -> rack) adds per-rack free GPUs; a server missing from it
    forms a rack of its own (counted in ``notes``).
    """
    require_columns(attempts, ["jobid", "attempt", "start", "end", "running", "num_gpus"], "attempts")
    require_columns(placements, ["jobid", "attempt", "machine", "gpu"], "placements")
    require_columns(machines, ["machine", "num_gpus"], "machines")

    att = attempts[["jobid", "attempt", "start", "end", "running", "num_gpus"]].merge(
        jobs[["jobid", "vc"]], on="jobid", how="left", indicator=True)
    orphans = att["_merge"] == "left_only"
    if orphans.any():
        raise ValueError(f"attempts: {int(orphans.sum())} attempt rows belong to no job in jobs "
                         f"(first jobid {att.loc[orphans, 'jobid'].iloc[0]!r})")
    att = att.drop(columns="_merge")
    att["t_start"] = epoch_seconds(att["start"])
    att["t_end"] = epoch_seconds(att["end"])
    running = att["running"].fillna(False).astype(bool)
    no_start = np.isnan(att["t_start"].to_numpy())
    no_end = np.isnan(att["t_end"].to_numpy()) & ~running.to_numpy()
    gpus = pd.to_numeric(att["num_gpus"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    no_gpus = ~(gpus >= 1) & ~no_start & ~no_end
    usable = ~(no_start | no_end | no_gpus)
    dropped = reason_counts({
        "attempt start unknown": int(no_start.sum()),
        "attempt end unknown and not running": int((no_end & ~no_start).sum()),
        "attempt GPU count unknown": int(no_gpus.sum()),
    })
    att = att.loc[usable].copy()
    att["t_end"] = att["t_end"].fillna(np.inf)
    att["num_gpus"] = att["num_gpus"].astype("int64")

    # --- servers: size and per-attempt GPUs on each
    per_server = (placements.merge(att[["jobid", "attempt", "t_start", "t_end"]], on=["jobid", "attempt"])
                  .groupby(["jobid", "attempt", "machine"], observed=True)
                  .agg(gpus=("gpu", "size"), top_gpu=("gpu", "max"), t_start=("t_start", "first"),
                       t_end=("t_end", "first"))
                  .reset_index())
    listed = machines.set_index("machine")["num_gpus"]
    listed = pd.to_numeric(listed, errors="coerce").fillna(0).astype("int64")
    seen_top = per_server.groupby("machine")["top_gpu"].max().astype("int64") + 1
    sizes = pd.concat([listed, seen_top], axis=1, keys=["listed", "seen"]).fillna(0).astype("int64")
    in_list = sizes.index.isin(listed.index)
    notes = reason_counts({
        "servers only in placements (size taken from placements)": int((~in_list).sum()),
        "servers whose placements exceed their listed size (size raised)":
            int(((sizes["seen"] > sizes["listed"]) & in_list).sum()),
    })
    sizes = sizes.max(axis=1)
    sizes = sizes[sizes > 0]
    server_size = int(sizes.max()) if len(sizes) else 1

    # --- event grid
    vc_times = np.concatenate([att["t_start"].to_numpy(), att["t_end"].to_numpy()])
    srv_times = np.concatenate([per_server["t_start"].to_numpy(), per_server["t_end"].to_numpy()])
    extra = [np.array([origin], dtype=float)] if origin is not None else []
    all_times = np.concatenate([vc_times, srv_times, *extra])
    times = np.unique(all_times[np.isfinite(all_times)])
    if len(times) == 0:
        times = np.array([0.0 if origin is None else float(origin)])

    def grid_index(t: np.ndarray) -> np.ndarray:
        return np.searchsorted(times, t)  # exact: every finite event time is on the grid

    # --- per-VC usage
    vcs = np.array(sorted(att["vc"].dropna().unique()), dtype=object)
    vc_idx = np.searchsorted(vcs, att["vc"].to_numpy()) if len(vcs) else np.zeros(0, dtype=int)
    usage = np.zeros((len(vcs), len(times)), dtype=np.int64)
    g = att["num_gpus"].to_numpy()
    np.add.at(usage, (vc_idx, grid_index(att["t_start"].to_numpy())), g)
    ends = np.isfinite(att["t_end"].to_numpy())
    np.add.at(usage, (vc_idx[ends], grid_index(att["t_end"].to_numpy()[ends])), -g[ends])
    usage = np.cumsum(usage, axis=1)

    # --- per-server free GPUs -> servers with >= k free
    ev = pd.DataFrame({
        "machine": np.concatenate([per_server["machine"].to_numpy(), per_server["machine"].to_numpy()]),
        "t": np.concatenate([per_server["t_start"].to_numpy(), per_server["t_end"].to_numpy()]),
        "delta": np.concatenate([per_server["gpus"].to_numpy(), -per_server["gpus"].to_numpy()]),
    })
    ev = ev[np.isfinite(ev["t"])].sort_values(["machine", "t", "delta"], kind="stable").reset_index(drop=True)
    cap = sizes.reindex(ev["machine"]).to_numpy()
    used = ev.groupby("machine", sort=False)["delta"].cumsum().to_numpy()
    raw_free = cap - used
    free = np.clip(raw_free, 0, cap)
    prev = pd.Series(free).groupby(ev["machine"].to_numpy(), sort=False).shift(1)
    prev = prev.fillna(pd.Series(cap)).to_numpy().astype(np.int64)
    levels = np.arange(1, server_size + 1)
    change = (free[:, None] >= levels).astype(np.int64) - (prev[:, None] >= levels).astype(np.int64)
    with_free = np.zeros((server_size, len(times)), dtype=np.int64)
    with_free[:, 0] = (sizes.to_numpy()[:, None] >= levels).sum(axis=0)
    idx = grid_index(ev["t"].to_numpy())
    for k in range(server_size):
        np.add.at(with_free[k], idx, change[:, k])
    with_free = np.cumsum(with_free, axis=1)

    overcommitted = int(pd.Series(raw_free < 0).groupby(ev["machine"].to_numpy()).any().sum()) if len(ev) else 0
    overcommit_note = {"servers overcommitted at some time (free GPUs clipped at 0)": overcommitted}
    notes = pd.concat([notes, reason_counts(overcommit_note)])

    rack_free = rack_size = None
    if racks is not None:
        rack_of = pd.Series(racks).astype(object).reindex(sizes.index)
        unracked = rack_of.isna()
        rack_of[unracked] = [("own rack", m) for m in sizes.index[unracked]]
        notes = pd.concat([notes, reason_counts({"servers without a rack (each forms its own)": int(unracked.sum())})])
        rack_codes, rack_names = pd.factorize(rack_of, sort=False)
        rack_size = np.bincount(rack_codes, weights=sizes.to_numpy(), minlength=len(rack_names)).astype(np.int64)
        rack_free = np.zeros((len(rack_names), len(times)), dtype=np.int64)
        rack_free[:, 0] = rack_size
        ev_rack = rack_codes[sizes.index.get_indexer(ev["machine"])]
        np.add.at(rack_free, (ev_rack, idx), free - prev)
        rack_free = np.cumsum(rack_free, axis=1)
    return ClusterTimeline(times=times, vcs=vcs, vc_usage=usage, servers_with_free=with_free,
                           server_size=server_size, dropped=dropped, notes=notes,
                           rack_free=rack_free, rack_size=rack_size)


def time_where(times: np.ndarray, blocked: np.ndarray, begin: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Seconds of each ``[begin, end)`` during which the step function ``blocked`` is True."""
    seg_len = np.diff(times)
    cum = np.concatenate([[0.0], np.cumsum(blocked[:-1] * seg_len)])

    def integral(t):
        i = np.searchsorted(times, t, side="right") - 1
        i = np.clip(i, 0, len(times) - 1)
        return cum[i] + blocked[i] * (t - times[i])

    return integral(end) - integral(begin)
