"""Gandiva-style migration: defragment for waiting jobs, consolidate spread jobs.

Two uses of moving running jobs (paper implications 1 and 2):

* **defragment**: a waiting job that fits on one server but finds no server
  with enough free GPUs (while enough are free in total) gets one: the
  simulator moves single-server jobs off the server needing the fewest moved
  GPUs, each to the best-fitting other server;
* **consolidate**: when capacity is freed, a running job spread wider than it
  must be (more servers or racks than its size needs) and with at least
  ``min_remaining_s`` of work left moves to a tighter placement, if one exists.
  Knowing the work left is an oracle (a real scheduler does not know when a job
  will end); ``min_attained_s`` asks instead that the job has already run that
  long (its attained service, which a scheduler does know: Tiresias ranks on
  it), with ``min_remaining_s=0`` the rule without the oracle.

A moved job makes no progress for ``cost_s`` (checkpoint and restore; 60 s is
an assumption) and its move is recorded as a new attempt (outcome
``migrated``), as Philly records each placement as an attempt.
"""

from __future__ import annotations

import heapq
from itertools import chain
from dataclasses import dataclass

from .placement import Locality


@dataclass(frozen=True)
class Migration:
    cost_s: float = 60.0
    defragment: bool = True
    consolidate: bool = True
    min_remaining_s: float = 3600.0
    #: consolidate only jobs that have run at least this long (s): GPU-seconds held so far over the gang's GPUs
    min_attained_s: float = 0.0

    def __post_init__(self):
        if not self.cost_s >= 0:
            raise ValueError(f"migration: cost_s must be >= 0, got {self.cost_s!r}")
        if not self.min_remaining_s >= 0:
            raise ValueError(f"migration: min_remaining_s must be >= 0, got {self.min_remaining_s!r}")
        if not self.min_attained_s >= 0:
            raise ValueError(f"migration: min_attained_s must be >= 0, got {self.min_attained_s!r}")

    def make_room(self, sim, job, now: float) -> bool:
        """Free one server for ``job`` by moving single-server jobs away; start it there."""
        cluster = sim.cluster
        g = job.gpus_now
        if job.min_level != Locality.SERVER or not sim.admissible(job):
            return False
        free, cap, jobs_on, jobs, running = cluster.free, cluster.cap, cluster.jobs_on, sim.jobs, sim.running
        options = []
        for s in range(len(cap)):
            if cap[s] < g:
                continue
            # running jobs only: a waiting gang's held GPUs (sim/gang.py) are on the server too, its alloc stale
            movable = sorted(((mask.bit_count(), o) for o, mask in jobs_on[s].items()
                              if o in running and len(jobs[o].alloc) == 1), reverse=True)
            gained, moves = free[s], []
            for k, o in movable:
                if gained >= g:
                    break
                gained += k
                moves.append((k, o))
            if gained >= g:
                options.append((sum(k for k, _ in moves), len(moves), s, moves))
        for _, _, s, moves in sorted(options, key=lambda o: o[:3]):
            plan = self._destinations(cluster, s, [k for k, _ in moves])
            if plan is None:
                continue
            for (k, o), dest in zip(moves, plan, strict=True):
                sim.move(jobs[o], [(dest, k)], Locality.SERVER, now, self.cost_s)
            sim.start(job, [(s, g)], Locality.SERVER, now)
            return True
        return False

    @staticmethod
    def _destinations(cluster, source: int, sizes: list[int]):
        """Best-fit servers (not ``source``) for jobs of these sizes, in order: the fewest free GPUs that hold each,
        the lowest index on a tie (read from the cluster's index by free GPUs); None if one has no room."""
        by_free = cluster.by_free
        planned: dict[int, int] = {}   # servers already chosen -> their free GPUs after the moves planned so far
        plan = []
        for k in sizes:
            dest = None
            for free in range(k, cluster.max_cap + 1):
                dest = min(chain((t for t, f in planned.items() if f == free),
                                 (t for t in by_free[free] if t != source and t not in planned)), default=None)
                if dest is not None:
                    break
            if dest is None:
                return None
            planned[dest] = planned.get(dest, cluster.free[dest]) - k
            plan.append(dest)
        return plan

    def improve_locality(self, sim, now: float) -> bool:
        """Move long-running spread jobs to tighter placements, in job order; True if any moved.

        Only the jobs :class:`SpreadJobs` says may have room are looked at: the others could not move at their last
        look, and nothing they depend on has grown since, so they cannot now.
        """
        moved = False
        cluster, spread, jobs = sim.cluster, sim.spread, sim.jobs
        most_free = _most_free(cluster)
        order = spread.candidates(*most_free)
        looked = set(order)
        while order:
            job = jobs[heapq.heappop(order)]
            if job.in_prerun or job.attempt_level <= job.min_level or not _room_for_tighter(cluster, job, *most_free):
                continue
            if sim.remaining_work(job, now) < self.min_remaining_s:
                spread.settle(job)   # its work left only shrinks: it stays where it is for this attempt
                continue
            spread.look_again(job)   # it had room: its next chance does not wait for more room
            if self.min_attained_s and sim.attained(job, now) < self.min_attained_s * job.num_gpus:
                continue   # it has not run long enough yet: looked at again when capacity is next freed
            cluster.release(job.idx, job.alloc)
            choice = sim.placement.choose(cluster, job.gpus_now, job.min_level, job.attempt_level - 1)
            cluster.allocate_masks(job.idx, job.alloc)
            if choice is None:
                continue
            counts, level = choice
            sim.move(job, counts, level, now, self.cost_s)
            most_free = _most_free(cluster)
            moved = True
            # the GPUs it left (and the larger free server or rack they may make) give later jobs room in this pass
            for other in spread.candidates(*most_free, keep=True):
                if other > job.idx and other not in looked:
                    looked.add(other)
                    heapq.heappush(order, other)
        return moved


class SpreadJobs:
    """The running jobs placed wider than they must be (consolidation's candidates), indexed by what lets them move.

    A spread job can move to a tighter placement only where a server or a rack could hold it once its own GPUs are
    free (:func:`_room_for_tighter`): the freest server or rack of the cluster has enough free GPUs, or one of its own
    servers or racks has (each its own number, :func:`_tighter_needs`). Free GPUs grow only where a job leaves, so a
    job that had no room at its last look can have room now only if the freest server or rack has grown to its size,
    or a job left one of its servers (or a server of one of its racks) and that server (rack) now has the free GPUs
    it needs. :meth:`candidates` gives those jobs (and the new ones, and those that had room), in job order: the same
    jobs move, in the same order, as if every spread job were looked at in every pass.
    """

    def __init__(self, cluster):
        self.cluster = cluster
        self.jobs: dict[int, object] = {}
        self.by_server: dict[int, dict] = {}       # server -> {free GPUs it needs there: spread jobs on it}
        self.by_rack: dict[int, dict] = {}         # rack -> {free GPUs it needs there: spread jobs on it}
        self.by_server_gpus: dict[int, set] = {}   # GPUs -> spread jobs that one free server of that size would hold
        self.by_rack_gpus: dict[int, set] = {}     # GPUs -> spread jobs that one free rack of that size would hold
        self.again: set = set()                    # jobs to look at whatever changed: new, or had room last time
        self.freed: set = set()                    # servers a job left since the last look

    def add(self, job) -> None:
        """``job`` started an attempt wider than it must."""
        self.jobs[job.idx] = job
        for index, key, need in self._entries(job):
            index.setdefault(key, {}).setdefault(need, set()).add(job.idx)
        self.again.add(job.idx)

    def released(self, job) -> None:
        """``job``'s attempt ended (or moved): its servers have more free GPUs; it is no longer spread."""
        self.freed.update(s for s, _ in job.alloc)
        if self.jobs.pop(job.idx, None) is not None:
            self.settle(job)

    def look_again(self, job) -> None:
        self.again.add(job.idx)

    def settle(self, job) -> None:
        """``job`` will not move in this attempt, whatever room it finds: it is no longer looked at."""
        for index, key, need in self._entries(job):
            index[key][need].discard(job.idx)
        self.again.discard(job.idx)

    def candidates(self, server_free: int, rack_free: int, keep: bool = False) -> list[int]:
        """The spread jobs that may have room (a heap, in job order) with ``server_free`` and ``rack_free`` GPUs free
        on the freest server and rack; ``keep``: leave the record of freed servers and new jobs for the next look."""
        found = set(self.again)
        cluster = self.cluster
        for index, free, keys in ((self.by_server, cluster.free, self.freed),
                                  (self.by_rack, cluster.rack_free, {cluster.rack_of[s] for s in self.freed})):
            for key in keys:
                for need, ids in index.get(key, {}).items():
                    if need <= free[key]:
                        found.update(ids)
        for index, most in ((self.by_server_gpus, server_free), (self.by_rack_gpus, rack_free)):
            for g, by_need in index.items():
                if g <= most:
                    found.update(by_need[None])
        if not keep:
            self.again, self.freed = set(), set()
        return sorted(found)

    def _entries(self, job) -> list[tuple[dict, int, int | None]]:
        """``(index, key, free GPUs needed)`` of ``job`` in each index, as :func:`_room_for_tighter` reads its room:
        the freest server's size, and its own servers, if it may take one server; the freest rack's size, and its
        own racks, if a rack is tighter than its attempt."""
        g, entries = job.gpus_now, []
        _, server_needs, rack_needs = _tighter_needs(self.cluster, job)
        if job.min_level == Locality.SERVER:
            entries.append((self.by_server_gpus, g, None))
        if job.min_level <= Locality.RACK < job.attempt_level:
            entries.append((self.by_rack_gpus, g, None))
        entries += [(self.by_server, s, need) for s, need in server_needs]
        entries += [(self.by_rack, r, need) for r, need in rack_needs]
        return entries


def _most_free(cluster) -> tuple[int, int]:
    """The most free GPUs on one server and on one rack."""
    server = next((k for k in range(cluster.max_cap, 0, -1) if cluster.by_free[k]), 0)
    return server, max(cluster.rack_free)


def _room_for_tighter(cluster, job, server_free: int, rack_free: int) -> bool:
    """Whether a server (or a rack) could hold ``job`` once its own GPUs are free: a placement at a tighter level
    needs one. Only a necessary condition, but it spares nearly every call the tentative release and re-allocation
    of a job that cannot move (they took most of a migrating replay's time). ``server_free``, ``rack_free``: the
    most free GPUs on one server and on one rack (:func:`_most_free`)."""
    g = job.gpus_now
    if job.min_level == Locality.SERVER and server_free >= g:
        return True
    if job.min_level <= Locality.RACK < job.attempt_level and rack_free >= g:
        return True
    needs = job.tighter_needs
    if needs is None or needs[0] is not job.alloc:   # another attempt since they were built
        needs = job.tighter_needs = _tighter_needs(cluster, job)
    free, rack_free_now = cluster.free, cluster.rack_free
    return any(free[s] >= k for s, k in needs[1]) or any(rack_free_now[r] >= k for r, k in needs[2])


def _tighter_needs(cluster, job) -> tuple:
    """``(alloc, ((server, GPUs it must have free), ...), ((rack, GPUs), ...))``: a server or rack the job is on holds
    it once its own GPUs there are free, if it has that many free (servers only where the job may take one server,
    racks only where a rack is tighter than its attempt)."""
    g = job.gpus_now
    own: dict[int, int] = {}
    own_rack: dict[int, int] = {}
    for s, mask in job.alloc:
        k = mask.bit_count()
        own[s] = own.get(s, 0) + k
        own_rack[cluster.rack_of[s]] = own_rack.get(cluster.rack_of[s], 0) + k
    server = job.min_level == Locality.SERVER and g <= cluster.max_cap
    rack = job.min_level <= Locality.RACK < job.attempt_level
    return (job.alloc, tuple((s, g - k) for s, k in own.items()) if server else (),
            tuple((r, g - k) for r, k in own_rack.items()) if rack else ())
