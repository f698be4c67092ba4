"""Why each waiting job waits, and Table 2's split of that time: the simulator's wait-cause bookkeeping.

After each scheduling pass (:mod:`.engine`), every job still waiting has the
cause of its wait, fixed until the cluster state changes:

* ``fair_share``: fewer GPUs that its VC may use are free than it needs (its
  quota is used up, or lent to VCs over quota, and no idle GPU can be lent, or
  its VC is at its maximum capacity), or its user limit (:mod:`.users`) does
  not admit it; with ``quotas=None`` this is plain contention for capacity. In
  YARN's words the job has no *headroom*;
* ``backoff``: enough such GPUs are free, so a looser placement exists, but
  the policy is still holding out for locality (Philly before the timeout);
* ``fragmentation``: enough such GPUs are free but no placement meets the
  locality the job requires.

Back-off and fragmentation are split again (:mod:`.results`): *held* while a
back-off timer alone holds the job (no pass tries it); else no placement met
its locality, in stretches ended by a relax timeout (``relaxed``), a placement
freeing up (``placed``), or the GPUs going (``contended``: the cause turned to
fair share). Table 2 counts the latter as fragmentation.

With the policy's ``relax_clock="headroom"`` (:data:`.policies.base.RELAX_CLOCKS`, YARN's delay scheduling) the
relax timer of a job runs only while it has headroom: a change of cause to fair share pauses it, a change back
resumes it with the time it had left (:meth:`WaitCauses.set_cause` calls the policy). A stretch that ends at the
timeout then lasted exactly the time the job had headroom and no local placement since its previous stretch ended, and
the relax timeout is the sum of such stretches at one level: Table 2's fragmentation is time with headroom and no
local placement, however the clock runs.

Cost: causes are re-derived only for jobs whose answer can have changed: by VC
and gang size (by pool, with pools), when the GPUs available to the VC change;
``avail_seen`` holds what each VC (each VC's pool) was last offered. A user limit that changes alone (another job
of the user starts or ends, outside that window of gang sizes) is seen when the job is next tried or re-derived:
its cause, and so the headroom clock, may lag until then.
"""

from __future__ import annotations

from .jobs import Cause, Job, JobState, LocalityEnd
from .placement import Locality
from .pools import changed_causes

_WAITING = JobState.WAITING
_ANYWHERE = int(Locality.ANYWHERE)
_FAIR_SHARE, _FRAGMENTATION, _BACKOFF = int(Cause.FAIR_SHARE), int(Cause.FRAGMENTATION), int(Cause.BACKOFF)
_RELAXED, _PLACED, _CONTENDED = int(LocalityEnd.RELAXED), int(LocalityEnd.PLACED), int(LocalityEnd.CONTENDED)


class WaitCauses:
    """The wait causes of a simulator's waiting jobs and their Table 2 stretches (module docstring).

    Invariant: each waiting job's cause matches ``avail_seen`` of its VC.
    """

    def __init__(self, sim):
        self.sim = sim
        self.relaxes = sim.policy.relaxes   # read for every cause set: a property, looked up once
        # the headroom clock (policies/base.py RELAX_CLOCKS): a change to or from fair share pauses or resumes the
        # relax timer
        self.clock = sim.policy if self.relaxes and getattr(sim.policy, "relax_clock", None) == "headroom" else None
        self.classified_at = None
        pools = sim.pools
        self.avail_seen = [sim._available(v) if pools is None else
                           [sim._available(v, p) for p in range(len(pools.pool_states))]
                           for v in range(len(sim.vc_names))]

    def classify(self, touched, now: float) -> None:
        """Update the causes of jobs whose cause may have changed after a pass; ``touched``: the jobs tried."""
        sim = self.sim
        if not sim.waiting:
            return
        touched = [job for job in touched if job.state is _WAITING]
        holds = sim.gang_holds
        for job in touched:
            if job.cause is None:   # still waiting after the pass of its enqueue time
                sim.policy.on_wait(job, now, sim)
            if holds is not None and holds.eligible(job):
                holds.take(job, now)
        free = sim.cluster.total_free
        # what each VC may take changes only with the GPUs in use (every allocation change is counted); a VC
        # with no waiting job is brought up to date when one of its jobs is touched
        if (free, sim.allocation_changes) != self.classified_at:
            self.classified_at = (free, sim.allocation_changes)
            cap, used, seen = sim.vc_cap, sim.vc_used, self.avail_seen
            # update's own test first, with one pool: most VCs' available GPUs did not change
            if sim.pools is not None:
                for v, by_gpus in enumerate(sim.groups):
                    if by_gpus:
                        self.update(v, free, now)
            elif sim.lending_state is None:
                for v, by_gpus in enumerate(sim.groups):
                    if by_gpus and (free if free < cap[v] - used[v] else cap[v] - used[v]) != seen[v]:
                        self.update(v, free, now)
            else:
                room = sim._room
                for v, by_gpus in enumerate(sim.groups):
                    if by_gpus:
                        r = room(v)
                        if (free if free < r else r) != seen[v]:
                            self.update(v, free, now)
            if holds is not None:   # a holder's own GPUs are free to it: its cause is re-derived each time
                touched.extend(sim.jobs[i] for i in holds.held)
        for job in touched:
            self.update(job.vc, free, now)
            seen = self.avail_seen[job.vc]
            self.set_cause(job, seen if sim.pools is None else seen[job.pool], now)

    def update(self, v: int, free: int, now: float) -> None:
        """Re-derive the causes of VC ``v``'s jobs whose answer changed with the GPUs it may take now."""
        sim = self.sim
        if sim.pools is not None:
            for job, avail in changed_causes(sim.groups[v], self.avail_seen[v], sim._room(v), sim.pools.pool_states):
                self.set_cause(job, avail, now)
            return
        avail = min(free, sim._room(v))
        seen = self.avail_seen[v]
        if avail == seen:
            return
        self.avail_seen[v] = avail
        low, high = (avail, seen) if avail < seen else (seen, avail)
        for g, by_level in sim.groups[v].items():
            if low < g <= high:
                for group in by_level.values():
                    for _, job in group:
                        self.set_cause(job, avail, now)

    def set_cause(self, job: Job, avail: int, now: float) -> None:
        """``job``'s cause, given the GPUs ``avail`` its VC may take (in its pool); a change books the time since
        the last one, and ends or starts a stretch of waiting for locality."""
        sim = self.sim
        if sim.gang_holds is not None:
            avail += sim.gang_holds.count.get(job.idx, 0)
        if job.gpus_now > avail or (sim.users is not None and not sim.users.admits(job)):
            cause = _FAIR_SHARE
        elif job.level < 0 or (self.relaxes and job.level < _ANYWHERE):   # held, or holding out for locality
            cause = _BACKOFF
        else:
            cause = _FRAGMENTATION
        if cause != job.cause:
            if job.cause is not None:
                job.delay[job.cause] += now - job.cause_since
            if job.cause is None or job.cause == _FAIR_SHARE:
                job.stretch_since = now     # where a stretch of back-off or fragmentation would begin
            elif cause == _FAIR_SHARE:
                self.end_stretch(job, now, _CONTENDED)
            job.cause, job.cause_since = cause, now
        clock = self.clock
        if clock is not None:
            if cause == _FAIR_SHARE:
                if job.relax_due is not None:
                    clock.pause_relax(job, now)
            elif job.relax_due is None and job.relax_left is not None and job.level >= 0:
                clock.arm_relax(job, now, sim)

    def placed(self, job: Job, now: float) -> None:
        """A waiting job starts: book the time since its last cause change; a stretch ends as placed."""
        if job.cause is not None:
            job.delay[job.cause] += now - job.cause_since
            if job.cause != _FAIR_SHARE:
                self.end_stretch(job, now, _PLACED)

    def relaxed(self, job: Job, now: float) -> None:
        """A waiting job's locality level changes (the policy's timer): a stretch ends as relaxed."""
        if job.cause is not None and job.cause != _FAIR_SHARE:
            self.end_stretch(job, now, _RELAXED)

    @staticmethod
    def end_stretch(job: Job, now: float, end: int) -> None:
        """Book the back-off or fragmentation time since ``job.stretch_since``: held by the timer, or waiting for
        locality that ended as ``end`` (a :class:`LocalityEnd`); the next stretch starts now."""
        if job.level < 0:
            job.held_s += now - job.stretch_since
        else:
            job.locality_end[end] += now - job.stretch_since
        job.stretch_since = now
