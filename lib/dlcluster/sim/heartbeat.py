"""A scheduling cycle: YARN's scheduler places jobs only when node managers heartbeat (issue 38).

Philly ran on YARN, whose Capacity Scheduler allocates containers when a node
manager reports in: each node heartbeats every
``yarn.resourcemanager.nodemanagers.heartbeat-interval-ms`` (1,000 ms in stock
YARN; Philly's own period is not public), and a heartbeat is when the
scheduler offers that node's free resources to the queues. So a job that
arrives, or GPUs that free up, between two heartbeats wait for the next one.

The model (:class:`Heartbeat`, ``heartbeat=`` in :class:`~.engine.Simulator`):
scheduling passes run only at cycle ticks, ``k x period_s`` (k = 0, 1, ...).
Events (arrivals, ends, relax timers) still happen at their own times; the
pass they call for waits for the next tick. A job that arrives (or is queued
again) between ticks is *held* until the tick, as a back-off timer holds a job
(:mod:`.backoff`): no pass has tried it, so its wait is booked as back-off held
by a timer (``held_by_timer_s``; Table 2's "other"). A job already waiting
keeps the cause it had until the tick's pass re-derives it.

Why one cluster-wide tick and not a heartbeat per server: per-server heartbeats
would cost (servers / period) events per simulated second (about 500 a second
for Philly's 539 servers at YARN's 1 s), and they add no more waiting than the
tick does: a job waits at most one period for the heartbeat of a server that
can hold it, and less when several can (a 1-GPU job, with many servers free,
waits for the first of them), whereas under the tick every job waits for the
same next tick, up to one full period. The tick is therefore the upper bound of
what a cycle of that period can add: at most ``period_s`` per attempt, ``period_s
/ 2`` on average for a job that could start at once. A period of seconds cannot
make jobs wait minutes; only a period of minutes could, which is no longer a
heartbeat (YARN warns against long intervals, as they slow every allocation).

Departures from YARN: a gang's GPUs are placed at one tick, as if every node
it lands on heartbeats then (YARN collects a multi-node gang over the
heartbeats of its nodes, each within one period; and before YARN-4161, Hadoop
2.9, the Capacity Scheduler gave at most one off-switch container per
heartbeat, so a gang asking one container per GPU anywhere could take a
heartbeat per GPU: at most GPUs x period, still seconds to tens of seconds);
reclaim (:mod:`.sharing`) starts the starved job at its monitoring check, not
at the next heartbeat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .events import EventKind
from .jobs import Cause, JobState

_BACKOFF, _WAITING = int(Cause.BACKOFF), JobState.WAITING

#: The period of stock YARN (``yarn.resourcemanager.nodemanagers.heartbeat-interval-ms`` = 1000).
YARN_DEFAULT_PERIOD_S = 1.0


@dataclass(frozen=True)
class Heartbeat:
    """Scheduling passes only at ticks ``k x period_s`` (module docstring)."""

    period_s: float = YARN_DEFAULT_PERIOD_S

    def __post_init__(self):
        if not (isinstance(self.period_s, (int, float)) and math.isfinite(self.period_s) and self.period_s > 0):
            raise ValueError(f"heartbeat: period_s must be a finite number of seconds > 0, got {self.period_s!r}")

    def next_tick(self, now: float) -> float:
        """The first tick at or after ``now`` (exactly ``k x period_s``, so that a tick event lands on it)."""
        k = math.floor(now / self.period_s)
        for candidate in (k - 1, k, k + 1):
            if candidate * self.period_s >= now:
                return candidate * self.period_s
        return (k + 2) * self.period_s


class CycleState:
    """The simulator's side of the cycle: the tick armed, and the hold of jobs queued between ticks."""

    def __init__(self, sim, heartbeat: Heartbeat):
        self.sim, self.heartbeat = sim, heartbeat
        self.armed = None          # the tick a HEARTBEAT event is scheduled for, if any

    def due(self, now: float) -> bool:
        """True if a scheduling pass may run at ``now`` (a tick); else arm the next tick's event.

        At a tick, the jobs queued since the last one (``sim._new``, not yet tried) had been held since they were
        queued: that time is booked as back-off held by a timer before the pass tries them.
        """
        tick = self.heartbeat.next_tick(now)
        if tick != now:
            if self.armed != tick:
                self.armed = tick
                self.sim.schedule(tick, EventKind.HEARTBEAT, self.sim.jobs[0], 0)
            return False
        self.armed = None
        for job in self.sim._new:
            if job.cause is None and job.cause_since < now and job.state is _WAITING:
                waited = now - job.cause_since
                job.delay[_BACKOFF] += waited
                job.held_s += waited
                job.cause_since = job.stretch_since = now
        return True
