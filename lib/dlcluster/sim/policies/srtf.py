"""Shortest remaining time first, preemptive: an oracle bound that knows every
job's remaining service. A waiting job's remaining time is its remaining work
(seconds at ideal speed); a running job's is the time to its scheduled end at
its current speed. A waiting job preempts running jobs whose remaining time is
strictly longer. Placement accepts any spread (tight levels are tried first).

Running jobs are kept sorted by scheduled end (which changes only when a
job's speed does), so finding victims needs no sorting per event.
"""

from __future__ import annotations

import bisect

from .base import SchedulingPolicy


class SrtfPolicy(SchedulingPolicy):
    name = "srtf"
    preemptive = True
    default_locality = "any"

    def prepare(self, sim):
        self._running = []   # (end_at, arrival, index) -> job, sorted
        self._entry = {}

    def queue_key(self, job, now):
        return (job.work_left, job.arrival, job.idx)

    def on_start(self, job, now, sim):
        entry = ((job.end_at, job.arrival, job.idx), job)
        self._entry[job.idx] = entry
        bisect.insort(self._running, entry)

    def on_stop(self, job, now, sim):
        entry = self._entry.pop(job.idx)
        del self._running[bisect.bisect_left(self._running, (entry[0],))]

    def on_speed_change(self, job, now, sim):
        self.on_stop(job, now, sim)
        self.on_start(job, now, sim)

    def ranked_running(self, now, sim):
        return self._running[::-1]

    def preempts(self, waiting_key, running_key, now):
        return waiting_key[0] < running_key[0] - now
