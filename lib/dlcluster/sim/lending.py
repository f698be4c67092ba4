"""Lending limited per VC: a VC lends at most a share of its idle quota (issue 38; the lender's side of sharing).

:mod:`.sharing` caps the borrower: Hadoop's Capacity Scheduler gives each queue
a ``maximum-capacity`` that "limits the elasticity for applications in the
queue" (the most one VC may hold, its own quota and borrowed GPUs together).
On the lender's side the Capacity Scheduler sets no limit; its *elasticity* reads:
"Free resources can be allocated to any queue beyond its capacity", and a queue
running below its capacity gets them back as the tasks on them complete (or by
preemption). Whether Philly
kept back part of each VC's idle quota for the VC's own next jobs, no public
source says; the model here is that hypothesis, so the replay can test it.

The model (:class:`LendingLimit`, ``lending_limit=`` in :class:`~.engine.Simulator`):
a VC ``v`` with quota ``Q_v`` and ``U_v`` GPUs in use has ``max(0, Q_v - U_v)``
idle; it lends at most ``floor(share x idle)`` of them (a VC without jobs: its
whole quota is idle). GPUs in no VC's quota (the cluster beyond the sum of
quotas) are nobody's guarantee and are lent in full. GPUs lent = those VCs use
beyond their quotas, ``sum max(0, U_w - Q_w)``.
A job of VC ``v`` may take, besides its VC's own idle quota, at most

    borrowable(v) = GPUs in no quota + sum over w != v of floor(share x idle_w) - GPUs lent now,

so with ``share = 1`` every idle GPU may be lent (the simulator's lending, the
Capacity Scheduler's); with ``share = 0`` only GPUs in no quota. The limit
binds on new borrowing only: when a lender's idle quota shrinks below what it
has lent, nothing is taken back (that is reclaim's, :mod:`.sharing`). It applies
together with the borrower's maximum capacity: a job starts only within both.
A job the limit holds back waits for fair share (its VC may not have those GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LendingLimit:
    """Each VC lends at most ``share`` of its idle quota (module docstring)."""

    share: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.share, (int, float)) and 0 <= self.share <= 1):
            raise ValueError(f"lending limit: share must be a number in [0, 1], got {self.share!r}")

    def lendable(self, quota: int, used: int) -> int:
        """GPUs a VC with ``quota`` and ``used`` GPUs in use may lend: the share of its idle quota, floored."""
        return int(self.share * max(0, quota - used))


class LendingState:
    """What borrowers may still take under a :class:`LendingLimit`: derived from the VCs' use, kept up to date as it
    changes (:meth:`changed`: one VC's share of the sums, not every VC's), and re-derived in full where a change
    was not reported (``_at``: the allocation change it is current for).

    Tentative changes of the VCs' use (a preemption search, :mod:`.preemption`) do not count: what other VCs may
    lend stays that of the real allocation, while the job's own idle quota is read as it stands."""

    def __init__(self, sim, limit: LendingLimit, quotas: dict):
        self.sim, self.limit = sim, limit
        total = sim.cluster.total_gpus
        # GPUs in no quota lend in full; the quota of a VC without jobs is idle throughout and lends its share
        self.unassigned = max(0, total - sum(int(q) for q in quotas.values()))
        with_jobs = set(sim.vc_names)
        self.unassigned += sum(limit.lendable(int(q), 0) for vc, q in quotas.items() if vc not in with_jobs)
        self._at = None
        self._lendable = []
        self._lent = []
        self._pool = 0

    def _refresh(self) -> None:
        """Each VC's lendable GPUs (:meth:`LendingLimit.lendable`, inlined), what it borrows, and the pool
        borrowers may still take, from every VC's use."""
        sim = self.sim
        self._at = sim.allocation_changes
        share = self.limit.share
        pairs = list(zip(sim.quota, sim.vc_used, strict=True))
        self._lendable = [int(share * (q - u)) if q > u else 0 for q, u in pairs]
        self._lent = [u - q if u > q else 0 for q, u in pairs]
        self._pool = self.unassigned + sum(self._lendable) - sum(self._lent)

    def changed(self, vc: int) -> None:
        """``vc``'s use changed, with the allocation change just counted: update its share of the sums (the
        same integers :meth:`_refresh` would derive), or derive all if the state was not current before."""
        sim = self.sim
        if self._at != sim.allocation_changes - 1:
            self._refresh()
            return
        self._at = sim.allocation_changes
        q, u = sim.quota[vc], sim.vc_used[vc]
        lendable = int(self.limit.share * (q - u)) if q > u else 0
        lent = u - q if u > q else 0
        self._pool += lendable - self._lendable[vc] - lent + self._lent[vc]
        self._lendable[vc], self._lent[vc] = lendable, lent

    def room(self, vc: int) -> int:
        """GPUs a job of ``vc`` may take under the limit: its VC's idle quota plus what others may still lend
        (inlined in :meth:`.engine.Simulator._room`)."""
        sim = self.sim
        if self._at != sim.allocation_changes:
            self._refresh()
        own = sim.quota[vc] - sim.vc_used[vc]
        borrowable = self._pool - self._lendable[vc]
        return (own if own > 0 else 0) + (borrowable if borrowable > 0 else 0)
