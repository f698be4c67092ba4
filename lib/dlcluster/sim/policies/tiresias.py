"""Tiresias (NSDI'19): discretized two-dimensional LAS and its Gittins variant.

Attained service is GPU-seconds held (GPUs x time). Jobs sit in queues cut at
``thresholds_gpu_s``; a running job is demoted by an event at the exact moment
its attained service crosses the next threshold (no ticking). A waiting job in
a higher queue preempts running jobs in lower queues; within a queue, LAS
orders by arrival, Gittins by the Gittins index of the job's attained service
(ties by arrival). Gittins needs the distribution of job service (GPU-seconds):
by default the workload's own, i.e. a distribution known from history, not
each job's size. The default thresholds (1 and 10 GPU-hours) are an assumption.
Placement accepts any spread (tight levels are still tried first).
"""

from __future__ import annotations

import bisect

import numpy as np

from ..events import EventKind
from .base import SchedulingPolicy


class LasPolicy(SchedulingPolicy):
    name = "las"
    preemptive = True
    default_locality = "any"

    def __init__(self, thresholds_gpu_s=(3600.0, 36000.0), locality=None, relax_after_s=180.0):
        super().__init__(locality, relax_after_s)
        thresholds = tuple(float(t) for t in thresholds_gpu_s)
        if any(t <= 0 for t in thresholds) or list(thresholds) != sorted(set(thresholds)):
            raise ValueError(f"{self.name}: thresholds_gpu_s must be positive and strictly increasing, "
                             f"got {thresholds_gpu_s!r}")
        self.thresholds = thresholds

    def within_queue_key(self, job, attained):
        return ()

    def _key(self, job, attained):
        return (job.queue, *self.within_queue_key(job, attained), job.arrival, job.idx)

    def prepare(self, sim):
        self._running = []  # (key, job) of running jobs, sorted: keys change only at demotions

    def queue_key(self, job, now):
        job.queue = bisect.bisect_right(self.thresholds, job.attained)
        return self._key(job, job.attained)

    def on_start(self, job, now, sim):
        bisect.insort(self._running, (job.key, job))
        self._schedule_demotion(job, now, job.attained, sim)

    def on_stop(self, job, now, sim):
        del self._running[bisect.bisect_left(self._running, (job.key,))]

    def ranked_running(self, now, sim):
        return self._running[::-1]

    def _schedule_demotion(self, job, now, attained, sim):
        if job.queue < len(self.thresholds):
            when = now + (self.thresholds[job.queue] - attained) / job.gpus_now
            sim.schedule(when, EventKind.DEMOTE, job, job.attempt_token)

    def on_demote(self, job, now, sim):
        attained = sim.attained(job, now)
        self.on_stop(job, now, sim)
        job.queue += 1
        job.key = self._key(job, attained)
        bisect.insort(self._running, (job.key, job))
        self._schedule_demotion(job, now, attained, sim)
        sim.priorities_changed()

    def preempts(self, waiting_key, running_key, now):
        return waiting_key[0] < running_key[0]


class GittinsPolicy(LasPolicy):
    name = "gittins"

    def __init__(self, thresholds_gpu_s=(3600.0, 36000.0), service_samples_gpu_s=None, locality=None,
                 relax_after_s=180.0):
        super().__init__(thresholds_gpu_s, locality, relax_after_s)
        self._samples = None if service_samples_gpu_s is None else np.asarray(service_samples_gpu_s, float)

    def prepare(self, sim):
        super().prepare(sim)
        samples = self._samples
        if samples is None:
            samples = sim.workload.num_gpus * sim.workload.service_s
        samples = np.sort(np.asarray(samples, dtype=float), kind="stable")
        if samples.size == 0 or not np.isfinite(samples).all():
            raise ValueError(f"{self.name}: service samples must be non-empty and finite")
        self.sorted_samples = samples.tolist()
        self.prefix = np.concatenate([[0.0], np.cumsum(samples)]).tolist()

    def gittins_index(self, attained: float, quantum: float) -> float:
        """P(a < S <= a + q) / E[min(S - a, q); S > a] over the service samples S."""
        x, c = self.sorted_samples, self.prefix
        i = bisect.bisect_right(x, attained)
        alive = len(x) - i
        if alive == 0:
            return 0.0
        k = len(x) if quantum == float("inf") else bisect.bisect_right(x, attained + quantum)
        done = k - i
        expected = (c[k] - c[i] - attained * done) + (0.0 if k == len(x) else quantum * (len(x) - k))
        return done / expected if expected > 0 else float("inf")

    def within_queue_key(self, job, attained):
        q = job.queue
        quantum = self.thresholds[q] - attained if q < len(self.thresholds) else float("inf")
        return (-self.gittins_index(attained, quantum),)
