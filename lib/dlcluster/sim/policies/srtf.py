"""Shortest remaining time first, preemptive: an oracle bound that knows every
job's remaining service, in seconds of work at ideal speed. A running job's
remaining time is estimated at ideal speed from the start of its attempt
(``resume + work left then - now``), so the order of running jobs is fixed
during an attempt (kept sorted, no sorting per event) and a preempted job can
never preempt its preemptor back. A waiting job preempts running jobs whose
remaining time is strictly longer. Placement accepts any spread (tight levels
are tried first).
"""

from __future__ import annotations

import bisect

from .base import SchedulingPolicy


class SrtfPolicy(SchedulingPolicy):
    name = "srtf"
    preemptive = True
    default_locality = "any"

    def prepare(self, sim):
        self._running = []   # ((ideal end, arrival, index), job), sorted
        self._entry = {}

    def queue_key(self, job, now):
        return (job.work_left, job.arrival, job.idx)

    def on_start(self, job, now, sim):
        entry = ((job.resume_at + job.work_left, job.arrival, job.idx), job)
        self._entry[job.idx] = entry
        bisect.insort(self._running, entry)

    def on_stop(self, job, now, sim):
        entry = self._entry.pop(job.idx)
        del self._running[bisect.bisect_left(self._running, (entry[0],))]

    def ranked_running(self, now, sim):
        return self._running[::-1]

    def preempts(self, waiting_key, running_key, now):
        return waiting_key[0] < running_key[0] - now
