"""Packing rules of Philly's placement as DRE's placements show them (issue 38): a candidate beside sim/placement.py.

DRE's last-attempt placements joined with the machine list (notebook 05 counts
them): 93% of the 2-4-GPU jobs and 78% of the 5-8-GPU jobs ran on one server,
2,749 of the 3,076 2-4-GPU jobs on 8-GPU servers, and no multi-GPU job on any of
the 82 12-GB 4-GPU servers. A placement that spreads small jobs over the emptiest
servers (``most_free``) leaves no whole server for a gang. The rules here, each
a switch so that an ablation can take it out:

* **best fit** for a job that fits one server: the server with the fewest free
  GPUs that holds it (ties: the lowest index), so partly used servers fill up
  and whole servers stay free;
* ``steer_single``: a 1-GPU job goes to the *smallest* servers first (best fit
  among the servers of the smallest size with a free GPU, then the next size),
  keeping the large servers whole for gangs (which machines 1-GPU jobs used the
  public data do not say; the 4-GPU servers no gang used point there);
* ``whole_servers_for_gangs``: a gang larger than the largest server takes
  wholly free servers of that size, ``k`` for ``k * C + r`` GPUs, plus ``r`` GPUs
  best fit on one more server; in one rack at the rack level (the rack with
  the fewest idle GPUs that can, ties the lowest index), on any servers at the
  anywhere level. Where no such set exists the gang waits, even with enough GPUs
  free in pieces: what held Philly's gangs of more than 8 GPUs, if the rule holds.

Levels below the gang rule (a 5-8-GPU job relaxed to a rack, or anywhere) are
best fit as in :class:`~.placement.LocalityPlacement` (``best_fit``). Any strategy
here is an object with ``choose(cluster, num_gpus, min_level, max_level)``.
"""

from __future__ import annotations

from .cluster import ClusterState
from .placement import Locality, LocalityPlacement

_SERVER, _RACK = int(Locality.SERVER), int(Locality.RACK)


class PackingPlacement:
    """Best fit, 1-GPU jobs steered to the smallest servers, whole servers for gangs (each rule a switch)."""

    def __init__(self, steer_single: bool = True, whole_servers_for_gangs: bool = True):
        self.steer_single = bool(steer_single)
        self.whole_servers_for_gangs = bool(whole_servers_for_gangs)
        self._best_fit = LocalityPlacement("best_fit")

    def __repr__(self) -> str:
        return (f"PackingPlacement(steer_single={self.steer_single}, "
                f"whole_servers_for_gangs={self.whole_servers_for_gangs})")

    def __eq__(self, other) -> bool:
        return isinstance(other, PackingPlacement) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))

    def decided_by_counts(self, state: ClusterState, num_gpus: int) -> bool:
        """As :meth:`.LocalityPlacement.decided_by_counts`: true except for a gang under the whole-servers rule (a
        1-GPU job steered to small servers still needs one server with a free GPU)."""
        return not (self.whole_servers_for_gangs and num_gpus > state.max_cap)

    def choose(self, cluster: ClusterState, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > cluster.total_free:
            return None
        for level in range(min_level, max_level + 1):
            if level == _SERVER:
                counts = self._one_server(cluster, num_gpus)
            elif num_gpus > cluster.max_cap and self.whole_servers_for_gangs:
                counts = self._whole_servers(cluster, num_gpus, level == _RACK)
            elif level == _RACK:
                counts = self._best_fit._one_rack(cluster, num_gpus)
            else:
                counts = self._best_fit._fill(cluster, range(len(cluster.free)), num_gpus)
            if counts is not None:
                return counts, level
        return None

    def _one_server(self, cluster: ClusterState, g: int):
        if g == 1 and self.steer_single:
            for cap in sorted(cluster.by_cap_free):
                by_free = cluster.by_cap_free[cap]
                for k in range(1, cap + 1):
                    if by_free[k]:
                        return [(min(by_free[k]), 1)]
            return None
        return self._best_fit._one_server(cluster, g)

    @staticmethod
    def _whole_servers(cluster: ClusterState, g: int, in_one_rack: bool):
        """``k`` wholly free servers of the largest size (lowest index first) + ``r`` GPUs best fit on one more."""
        size = cluster.max_cap
        k, rest = divmod(g, size)
        if in_one_rack:
            racks = sorted((r for r in range(len(cluster.rack_servers))
                            if len(cluster.rack_idle_by_cap[r][size]) >= k and cluster.rack_free[r] >= g),
                           key=lambda r: (cluster.rack_idle_gpus[r], r))
            groups = [(cluster.rack_idle_by_cap[r][size], cluster.rack_servers[r]) for r in racks]
        else:
            groups = [(cluster.idle_by_cap[size], range(len(cluster.free)))]
        for idle, servers in groups:
            if len(idle) < k:
                continue
            whole = idle[:k]
            counts = [(s, size) for s in whole]
            if rest:
                taken = set(whole)
                free = cluster.free
                fits = [s for s in servers if s not in taken and free[s] >= rest]
                if not fits:
                    continue
                counts.append((min(fits, key=lambda s: (free[s], s)), rest))
            return counts
        return None
