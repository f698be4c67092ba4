"""Mutable cluster state: free GPUs per server, indexed for fast placement.

Servers are indexed by free-GPU count (``by_free[k]``: the servers with exactly
``k`` free GPUs; ``by_cap_free[c][k]``: the same among the servers of ``c``
GPUs), racks keep their free totals, and each server records which jobs hold
which of its GPUs (a bit mask, so the raw trace can name GPUs).
Idle servers (no job) are also indexed by size, in the whole cluster and per
rack (``idle_by_cap``, ``rack_idle_by_cap``: sorted lists), so that a placement
that only takes idle servers need not scan every server.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from .topology import Topology


class ClusterState:
    def __init__(self, topology: Topology):
        self.topology = topology
        self.cap = list(topology.server_gpus)
        self.free = list(self.cap)
        self.rack_of = list(topology.server_rack)
        self.rack_servers = topology.rack_servers()
        self.rack_free = topology.rack_gpus()
        self.total_gpus = topology.total_gpus
        self.total_free = self.total_gpus
        self.max_cap = max(self.cap)
        self.max_rack_cap = max(self.rack_free)
        self.by_free = [dict() for _ in range(self.max_cap + 1)]
        self.by_cap_free = {c: [dict() for _ in range(c + 1)] for c in sorted(set(self.cap))}
        for s, c in enumerate(self.cap):
            self.by_free[c][s] = None
            self.by_cap_free[c][c][s] = None
        self.used_mask = [0] * len(self.cap)
        self.changed_servers = None   # a set to collect the servers whose jobs change (a placement's cache), or None
        self.jobs_on = [dict() for _ in self.cap]   # server -> {job index: GPU mask}
        self.idle_servers = len(self.cap)
        self.idle_gpus = self.total_gpus             # free GPUs on servers with no job
        self.idle_by_cap = [[] for _ in range(self.max_cap + 1)]   # idle servers of each size, ascending
        self.rack_idle_by_cap = [[[] for _ in range(self.max_cap + 1)] for _ in self.rack_servers]
        self.rack_idle_gpus = list(self.rack_free)
        for s, c in enumerate(self.cap):
            self.idle_by_cap[c].append(s)
            self.rack_idle_by_cap[self.rack_of[s]][c].append(s)

    def _set_free(self, s: int, new: int) -> None:
        old = self.free[s]
        if new == old:
            return
        del self.by_free[old][s]
        self.by_free[new][s] = None
        cap = self.cap[s]
        by_cap = self.by_cap_free[cap]
        del by_cap[old][s]
        by_cap[new][s] = None
        self.free[s] = new
        delta = new - old
        self.rack_free[self.rack_of[s]] += delta
        self.total_free += delta
        if old == cap:
            self.idle_servers -= 1
            self.idle_gpus -= cap
            rack = self.rack_of[s]
            self.rack_idle_gpus[rack] -= cap
            for servers in (self.idle_by_cap[cap], self.rack_idle_by_cap[rack][cap]):
                del servers[bisect_left(servers, s)]
        elif new == cap:
            self.idle_servers += 1
            self.idle_gpus += cap
            rack = self.rack_of[s]
            self.rack_idle_gpus[rack] += cap
            insort(self.idle_by_cap[cap], s)
            insort(self.rack_idle_by_cap[rack][cap], s)

    def allocate(self, job: int, counts) -> list[tuple[int, int]]:
        """Give ``job`` the lowest free GPUs of each ``(server, count)``; returns ``(server, mask)``."""
        alloc = []
        for s, k in counts:
            used = self.used_mask[s]
            mask = 0
            bit = 1
            while k:
                if not used & bit:
                    mask |= bit
                    k -= 1
                bit <<= 1
            alloc.append((s, mask))
        self.allocate_masks(job, alloc)
        return alloc

    def allocate_masks(self, job: int, alloc) -> None:
        """Give ``job`` exactly these GPUs (used to undo a tentative release)."""
        changed = self.changed_servers
        for s, mask in alloc:
            if self.used_mask[s] & mask or mask >> self.cap[s]:
                raise RuntimeError(f"GPUs {mask:b} of server {s} are taken or do not exist")
            self.used_mask[s] |= mask
            self.jobs_on[s][job] = mask
            self._set_free(s, self.free[s] - mask.bit_count())
            if changed is not None:
                changed.add(s)

    def release(self, job: int, alloc) -> None:
        changed = self.changed_servers
        for s, mask in alloc:
            self.used_mask[s] &= ~mask
            del self.jobs_on[s][job]
            self._set_free(s, self.free[s] + mask.bit_count())
            if changed is not None:
                changed.add(s)

    @property
    def allocated(self) -> int:
        return self.total_gpus - self.total_free
