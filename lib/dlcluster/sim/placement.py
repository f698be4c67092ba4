"""Choosing GPUs for a gang: locality levels and placement strategies.

Locality levels, tightest first: one server, one rack (RDMA domain), anywhere.
A placement is asked for a gang of ``g`` GPUs with the loosest level the job
currently accepts; it tries the tightest feasible level first and returns
``(counts, level)`` with ``counts`` a list of ``(server, GPUs)``, or ``None``.
Any object with the same ``choose`` method can replace :class:`LocalityPlacement`.

Strategies of :class:`LocalityPlacement`:

* ``best_fit`` (consolidate): the server with the fewest free GPUs that fits;
  for a rack, the rack needing the fewest servers, then with the fewest free
  GPUs. Keeps whole servers free for large jobs.
* ``most_free`` (Philly, as summarised from the paper): the server with the
  most free GPUs; for a rack, the rack with the most free GPUs.
* ``whole_servers`` (the "consolidate" placer of the Helios and Lucid
  simulators): a gang that fits one server goes there best-fit; a larger gang
  of ``k * C + r`` GPUs (C = the largest server size) takes ``k`` wholly free
  servers of that size, lowest index first, plus ``r`` GPUs on the remaining
  server with the most free GPUs; otherwise it waits, even if enough GPUs are
  free in pieces. At rack level, racks are tried in index order.

Within a rack (or anywhere), servers are filled largest-free first; ``best_fit``
takes the last part from the smallest server that can hold it. Ties go to the
lowest server index.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Protocol

from .cluster import ClusterState


class Locality(IntEnum):
    SERVER = 0
    RACK = 1
    ANYWHERE = 2


# plain ints for the placements' loops (an enum member's lookup costs several times an int comparison)
_SERVER, _RACK = int(Locality.SERVER), int(Locality.RACK)


def best_feasible_level(num_gpus: int, max_server_gpus: int, max_rack_gpus: int) -> Locality:
    """The tightest level a gang can ever reach on this (empty) cluster."""
    if num_gpus <= max_server_gpus:
        return Locality.SERVER
    if num_gpus <= max_rack_gpus:
        return Locality.RACK
    return Locality.ANYWHERE


class Placement(Protocol):
    def choose(self, cluster: ClusterState, num_gpus: int, min_level: int, max_level: int):
        """``(counts, level)`` for the tightest level in [min_level, max_level] that fits, else None."""


class LocalityPlacement:
    STRATEGIES = ("best_fit", "most_free", "whole_servers")

    def __init__(self, strategy: str = "best_fit"):
        if strategy not in self.STRATEGIES:
            raise ValueError(f"placement strategy must be one of {self.STRATEGIES}, got {strategy!r}")
        self.strategy = strategy
        self.best_fit = strategy in ("best_fit", "whole_servers")   # one-server gangs: best fit
        self.whole_servers = strategy == "whole_servers"

    def __repr__(self) -> str:
        return f"LocalityPlacement({self.strategy!r})"

    def decided_by_counts(self, state: ClusterState, num_gpus: int) -> bool:
        """Whether :meth:`choose` finds a place exactly when, at a level it may use, one server (level 0), one rack
        (1) or the whole ``state`` (2) has ``num_gpus`` free GPUs: so a preemption search can count instead of
        asking (:func:`~.preemption.choose_victims`). True of best fit and most free, not of the whole-servers rule."""
        return not self.whole_servers

    def choose(self, cluster: ClusterState, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > cluster.total_free:
            return None
        for level in range(min_level, max_level + 1):
            if level == _SERVER:
                counts = self._one_server(cluster, num_gpus)
            elif self.whole_servers:
                servers = cluster.rack_servers if level == _RACK else [range(len(cluster.free))]
                counts = next(filter(None, (self._whole(cluster, group, num_gpus) for group in servers)), None)
            elif level == _RACK:
                counts = self._one_rack(cluster, num_gpus)
            else:
                counts = self._fill(cluster, range(len(cluster.free)), num_gpus)
            if counts is not None:
                return counts, level
        return None

    def _one_server(self, cluster: ClusterState, g: int):
        by_free = cluster.by_free
        if g > cluster.max_cap:
            return None
        sizes = range(g, cluster.max_cap + 1) if self.best_fit else range(cluster.max_cap, g - 1, -1)
        for k in sizes:
            if by_free[k]:
                return [(min(by_free[k]), g)]
        return None

    def _one_rack(self, cluster: ClusterState, g: int):
        if g > cluster.max_rack_cap:
            return None
        best = None
        for r, free in enumerate(cluster.rack_free):
            if free < g:
                continue
            if not self.best_fit:
                if best is None or free > best[0]:
                    best = (free, r)
                continue
            counts = self._fill(cluster, cluster.rack_servers[r], g)
            rank = (len(counts), free)
            if best is None or rank < best[0]:
                best = (rank, counts)
        if best is None:
            return None
        return best[1] if self.best_fit else self._fill(cluster, cluster.rack_servers[best[1]], g)

    @staticmethod
    def _whole(cluster: ClusterState, servers, g: int):
        """``k`` wholly free servers of the largest size (lowest index first) + the remainder on the most free."""
        size, free = cluster.max_cap, cluster.free
        k, rest = divmod(g, size)
        whole = [s for s in servers if free[s] == size][:k]
        if len(whole) < k:
            return None
        counts = [(s, size) for s in whole]
        if rest:
            taken = set(whole)
            best = None
            for s in servers:
                if s not in taken and free[s] >= rest and (best is None or free[s] > free[best]):
                    best = s
            if best is None:
                return None
            counts.append((best, rest))
        return counts

    def _fill(self, cluster: ClusterState, servers, g: int):
        return fill_largest_first(servers, cluster.free, g, self.best_fit)


def fill_largest_first(servers, available, g: int, best_fit: bool = False):
    """Take ``g`` GPUs from ``servers``, those with the most ``available`` first (ties: lowest index).

    ``best_fit``: once one server can hold the rest, the rest goes to the
    smallest such server. Returns ``[(server, gpus), ...]``, or None when the
    servers hold fewer than ``g``.
    """
    order = sorted((s for s in servers if available[s] > 0), key=lambda s: (-available[s], s))
    counts, remaining = [], g
    for i, s in enumerate(order):
        if best_fit and available[s] >= remaining:
            fit = min((t for t in order[i:] if available[t] >= remaining), key=lambda t: (available[t], t))
            counts.append((fit, remaining))
            return counts
        take = min(available[s], remaining)
        counts.append((s, take))
        remaining -= take
        if remaining == 0:
            return counts
    return None


def make_placement(spec) -> Placement:
    """A placement from a strategy name or an object with ``choose``."""
    if isinstance(spec, str):
        return LocalityPlacement(spec)
    if not hasattr(spec, "choose"):
        raise ValueError(f"placement must be a strategy name {LocalityPlacement.STRATEGIES} or have .choose()")
    return spec
