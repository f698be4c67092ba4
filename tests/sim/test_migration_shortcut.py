"""The migration's shortcuts skip only jobs that no placement could tighten: a simulation with them equals one that
tries every spread job in every pass (``_room_for_tighter`` spares the tentative release and re-allocation, and
``SpreadJobs`` the look at jobs whose room cannot have grown), and the destinations read from the cluster's index are
those a scan of every server picks."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_helpers import make_workload
from test_sim_properties import SETTINGS, scenarios

from dlcluster.sim import Migration, Topology, simulate
from dlcluster.sim import migration as migration_module
from dlcluster.sim.cluster import ClusterState
from dlcluster.sim.jobs import Job
from dlcluster.sim.migration import SpreadJobs
from dlcluster.sim.placement import Locality

# two racks of two 4-GPU servers
CLUSTER = Topology(server_names=("s0", "s1", "s2", "s3"), server_gpus=(4, 4, 4, 4), server_rack=(0, 0, 1, 1))


def spread_job(cluster, counts, level):
    """A job running on ``counts`` [(server, GPUs)] at locality ``level``, the tightest it could have being a server
    for up to 4 GPUs, else a rack."""
    g = sum(k for _, k in counts)
    job = Job(99, 0.0, g, 100.0, 100.0, 0, int(Locality.SERVER if g <= 4 else Locality.RACK), 0)
    job.attempt_level = level
    job.alloc = cluster.allocate(job.idx, counts)
    return job


def room(cluster, job):
    return migration_module._room_for_tighter(cluster, job, *migration_module._most_free(cluster))


def test_a_small_spread_job_has_room_where_a_server_or_a_rack_holds_it_with_its_own_gpus():
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 2), (1, 3), (2, 4), (3, 3)])   # free: s0 2, s1 1, s2 0, s3 1
    job = spread_job(cluster, [(0, 1), (3, 1)], Locality.ANYWHERE)   # 2 GPUs over both racks; free: s0 1, s1 1
    assert room(cluster, job)                                # s0: 1 free + 1 own = 2
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 3), (1, 4), (2, 3), (3, 4)])   # free: s0 1, s2 1
    job = spread_job(cluster, [(0, 1), (2, 1)], Locality.ANYWHERE)   # 2 GPUs over both racks; nothing else free
    assert not room(cluster, job)                            # each server and each rack: 0 free + 1 own = 1 < 2
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 3), (1, 3), (2, 4), (3, 4)])   # free: s0 1, s1 1
    job = spread_job(cluster, [(0, 1), (1, 1)], Locality.RACK)   # 2 GPUs over the two servers of rack 0
    # no server holds it (0 free + 1 own); rack 0 does (2 own), but a rack is not tighter than the rack it is on
    assert not room(cluster, job)
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 2), (1, 3), (2, 4), (3, 4)])   # free: s0 2, s1 1
    job = spread_job(cluster, [(0, 1), (1, 1)], Locality.RACK)   # free now: s0 1
    assert room(cluster, job)                                # s0: 1 free + 1 own = 2


def test_a_gang_larger_than_a_server_has_room_where_one_rack_holds_it():
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 3), (1, 4), (2, 3), (3, 4)])   # free: s0 1, s2 1
    job = spread_job(cluster, [(0, 1), (2, 1)], Locality.ANYWHERE)
    assert not room(cluster, job)
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(1, 4), (2, 4)])                    # free: s0 4, s3 4
    job = spread_job(cluster, [(0, 3), (3, 3)], Locality.ANYWHERE)   # 6 GPUs over both racks; free: s0 1, s3 1
    assert not room(cluster, job)                            # rack 0: 1 free + 3 own = 4 < 6; rack 1 the same
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(1, 2), (2, 4)])                    # free: s0 4, s1 2, s3 4
    job = spread_job(cluster, [(1, 2), (3, 4)], Locality.ANYWHERE)   # 6 GPUs over both racks; free: s0 4
    assert room(cluster, job)                                # rack 0: 4 free + 2 own = 6


def test_what_a_job_needs_is_rebuilt_for_each_attempt():
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 4), (1, 4), (2, 3), (3, 3)])   # free: s2 1, s3 1
    job = spread_job(cluster, [(2, 1), (3, 1)], Locality.RACK)   # on rack 1's two servers, nothing else free
    assert not room(cluster, job)
    moved = ClusterState(CLUSTER)
    moved.allocate(1, [(0, 2), (1, 3), (2, 4), (3, 4)])     # free: s0 2, s1 1
    job.alloc = moved.allocate(job.idx, [(0, 1), (1, 1)])   # its next attempt, on rack 0; free now: s0 1
    assert room(moved, job)                                  # s0: 1 free + 1 own (s2 and s3 have none free)


@SETTINGS
@given(scenarios())
def test_the_shortcut_never_changes_a_simulation(scenario):
    workload, topology, policy, options = scenario
    options = {**options, "migration": Migration(cost_s=7, min_remaining_s=0)}
    shortcut = simulate(workload, topology, policy, **options)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(migration_module, "_room_for_tighter", lambda *args: True)
        full = simulate(workload, topology, policy, **options)
    pd.testing.assert_frame_equal(shortcut.jobs, full.jobs)
    pd.testing.assert_frame_equal(shortcut.attempts, full.attempts)


def every_server_destinations(cluster, source, sizes):
    """The best-fit destinations by a scan of every server (what ``Migration._destinations`` reads from its index)."""
    free = list(cluster.free)
    plan = []
    for k in sizes:
        candidates = [t for t in range(len(free)) if t != source and free[t] >= k]
        if not candidates:
            return None
        dest = min(candidates, key=lambda t: (free[t], t))
        free[dest] -= k
        plan.append(dest)
    return plan


@st.composite
def crowded_scenarios(draw):
    """Many gangs on a few servers in two racks, so that jobs run spread and find room as others leave."""
    servers = draw(st.integers(3, 6))
    topology = Topology(server_names=tuple(f"m{i}" for i in range(servers)), server_gpus=(4,) * servers,
                        server_rack=tuple(i % 2 for i in range(servers)))
    n = draw(st.integers(8, 30))
    rows = [(f"j{i}", draw(st.integers(0, 400)), draw(st.sampled_from([1, 2, 3, 4, 6, 8])),
             draw(st.sampled_from([20, 100, 400, 1500, 5000]))) for i in range(n)]
    policy = draw(st.sampled_from(["philly", "fifo", "las"]))
    placement = draw(st.sampled_from(["most_free", "best_fit"]))
    return make_workload(rows), topology, policy, {"placement": placement, "slowdown": "default"}


@SETTINGS
@given(st.one_of(scenarios(), crowded_scenarios()), st.sampled_from([0.0, 150.0]), st.booleans())
def test_looking_only_at_jobs_whose_room_can_have_grown_never_changes_a_simulation(scenario, min_remaining_s,
                                                                                   defragment):
    workload, topology, policy, options = scenario
    options = {**options, "migration": Migration(cost_s=7, min_remaining_s=min_remaining_s, defragment=defragment)}
    indexed = simulate(workload, topology, policy, **options)
    with pytest.MonkeyPatch.context() as patch:
        # every spread job, in job order, in every pass: as before the index
        patch.setattr(SpreadJobs, "candidates", lambda self, *most_free, keep=False: sorted(self.jobs))
        patch.setattr(Migration, "_destinations", staticmethod(every_server_destinations))
        every = simulate(workload, topology, policy, **options)
    pd.testing.assert_frame_equal(indexed.jobs, every.jobs)
    pd.testing.assert_frame_equal(indexed.attempts, every.attempts)


def test_destinations_are_the_best_fit_servers_lowest_index_first():
    cluster = ClusterState(CLUSTER)
    cluster.allocate(1, [(0, 1), (1, 3), (2, 1), (3, 2)])   # free: s0 3, s1 1 (the source), s2 3, s3 2
    # 1 GPU: s3 (2 free, the fewest that hold it; s1 is the source) -> s3 1 left; 2 GPUs: s0 (3 free, the lower
    # index of s0 and s2) -> s0 1 left; 2 GPUs: s2; 1 GPU: s0, s2 and s3 have 1 free each: s0
    assert Migration._destinations(cluster, 1, [1, 2, 2, 1]) == [3, 0, 2, 0]
    assert Migration._destinations(cluster, 1, [4]) is None             # no server other than the source has 4
    assert Migration._destinations(cluster, 1, [3, 3, 3]) is None       # two servers hold 3 each, not three
