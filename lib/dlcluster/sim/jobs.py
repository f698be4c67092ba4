"""Per-job simulation state (one object per job, slots for speed)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from enum import IntEnum


class JobState(IntEnum):
    FUTURE = 0
    WAITING = 1
    RUNNING = 2
    DONE = 3


class Cause(IntEnum):
    """Why a waiting job is not running (see :mod:`dlcluster.sim.causes`)."""

    FAIR_SHARE = 0
    FRAGMENTATION = 1
    BACKOFF = 2


CAUSE_NAMES = ("fair_share", "fragmentation", "backoff")


class LocalityEnd(IntEnum):
    """How a stretch of waiting for locality ended (the VC had the GPUs, no placement met the job's locality)."""

    RELAXED = 0       # the policy loosened the job's locality (Philly's relax timeout)
    PLACED = 1        # the job started at the locality it waited for: a placement freed up
    CONTENDED = 2     # the GPUs went: its VC's share, or the cluster's free GPUs, fell below its size


#: Per-job column of each :class:`LocalityEnd` (seconds; :mod:`.results`).
LOCALITY_END_NAMES = ("relaxed", "placed", "contended")


class Outcome(IntEnum):
    """How an attempt ended."""

    FINISHED = 0
    FAILED = 1
    PREEMPTED = 2
    MIGRATED = 3
    PRERUN_DONE = 4


OUTCOME_NAMES = ("finished", "failed", "preempted", "migrated", "prerun_done")


class Job:
    __slots__ = (
        # fixed
        "idx", "arrival", "num_gpus", "service", "target_work", "vc", "min_level", "fail_class",
        # lifecycle
        "state", "status", "in_prerun", "gpus_now", "first_start", "end_time", "early_stopped",
        # progress of the current attempt
        "work_left", "speed", "progress_at", "resume_at", "attempt_start", "alloc", "shape", "num_racks",
        "attempt_level", "end_token", "attempt_token", "fail_at",
        # what a server or rack must have free to hold this attempt's gang (the migration's, built on first use)
        "tighter_needs",
        # queueing
        "key", "level", "pool", "wait_token", "cause", "cause_since", "delay", "starved_since", "starved_check",
        # the relax timer under the headroom clock (policies/base.py): when it fires (None: not running), and the
        # seconds it has left while paused (None: no timer at this level)
        "relax_due", "relax_left",
        # back-off and fragmentation time split by what held the job and how each stretch ended (causes.py)
        "stretch_since", "held_s", "locality_end",
        # policy state
        "attained", "queue",
        # history
        "num_attempts", "failures", "failure_cleared", "preemptions", "migrations",
    )

    def __init__(self, idx, arrival, num_gpus, service, target_work, vc, min_level, fail_class):
        self.idx = idx
        self.arrival = arrival
        self.num_gpus = num_gpus
        self.service = service
        self.target_work = target_work
        self.vc = vc
        self.min_level = min_level
        self.fail_class = fail_class
        self.state = JobState.FUTURE
        self.status = None
        self.in_prerun = False
        self.gpus_now = num_gpus
        self.first_start = None
        self.end_time = None
        self.early_stopped = False
        self.work_left = target_work
        self.speed = 1.0
        self.progress_at = 0.0
        self.resume_at = 0.0
        self.attempt_start = 0.0
        self.alloc = ()
        self.tighter_needs = None
        self.shape = ()
        self.num_racks = 0
        self.attempt_level = 0
        self.end_token = 0
        self.attempt_token = 0
        self.fail_at = None
        self.key = ()
        self.level = 0
        self.pool = 0       # its GPU-type pool (sim/pools.py; 0 without pools)
        self.wait_token = 0
        self.cause = None
        self.cause_since = 0.0
        self.relax_due = self.relax_left = None
        self.delay = [0.0, 0.0, 0.0]
        self.stretch_since = 0.0
        self.held_s = 0.0
        self.locality_end = [0.0, 0.0, 0.0]
        self.starved_since = 0.0
        self.starved_check = -1
        self.attained = 0.0
        self.queue = 0
        self.num_attempts = 0
        self.failures = 0
        self.failure_cleared = False
        self.preemptions = 0
        self.migrations = 0

    def __repr__(self) -> str:
        return f"Job({self.idx}, gpus={self.num_gpus}, state={self.state.name})"


@contextmanager
def gc_paused():
    """The cyclic garbage collector paused (and restored as it was): for phases that make or keep many objects and
    no reference cycles.

    On the way out, the objects made meanwhile join the oldest generation unscanned (``gc.freeze`` then
    ``gc.unfreeze``: two list merges, and the young generation's count back to 0). Re-enabled as they were, the
    collector's next young collection would scan all ~10^6 of them, and the next middle one again: ~0.2 s of a
    4.5-s replay. Cyclic garbage among them is still found, by the next full collection."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
