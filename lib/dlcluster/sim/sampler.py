"""The cluster time series of a run: its state sampled at fixed times, and the optional progress bar.

Each sample is the state after every event at or before its time: allocated
and free GPUs, idle servers, free GPUs on partly used servers, running and
waiting jobs, waiting jobs and the GPUs they ask for per size bucket
(:data:`PENDING_BUCKETS`, the study's 1 / 2-4 / 5-8 / >8), and each VC's GPUs
in use.
"""

from __future__ import annotations

import math

import numpy as np

#: Size buckets of the pending counts (upper GPU bound of each; the last is open).
PENDING_BUCKETS = ("1", "2-4", "5-8", "gt8")
_BOUNDS = (1, 4, 8)
#: The counts of each sample, in the order :meth:`Sampler.until` records them.
COUNTS = ("allocated_gpus", "free_gpus", "idle_servers", "fragmented_free_gpus", "running_jobs", "waiting_jobs",
          *(f"pending_jobs_{b}" for b in PENDING_BUCKETS), *(f"pending_gpus_{b}" for b in PENDING_BUCKETS))


def pending_bucket(num_gpus: int) -> int:
    """Index in :data:`PENDING_BUCKETS` of a job of ``num_gpus`` GPUs."""
    for i, bound in enumerate(_BOUNDS):
        if num_gpus <= bound:
            return i
    return len(_BOUNDS)


class Sampler:
    """Samples ``sim``'s state every ``sim.sample_interval_s``.

    Kept run-length encoded: one state per call to :meth:`until` with how many sample times it covers. A run's
    long quiet stretches (its last jobs draining for weeks after the last arrival) would otherwise cost one tuple
    per minute. :meth:`columns` expands it; sample ``k`` is at ``k * interval``.
    """

    def __init__(self, sim):
        self.sim = sim
        self.interval = sim.sample_interval_s
        self.count = 0
        self.next = 0.0
        self.states = []    # each state's GPU and job counts, then each VC's GPUs in use, one flat list
        self.repeats = []   # how many consecutive samples each state covers

    def until(self, now: float) -> None:
        """Record the current state at every sample time before ``now`` not yet recorded."""
        if not self.next < now:
            return
        c, sim = self.sim.cluster, self.sim
        covered = max(1, math.ceil(now / self.interval) - self.count)
        # ceil on a float quotient may be off by one at an exact multiple: settle it as the per-sample loop would
        while (self.count + covered - 1) * self.interval >= now:
            covered -= 1
        while (self.count + covered) * self.interval < now:
            covered += 1
        self.states.extend((c.total_gpus - c.total_free, c.total_free, c.idle_servers, c.total_free - c.idle_gpus,
                            len(sim.running), len(sim.waiting), *sim.pending_jobs, *sim.pending_gpus, *sim.vc_used))
        self.repeats.append(covered)
        self.count += covered
        self.next = self.count * self.interval

    def table(self, num_vcs: int) -> tuple[np.ndarray, np.ndarray]:
        """Sample times, and one row per sample: the counts (:data:`COUNTS`), then each VC's GPUs in use (one
        array, so that the time series is built without copying column by column)."""
        repeats = np.asarray(self.repeats, dtype=np.int64)
        states = np.asarray(self.states, dtype=np.int64).reshape(len(repeats), len(COUNTS) + num_vcs)
        times = np.arange(self.count, dtype=np.int64) * self.interval
        return times, np.repeat(states, repeats, axis=0)


def progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="job", desc="simulating", mininterval=1.0)
