"""The scheduling pass: which waiting jobs a pass tries, in what order, and which tries it leaves out.

:meth:`.engine.Simulator._pass` runs :func:`place_all` when GPUs were freed or priorities changed (every waiting job
may now start), else :func:`place_jobs` on the jobs that are new since the last pass (nothing was freed since the
others last failed). Both hand each job they try to the simulator (``_try_start``: admission, placement, migration,
preemption). A try is left out only where it could change nothing: the tests it would fail first (too few free GPUs
in all, beyond its VC's room, a gang size and level that already failed in this pass) are read here, in the hot loop,
without the call; and in a pass that cannot preempt, a VC's room only shrinks, so a gang beyond it stays beyond it.
"""

from __future__ import annotations

import heapq

from .jobs import JobState
from .preemption import PassState

_WAITING = JobState.WAITING


def _stop_placing(sim, state: PassState) -> bool:
    """No GPU is free, and no job may preempt for the rest of the pass."""
    return sim.cluster.total_free == 0 and (not sim.policy.preemptive or state.nobody_preemptible)


def place_all(sim, now: float) -> None:
    """Try every waiting job in policy order: jobs within their VC quota, then borrowers.

    Works on group heads: once a group's head cannot start, neither can the
    rest of the group in this pass (the cluster only fills up), so the
    group is dropped. Cost grows with jobs started and groups, not queue length.
    Without backfill, a VC's first job that cannot start drops the whole VC.
    """
    cluster = sim.cluster
    # a VC at its maximum capacity cannot take more GPUs, unless by preempting its own jobs
    capped = not sim.policy.preemptive
    placeable = sim._placeable
    if capped and getattr(cluster, placeable) == 0:   # a full cluster: the pass would stop before its first job
        return
    quota, cap, used, groups, held = sim.quota, sim.vc_cap, sim.vc_used, sim.groups, sim._held_by_vc
    state = PassState()
    failed = state.failed
    head_of_line = not sim.policy.backfill
    blocked = set()
    # with backfill and no preemption a gang larger than the free GPUs (and the GPUs waiting gangs hold for
    # themselves) cannot start in this pass, whatever runs before it: its group is left out (most passes free a
    # few GPUs for a long queue)
    room = getattr(cluster, placeable) + max(held) if capped and not head_of_line else cluster.total_gpus
    users, room_of = sim.users, sim._room
    # a try that _room turns down changes nothing where no user limit, gang hold or preemption acts: it is not
    # made. A VC's room only shrinks in such a pass, so a borrower beyond the room read at the pass's start (and,
    # with backfill, a gang beyond both that room and its own quota) stays so: left out
    fast = sim.skips_failing_tries and capped and users is None and sim.gang_holds is None
    rooms = {} if fast and not head_of_line else None
    heads = []
    for vc, by_gpus in enumerate(groups):
        if by_gpus:
            top = room
            if rooms is not None:
                rooms[vc] = r = room_of(vc)
                own = quota[vc] - used[vc]
                top = min(room, r if r > own else own)
            heads += [(group[0][0], vc, g, level) for g, by_level in by_gpus.items() if g <= top
                      for level, group in by_level.items() if group[0][1].level >= 0]   # held: wait for its timer
    heapq.heapify(heads)
    borrowers = []
    # a preemptive pass leaves out the gangs larger than the free GPUs too, once no job may preempt for the rest
    # of it (every gang tried later ranks lower): free GPUs then only go (with backfill, a gang that cannot start
    # blocks nothing)
    prune = sim.prunes_after_preemption and not capped and not head_of_line and sim.gang_holds is None
    # the hot loop's lookups, bound once (a pass tries every group's head)
    heappop, heappush, lending = heapq.heappop, heapq.heappush, sim.lending
    try_start = sim._try_start if users is not None or sim.gang_holds is not None else \
        lambda job, state, now, try_place=sim._try_place: try_place(job, state, now, True)
    total = placeable == "total_free"
    for phase in (0, 1):
        while heads:
            if (cluster.total_free if total else getattr(cluster, placeable)) == 0 and \
                    (capped or state.nobody_preemptible):   # _stop_placing
                return
            if prune and state.nobody_preemptible:
                prune, room = False, getattr(cluster, placeable)
                heads = [head for head in heads if head[2] <= room]
                heapq.heapify(heads)
                borrowers = [head for head in borrowers if head[2] <= room]
                if not heads:
                    break
            _, vc, g, level = heappop(heads)
            by_level = groups[vc].get(g)
            group = by_level.get(level) if by_level else None
            if not group or vc in blocked:
                continue
            if phase == 0 and g > quota[vc] - used[vc] + held[vc]:
                if lending:
                    if rooms is not None and g > rooms[vc]:
                        continue
                    if g <= cap[vc] - used[vc] + held[vc] or not capped:
                        borrowers.append((group[0][0], vc, g, level))
                elif head_of_line:
                    blocked.add(vc)
                continue
            if capped and g > cap[vc] - used[vc] + held[vc]:   # a borrower whose VC reached its cap in this pass
                continue
            job = group[0][1] if users is None else users.first_admissible(group)
            if job is None:
                continue
            # _try_place's own first test, where failing it is all a try would do
            if fast and (g > cluster.total_free or (failed and (g, job.level, job.pool) in failed) or
                         g > room_of(vc)):
                if head_of_line:
                    blocked.add(vc)
                continue
            if try_start(job, state, now):
                if group:
                    heappush(heads, (group[0][0], vc, g, level))
            elif head_of_line:
                blocked.add(vc)
        heads = borrowers
        heapq.heapify(heads)


def place_jobs(sim, jobs, now: float) -> None:
    """Try just these jobs (new or relaxed; nothing was freed since the others last failed)."""
    if sim.cluster.total_free == 0 and not sim.policy.preemptive:   # as _stop_placing before the first job
        return
    quota, cap, used = sim.quota, sim.vc_cap, sim.vc_used
    state = PassState()
    borrowers = []
    if len(jobs) == 1:   # most passes try one new job
        ordered = [(jobs[0].key, jobs[0])] if jobs[0].state is _WAITING and jobs[0].level >= 0 else ()
    else:   # a job may be listed twice (enqueued, then held or relaxed at the same instant)
        ordered = sorted({j.idx: (j.key, j) for j in jobs if j.state is _WAITING and j.level >= 0}.values())
    for _, job in ordered:
        if _stop_placing(sim, state):
            return
        if job.state is not _WAITING:
            continue
        if job.gpus_now > quota[job.vc] - used[job.vc]:
            if sim.lending:
                borrowers.append(job)
            continue
        sim._try_start(job, state, now)
    for job in borrowers:
        if _stop_placing(sim, state):
            return
        if job.state is _WAITING and (sim.policy.preemptive or job.gpus_now <= cap[job.vc] - used[job.vc]):
            sim._try_start(job, state, now)
