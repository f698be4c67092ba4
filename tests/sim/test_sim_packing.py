"""Packing rules (sim/packing.py) on hand-computed scenarios: best fit, 1-GPU jobs steered to the smallest servers,
whole servers for gangs larger than a server, each rule switched off beside it."""

from __future__ import annotations

from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec
from dlcluster.sim.cluster import ClusterState
from dlcluster.sim.packing import PackingPlacement
from dlcluster.sim.placement import Locality
from dlcluster.sim.topology import Topology

SERVER, RACK, ANYWHERE = int(Locality.SERVER), int(Locality.RACK), int(Locality.ANYWHERE)
#: a8, b8: 8 GPUs (rack 0); c4, d4: 4 GPUs (rack 1)
MIXED = Topology(server_names=("a8", "b8", "c4", "d4"), server_gpus=(8, 8, 4, 4), server_rack=(0, 0, 1, 1))


def cluster_with(topology, used: dict) -> ClusterState:
    """A cluster whose server ``s`` has ``used[s]`` GPUs taken (one job per server)."""
    cluster = ClusterState(topology)
    for s, k in used.items():
        cluster.allocate(100 + s, [(s, k)])
    return cluster


def test_one_gpu_jobs_go_to_the_smallest_servers_first():
    cluster = cluster_with(MIXED, {0: 7})            # a8 has 1 free GPU, c4 and d4 4 each
    assert PackingPlacement().choose(cluster, 1, SERVER, SERVER) == ([(2, 1)], SERVER)   # c4: smallest, lowest
    # without steering: best fit over every server, a8's last GPU
    assert PackingPlacement(steer_single=False).choose(cluster, 1, SERVER, SERVER) == ([(0, 1)], SERVER)
    # among the smallest servers, best fit: d4 with 1 free before c4 with 4
    cluster = cluster_with(MIXED, {0: 7, 3: 3})
    assert PackingPlacement().choose(cluster, 1, SERVER, SERVER) == ([(3, 1)], SERVER)
    # the smallest servers full: the next size, best fit
    cluster = cluster_with(MIXED, {0: 7, 2: 4, 3: 4})
    assert PackingPlacement().choose(cluster, 1, SERVER, SERVER) == ([(0, 1)], SERVER)


def test_small_jobs_best_fit():
    cluster = cluster_with(MIXED, {2: 2, 0: 4})       # free: a8 4, b8 8, c4 2, d4 4
    placement = PackingPlacement()
    assert placement.choose(cluster, 2, SERVER, SERVER) == ([(2, 2)], SERVER)   # c4: the fewest free that fit
    assert placement.choose(cluster, 3, SERVER, SERVER) == ([(0, 3)], SERVER)   # a8 and d4 have 4: the lower index
    assert placement.choose(cluster, 5, SERVER, SERVER) == ([(1, 5)], SERVER)   # only b8 holds 5


FOUR_EIGHTS = topology_from_spec(2, 2, 8)             # racks {s0, s1}, {s2, s3}


def test_a_gang_takes_whole_servers_in_the_rack_with_the_fewest_idle_gpus():
    cluster = cluster_with(topology_from_spec(2, 3, 8), {0: 1})   # rack 0: s0 partly used, s1, s2 idle; rack 1 idle
    assert PackingPlacement().choose(cluster, 16, RACK, RACK) == ([(1, 8), (2, 8)], RACK)
    # 12 GPUs = 1 whole server + 4 best fit on another server of the rack: s0 (7 free) before the idle s2
    assert PackingPlacement().choose(cluster, 12, RACK, RACK) == ([(1, 8), (0, 4)], RACK)


def test_a_gang_waits_for_whole_servers_while_enough_gpus_are_free_in_pieces():
    cluster = cluster_with(FOUR_EIGHTS, {0: 1, 1: 1, 2: 1})   # free 7, 7, 7, 8: 29 GPUs, one whole server
    assert PackingPlacement().choose(cluster, 16, RACK, ANYWHERE) is None
    # without the rule: best fit in pieces, in the rack with the fewest servers (rack 1: s3 8 + s2 7 = 15 < 16: no)
    # then anywhere: largest first s3, then the rest best fit on s0
    counts, level = PackingPlacement(whole_servers_for_gangs=False).choose(cluster, 16, RACK, ANYWHERE)
    assert level == ANYWHERE and counts == [(3, 8), (0, 7), (1, 1)]
    # anywhere: whole servers in two racks
    cluster = cluster_with(FOUR_EIGHTS, {0: 1, 2: 1})        # idle: s1 (rack 0), s3 (rack 1)
    assert PackingPlacement().choose(cluster, 16, RACK, RACK) is None
    assert PackingPlacement().choose(cluster, 16, RACK, ANYWHERE) == ([(1, 8), (3, 8)], ANYWHERE)


def run(rows, placement, topology):
    workload = make_workload(rows)
    result = simulate(workload, topology, PhillyPolicy(relax_after_s=30), slowdown=None, placement=placement)
    check_invariants(result, workload, topology)
    return result


def test_packing_leaves_whole_servers_where_spreading_breaks_them():
    rows = [("A", 0, 1, 100), ("B", 0, 1, 100), ("G", 5, 16, 10)]
    three = topology_from_spec(1, 3, 8)
    # packed: A and B share s0, so G gets the idle s1 and s2 at once
    assert job(run(rows, PackingPlacement(), three), "G")[["first_start_s", "num_servers"]].tolist() == [5, 2]
    # most_free: B goes to s1, and G, placed at the rack level at once, spans all three servers
    assert job(run(rows, "most_free", three), "G")[["first_start_s", "num_servers"]].tolist() == [5, 3]


def test_a_gang_held_for_whole_servers_starts_when_one_frees():
    # E -> s0, F -> s1 (best fit: s0 has 2 free): free 2, 2, 8. G (12 GPUs) needs s2 whole + 4 on one server: none
    # until F ends at 50 (its timeout at 35 relaxes it to anywhere, where the rule holds too). Then s1 whole + 4
    # best fit on s2.
    rows = [("E", 0, 6, 100), ("F", 0, 6, 50), ("G", 5, 12, 10)]
    three = topology_from_spec(1, 3, 8)
    g = job(run(rows, PackingPlacement(), three), "G")
    assert g[["first_start_s", "num_servers", "delay_backoff_s", "delay_fragmentation_s"]].tolist() == [50, 2, 30, 15]
    # without the rule: in pieces at once (s2 8, s0 2, s1 2)
    g = job(run(rows, PackingPlacement(whole_servers_for_gangs=False), three), "G")
    assert g[["first_start_s", "num_servers"]].tolist() == [5, 3]
