"""Shortest job first, non-preemptive: waiting jobs in order of their service
time (an oracle: the job's own duration at ideal speed), ties by arrival. The
SJF of the Helios and Lucid simulators (their ``policies/sjf.py`` sorts the
queue by duration). Strict locality, packed best-fit, with backfill by default;
``backfill=False`` gives those simulators' head-of-line blocking per VC."""

from __future__ import annotations

from .base import SchedulingPolicy


class SjfPolicy(SchedulingPolicy):
    name = "sjf"
    default_locality = "strict"

    def queue_key(self, job, now):
        return (job.service, job.arrival, job.idx)
