"""Preemption: which running jobs a waiting job may take GPUs from, and the fewest that let it start.

Used by preemptive policies (a higher-ranked waiting job preempts lower-ranked
running ones, :func:`preempt_for`) and by the Capacity Scheduler's reclaim
(:mod:`.sharing`). :func:`choose_victims` frees candidates tentatively, least
important first, until the job fits, then gives back those it does not need,
and leaves the cluster as it found it.
"""

from __future__ import annotations

import itertools

from .jobs import JobState

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
    pools = sim.pools
    in_pool, pool = (None, None) if pools is None else (pools.server_pool, job.pool)
    free = cluster.total_free if pools is None else pools.pool_states[pool].total_free
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
