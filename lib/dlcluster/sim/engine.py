"""The discrete-event simulator of a Philly-like GPU cluster: the event loop and the job state.

Events (arrivals, attempt ends and failures, policy timers) are handled in ``(time, kind, sequence)`` order (arrivals
come from a pre-sorted stream merged in at their place in that order); after all events of one timestamp, one
scheduling pass runs (with ``heartbeat``, only at the next scheduling-cycle tick, :mod:`.heartbeat`):

1. Waiting jobs are tried in the policy's order. A job whose VC has quota left for its whole gang is tried first;
   jobs that would exceed their VC's quota may then borrow idle GPUs (Philly's fair sharing; ``lending=False``
   forbids it), up to its maximum capacity (``max_capacity``; :mod:`.sharing`) and, with ``lending_limit``, within
   what the other VCs may lend (:mod:`.lending`). Jobs that cannot be placed are skipped (backfill). A preemptive
   policy may preempt lower-priority running jobs for a job that does not fit; with ``reclaim``, VCs below their
   quota take lent GPUs back (:mod:`.sharing`).
2. With a migration option, fragmentation is repaired by moving jobs.
3. Every job still waiting has the cause of its wait (fair share, back-off or fragmentation), and Table 2's split of
   that time is booked: :mod:`.causes`.

A job's speed comes from the slowdown model and changes when neighbours come and go; its end event is then
rescheduled (stale events carry an old token and are skipped).

Cost: the heap holds only running jobs' and timers' events; waiting jobs are kept in groups of equal VC, gang size and
locality level (and GPU-type pool, with ``gpu_pools``: :mod:`.pools`), each sorted by the policy's key (keys do not
change while a job waits), and a pass (:mod:`.scheduling`) walks group heads in key order, dropping a group at its
first failure and leaving out the tries that could only fail; a pass
stops when the placement can give no more GPUs (the free ones, or fewer: a placement's ``capacity``), and a
preemptive pass drops the gangs larger than the free GPUs once no job may preempt for the rest of it; causes are
re-derived only for jobs whose answer can have changed (:mod:`.causes`). Consolidation looks only at the spread jobs
whose room can have grown (:class:`.migration.SpreadJobs`).
"""

from __future__ import annotations

import bisect
import heapq
import time as wallclock

import numpy as np

from .cluster import ClusterState
from .events import EventKind
from .failures import FailureModel, RetryPolicy, RETRY_PRESETS
from .gang import GangHolds
from .heartbeat import CycleState, Heartbeat
from .causes import WaitCauses
from .jobs import Job, JobState, Outcome, gc_paused
from .lending import LendingLimit, LendingState
from .migration import SpreadJobs
from .placement import Locality, best_feasible_level, make_placement
from .policies import make_policy
from .pools import PooledCluster
from .preemption import PassState, preempt_for
from .results import SimResult
from .sampler import Sampler, pending_bucket, progress_bar
from .scheduling import place_all, place_jobs
from .sharing import Reclaim, arm_reclaim, reclaim_check, vc_caps
from .slowdown import default_slowdown_model, no_slowdown, real_speeds
from .topology import Topology
from .users import UserLimits, UserState
from .workload import Workload

_WAITING, _RUNNING, _DONE = JobState.WAITING, JobState.RUNNING, JobState.DONE
_END, _FAIL, _ARRIVAL = int(EventKind.JOB_END), int(EventKind.ATTEMPT_FAIL), int(EventKind.ARRIVAL)
_SERVER, _RACK, _ANYWHERE = int(Locality.SERVER), int(Locality.RACK), int(Locality.ANYWHERE)
# plain ints in the hot paths: an enum member's attribute lookup costs several times an int comparison
_FINISHED, _FAILED, _PREEMPTED = int(Outcome.FINISHED), int(Outcome.FAILED), int(Outcome.PREEMPTED)
_MIGRATED, _PRERUN_DONE = int(Outcome.MIGRATED), int(Outcome.PRERUN_DONE)
_INF = float("inf")


class Simulator:
    """One simulation run. ``Simulator(workload, topology, policy, ...).run() -> SimResult``.

    ``quotas``: ``{vc: GPUs}``; VCs missing from it get quota 0 (they only borrow idle GPUs). None means no VC
    limits. ``lending``: VCs may use idle GPUs beyond their quota, up to ``max_capacity`` (``{vc: GPUs}``; a VC not
    in it, or None: the whole cluster). ``reclaim``: a :class:`~.sharing.Reclaim` (VCs below their quota preempt
    borrowers), or None. ``slowdown``: "default", None (ideal speed) or a callable ``(gpus_per_server, num_racks,
    colocated_jobs)``; a :class:`~.slowdown.ReplaySlowdown` charges each job relative to its real placement (a speed
    above 1 where the replay places it better than Philly did). ``failures``: a :class:`FailureModel` (None: no
    failures beyond those in the trace's run times). ``retry``: a :class:`RetryPolicy` or preset name.
    ``early_stop``: end jobs when their loss converged (``converge_frac``). ``migration``: a
    :class:`dlcluster.sim.migration.Migration` or None. ``restart_overhead_s``: time each attempt after the first
    spends restoring before it makes progress. ``gang_hold``: a waiting gang holds the free GPUs it wants until it
    starts or relaxes (:mod:`.gang`). ``user_limits``: a :class:`~.users.UserLimits` (YARN's per-user limits within
    a VC), or None. ``lending_limit``: a :class:`~.lending.LendingLimit` (each VC lends at most a share of its idle
    quota), or None. ``heartbeat``: a :class:`~.heartbeat.Heartbeat` (scheduling passes only at cycle ticks), or
    None. ``gpu_pools``: each job's GPU-type pool (a ``gpu_mem`` of the topology; :mod:`.pools`): it is placed only
    on that pool's servers and its wait counts that pool's free GPUs; None: one pool. ``progress``: a progress bar.
    """

    #: A preemptive pass drops the gangs larger than the free GPUs once no job may preempt for the rest of it
    #: (:func:`.scheduling.place_all`); False tries them all, the plain rule the tests hold it equal to.
    prunes_after_preemption = True
    #: A pass that cannot preempt leaves out the tries that could only fail (:func:`.scheduling.place_all`); False
    #: makes each of them, the plain rule the tests hold it equal to.
    skips_failing_tries = True

    def __init__(self, workload: Workload, topology: Topology, policy="philly", *, quotas: dict | None = None,
                 lending: bool = True, max_capacity: dict | None = None, reclaim: Reclaim | None = None,
                 placement=None, slowdown="default", failures: FailureModel | None = None,
                 retry: RetryPolicy | str | None = None, early_stop: bool = False, migration=None, seed: int = 0,
                 sample_interval_s: float = 300.0, restart_overhead_s: float = 0.0, gang_hold: bool = False,
                 user_limits: UserLimits | None = None, lending_limit: LendingLimit | None = None,
                 heartbeat: Heartbeat | None = None, gpu_pools=None, progress: bool = False):
        if len(workload) == 0:
            raise ValueError("workload has no jobs")
        if not sample_interval_s > 0:
            raise ValueError(f"sample_interval_s must be > 0, got {sample_interval_s!r}")
        if not restart_overhead_s >= 0:
            raise ValueError(f"restart_overhead_s must be >= 0, got {restart_overhead_s!r}")
        if isinstance(retry, str) and retry not in RETRY_PRESETS:
            raise ValueError(f"retry: unknown preset {retry!r}; choose from {sorted(RETRY_PRESETS)}")
        self.workload, self.topology, self.seed = workload, topology, seed
        self.policy = make_policy(policy)
        self.placement = make_placement(placement or self.policy.default_placement)
        # the cluster's count of the GPUs the placement can still give (a full pass stops when it is 0, and skips a
        # gang larger): a placement may name a narrower one than the free GPUs (the dedicated arm: those of servers
        # without a job), unless something else can make room (moving jobs, GPUs held by waiting gangs, pools)
        narrower = migration is None or not migration.defragment
        self._placeable = getattr(self.placement, "capacity", "total_free") \
            if narrower and not gang_hold and gpu_pools is None else "total_free"
        if isinstance(slowdown, str) and slowdown == "default":
            slowdown = default_slowdown_model()
        self.slowdown = no_slowdown if slowdown is None else getattr(slowdown, "speed", slowdown)
        self._ideal = self.slowdown is no_slowdown   # every job at speed 1: no neighbour ever changes it
        # what of its neighbours a job's speed depends on (SlowdownModel.colocation); any other callable: their count
        self._colocation = getattr(slowdown, "colocation", "count")
        if not callable(self.slowdown):
            raise ValueError("slowdown must be 'default', None, a callable or an object with .speed()")
        self._real_speed = real_speeds(slowdown, len(workload))   # a replay of real durations: relative speeds
        if not self.policy.backfill and quotas is not None and lending:
            raise ValueError(f"{self.policy!r} has no backfill (head-of-line blocking per VC): it needs "
                             "lending=False (or quotas=None), so that each VC's queue is decided on its own GPUs")
        if max_capacity is not None and (quotas is None or not lending):
            raise ValueError("max_capacity caps what VCs borrow beyond their quotas: it needs quotas and lending=True")
        if reclaim is not None and (quotas is None or not lending):
            raise ValueError("reclaim takes lent GPUs back: it needs quotas and lending=True")
        if user_limits is not None and quotas is None:
            raise ValueError("user_limits are shares of each VC's quota: they need quotas")
        if lending_limit is not None and (quotas is None or not lending):
            raise ValueError("lending_limit limits what VCs lend of their idle quotas: it needs quotas and "
                             "lending=True")
        if gpu_pools is not None and (migration is not None or len(gpu_pools) != len(workload)):
            raise ValueError("gpu_pools: one pool per job of the workload, and no migration (it moves jobs across "
                             f"the whole cluster); got {len(gpu_pools)} pools for {len(workload)} jobs")
        self.lending, self.early_stop, self.migration = lending, early_stop, migration
        self.max_capacity, self.reclaim = max_capacity, reclaim
        self.reclaim_pending, self.reclaim_checks = False, 0
        self.reclaim_order = (None, [])   # (allocation changes, time) and the borrowers in victim order then
        self.reclaim_failed = {}   # job index -> (allocation changes, level, GPUs) when a reclaim for it last failed
        self.retry_policy = RETRY_PRESETS[retry] if isinstance(retry, str) else (retry or RETRY_PRESETS["philly"])
        self.failure_model = failures
        self.sample_interval_s, self.restart_overhead_s, self.progress = sample_interval_s, restart_overhead_s, progress
        self.cluster = ClusterState(topology) if gpu_pools is None else PooledCluster(topology)
        self.pools = None if gpu_pools is None else self.cluster
        self._setup_vcs(quotas)
        with gc_paused():   # ~10^5 job objects: the cyclic collector would rescan them as they are made
            self._setup_jobs()
        if self.pools is not None:
            for job, pool in zip(self.jobs, self.pools.pool_index(gpu_pools), strict=True):
                job.pool = pool
        self.gang_holds = GangHolds(self) if gang_hold else None
        self._held_by_vc = self.gang_holds.by_vc if gang_hold else [0] * len(self.vc_names)
        self.users = UserState(self, user_limits) if user_limits is not None else None
        self.lending_state = LendingState(self, lending_limit, quotas) if lending_limit is not None else None
        self.cycle = CycleState(self, heartbeat) if heartbeat is not None else None
        self.waiting: dict[int, Job] = {}
        self.pending_jobs, self.pending_gpus = [0] * 4, [0] * 4   # waiting jobs and their GPUs per size bucket
        self._bucket_of = [pending_bucket(g) for g in range(int(workload.num_gpus.max()) + 1)]   # by job size
        self.running: dict[int, Job] = {}
        # running wider than they must, for consolidation (:mod:`.migration`) only
        self.spread = SpreadJobs(self.cluster) if migration is not None and migration.consolidate else None
        self.rejections: dict[int, str] = {}
        self.attempt_log: list = []
        # Waiting jobs grouped by VC, gang size and locality level (members of a group get the same answer
        # from admission and placement), each group sorted by policy key: vc -> {gpus -> {level -> [(key, job)]}};
        # with pools the level's key is (level, pool) and what each VC was offered is kept per pool
        self.groups = [dict() for _ in self.vc_names]
        self.allocation_changes = 0
        self.causes = WaitCauses(self)   # each waiting job's cause and Table 2's stretches
        self._new: list[Job] = []
        self._capacity_freed = self._priorities_changed = False
        self._speed_cache: dict = {}
        self._heap: list = []
        self._seq = 0
        self.events_processed = 0
        self.allocated_gpu_s = 0.0
        self.done_count = 0

    # ----------------------------------------------------------------- setup
    def _setup_vcs(self, quotas):
        names, inverse = np.unique(np.asarray(self.workload.vc, dtype=str), return_inverse=True)
        self.vc_names = [str(v) for v in names]
        self.job_vc = inverse.astype(np.int64)
        total = self.cluster.total_gpus
        if quotas is None:
            self.quota = [total] * len(self.vc_names)
            self.vcs_without_quota = []
        else:
            bad = {v: q for v, q in quotas.items() if int(q) != q or q < 0}
            if bad:
                raise ValueError(f"quotas: GPU quotas must be non-negative integers, got {bad}")
            self.quota = [int(quotas.get(v, 0)) for v in self.vc_names]
            self.vcs_without_quota = [v for v in self.vc_names if v not in quotas]
        self.vc_cap = vc_caps(quotas, total, self.lending, self.max_capacity, self.vc_names)
        self.vc_used = [0] * len(self.vc_names)

    def _setup_jobs(self):
        w, c = self.workload, self.cluster
        target = w.service_s.astype(float)
        if self.early_stop and w.converge_frac is not None:
            target = target * np.where(np.isnan(w.converge_frac), 1.0, w.converge_frac)
        self.failure_classes = ()
        self.draws = None
        job_class = np.full(len(w), -1)
        if self.failure_model is not None:
            self.draws = self.failure_model.draws(len(w), self.retry_policy.max_retries + 2, self.seed,
                                                  w.fail_class)
            self.failure_classes = self.failure_model.classes
            job_class = self.draws.job_class
        gpus = w.num_gpus.astype(np.int64)
        min_level = np.where(gpus <= c.max_cap, _SERVER, np.where(gpus <= c.max_rack_cap, _RACK, _ANYWHERE))
        self.jobs = [Job(i, a, g, s, t, v, m, f) for i, (a, g, s, t, v, m, f) in enumerate(zip(
            w.arrival_s.astype(float).tolist(), gpus.tolist(), w.service_s.astype(float).tolist(),
            target.tolist(), self.job_vc.tolist(), min_level.tolist(), job_class.tolist(), strict=True))]
        order = np.lexsort((np.arange(len(w)), w.arrival_s))
        self._arrival_times = w.arrival_s[order].astype(float).tolist()
        self._arrival_order = order.tolist()

    # -------------------------------------------------------- services to policies
    def schedule(self, when: float, kind: EventKind, job: Job, token: int) -> None:
        heapq.heappush(self._heap, (when, int(kind), self._seq, job.idx, token))
        self._seq += 1

    def priorities_changed(self) -> None:
        self._priorities_changed = True

    def remaining_work(self, job: Job, now: float) -> float:
        if job.state is not _RUNNING:
            return job.work_left
        begin = max(job.progress_at, job.resume_at)
        return job.work_left - job.speed * max(0.0, now - begin)

    def attained(self, job: Job, now: float) -> float:
        """GPU-seconds held so far (Tiresias' attained service)."""
        if job.state is not _RUNNING:
            return job.attained
        return job.attained + job.gpus_now * (now - job.attempt_start)

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        # The loop creates no reference cycles but keeps ~10^6 objects alive: the cyclic garbage
        # collector would rescan them over and over (~15% of the time), so it is paused for the run.
        with gc_paused():
            return self._run()

    def _run(self) -> SimResult:
        started = wallclock.perf_counter()
        self.policy.prepare(self)
        heap, jobs, pop = self._heap, self.jobs, heapq.heappop
        handlers = [None] * (max(EventKind) + 1)
        handlers[_END], handlers[_FAIL] = self._on_end, self._on_fail
        handlers[EventKind.DEMOTE], handlers[EventKind.RELAX] = self._on_demote, self._on_relax
        handlers[EventKind.RECLAIM] = lambda _job, _token, now: reclaim_check(self, now)
        handlers[EventKind.HEARTBEAT] = lambda _job, _token, now: None   # the tick's pass runs below
        arrivals, arrival_order = self._arrival_times, self._arrival_order
        n_arrivals, next_arrival = len(arrivals), 0
        sampler = Sampler(self)
        bar = progress_bar(len(jobs), self.progress)
        last_done, last_time, events = 0, 0.0, 0
        cluster = self.cluster
        while True:
            t_arrival = arrivals[next_arrival] if next_arrival < n_arrivals else _INF
            now = heap[0][0] if heap and heap[0][0] < t_arrival else t_arrival
            if now == _INF:
                break
            if now > sampler.next:
                sampler.until(now)
            self.allocated_gpu_s += (cluster.total_gpus - cluster.total_free) * (now - last_time)
            last_time = now
            while heap and heap[0][0] == now and heap[0][1] < _ARRIVAL:
                _, kind, _, j, token = pop(heap)
                handlers[kind](jobs[j], token, now)
                events += 1
            while next_arrival < n_arrivals and arrivals[next_arrival] == now:
                self._on_arrival(jobs[arrival_order[next_arrival]], now)
                next_arrival += 1
                events += 1
            while heap and heap[0][0] == now:
                _, kind, _, j, token = pop(heap)
                handlers[kind](jobs[j], token, now)
                events += 1
            if (self._new or self._capacity_freed or self._priorities_changed) and \
                    (self.cycle is None or self.cycle.due(now)):
                self._pass(now)
            if bar is not None and self.done_count - last_done >= 1024:
                bar.update(self.done_count - last_done)
                last_done = self.done_count
        sampler.until(last_time + self.sample_interval_s)
        if bar is not None:
            bar.update(self.done_count - last_done)
            bar.close()
        self.events_processed = events
        leftover = [j for j in jobs if j.state is not _DONE]
        if leftover:
            raise RuntimeError(f"simulation ended with {len(leftover)} unfinished jobs, e.g. {leftover[0]!r}")
        return SimResult.build(self, sampler, wall_s=wallclock.perf_counter() - started, end_time=last_time)

    # --------------------------------------------------------------- events
    def _on_arrival(self, job: Job, now: float) -> None:
        g = job.num_gpus
        reason = None
        if g > self.cluster.total_gpus:
            reason = "needs more GPUs than the cluster has"
        elif not self.lending and g > self.quota[job.vc]:
            reason = "needs more GPUs than its VC quota and lending is off"
        elif g > self.vc_cap[job.vc]:
            reason = "needs more GPUs than its VC's maximum capacity"
        if reason is not None:
            self.rejections[job.idx] = reason
            self._finish(job, "Rejected", now)
            return
        if self.users is not None:
            self.users.arrive(job)
        if self.retry_policy.prerun_s > 0 and g > 1:
            job.in_prerun, job.gpus_now, job.min_level = True, 1, _SERVER
            job.work_left = self.retry_policy.prerun_s
        self._enqueue(job, now)

    def _on_end(self, job: Job, token: int, now: float) -> None:
        if token != job.end_token:
            return
        job.work_left = 0.0
        if job.in_prerun:
            self._stop(job, now, _PRERUN_DONE)
            job.in_prerun, job.gpus_now = False, job.num_gpus
            job.min_level = int(best_feasible_level(job.num_gpus, self.cluster.max_cap, self.cluster.max_rack_cap))
            job.work_left = job.target_work
            self._enqueue(job, now)
            return
        self._stop(job, now, _FINISHED)
        job.early_stopped = job.target_work < job.service
        self._finish(job, "Pass", now)

    def _on_fail(self, job: Job, token: int, now: float) -> None:
        if token != job.attempt_token or job.state is not _RUNNING:
            return
        self._stop(job, now, _FAILED)
        job.failures += 1
        cls = self.failure_classes[job.fail_class]
        retry = self.retry_policy
        if job.failures > retry.max_retries or not (cls.retryable or retry.retry_non_retryable):
            self._finish(job, "Failed", now)
            return
        if not retry.keep_progress:
            job.work_left = retry.prerun_s if job.in_prerun else job.target_work
        self._enqueue(job, now)

    def _on_demote(self, job: Job, token: int, now: float) -> None:
        if token == job.attempt_token and job.state is _RUNNING:
            self.policy.on_demote(job, now, self)

    def _on_relax(self, job: Job, token: int, now: float) -> None:
        if token == job.wait_token and job.state is _WAITING:
            self.policy.on_relax(job, now, self)

    def _finish(self, job: Job, status: str, now: float) -> None:
        job.status, job.end_time, job.state = status, now, _DONE
        self.done_count += 1
        if self.users is not None and status != "Rejected":
            self.users.leave(job)

    # ------------------------------------------------------------ job state
    def _enqueue(self, job: Job, now: float) -> None:
        job.state = _WAITING
        job.wait_token += 1
        job.cause_since, job.cause = now, None
        job.relax_due = job.relax_left = None   # the relax clock (policies/base.py) starts afresh
        self.policy.on_enqueue(job, now, self)
        self._add_waiting(job)
        self._new.append(job)

    def _add_waiting(self, job: Job) -> None:
        level = job.level if self.pools is None else (job.level, job.pool)
        group = self.groups[job.vc].setdefault(job.gpus_now, {}).setdefault(level, [])
        bisect.insort(group, (job.key, job))
        self.waiting[job.idx] = job
        b = self._bucket_of[job.num_gpus]
        self.pending_jobs[b] += 1
        self.pending_gpus[b] += job.gpus_now

    def _remove_waiting(self, job: Job) -> None:
        by_gpus = self.groups[job.vc]
        by_level = by_gpus[job.gpus_now]
        level = job.level if self.pools is None else (job.level, job.pool)
        group = by_level[level]
        del group[bisect.bisect_left(group, (job.key,))]
        if not group:
            del by_level[level]
            if not by_level:
                del by_gpus[job.gpus_now]
        del self.waiting[job.idx]
        b = self._bucket_of[job.num_gpus]
        self.pending_jobs[b] -= 1
        self.pending_gpus[b] -= job.gpus_now

    def set_level(self, job: Job, level: int, now: float) -> None:
        """Change a waiting job's locality level (policies relax it) and reconsider it now."""
        self.causes.relaxed(job, now)
        if self.gang_holds is not None and level > job.min_level and self.gang_holds.lift(job, now) is not None:
            self._capacity_freed = True     # its timeout: a gang gives back the GPUs it held
        self._remove_waiting(job)
        job.level = level
        self._add_waiting(job)
        self._new.append(job)

    def start(self, job: Job, counts, level: int, now: float) -> None:
        """A waiting job starts an attempt on ``counts`` = [(server, GPUs)]."""
        self.causes.placed(job, now)
        self._remove_waiting(job)
        if self.gang_holds is not None:
            self.gang_holds.lift(job, now)
        job.wait_token += 1
        if job.first_start is None:
            job.first_start = now
        overhead = self.restart_overhead_s if job.num_attempts else 0.0
        self._begin_attempt(job, counts, level, now, now + overhead)
        if job.fail_class >= 0:
            self._arm_failure(job, now)

    def _begin_attempt(self, job: Job, counts, level: int, now: float, resume_at: float) -> None:
        c = self.cluster
        job.alloc = c.allocate(job.idx, counts)
        self.allocation_changes += 1
        if len(counts) == 1:
            job.shape, job.num_racks = (counts[0][1],), 1
        else:
            job.shape = tuple(k for _, k in counts)
            job.num_racks = len({c.rack_of[s] for s, _ in counts})
        job.attempt_level = level
        job.state = _RUNNING
        job.attempt_start = job.progress_at = now
        job.resume_at = resume_at
        self.running[job.idx] = job
        if self.spread is not None and level > job.min_level:
            self.spread.add(job)
        self.vc_used[job.vc] += job.gpus_now
        if self.lending_state is not None:
            self.lending_state.changed(job.vc)
        if self.users is not None:
            self.users.change(job, job.gpus_now)
        job.speed = 1.0 if self._ideal else self._speed_of(job)
        self._schedule_end(job, now)
        self.policy.on_start(job, now, self)
        self._refresh_neighbours(job, now)

    def _end_attempt(self, job: Job, now: float, outcome: int) -> None:
        """``outcome``: an :class:`Outcome`'s value."""
        self._advance(job, now)
        job.attained += job.gpus_now * (now - job.attempt_start)
        self.attempt_log.append((job.idx, job.attempt_start, now, outcome, job.alloc, job.attempt_level,
                                 job.in_prerun, job.gpus_now, job.num_racks))
        job.num_attempts += 1
        self.cluster.release(job.idx, job.alloc)
        self.allocation_changes += 1
        del self.running[job.idx]
        if self.spread is not None:
            self.spread.released(job)
        self.vc_used[job.vc] -= job.gpus_now
        if self.lending_state is not None:
            self.lending_state.changed(job.vc)
        if self.users is not None:
            self.users.change(job, -job.gpus_now)
        job.end_token += 1
        job.attempt_token += 1
        self.policy.on_stop(job, now, self)
        self._refresh_neighbours(job, now)

    def _stop(self, job: Job, now: float, outcome: int) -> None:
        """End the running attempt and free its GPUs (finish, failure, pre-run end, preemption)."""
        self._end_attempt(job, now, outcome)
        job.fail_at = None
        self._capacity_freed = True

    def preempt_job(self, job: Job, now: float) -> None:
        self._stop(job, now, _PREEMPTED)
        job.preemptions += 1
        self._enqueue(job, now)

    def move(self, job: Job, counts, level: int, now: float, pause_s: float) -> None:
        """Migrate a running job to ``counts``; it makes no progress for ``pause_s``."""
        fail_at = job.fail_at
        self._end_attempt(job, now, _MIGRATED)
        job.migrations += 1
        self._begin_attempt(job, counts, level, now, now + pause_s)
        if fail_at is not None:
            job.fail_at = fail_at
            self.schedule(fail_at, _FAIL, job, job.attempt_token)

    def _arm_failure(self, job: Job, now: float) -> None:
        job.fail_at = None
        if job.failure_cleared:
            return
        k = job.failures
        cls = self.failure_classes[job.fail_class]
        if k > 0 and cls.retryable and self.draws.repeat_u[job.idx, k] >= cls.repeat_probability:
            job.failure_cleared = True
            return
        job.fail_at = now + float(self.draws.rtf_s[job.idx, k])
        self.schedule(job.fail_at, _FAIL, job, job.attempt_token)

    # ------------------------------------------------------------- progress
    def _advance(self, job: Job, now: float) -> None:
        begin = job.resume_at if job.resume_at > job.progress_at else job.progress_at
        if now > begin:
            job.work_left = max(0.0, job.work_left - job.speed * (now - begin))
        job.progress_at = now

    def _schedule_end(self, job: Job, now: float) -> None:
        job.end_token += 1
        begin = job.resume_at if job.resume_at > now else now
        heapq.heappush(self._heap, (begin + job.work_left / job.speed, _END, self._seq, job.idx, job.end_token))
        self._seq += 1

    def _speed_of(self, job: Job) -> float:
        jobs_on = self.cluster.jobs_on
        alloc = job.alloc
        if self._colocation == "none":
            colocated = 0
        elif len(alloc) == 1:
            colocated = len(jobs_on[alloc[0][0]]) - 1
        elif self._colocation == "any":
            colocated = int(any(len(jobs_on[s]) > 1 for s, _ in alloc))
        elif sum(len(jobs_on[s]) for s, _ in alloc) == len(alloc):
            colocated = 0
        else:
            colocated = len(set().union(*(jobs_on[s] for s, _ in alloc))) - 1
        key = (job.shape, job.num_racks, colocated)
        speed = self._speed_cache.get(key)
        if speed is None:
            speed = float(self.slowdown(list(job.shape), job.num_racks, colocated))
            if not 0 < speed <= 1:
                raise ValueError(f"slowdown model returned speed {speed!r} for {key}; must be in (0, 1]")
            self._speed_cache[key] = speed
        return speed if self._real_speed is None else speed / self._real_speed[job.idx]

    def _refresh_neighbours(self, job: Job, now: float) -> None:
        """Jobs sharing a server with ``job`` (came or went) may change speed; a waiting gang's held GPUs do not."""
        if self._ideal or self._colocation == "none":
            return
        jobs_on, me, running = self.cluster.jobs_on, job.idx, self.running
        if len(job.alloc) == 1:
            neighbours = jobs_on[job.alloc[0][0]]
        else:
            neighbours = dict.fromkeys(o for s, _ in job.alloc for o in jobs_on[s])
        jobs = self.jobs
        for other in neighbours:
            if other == me or other not in running:
                continue
            o = jobs[other]
            speed = self._speed_of(o)
            if speed != o.speed:
                self._advance(o, now)
                o.speed = speed
                self._schedule_end(o, now)

    # ------------------------------------------------------------ scheduling
    def _pass(self, now: float) -> None:
        full = self._capacity_freed or self._priorities_changed
        touched = self._new
        self._new = []
        self._capacity_freed = self._priorities_changed = False
        if self.waiting:
            if full or not self.policy.backfill:
                place_all(self, now)
            else:
                place_jobs(self, touched, now)
        if self.migration is not None and full and self.migration.consolidate:
            self.migration.improve_locality(self, now)
        # Preemption may free more GPUs than the preemptor takes: let waiting jobs have them. Each preemption
        # replaces a running job by a strictly higher-ranked one, so this settles; the guard catches policies
        # that break that rule.
        rounds = 0
        while self._capacity_freed and self.waiting:
            self._capacity_freed = False
            place_all(self, now)
            rounds += 1
            if rounds > 10 * len(self.jobs):
                raise RuntimeError(f"scheduling at t={now} does not settle (policy {self.policy!r})")
        touched.extend(self._new)
        self._new = []
        self.causes.classify(touched, now)
        if self.reclaim is not None:
            arm_reclaim(self, now)

    def _try_start(self, job: Job, state: PassState, now: float) -> bool:
        if self.users is not None and not self.users.admits(job):
            return False
        if self.gang_holds is None:
            return self._try_place(job, state, now, True)
        lifted = self.gang_holds.lift(job, now)     # a waiting gang's own GPUs are free to it
        started = self._try_place(job, state, now, lifted is None)
        if lifted is not None and not started:
            self.gang_holds.restore(job, lifted, now)
        return started

    def _try_place(self, job: Job, state: PassState, now: float, same_as_failed: bool) -> bool:
        g = job.gpus_now
        failed = state.failed
        # free GPUs only within the VC's room (maximum capacity, lending limit: _room); beyond it a preemptive policy
        # may still preempt (its victims' GPUs then count: _choose_victims checks the cap after freeing them)
        if g <= self.cluster.total_free and not (same_as_failed and failed and (g, job.level, job.pool) in failed) \
                and g <= self._room(job.vc):
            choice = self.choose(job)
            if choice is not None:
                self.start(job, choice[0], choice[1], now)
                return True
            if self.migration is not None and self.migration.defragment and self.migration.make_room(self, job, now):
                failed.clear()
                return True
            failed.add((g, job.level, job.pool))
        if self.policy.preemptive and not state.nobody_preemptible and preempt_for(self, job, state, now):
            state.failed.clear()
            return True
        return False

    def choose(self, job: Job):
        """Where ``job`` would start now: ``(counts, level)`` at its locality (in its pool, with pools), or None."""
        if self.pools is None:
            return self.placement.choose(self.cluster, job.gpus_now, job.min_level, job.level)
        return self.pools.choose(self.placement, job)

    def _room(self, vc: int) -> int:
        """GPUs ``vc`` may still take: within its maximum capacity (and the lending limit: LendingState.room)."""
        used = self.vc_used[vc]
        room = self.vc_cap[vc] - used
        lending = self.lending_state
        if lending is None:
            return room
        if lending._at != self.allocation_changes:
            lending._refresh()
        own = self.quota[vc] - used
        borrowable = lending._pool - lending._lendable[vc]
        limit = (own if own > 0 else 0) + (borrowable if borrowable > 0 else 0)
        return room if room < limit else limit

    def _available(self, vc: int, pool: int | None = None) -> int:
        """GPUs a job of ``vc`` (in ``pool``) may take now: free ones, within its VC's room (:meth:`_room`)."""
        free = self.cluster.total_free if pool is None else self.pools.pool_states[pool].total_free
        return min(free, self._room(vc))

    def admissible(self, job: Job) -> bool:
        return job.gpus_now <= self._available(job.vc, None if self.pools is None else job.pool)
