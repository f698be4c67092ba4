"""choose_victims counts the GPUs candidates would free before freeing any: whole runs equal those of the
one-candidate-at-a-time search it replaced (the reference below), under reclaim and under preemptive policies."""

import pandas as pd
import pytest

from dlcluster.sim import preemption, simulate
from test_dedicated_arm import real_jobs_with_sharing


def reference_choose_victims(sim, job, candidates):
    """``choose_victims`` before issue 48's speed-up (commit 7ee4e3d): free candidates one by one, asking after
    each whether the job fits, then give back those it does not need."""
    cluster, used = sim.cluster, sim.vc_used
    if sim.lending_state is not None:
        sim.lending_state.room(job.vc)
    over_cap = job.gpus_now - (sim.vc_cap[job.vc] - used[job.vc])
    if over_cap > 0:
        candidates = list(candidates)
        if sum(v.gpus_now for v in candidates if v.vc == job.vc) < over_cap:
            return None

    def fits():
        return sim.admissible(job) and sim.choose(job) is not None

    def release(v):
        cluster.release(v.idx, v.alloc)
        used[v.vc] -= v.gpus_now

    def restore(v):
        cluster.allocate_masks(v.idx, v.alloc)
        used[v.vc] += v.gpus_now

    released = []
    for v in candidates:
        release(v)
        released.append(v)
        if fits():
            break
    else:
        for v in reversed(released):
            restore(v)
        return None
    needed = [released[-1]]
    for v in reversed(released[:-1]):
        restore(v)
        if not fits():
            release(v)
            needed.append(v)
    for v in needed:
        restore(v)
    return needed[::-1]


def run(policy: str, placement: str) -> pd.DataFrame:
    inputs, sharing = real_jobs_with_sharing(6)
    return simulate(inputs.workload, inputs.topology, policy, quotas=inputs.quotas, seed=0,
                    **{**sharing, "placement": placement}).jobs


@pytest.mark.parametrize("policy, placement", [("philly", "most_free"), ("las", "most_free"), ("gittins", "best_fit")])
def test_whole_runs_equal_the_one_by_one_search(monkeypatch, policy, placement):
    jobs = run(policy, placement)
    monkeypatch.setattr(preemption, "choose_victims", reference_choose_victims)
    pd.testing.assert_frame_equal(jobs, run(policy, placement))
    # the runs preempt: reclaim under Philly's policy, and the policies' own preemption
    assert jobs["num_preemptions"].sum() > 10
