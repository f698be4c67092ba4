"""Gandiva-style migration: defragment for waiting jobs, consolidate spread jobs.

Two uses of moving running jobs (paper implications 1 and 2):

* **defragment**: a waiting job that fits on one server but finds no server
  with enough free GPUs (while enough are free in total) gets one: the
  simulator moves single-server jobs off the server needing the fewest moved
  GPUs, each to the best-fitting other server;
* **consolidate**: when capacity is freed, a running job spread wider than it
  must be (more servers or racks than its size needs) and with at least
  ``min_remaining_s`` of work left moves to a tighter placement, if one exists.

A moved job makes no progress for ``cost_s`` (checkpoint and restore; 60 s is
an assumption) and its move is recorded as a new attempt (outcome
``migrated``), as Philly records each placement as an attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

from .placement import Locality


@dataclass(frozen=True)
class Migration:
    cost_s: float = 60.0
    defragment: bool = True
    consolidate: bool = True
    min_remaining_s: float = 3600.0

    def __post_init__(self):
        if not self.cost_s >= 0:
            raise ValueError(f"migration: cost_s must be >= 0, got {self.cost_s!r}")
        if not self.min_remaining_s >= 0:
            raise ValueError(f"migration: min_remaining_s must be >= 0, got {self.min_remaining_s!r}")

    def make_room(self, sim, job, now: float) -> bool:
        """Free one server for ``job`` by moving single-server jobs away; start it there."""
        cluster = sim.cluster
        g = job.gpus_now
        if job.min_level != Locality.SERVER or not sim.admissible(job):
            return False
        free, cap, jobs_on, jobs = cluster.free, cluster.cap, cluster.jobs_on, sim.jobs
        options = []
        for s in range(len(cap)):
            if cap[s] < g:
                continue
            movable = sorted(((mask.bit_count(), o) for o, mask in jobs_on[s].items()
                              if len(jobs[o].alloc) == 1), reverse=True)
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
        """Best-fit servers (not ``source``) for jobs of these sizes, in order; None if one has no room."""
        free = list(cluster.free)
        plan = []
        for k in sizes:
            candidates = [t for t in range(len(free)) if t != source and free[t] >= k]
            if not candidates:
                return None
            dest = min(candidates, key=lambda t: (free[t], t))
            free[dest] -= k
            plan.append(dest)
        return plan

    def improve_locality(self, sim, now: float) -> bool:
        """Move long-running spread jobs to tighter placements; True if any moved."""
        moved = False
        cluster = sim.cluster
        most_free = _most_free(cluster)
        for job in sorted(sim.spread_running.values(), key=lambda j: j.idx):
            if job.in_prerun or job.attempt_level <= job.min_level or not _room_for_tighter(cluster, job, *most_free):
                continue
            if sim.remaining_work(job, now) < self.min_remaining_s:
                continue
            cluster.release(job.idx, job.alloc)
            choice = sim.placement.choose(cluster, job.gpus_now, job.min_level, job.attempt_level - 1)
            cluster.allocate_masks(job.idx, job.alloc)
            if choice is None:
                continue
            counts, level = choice
            sim.move(job, counts, level, now, self.cost_s)
            most_free = _most_free(cluster)
            moved = True
        return moved


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
