"""The scheduling-policy interface: order the queue, and (optionally) preempt.

A policy decides *which job goes first*; a placement (:mod:`..placement`)
decides *which GPUs*. The simulator keeps the cluster and job state and calls:

* ``on_enqueue(job, now, sim)`` when a job starts waiting (arrival, retry,
  preemption): set ``job.key`` (smaller runs first; it must not change while
  the job waits) and ``job.level`` (the loosest locality it accepts now);
* ``on_wait(job, now, sim)`` when the job is still waiting after the pass of
  its enqueue time (e.g. start a back-off timer);
* ``on_start(job, now, sim)`` / ``on_stop(job, now, sim)`` when an attempt
  starts (e.g. schedule demotions) or ends;
* ``on_relax`` / ``on_demote`` for the timer events the policy scheduled;
* when ``preemptive`` is true: ``ranked_running(now, sim)`` (running jobs as
  ``(key, job)``, least important first; by default by ``job.key``) and
  ``preempts(waiting_key, running_key, now)``, which must hold for a prefix of
  that ranking.

``backfill`` (default true): a job that cannot start does not hold back
later jobs. With it off, the first job of a VC that cannot start blocks every
later job of that VC until it starts (head-of-line blocking, as the Helios and
Lucid simulators do); it needs ``lending=False`` or no quotas, so that each
VC's queue is decided on its own GPUs.

Locality handling is shared: ``strict`` keeps the tightest level the job can
ever get, ``any`` accepts any spread (placement still tries tight levels
first), ``relax`` starts strict and loosens one level every ``relax_after_s``
seconds of waiting (Philly's back-off; ``gang_relax_after_s``: a gang larger than a
server has its own timeout, :mod:`..relax`). Waiting while a looser placement exists
is attributed to back-off. ``relax_clock`` says when that waiting counts: ``"first_pass"`` (the
default) from the job's first scheduling pass, whatever it waits for; ``"headroom"`` only while it
has headroom (:data:`RELAX_CLOCKS`). ``backoff="every"`` holds back *every* job that
cannot start when first tried for one ``relax_after_s``, ``"borrowers"`` every
job that would have to borrow beyond its VC's quota (:mod:`..backoff`).
"""

from __future__ import annotations

from ..backoff import HELD, check_scope, released_level
from ..events import EventKind
from ..jobs import Cause
from ..placement import Locality
from ..relax import check_gang_timeout, relax_timeout

LOCALITY_MODES = ("strict", "relax", "any")
#: When a waiting job's relax timer runs. ``"first_pass"``: from the first scheduling pass that could not place it,
#: whatever it waits for (the simulator's clock before issue 47). ``"headroom"``: only while the job has headroom
#: (its VC may take its GPUs, its user limit admits it, enough GPUs are free in its pool: its wait cause is not
#: fair share, :mod:`..causes`); a stretch without headroom pauses the timer, which resumes with the time it had
#: left, and a placement or a relax starts the next level afresh. That is YARN's delay scheduling in the
#: CapacityScheduler (apache/hadoop, ``scheduler/capacity/allocator/RegularContainerAllocator.java``, as stored at
#: commit b9ed4c8): ``allocate`` runs ``preCheckForNodeCandidateSet``, whose ``checkHeadroom`` returns QUEUE_SKIPPED
#: before ``tryAllocateOnNode`` calls ``application.addSchedulingOpportunity`` (and ``LeafQueue`` checks the queue's
#: and the user's limits before it offers the node to the app at all); the count is reset
#: (``resetSchedulingOpportunities``) only in ``doAllocation``, when a container is allocated node- or rack-local,
#: and when the allowed locality level is relaxed. A stretch without headroom neither adds opportunities nor resets
#: them: a pause, not a reset. Philly counts time where YARN counts missed node offers; a job with headroom is
#: offered nodes at every heartbeat, so time with headroom stands for the count.
RELAX_CLOCKS = ("first_pass", "headroom")
_ANYWHERE = int(Locality.ANYWHERE)
_RELAX = int(EventKind.RELAX)   # a plain int: scheduled for most waiting jobs
_FAIR_SHARE = int(Cause.FAIR_SHARE)


class SchedulingPolicy:
    name = "base"
    preemptive = False
    default_placement = "best_fit"
    default_locality = "strict"

    def __init__(self, locality: str | None = None, relax_after_s: float = 180.0, backfill: bool = True,
                 backoff: str = "gangs", gang_relax_after_s: float | None = None, relax_clock: str = "first_pass"):
        if not backfill and self.preemptive:
            raise ValueError(f"{self.name}: backfill=False is for non-preemptive policies")
        self.backfill = bool(backfill)
        locality = locality or self.default_locality
        if locality not in LOCALITY_MODES:
            raise ValueError(f"{self.name}: locality must be one of {LOCALITY_MODES}, got {locality!r}")
        if not relax_after_s > 0:
            raise ValueError(f"{self.name}: relax_after_s must be > 0, got {relax_after_s!r}")
        self.locality = locality
        self.relax_after_s = float(relax_after_s)
        self.backoff = check_scope(backoff)
        self.gang_relax_after_s = check_gang_timeout(gang_relax_after_s)
        if relax_clock not in RELAX_CLOCKS:
            raise ValueError(f"{self.name}: relax_clock must be one of {RELAX_CLOCKS}, got {relax_clock!r}")
        self.relax_clock = relax_clock

    @property
    def relaxes(self) -> bool:
        return self.locality == "relax"

    def __repr__(self) -> str:
        extra = ("" if self.backfill else ", backfill=False") + ("" if self.backoff == "gangs" else ", backoff='every'")
        extra += "" if self.relax_clock == "first_pass" else f", relax_clock={self.relax_clock!r}"
        return f"{type(self).__name__}(locality={self.locality!r}{extra})"

    def prepare(self, sim) -> None:
        """Called once before the run (e.g. to learn the service distribution)."""

    def queue_key(self, job, now: float):
        raise NotImplementedError

    def on_enqueue(self, job, now: float, sim) -> None:
        job.key = self.queue_key(job, now)
        job.level = _ANYWHERE if self.locality == "any" else job.min_level
        if self.backoff == "borrowers" and sim.quota[job.vc] - sim.vc_used[job.vc] < job.gpus_now:
            job.level = HELD     # it would have to borrow: held one timeout before it may
            sim.schedule(now + self.relax_after_s, _RELAX, job, job.wait_token)

    def on_wait(self, job, now: float, sim) -> None:
        if self.backoff == "every":
            sim.set_level(job, HELD, now)
            sim.schedule(now + self.relax_after_s, _RELAX, job, job.wait_token)
        elif self.locality == "relax" and 0 <= job.level < _ANYWHERE:
            timeout = relax_timeout(job, self.relax_after_s, self.gang_relax_after_s)
            if self.relax_clock == "first_pass":
                sim.schedule(now + timeout, _RELAX, job, job.wait_token)
            else:   # the wait causes arm it while the job has headroom (causes.WaitCauses.set_cause)
                job.relax_left = timeout

    def on_relax(self, job, now: float, sim) -> None:
        job.relax_due = None
        sim.set_level(job, released_level(job, self.locality) if job.level == HELD else job.level + 1, now)
        if self.locality == "relax" and job.level < _ANYWHERE:
            timeout = relax_timeout(job, self.relax_after_s, self.gang_relax_after_s)
            if self.relax_clock == "first_pass":
                sim.schedule(now + timeout, _RELAX, job, job.wait_token)
            else:   # the next level's clock, at once where the job had headroom (else when it gets it)
                job.relax_left = timeout
                if job.cause is not None and job.cause != _FAIR_SHARE:
                    self.arm_relax(job, now, sim)
        else:   # no looser level: the clock stops (left set, the causes would arm it again past ANYWHERE)
            job.relax_left = None

    def arm_relax(self, job, now: float, sim) -> None:
        """Start (or resume) ``job``'s relax timer with the time it has left (``relax_clock="headroom"``)."""
        job.relax_due = now + job.relax_left
        sim.schedule(job.relax_due, _RELAX, job, job.wait_token)

    @staticmethod
    def pause_relax(job, now: float) -> None:
        """Stop ``job``'s relax timer, keeping the time it has left; the pending event goes stale (its token)."""
        job.relax_left = job.relax_due - now
        job.relax_due = None
        job.wait_token += 1

    def on_start(self, job, now: float, sim) -> None:
        """Called when an attempt starts running."""

    def on_stop(self, job, now: float, sim) -> None:
        """Called when an attempt ends (finished, failed, preempted, migrated)."""

    def on_demote(self, job, now: float, sim) -> None:
        raise NotImplementedError(f"{self.name} schedules no demotions")

    def ranked_running(self, now: float, sim) -> list:
        return sorted(((r.key, r) for r in sim.running.values()), key=lambda item: item[0], reverse=True)

    def preempts(self, waiting_key, running_key, now: float) -> bool:
        return False
