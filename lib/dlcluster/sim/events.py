"""Typed simulation events and their deterministic order.

Events live in a ``heapq`` keyed on ``(time, kind, sequence)``: at equal times,
kinds run in the order below (capacity is freed before new demand is seen, and
priority changes come last), then in the order they were scheduled. The
simulator handles every event of one timestamp, then runs one scheduling pass:
no fixed time steps.
"""

from __future__ import annotations

from enum import IntEnum


class EventKind(IntEnum):
    JOB_END = 0        # an attempt finished its work (job done, or its one-GPU pre-run done)
    ATTEMPT_FAIL = 1   # an attempt hit its failure
    ARRIVAL = 2        # a job is submitted
    DEMOTE = 3         # a running job crosses a priority threshold (Tiresias queues)
    RELAX = 4          # a waiting job's locality timeout expires (Philly back-off)
    RECLAIM = 5        # a monitoring check of the preemption policy: VCs below their quota take lent GPUs back
    HEARTBEAT = 6      # a scheduling-cycle tick (heartbeat.py): the pass that events since the last tick call for
