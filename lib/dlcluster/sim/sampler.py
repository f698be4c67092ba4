"""The cluster time series of a run: its state sampled at fixed times, and the optional progress bar.

Each sample is the state after every event at or before its time: allocated
and free GPUs, idle servers, free GPUs on partly used servers, running and
waiting jobs, waiting jobs and the GPUs they ask for per size bucket
(:data:`PENDING_BUCKETS`, the study's 1 / 2-4 / 5-8 / >8), and each VC's GPUs
in use.
"""

from __future__ import annotations

#: Size buckets of the pending counts (upper GPU bound of each; the last is open).
PENDING_BUCKETS = ("1", "2-4", "5-8", "gt8")
_BOUNDS = (1, 4, 8)


def pending_bucket(num_gpus: int) -> int:
    """Index in :data:`PENDING_BUCKETS` of a job of ``num_gpus`` GPUs."""
    for i, bound in enumerate(_BOUNDS):
        if num_gpus <= bound:
            return i
    return len(_BOUNDS)


class Sampler:
    """Samples ``sim``'s state every ``sim.sample_interval_s``."""

    def __init__(self, sim):
        self.sim = sim
        self.interval = sim.sample_interval_s
        self.count = 0
        self.next = 0.0
        self.rows = []
        self.vc_rows = []

    def until(self, now: float) -> None:
        c, sim = self.sim.cluster, self.sim
        row = (c.total_gpus - c.total_free, c.total_free, c.idle_servers, c.total_free - c.idle_gpus,
               len(sim.running), len(sim.waiting), *sim.pending_jobs, *sim.pending_gpus)
        vcs = tuple(sim.vc_used)
        while self.next < now:
            self.rows.append((self.next, *row))
            self.vc_rows.append(vcs)
            self.count += 1
            self.next = self.count * self.interval


def progress_bar(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="job", desc="simulating", mininterval=1.0)
