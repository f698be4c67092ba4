"""The migration's shortcut (``_room_for_tighter``) skips only jobs that no placement could tighten: a simulation
with it equals one that tries every spread job (the tentative release and re-allocation it spares)."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given
from test_sim_properties import SETTINGS, scenarios

from dlcluster.sim import Migration, Topology, simulate
from dlcluster.sim import migration as migration_module
from dlcluster.sim.cluster import ClusterState
from dlcluster.sim.jobs import Job
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
