"""GPUs held by a gang waiting for the rest of its GPUs (Philly's application master, as the paper describes it).

In Philly a job's application master asks YARN for its gang's containers and
keeps those it gets while it waits for the rest, up to its locality timeout;
then it gives them back and asks again with looser locality. The GPUs it holds
meanwhile are allocated but idle: other jobs cannot have them, and the
utilization record sees them at 0%. The simulator otherwise places a gang at
once or not at all.

The model (``gang_hold=True`` in :class:`~.engine.Simulator`): a gang (more than
one GPU) that waits at its tightest locality level, or held by the back-off
(:mod:`.backoff`), takes the free GPUs of the place it wants, up to one fewer
than its size and within its VC's room: the server with the most free GPUs (a
gang that fits one server), else the servers of the rack with the most free
GPUs, largest first (ties: the lowest index). They count as its VC's GPUs in
use. It keeps exactly those GPUs until it starts (they are lifted for its own
placement each time it is tried, and taken back if it still cannot start) or
its locality relaxes (the timeout: they are given back). Simplifications: a hold
does not grow when more GPUs free up beside it; a gang larger than a rack holds
nothing.
"""

from __future__ import annotations

from .placement import Locality

_SERVER, _RACK, _HELD = int(Locality.SERVER), int(Locality.RACK), -1


class GangHolds:
    """The GPUs each waiting gang holds: ``held[job index] = [(server, mask), ...]``, and their total per VC."""

    def __init__(self, sim):
        self.sim = sim
        self.held: dict[int, list] = {}
        self.count: dict[int, int] = {}          # GPUs each holder holds
        self.since: dict[int, float] = {}
        self.by_vc = [0] * len(sim.vc_names)
        self.gpu_s = [0.0] * len(sim.jobs)      # GPU-seconds each job held while it waited

    def eligible(self, job) -> bool:
        return (job.gpus_now > 1 and job.min_level <= _RACK and job.idx not in self.held
                and (job.level == job.min_level or job.level == _HELD))

    def take(self, job, now: float) -> None:
        """Hold the free GPUs a waiting gang wants (module doc); nothing if there are none or its VC has no room."""
        sim = self.sim
        pool = None if sim.pools is None else job.pool
        c = sim.cluster if pool is None else sim.pools.pool_states[pool]   # with pools: its pool's GPUs
        want = min(job.gpus_now - 1, sim._available(job.vc, pool))   # free, within its VC's cap and the lending limit
        if want <= 0:
            return
        if job.min_level == _SERVER:
            most = next((k for k in range(c.max_cap, 0, -1) if c.by_free[k]), 0)
            servers = [min(c.by_free[most])] if most else []
        else:
            rack = max(range(len(c.rack_free)), key=lambda r: (c.rack_free[r], -r))
            servers = sorted((s for s in c.rack_servers[rack] if c.free[s] > 0), key=lambda s: (-c.free[s], s))
        counts = []
        for s in servers:
            k = min(c.free[s], want)
            counts.append((s, k))
            want -= k
            if want == 0:
                break
        if counts:
            if sim.pools is not None:
                counts = sim.pools.to_whole(job.pool, counts)
            self._register(job, sim.cluster.allocate(job.idx, counts), now)

    def _register(self, job, alloc, now: float) -> None:
        gpus = sum(mask.bit_count() for _, mask in alloc)
        self.held[job.idx] = alloc
        self.count[job.idx] = gpus
        self.since[job.idx] = now
        self.by_vc[job.vc] += gpus
        self.sim.vc_used[job.vc] += gpus
        self.sim.allocation_changes += 1
        if self.sim.lending_state is not None:
            self.sim.lending_state.changed(job.vc)

    def lift(self, job, now: float):
        """Give back the job's GPUs (for its own placement, or for good); returns them, or None if it held none."""
        alloc = self.held.pop(job.idx, None)
        if alloc is None:
            return None
        gpus = self.count.pop(job.idx)
        self.gpu_s[job.idx] += gpus * (now - self.since.pop(job.idx))
        self.sim.cluster.release(job.idx, alloc)
        self.by_vc[job.vc] -= gpus
        self.sim.vc_used[job.vc] -= gpus
        self.sim.allocation_changes += 1
        if self.sim.lending_state is not None:
            self.sim.lending_state.changed(job.vc)
        return alloc

    def restore(self, job, alloc, now: float) -> None:
        """Take back exactly the GPUs :meth:`lift` gave back (the job still cannot start)."""
        self.sim.cluster.allocate_masks(job.idx, alloc)
        self._register(job, alloc, now)
