"""User limits within a VC, as YARN's Capacity Scheduler sets them for the users of one queue.

YARN bounds what one user of a queue may hold: ``user-limit-factor`` (ULF) caps
a user at ULF x the queue's capacity (1, YARN's default, keeps a single user
within the queue's guarantee even when the queue borrows), and
``minimum-user-limit-percent`` (MULP) shares the queue among its active users:
each may hold at least MULP% of the queue's current capacity, and as much as an
equal share when fewer users are active. The model (:class:`UserLimits`):

    limit = max(min_gpus, min(ULF x Q, max(ceil(C x MULP / 100), ceil(C / active users))))

with Q the VC's quota (its capacity), C = max(Q, GPUs the VC uses now) (its
current capacity), and the active users of the VC those with a job waiting or
running. A job may start only if its user's GPUs in use in the VC plus the
job's stay within the limit, or if its user holds nothing there (a gang larger
than the limit would otherwise never run). Jobs without a user are not limited.

Departures from YARN: one limit per (VC, user), re-read whenever a job is tried
(YARN recomputes it per allocation); YARN adds the request being made to the
queue's used capacity, this model does not; ``min_gpus`` keeps a user of a VC
without a quota able to run. Who the users are is the caller's: RFold's jobs
have none, and the replay names them by an assumption (notebook 05).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class UserLimits:
    """YARN's per-user limits of a queue (module docstring)."""

    user_limit_factor: float = 1.0
    minimum_user_limit_percent: float = 100.0
    min_gpus: int = 8

    def __post_init__(self):
        if not self.user_limit_factor > 0:
            raise ValueError(f"user_limit_factor must be > 0, got {self.user_limit_factor!r}")
        if not 0 < self.minimum_user_limit_percent <= 100:
            raise ValueError(f"minimum_user_limit_percent must be in (0, 100], got {self.minimum_user_limit_percent!r}")

    def limit(self, quota: int, vc_used: int, active_users: int) -> int:
        """GPUs one user of a VC may hold: its quota ``quota``, ``vc_used`` GPUs in use, ``active_users`` users."""
        current = max(quota, vc_used)
        share = max(math.ceil(current * self.minimum_user_limit_percent / 100.0),
                    math.ceil(current / max(active_users, 1)))
        return max(self.min_gpus, min(math.floor(self.user_limit_factor * quota), share))


class UserState:
    """Each (VC, user)'s GPUs in use and jobs waiting or running, and each VC's active users."""

    def __init__(self, sim, limits: UserLimits):
        self.sim, self.limits = sim, limits
        w = sim.workload
        users = np.asarray(w.user, dtype=object)
        named = np.array([u is not None and u == u for u in users], dtype=bool)   # None and NaN: no user
        keys = np.array([f"{v}\x00{u}" for v, u in zip(sim.job_vc, users, strict=True)], dtype=object)
        _, index = np.unique(keys.astype(str), return_inverse=True)
        self.job_user = np.where(named, index, -1).tolist()
        n = int(index.max()) + 1 if len(index) else 0
        self.used = [0] * n
        self.jobs = [0] * n
        self.active = [0] * len(sim.vc_names)

    def arrive(self, job) -> None:
        u = self.job_user[job.idx]
        if u >= 0:
            self.jobs[u] += 1
            if self.jobs[u] == 1:
                self.active[job.vc] += 1

    def leave(self, job) -> None:
        u = self.job_user[job.idx]
        if u >= 0:
            self.jobs[u] -= 1
            if self.jobs[u] == 0:
                self.active[job.vc] -= 1

    def change(self, job, gpus: int) -> None:
        u = self.job_user[job.idx]
        if u >= 0:
            self.used[u] += gpus

    def admits(self, job) -> bool:
        u = self.job_user[job.idx]
        if u < 0 or self.used[u] == 0:
            return True
        v = job.vc
        return self.used[u] + job.gpus_now <= self.limits.limit(self.sim.quota[v], self.sim.vc_used[v], self.active[v])

    def first_admissible(self, group):
        """The first job of a group (``[(key, job)]``) whose user may start it, or None."""
        for _, job in group:
            if self.admits(job):
                return job
        return None
