"""Preemption: which running jobs a waiting job may take GPUs from, and the fewest that let it start.

Used by preemptive policies (a higher-ranked waiting job preempts lower-ranked
running ones, :func:`preempt_for`) and by the Capacity Scheduler's reclaim
(:mod:`.sharing`). :func:`choose_victims` frees candidates tentatively, least
important first, until the job fits, then gives back those it does not need,
and leaves the cluster as it found it. Where the placement's answer depends only
on the free GPUs per server, rack and in total (best fit, most free, Philly's
packing rules but for whole-server gangs: ``decided_by_counts``), it counts the
candidates' GPUs instead of freeing them and asking (:func:`_count_victims`):
the same victims, at a fraction of the cost.
"""

from __future__ import annotations

import itertools

from .jobs import JobState
from .placement import best_feasible_level

_RUNNING = JobState.RUNNING


class PassState:
    """What one scheduling pass has learned: failures stay failures until GPUs are freed."""

    __slots__ = ("failed", "ranked", "preempt_failed", "nobody_preemptible")

    def __init__(self):
        self.failed = set()
        self.ranked = None
        self.preempt_failed = {}
        self.nobody_preemptible = False


def preempt_for(sim, job, state: PassState, now: float) -> bool:
    """Preempt lower-priority running jobs so that ``job`` can start; False if impossible.

    Candidates are running jobs the policy lets ``job`` preempt, least
    important first; jobs started in this pass are not candidates.
    """
    policy = sim.policy
    if state.ranked is None:
        state.ranked = policy.ranked_running(now, sim)
    ranked = state.ranked
    lo, hi = 0, len(ranked)
    while lo < hi:  # candidates form a prefix of the ranking
        mid = (lo + hi) // 2
        if policy.preempts(job.key, ranked[mid][0], now):
            lo = mid + 1
        else:
            hi = mid
    n = lo
    if n == 0:
        state.nobody_preemptible = True  # jobs tried later rank lower still
        return False
    key = (job.gpus_now, job.level, job.pool)
    if state.preempt_failed.get(key, -1) >= n:
        return False
    # Jobs preempted or started earlier in this pass stay in the ranking but are skipped.
    victims = choose_victims(sim, job, (r for _, r in itertools.islice(ranked, n)
                                        if r.state is _RUNNING and r.attempt_start < now))
    if victims is None:
        state.preempt_failed[key] = n
        return False
    for v in victims:
        sim.preempt_job(v, now)
    counts, level = sim.choose(job)
    sim.start(job, counts, level, now)
    return True


def choose_victims(sim, job, candidates):
    """The fewest candidates (least important first) whose GPUs let ``job`` start; None if none do.

    Frees candidates tentatively until the job fits, then gives back those
    it does not need (most important first). Leaves the cluster unchanged.

    ``candidates`` may be lazy and read the VCs' use (the reclaim takes a job only while its VC is above its quota):
    it is read after each earlier candidate's GPUs were taken from its VC's use, as if freed one by one.
    """
    cluster, used = sim.cluster, sim.vc_used
    if sim.lending_state is not None:
        # what other VCs may lend is re-derived lazily, once per allocation change: derive it now, from the real
        # allocation, not from one with candidates tentatively freed below (it would be kept until the next change)
        sim.lending_state.room(job.vc)
    g, vc = job.gpus_now, job.vc
    over_cap = g - (sim.vc_cap[vc] - used[vc])
    if over_cap > 0:
        # past its VC's maximum capacity only the VC's own jobs can make room: if all of them together cannot,
        # no set of victims can (the search below would free every candidate and find none)
        candidates = list(candidates)
        if sum(v.gpus_now for v in candidates if v.vc == vc) < over_cap:
            return None

    pools = sim.pools
    state = cluster if pools is None else pools.pool_states[job.pool]
    decided_by_counts = getattr(sim.placement, "decided_by_counts", None)
    if decided_by_counts is not None and decided_by_counts(state, g):
        return _count_victims(sim, job, candidates, state)

    def fits():
        return sim.admissible(job) and sim.choose(job) is not None

    def release(v):
        cluster.release(v.idx, v.alloc)
        used[v.vc] -= v.gpus_now

    def restore(v):
        cluster.allocate_masks(v.idx, v.alloc)
        used[v.vc] += v.gpus_now

    # Until the job is admissible (enough free GPUs in its pool, within its VC's room) it cannot fit, and fits() would
    # not ask the placement: count the GPUs a candidate frees and take it from its VC's use only, and free the
    # counted candidates on the cluster once the job is admissible (the same frees, in the same order: most of a
    # preemptive replay's time went to freeing and asking one candidate at a time)
    in_pool, pool = (None, None) if pools is None else (pools.server_pool, job.pool)
    free = state.total_free
    counted = []
    candidates = iter(candidates)
    admissible = False
    for v in candidates:
        used[v.vc] -= v.gpus_now
        counted.append(v)
        free += sum(mask.bit_count() for s, mask in v.alloc if in_pool is None or in_pool[s] == pool)
        if g <= free and g <= sim._room(vc):
            admissible = True
            break
    for v in counted:
        used[v.vc] += v.gpus_now
    if not admissible:
        return None
    for v in counted:
        release(v)
    released = counted
    if sim.choose(job) is None:
        for v in candidates:
            release(v)
            released.append(v)
            if fits():
                break
        else:
            for v in reversed(released):
                restore(v)
            return None
    # the last one released is needed: before it was, the job did not fit (and it did not fit before the first, or it
    # would not be preempting), so restoring it first only to find that again is skipped
    needed = [released[-1]]
    for v in reversed(released[:-1]):
        restore(v)
        if not fits():
            release(v)
            needed.append(v)
    for v in needed:
        restore(v)
    return needed[::-1]


def _count_victims(sim, job, candidates, state):
    """:func:`choose_victims` for a placement whose answer the free GPUs per server, rack and in total decide
    (``decided_by_counts``): the same search, in the same order, with each candidate's GPUs counted instead of freed
    and the placement's answer read from the counts. The cluster is never touched, but for the order of
    ``jobs_on``: freeing a job and giving it back moves it last among its servers' jobs, and the order of colocated
    jobs orders their speed changes, so the moves the one-by-one search made are made here too."""
    g, vc, used, pools = job.gpus_now, job.vc, sim.vc_used, sim.pools
    if pools is None:
        low, high = job.min_level, job.level
        in_pool = local = pool = None
    else:   # as PooledCluster.choose
        low = max(job.min_level, int(best_feasible_level(g, state.max_cap, state.max_rack_cap)))
        high = max(job.level, low)
        in_pool, local, pool = pools.server_pool, pools.local, job.pool
    levels = range(low, high + 1)
    server_level, rack_level, anywhere = 0 in levels, 1 in levels, 2 in levels
    free, rack_of, rack_free = state.free, state.rack_of, state.rack_free
    total = state.total_free
    # servers (racks) with at least g GPUs counted free: the job fits at that level while there is one
    servers = sum(len(state.by_free[k]) for k in range(g, state.max_cap + 1)) if server_level else 0
    racks = sum(f >= g for f in rack_free) if rack_level else 0
    server_free, rack_free_now = {}, {}

    room = sim._room(vc)   # moves only with the job's own VC's use (the lending state was derived above)

    def change(v, sign):   # +1: count v's GPUs free (free it); -1: give them back
        nonlocal total, servers, racks, room
        used[v.vc] -= sign * v.gpus_now
        if v.vc == vc:
            room = sim._room(vc)
        for s, mask in v.alloc:
            if in_pool is not None:
                if in_pool[s] != pool:
                    continue
                s = local[s]
            k = sign * mask.bit_count()
            total += k
            if server_level:
                old = server_free.get(s, free[s])
                server_free[s] = new = old + k
                if old < g <= new:
                    servers += 1
                elif new < g <= old:
                    servers -= 1
            if rack_level:
                r = rack_of[s]
                old = rack_free_now.get(r, rack_free[r])
                rack_free_now[r] = new = old + k
                if old < g <= new:
                    racks += 1
                elif new < g <= old:
                    racks -= 1

    def placed():   # the placement finds a place (its first test: enough GPUs free in all)
        return total >= g and ((server_level and servers > 0) or (rack_level and racks > 0) or anywhere)

    def fits():   # sim.admissible(job) and sim.choose(job) is not None
        return total >= g and g <= room and placed()

    jobs_on = sim.cluster.jobs_on

    def moved_last(v):   # what freeing v and giving it back did to the order of its servers' jobs
        for s, _ in v.alloc:
            on = jobs_on[s]
            on[v.idx] = on.pop(v.idx)

    released = []
    candidates = iter(candidates)
    for v in candidates:   # until the job is admissible, as choose_victims
        change(v, 1)
        released.append(v)
        if total >= g and g <= room:
            break
    else:   # never admissible: nothing was freed
        for v in released:
            used[v.vc] += v.gpus_now
        return None
    if not placed():
        for v in candidates:
            change(v, 1)
            released.append(v)
            if fits():
                break
        else:
            for v in reversed(released):
                change(v, -1)
                moved_last(v)
            return None
    needed = [released[-1]]
    for v in reversed(released[:-1]):
        change(v, -1)
        if fits():
            moved_last(v)
        else:
            change(v, 1)
            needed.append(v)
    for v in needed:
        change(v, -1)
        moved_last(v)
    return needed[::-1]
