"""GPU-type pools (sim/pools.py) on hand-computed scenarios: jobs stay in their pool, the wait causes count the pool's
free GPUs, the shares per VC from a hand-made placements table, the draw for VCs without records and for 1-GPU jobs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent / "sim"))
from sim_helpers import check_invariants, job, make_workload

from dlcluster.sim import PhillyPolicy, simulate
from dlcluster.sim.pools import (ANY_VC, PooledCluster, draw_pools, pool_shares, single_gpu_shares,
                                 size_key)
from dlcluster.sim.topology import Topology

#: a8 (12GB, rack 0), b8 (24GB, rack 0), c8 (24GB, rack 1)
TWO_TYPES = Topology(server_names=("a8", "b8", "c8"), server_gpus=(8, 8, 8), server_rack=(0, 0, 1),
                     gpu_mem=("12GB", "24GB", "24GB"))


def run(rows, pools, topology=TWO_TYPES, relax_after_s=30.0, **options):
    workload = make_workload(rows)
    result = simulate(workload, topology, PhillyPolicy(relax_after_s=relax_after_s), slowdown=None,
                      placement="best_fit", gpu_pools=pools, **options)
    check_invariants(result, workload, topology)
    return result


def machines_of(result, name) -> set:
    placements = result.placements()
    return set(placements.loc[placements["jobid"] == name, "machine"])


def test_a_gang_stays_within_its_pool_even_across_racks():
    # 16 GPUs: without pools best fit takes rack 0 (a8 + b8, two types); in the 24GB pool only b8 + c8 exist, in two
    # racks, so the pool can never give it one rack: it is placed anywhere at once, not after a relax timeout
    rows = [("G", 0, 16, 100)]
    assert machines_of(run(rows, None), "G") == {"a8", "b8"}
    pooled = run(rows, ["24GB"])
    assert machines_of(pooled, "G") == {"b8", "c8"}
    assert job(pooled, "G")["first_start_s"] == 0


def test_jobs_never_span_pools_and_wait_for_their_own():
    rows = [("R", 0, 8, 100), ("W", 0, 4, 50), ("S", 0, 2, 50)]
    result = run(rows, ["12GB", "12GB", "24GB"])
    # R fills a8 (the 12GB pool); W waits for it although the 24GB pool has 16 free GPUs; S goes to b8 (best fit)
    assert machines_of(result, "R") == {"a8"} and machines_of(result, "W") == {"a8"}
    assert machines_of(result, "S") == {"b8"}
    assert job(result, "W")["first_start_s"] == 100
    # without pools W starts at once on b8 (best fit: b8 and c8 tie at 8 free, the lower index)
    assert job(run(rows, None), "W")["first_start_s"] == 0


def test_a_wait_for_a_pool_in_short_supply_is_fair_share_while_the_other_pool_has_free_gpus():
    # W (12GB) waits 100 s for R while 16 24GB GPUs are free: too few GPUs of its type, so fair share (contention),
    # neither back-off nor fragmentation
    result = run([("R", 0, 8, 100), ("W", 0, 4, 50)], ["12GB", "12GB"])
    w = job(result, "W")
    assert w["delay_fair_share_s"] == pytest.approx(100)
    assert w["delay_backoff_s"] == 0 and w["delay_fragmentation_s"] == 0


def test_free_gpus_of_the_pool_in_pieces_give_back_off_then_a_rack_placement():
    # the 24GB pool: b8 with 7 GPUs taken, c8 with 7 taken (2 free in pieces); the 12GB pool a8 idle. A 2-GPU job of
    # the 24GB pool has the GPUs (2 free in its pool), but no one server: it holds out 30 s for a server and 30 s for
    # a rack (back-off: b8 and c8 are in two racks), then spreads anywhere; without pools it starts at once on a8
    rows = [("X", 0, 7, 100), ("Y", 0, 7, 100), ("J", 1, 2, 10)]
    result = run(rows, ["24GB", "24GB", "24GB"])
    j = job(result, "J")
    assert j["first_start_s"] == pytest.approx(61)
    assert j["delay_backoff_s"] == pytest.approx(60) and j["delay_fair_share_s"] == 0
    assert machines_of(result, "J") == {"b8", "c8"}
    assert job(run(rows, None), "J")["first_start_s"] == 1


def test_one_pool_for_every_server_and_job_gives_the_run_without_pools():
    one = Topology(server_names=("a", "b", "c", "d"), server_gpus=(8, 8, 4, 4), server_rack=(0, 0, 1, 1),
                   gpu_mem=("12GB",) * 4)
    rng = np.random.default_rng(3)
    rows = [(f"j{i}", float(t), int(g), float(s)) for i, (t, g, s) in enumerate(zip(
        np.sort(rng.uniform(0, 500, 60)).round(), rng.choice([1, 1, 2, 4, 8, 12], 60), rng.uniform(5, 200, 60).round(),
        strict=True))]
    workload = make_workload(rows, vcs=["v1", "v2"] * 30)
    options = dict(slowdown=None, placement="best_fit", quotas={"v1": 12, "v2": 12}, gang_hold=True)
    plain = simulate(workload, one, PhillyPolicy(relax_after_s=30), **options)
    pooled = simulate(workload, one, PhillyPolicy(relax_after_s=30), gpu_pools=["12GB"] * 60, **options)
    pd.testing.assert_frame_equal(plain.jobs, pooled.jobs)
    pd.testing.assert_frame_equal(plain.attempts, pooled.attempts)


def test_pooled_cluster_keeps_each_pools_state_in_step():
    cluster = PooledCluster(TWO_TYPES)
    assert cluster.pool_names == ["12GB", "24GB"]
    assert cluster.pool_servers == [[0], [1, 2]]
    assert [s.max_rack_cap for s in cluster.pool_states] == [8, 8]   # the 24GB pool: one server in each rack
    alloc = cluster.allocate(7, [(2, 3)])
    assert cluster.pool_states[1].free == [8, 5] and cluster.pool_states[1].total_free == 13
    cluster.release(7, alloc)
    assert cluster.pool_states[1].free == [8, 8] and cluster.total_free == 24


def test_bad_pools_are_named():
    with pytest.raises(ValueError, match="gpu_pools"):
        run([("A", 0, 1, 10)], ["40GB"])
    with pytest.raises(ValueError, match="gpu_pools"):
        run([("A", 0, 1, 10)], ["12GB", "12GB"])
    no_types = Topology(server_names=("a",), server_gpus=(8,), server_rack=(0,))
    with pytest.raises(ValueError, match="gpu_mem"):
        run([("A", 0, 1, 10)], ["12GB"], topology=no_types)


# ---------------------------------------------------------------------------------------------------- shares


def tiny_placements():
    """m1, m2: 12GB; m3: 24GB. VC x: four 2-4-GPU jobs (3 on 12GB), VC y: one 6-GPU job on 24GB, one 1-GPU job."""
    machines = pd.DataFrame({"machine": ["m1", "m2", "m3"], "num_gpus": [8, 8, 8], "gpu_mem": ["12GB", "12GB", "24GB"]})
    rows = [("j1", 0, "m1"), ("j1", 0, "m1"),                                # 12GB
            ("j2", 0, "m3"), ("j2", 0, "m3"),                                # 24GB
            ("j3", 0, "m1"), ("j3", 0, "m2"), ("j3", 0, "m1"), ("j3", 0, "m3"),   # 3 of 4 GPUs 12GB: 12GB
            ("j4", 0, "m3"), ("j4", 0, "m3"), ("j4", 1, "m2"), ("j4", 1, "m2"),   # the last attempt's: 12GB
            *[("j5", 0, "m3")] * 6,                                            # 5-8 GPUs, 24GB
            ("j6", 0, "m1")]                                                  # 1 GPU: not counted
    placements = pd.DataFrame(rows, columns=["jobid", "attempt", "machine"])
    jobs = pd.DataFrame({"jobid": ["j1", "j2", "j3", "j4", "j5", "j6"], "vc": ["x", "x", "x", "x", "y", "y"]})
    return placements, machines, jobs


def test_pool_shares_per_vc_and_size_bucket_from_placements():
    placements, machines, jobs = tiny_placements()
    assert pool_shares(placements, machines, jobs, min_records=2) == (
        (ANY_VC, "2-4", "12GB", 0.75), (ANY_VC, "2-4", "24GB", 0.25), (ANY_VC, "5-8", "24GB", 1.0),
        ("x", "2-4", "12GB", 0.75), ("x", "2-4", "24GB", 0.25))   # y's one 5-8-GPU record: below min_records
    # only the records given count (e.g. the fit span's)
    assert pool_shares(placements, machines, jobs[jobs["jobid"] != "j2"], min_records=2)[:1] == \
        ((ANY_VC, "2-4", "12GB", 1.0),)
    with pytest.raises(ValueError, match="gpu_mem"):
        pool_shares(placements.assign(machine="zz"), machines, jobs)
    with pytest.raises(ValueError, match="vc"):
        pool_shares(placements, machines, jobs.drop(columns="vc"))


def test_size_keys():
    assert [size_key(g) for g in (1, 2, 4, 5, 8, 9, 64)] == ["1", "2-4", "2-4", "5-8", "5-8", ">8", ">8"]


def test_vcs_without_records_take_the_cluster_wide_share():
    shares = ((ANY_VC, "2-4", "24GB", 1.0), ("x", "2-4", "12GB", 1.0))
    pools = draw_pools(["x", "z", "x"], [2, 4, 3], [10, 10, 10], shares, {"12GB": 8, "24GB": 8})
    assert list(pools) == ["12GB", "24GB", "12GB"]
    # a drawn share: the cluster-wide 70/30 for an unknown VC, reproducible with its seed
    mixed = ((ANY_VC, "5-8", "12GB", 0.7), (ANY_VC, "5-8", "24GB", 0.3))
    n = 20_000
    args = (["z"] * n, [8] * n, [1.0] * n, mixed, {"12GB": 100, "24GB": 100})
    first = draw_pools(*args, seed=4)
    assert abs((first == "12GB").mean() - 0.7) < 0.015
    assert (draw_pools(*args, seed=4) == first).all()
    assert (draw_pools(*args, seed=5) != first).any()
    with pytest.raises(ValueError, match="no pool share"):
        draw_pools(["z"], [16], [1.0], mixed, {"12GB": 100, "24GB": 100})
    with pytest.raises(ValueError, match="40GB"):
        draw_pools(["z"], [8], [1.0], ((ANY_VC, "5-8", "40GB", 1.0),), {"12GB": 100})


def test_one_gpu_jobs_balance_the_pools_load():
    # 16 GPUs in two equal pools; multi-GPU jobs offer 100 GPU-s to 12GB. With 100 GPU-s of 1-GPU jobs, an equal load
    # is 100 each: every 1-GPU job to 24GB; with 300 GPU-s, 200 each: 100 more to 12GB, 200 to 24GB
    assert single_gpu_shares({"12GB": 8, "24GB": 8}, {"12GB": 100.0}, 100.0) == {"12GB": 0.0, "24GB": 1.0}
    assert single_gpu_shares({"12GB": 8, "24GB": 8}, {"12GB": 100.0}, 300.0) == \
        pytest.approx({"12GB": 1 / 3, "24GB": 2 / 3})
    # in the draw: the multi-GPU job (2 GPUs x 50 s) goes to 12GB, so the 1-GPU job goes to 24GB
    pools = draw_pools(["x", "x"], [2, 1], [50, 100], ((ANY_VC, "2-4", "12GB", 1.0),), {"12GB": 8, "24GB": 8})
    assert list(pools) == ["12GB", "24GB"]


def test_a_job_larger_than_its_pool_goes_to_the_largest_pool():
    pools = draw_pools(["x"], [12], [10], ((ANY_VC, ">8", "A", 1.0),), {"A": 8, "B": 16})
    assert list(pools) == ["B"]


def test_replay_params_pools_need_shares():
    from dlcluster.validation.calibrate import ReplayParams, job_pools

    params = ReplayParams(gpu_pools=True)
    with pytest.raises(ValueError, match="pool_shares"):
        job_pools(params, TWO_TYPES, make_workload([("A", 0, 1, 10)]), ["A"])
    params = ReplayParams(gpu_pools=True, pool_shares=((ANY_VC, "2-4", "24GB", 1.0),))
    workload = make_workload([("A", 0, 1, 10), ("B", 0, 2, 10)])
    assert list(job_pools(params, TWO_TYPES, workload, ["B"])) == ["24GB"]
    assert ReplayParams.from_dict({"pool_shares": [["*", "2-4", "24GB", 1.0]]}).pool_shares == \
        (("*", "2-4", "24GB", 1.0),)
    assert "GPU-type pools" in params.ingredients()


def test_the_ablation_and_the_sensitivity_switch_pools_the_other_way():
    from dlcluster.validation import heldout
    from dlcluster.validation.calibrate import ReplayParams

    shares = ((ANY_VC, "2-4", "24GB", 1.0),)
    rows = heldout.placement_variants(ReplayParams(pool_shares=shares))
    assert rows["GPU-type pools (sim/pools.py)"].gpu_pools is True
    assert heldout.placement_variants(ReplayParams(gpu_pools=True, pool_shares=shares))[
        "no GPU-type pools (one pool)"].gpu_pools is False
    assert not any("pools" in name for name in heldout.placement_variants(ReplayParams()))   # no shares: no row
    moves = {(name, label): params for name, label, params in heldout._moves(ReplayParams(pool_shares=shares))}
    assert moves[("gpu_pools", "True")].gpu_pools is True
