"""choose_victims counts the GPUs candidates would free before freeing any: whole runs equal those of the
one-candidate-at-a-time search it replaced (the reference below), under reclaim and under preemptive policies."""

import pandas as pd
import pytest

from dlcluster.sim import preemption, simulate
from dlcluster.sim.cluster import ClusterState
from dlcluster.sim.packing import PackingPlacement
from dlcluster.sim.placement import LocalityPlacement
from dlcluster.sim.topology import Topology
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


def run(policy: str, placement, pools: bool = False) -> pd.DataFrame:
    inputs, sharing = real_jobs_with_sharing(6)
    options = {**sharing, "placement": placement}
    if pools:   # gangs of more than 8 GPUs in the 12-GB pool (53 8-GPU servers); the others alternate
        gpus = inputs.workload.num_gpus
        options["gpu_pools"] = ["12GB" if g > 8 or i % 2 else "24GB" for i, g in enumerate(gpus)]
    return simulate(inputs.workload, inputs.topology, policy, quotas=inputs.quotas, seed=0, **options).jobs


CASES = [("philly", "most_free", False), ("las", "most_free", False), ("gittins", "best_fit", False),
         ("srtf", PackingPlacement(), False), ("las", "best_fit", True), ("philly", PackingPlacement(), True)]


@pytest.mark.parametrize("policy, placement, pools", CASES)
def test_whole_runs_equal_the_one_by_one_search(monkeypatch, policy, placement, pools):
    counted = []
    count_victims = preemption._count_victims
    monkeypatch.setattr(preemption, "_count_victims", lambda *a: counted.append(1) or count_victims(*a))

    def recorded(search, log):
        def choose_victims(sim, job, candidates):
            victims = search(sim, job, candidates)
            # the victims, and the order of each server's jobs (freeing a job and giving it back moves it last)
            log.append(([v.idx for v in victims or ()], [tuple(on) for on in sim.cluster.jobs_on]))
            return victims
        return choose_victims

    searches, reference = [], []
    monkeypatch.setattr(preemption, "choose_victims", recorded(preemption.choose_victims, searches))
    jobs = run(policy, placement, pools)
    monkeypatch.setattr(preemption, "choose_victims", recorded(reference_choose_victims, reference))
    pd.testing.assert_frame_equal(jobs, run(policy, placement, pools))
    assert searches == reference
    # the runs preempt: reclaim under Philly's policy (8-17 preemptions), and the policies' own preemption (500-800)
    assert jobs["num_preemptions"].sum() >= 5
    # the searches counted (best fit, most free and the packing rules are decided by counts but for whole-server gangs)
    assert len(counted) >= 5


def test_whole_server_gangs_are_asked_not_counted():
    """The whole-servers rule needs wholly free servers, which counts per server and rack do not show."""
    cluster = ClusterState(Topology(server_names=("a", "b"), server_gpus=(8, 8), server_rack=(0, 0)))
    packing = PackingPlacement()
    assert packing.decided_by_counts(cluster, 8) and not packing.decided_by_counts(cluster, 9)
    assert PackingPlacement(whole_servers_for_gangs=False).decided_by_counts(cluster, 16)
    assert LocalityPlacement("best_fit").decided_by_counts(cluster, 16)
    assert not LocalityPlacement("whole_servers").decided_by_counts(cluster, 4)
