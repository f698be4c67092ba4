"""Sharing GPUs between virtual clusters the way YARN's Capacity Scheduler does.

Philly ran on YARN: each group's virtual cluster (VC) is a queue with a share of
the cluster, idle GPUs go to queues with more demand, and "YARN reclaims any GPU
currently in use to schedule another job" (the paper's *job preempted* failure
class). The model follows Apache Hadoop's Capacity Scheduler and keeps its names:

* **capacity** (the guarantee): a VC's quota, ``quotas={vc: GPUs}``;
* **maximum-capacity** (the elastic cap): ``max_capacity={vc: GPUs}``; a VC may
  take idle GPUs beyond its capacity up to this cap. ``lending=False`` is the
  special case cap = capacity; ``lending=True`` without caps is unlimited
  lending (cap = the cluster), as the simulator did before reclaim existed;
* **preemption** (``ProportionalCapacityPreemptionPolicy``, :class:`Reclaim`):
  every ``monitoring_interval_s`` the scheduler looks for VCs that are below
  their capacity and have a waiting job that would fit within it but finds too
  few free GPUs (they are lent out). Once such a job has waited
  ``max_wait_before_kill_s``, running jobs of VCs *above* their capacity are
  preempted, youngest first (YARN takes containers in reverse order of
  allocation), until the job can start; the job then starts at once on the
  freed GPUs. A victim's attempt ends as *job preempted*, and the job queues
  again, losing its progress unless ``keep_progress`` (a checkpoint restore).

Where this departs from YARN: containers are whole gangs, so a victim may take
its VC below its capacity by less than its own size (YARN also overshoots by
part of a container); YARN's ``total_preemption_per_round`` and
``natural_termination_factor`` (preempt a fraction of the excess per round) are
not modelled: enough is preempted at once for the one starved job, and only
for a job that fits within its VC's capacity (YARN preempts for a queue's whole
under-served demand); a starved job is recognised at the first monitoring check
after it became starved, so its wait before preemption is between
``max_wait_before_kill_s`` and that plus one interval.
"""

from __future__ import annotations

from dataclasses import dataclass

VICTIM_ORDERS = ("youngest", "oldest")


@dataclass(frozen=True)
class Reclaim:
    """Preemption of borrowed GPUs for VCs below their capacity (see the module docstring)."""

    max_wait_before_kill_s: float = 15.0
    monitoring_interval_s: float = 15.0
    victims: str = "youngest"
    keep_progress: bool = False

    def __post_init__(self):
        if not self.max_wait_before_kill_s >= 0:
            raise ValueError(f"reclaim: max_wait_before_kill_s must be >= 0, got {self.max_wait_before_kill_s!r}")
        if not self.monitoring_interval_s > 0:
            raise ValueError(f"reclaim: monitoring_interval_s must be > 0, got {self.monitoring_interval_s!r}")
        if self.victims not in VICTIM_ORDERS:
            raise ValueError(f"reclaim: victims must be one of {VICTIM_ORDERS}, got {self.victims!r}")

    def victim_order(self, running):
        """Running jobs in the order they are taken: the most recently started first (YARN), or the oldest."""
        return sorted(running, key=lambda j: (j.attempt_start, j.idx), reverse=self.victims == "youngest")


def vc_caps(quotas: dict | None, total_gpus: int, lending: bool, max_capacity: dict | None, vc_names) -> list[int]:
    """Each VC's maximum capacity: its quota without lending, else its cap (the cluster where none is given)."""
    if quotas is None:
        return [total_gpus] * len(vc_names)
    caps = []
    for vc in vc_names:
        quota = int(quotas.get(vc, 0))
        if not lending:
            caps.append(quota)
            continue
        if max_capacity is None or vc not in max_capacity:
            caps.append(max(total_gpus, quota))
            continue
        cap = int(max_capacity[vc])
        if cap < quota:
            raise ValueError(f"max_capacity: VC {vc!r} has a cap of {cap} GPUs below its quota of {quota}")
        caps.append(cap)
    return caps
