"""FIFO with strict locality: first come, first served; a job waits for the
tightest placement it can ever get (one server if it fits on one, else one
rack), packed best-fit. Jobs that cannot be placed are skipped, not blocking
later ones (backfill), so the queue never stalls on one large job;
``backfill=False`` makes it strict FIFO within each VC, as in the Helios and
Lucid simulators."""

from __future__ import annotations

from .base import SchedulingPolicy


class FifoPolicy(SchedulingPolicy):
    name = "fifo"
    default_locality = "strict"

    def queue_key(self, job, now):
        return (job.arrival, job.idx)
