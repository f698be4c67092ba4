"""Isolating multi-GPU gangs, as the paper proposes (section 5: isolate jobs on dedicated servers, migrate to
defragment), beside :mod:`.placement`.

* :func:`idle_servers_choice`: a job gets only servers no other job uses (whole idle servers), tightest level first.
  The everyone-dedicated placement (``experiments.interference.DedicatedPlacement``) is this rule for every job.
* :class:`IsolatePlacement`: a gang (more than one GPU) gets only idle servers, as above; a 1-GPU job is packed
  best fit (as ``LocalityPlacement("best_fit")`` places it) onto the servers no gang holds. So a gang never shares a
  server, and 1-GPU jobs share servers with 1-GPU jobs only.
* :class:`IsolatingMigration`: :class:`~.migration.Migration` whose defragmentation keeps that isolation. The plain
  one moves any single-server job to the best-fitting server and starts the waiting job beside what stays: it would
  move a gang onto the 1-GPU jobs' servers, or start a gang on a server with a neighbour. Here a gang that fits one
  server gets one by moving the 1-GPU jobs off a server no gang holds (the smallest server that fits, as the
  placement picks an idle one, then the fewest jobs to move), each to the best-fitting other such server; a 1-GPU
  job is never helped by moving (no move frees a GPU on a server without a gang). Consolidation is the plain one:
  it asks the placement, so it keeps isolation already.

Which jobs are gangs is given per job (the workload's ``num_gpus > 1``): the cluster records which jobs hold a server,
not their sizes, and a gang's last server may hold one of its GPUs only. A gang's one-GPU pre-run (``retry="prerun"``)
would count as the gang's: not supported here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import ClusterState
from .migration import Migration
from .placement import Locality

_SERVER, _RACK = int(Locality.SERVER), int(Locality.RACK)


def idle_servers_choice(cluster: ClusterState, num_gpus: int, min_level: int, max_level: int):
    """``(counts, level)`` on servers without any job, or None.

    Tightest level first (one server, then one rack, then anywhere); the smallest idle server that fits, racks
    needing the fewest servers. The GPUs a job leaves free on its servers stay unused: the price of isolation.
    Reads the cluster's index of idle servers by size (``idle_by_cap``, ``rack_idle_by_cap``), so that a saturated
    cluster, asked again and again, costs a few list looks per call rather than a sort of every idle server.
    """
    if num_gpus > cluster.idle_gpus:  # GPUs on servers without any job
        return None
    for level in range(min_level, max_level + 1):
        if level == _SERVER:
            for size in range(num_gpus, cluster.max_cap + 1):
                if cluster.idle_by_cap[size]:
                    return [(cluster.idle_by_cap[size][0], num_gpus)], level
        elif level == _RACK:
            best = None
            for rack, idle in enumerate(cluster.rack_idle_by_cap):
                if cluster.rack_idle_gpus[rack] >= num_gpus:
                    rank = _largest_first_rank(idle, num_gpus)
                    if best is None or rank < best[0]:
                        best = (rank, idle)
            if best is not None:
                return _largest_first(best[1], num_gpus), level
        else:
            return _largest_first(cluster.idle_by_cap, num_gpus), level
    return None


def _largest_first(idle_by_cap, num_gpus: int) -> list[tuple[int, int]]:
    """``sim.placement.fill_largest_first`` over idle servers given by size (each list ascending): the largest first,
    ties to the lowest index. The caller has checked that they hold ``num_gpus``."""
    counts, remaining = [], num_gpus
    for size in range(len(idle_by_cap) - 1, 0, -1):
        for s in idle_by_cap[size]:
            take = min(size, remaining)
            counts.append((s, take))
            remaining -= take
            if remaining == 0:
                return counts
    raise ValueError(f"the idle servers hold fewer than {num_gpus} GPUs")


def _largest_first_rank(idle_by_cap, num_gpus: int) -> tuple[int, int]:
    """(servers, their GPUs) that :func:`_largest_first` would take, without listing them."""
    servers = gpus = 0
    remaining = num_gpus
    for size in range(len(idle_by_cap) - 1, 0, -1):
        available = len(idle_by_cap[size])
        if available:
            needed = -(-remaining // size)
            if needed <= available:
                return servers + needed, gpus + needed * size
            servers, gpus, remaining = servers + available, gpus + available * size, remaining - available * size
    raise ValueError(f"the idle servers hold fewer than {num_gpus} GPUs")


class IsolatePlacement:
    """Gangs on servers no other job uses; 1-GPU jobs packed best fit, never onto a server a gang holds.

    ``gangs``: per job (the workload's order, the simulator's job index), whether it is a gang (``num_gpus > 1``).
    """

    def __init__(self, gangs):
        self.gangs = frozenset(int(i) for i in np.flatnonzero(np.asarray(gangs, dtype=bool)))
        self._rooms_at, self._rooms = None, None
        self._cluster, self._no_gang = None, None

    def __repr__(self) -> str:
        return f"IsolatePlacement({len(self.gangs)} gangs)"

    def holds_gang(self, cluster: ClusterState, server: int) -> bool:
        """Whether a gang holds GPUs of ``server`` (a running one, or a waiting one's held GPUs)."""
        return not self.gangs.isdisjoint(cluster.jobs_on[server])

    def no_gang(self, cluster: ClusterState) -> list[bool]:
        """Per server, whether no gang holds it (:meth:`holds_gang`), re-read only for the servers whose jobs changed
        since (``cluster.changed_servers``): a saturated cluster asks for every server in every pass."""
        if self._cluster is not cluster:
            self._cluster = cluster
            cluster.changed_servers = set()
            self._no_gang = [self.gangs.isdisjoint(on) for on in cluster.jobs_on]
        elif cluster.changed_servers:
            gangs, jobs_on, no_gang = self.gangs, cluster.jobs_on, self._no_gang
            for s in cluster.changed_servers:
                no_gang[s] = gangs.isdisjoint(jobs_on[s])
            cluster.changed_servers.clear()
        return self._no_gang

    def rooms(self, sim) -> tuple[list[tuple[int, int, int]], list[int]]:
        """``([(size, GPUs to move, server), ...] ascending, servers no gang holds)``: the servers
        :class:`IsolatingMigration` could empty, each by moving its 1-GPU jobs (all running) to the free GPUs of the
        other servers no gang holds. Kept until an allocation changes (``sim.allocation_changes``): a saturated
        cluster asks for room for every waiting gang size in every pass, and a scan of every server each time took
        most of the arm's run."""
        at = (sim.cluster, sim.allocation_changes)
        if self._rooms_at is None or self._rooms_at[0] is not at[0] or self._rooms_at[1] != at[1]:
            cluster, running = sim.cluster, sim.running
            cap, free, jobs_on = cluster.cap, cluster.free, cluster.jobs_on
            shared = [s for s, no_gang in enumerate(self.no_gang(cluster)) if no_gang]
            shared_free = sum(free[s] for s in shared)
            rooms = sorted((cap[s], cap[s] - free[s], s) for s in shared
                           if 0 < cap[s] - free[s] <= shared_free - free[s] and all(o in running for o in jobs_on[s]))
            self._rooms_at, self._rooms = at, (rooms, shared)
        return self._rooms

    def choose(self, cluster: ClusterState, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > 1:
            return idle_servers_choice(cluster, num_gpus, min_level, max_level)
        if cluster.total_free == 0:
            return None
        no_gang, by_free = self.no_gang(cluster), cluster.by_free
        # best fit: the fewest free GPUs, the lowest index on a tie, among the servers no gang holds
        for k in range(1, cluster.max_cap + 1):
            server = min((s for s in by_free[k] if no_gang[s]), default=None)
            if server is not None:
                return [(server, 1)], min_level
        return None


@dataclass(frozen=True)
class IsolatingMigration(Migration):
    """:class:`~.migration.Migration` whose defragmentation keeps :class:`IsolatePlacement`'s isolation (the
    simulator's placement must be one)."""

    def make_room(self, sim, job, now: float) -> bool:
        """Empty a server of 1-GPU jobs for a gang that fits one server (the smallest server that holds the gang, as
        :func:`idle_servers_choice` takes an idle one, then the fewest jobs moved, then the lowest index: a gang left
        on a larger server would keep the GPUs it does not use from everyone); move each to the best-fitting other
        server no gang holds; start the gang there."""
        g = job.gpus_now
        if g == 1 or job.min_level != Locality.SERVER or not sim.admissible(job):
            return False
        rooms, shared = sim.placement.rooms(sim)
        # an idle server fits the gang (choose found none): rooms holds only servers with jobs to move
        best = next(((moved, s) for size, moved, s in rooms if size >= g), None)
        if best is None:
            return False
        cluster, jobs_on = sim.cluster, sim.cluster.jobs_on
        source = best[1]
        movers = sorted(jobs_on[source])
        for o, dest in zip(movers, _best_fit_singles(cluster, shared, source, len(movers)), strict=True):
            sim.move(sim.jobs[o], [(dest, 1)], Locality.SERVER, now, self.cost_s)
        sim.start(job, [(source, g)], Locality.SERVER, now)
        return True


def _best_fit_singles(cluster: ClusterState, servers, source: int, n: int) -> list[int]:
    """Servers for ``n`` 1-GPU jobs, one after another: each the one with the fewest free GPUs left (the lowest index
    on a tie) among ``servers`` but ``source``; the caller has checked they have ``n`` free GPUs."""
    left = {s: cluster.free[s] for s in servers if s != source and cluster.free[s] > 0}
    plan = []
    for _ in range(n):
        dest = min(left, key=lambda s: (left[s], s))
        plan.append(dest)
        left[dest] -= 1
        if left[dest] == 0:
            del left[dest]
    return plan
