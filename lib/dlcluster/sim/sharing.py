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

from .events import EventKind

_RECLAIM = EventKind.RECLAIM

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


# --------------------------------------------------------------------------- the reclaim, run by the simulator


def starved_vcs(sim) -> list[int]:
    """VCs below their quota with a waiting job that fits within it (it waits for GPUs lent out)."""
    quota, used = sim.quota, sim.vc_used
    return [v for v, by_gpus in enumerate(sim.groups)
            if by_gpus and used[v] < quota[v] and min(by_gpus) <= quota[v] - used[v]]


def arm_reclaim(sim, now: float) -> None:
    """Schedule the next monitoring check if a VC is starved and none is pending (after every pass: no import here)."""
    if not sim.reclaim_pending and starved_vcs(sim):
        sim.reclaim_pending = True
        sim.schedule(now + sim.reclaim.monitoring_interval_s, _RECLAIM, sim.jobs[0], 0)


def reclaim_check(sim, now: float) -> None:
    """A monitoring check of the Capacity Scheduler's preemption policy (module docstring).

    The head jobs of starved VCs that have been seen starved at every check
    for ``max_wait_before_kill_s`` get borrowed GPUs back, VC by VC in index order.
    """
    from .jobs import JobState

    sim.reclaim_pending = False
    sim.reclaim_checks += 1
    check, wait = sim.reclaim_checks, sim.reclaim.max_wait_before_kill_s
    for v in starved_vcs(sim):
        heads = sorted((group[0] for by_level in sim.groups[v].values() for group in by_level.values()),
                       key=lambda item: item[0])
        for _, job in heads:
            if job.state is not JobState.WAITING or job.level < 0 or job.gpus_now > sim.quota[v] - sim.vc_used[v]:
                continue
            if job.starved_check != check - 1:
                job.starved_since = now
            job.starved_check = check
            if now - job.starved_since >= wait:
                _reclaim_for(sim, job, now)
    arm_reclaim(sim, now)


def _reclaim_for(sim, job, now: float) -> bool:
    """Preempt borrowers of VCs above their quota (in the reclaim's victim order) so that ``job`` starts."""
    from .preemption import choose_victims

    # a reclaim that found no victims fails again until an allocation changes (or the job's locality does): the
    # monitoring check repeats every few seconds while a VC starves, and each try frees every candidate tentatively
    state = (sim.allocation_changes, job.level, job.gpus_now)
    if sim.reclaim_failed.get(job.idx) == state:
        return False
    quota, used = sim.quota, sim.vc_used
    # a candidate is taken only while its VC is above its quota (checked as victims are tentatively freed, which
    # only lowers the VCs' use): jobs of the VCs at or below it now are never candidates, and none are ordered
    over = [u > q for u, q in zip(used, quota, strict=True)]
    if not any(over):
        return False
    # with GPU-type pools only a job holding GPUs in the starved job's pool can make room for it (its VC's room does
    # not move with other VCs' use while victims are freed tentatively: the lending state is brought up to date first,
    # choose_victims), so the others are not freed and given back one by one: that cost most of a pooled replay's time
    pools = sim.pools
    in_pool = None if pools is None else pools.server_pool
    # the borrowers in victim order, sorted once per check (a check tries each starved VC's head jobs) until an
    # allocation changes; each job then takes those of other VCs (and of its pool). The order is total, so filtering
    # the sorted list gives what sorting the filtered one gave
    key = (sim.allocation_changes, now)
    if sim.reclaim_order[0] != key:
        sim.reclaim_order = key, sim.reclaim.victim_order(
            r for r in sim.running.values() if over[r.vc] and not r.in_prerun and r.attempt_start < now)
    order = [r for r in sim.reclaim_order[1]
             if r.vc != job.vc and (in_pool is None or any(in_pool[s] == job.pool for s, _ in r.alloc))]
    if in_pool is not None and sim.pools.pool_states[job.pool].total_free + sum(
            k.bit_count() for r in order for s, k in r.alloc if in_pool[s] == job.pool) < job.gpus_now:
        victims = None   # not GPUs enough in the pool even if every candidate went: no need to try them one by one
    else:
        victims = choose_victims(sim, job, (r for r in order if used[r.vc] > quota[r.vc]))
    if victims is None:
        sim.reclaim_failed[job.idx] = state
        return False
    for victim in victims:
        sim.preempt_job(victim, now)
        if not sim.reclaim.keep_progress:
            victim.work_left = victim.target_work
    counts, level = sim.choose(job)
    sim.start(job, counts, level, now)
    return True
