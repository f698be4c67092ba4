"""The dedicated-servers arm of experiment 2, made fast without changing a result.

Under it the cluster saturates (jobs wait days for whole idle servers), and two costs grew with the queue: the
placement sorted every idle server on each call, and each reclaim attempt (every 15 simulated seconds, per starved
VC) sorted every running job. The placement now reads the cluster's index of idle servers, the reclaim orders
only the jobs of VCs above their quota (the only ones it may take), and the simulator's full pass stops when no idle
server is left (``DedicatedPlacement.capacity``; the scan below names none, so its runs try every waiting job). The
code each replaced is kept here as the reference, and the new code must give the same choices on random cluster
states and the same runs on real jobs.
"""

import numpy as np
import pandas as pd
import pytest

from dlcluster import experiments as E
from dlcluster.experiments import grid, interference
from dlcluster.sim import simulate
from dlcluster.sim.cluster import ClusterState
from dlcluster.sim import sharing as sharing_module
from dlcluster.sim.placement import LocalityPlacement, fill_largest_first
from dlcluster.sim.topology import Topology
from dlcluster.validation.calibrate import ReplayParams, sharing_options


class ScanDedicatedPlacement:
    """The placement as it was before the index (commit 4b95085): sorts every idle server and scans every rack
    on each call. The reference the indexed one must match choice for choice."""

    def choose(self, cluster, num_gpus: int, min_level: int, max_level: int):
        if num_gpus > cluster.idle_gpus:
            return None
        cap, free = cluster.cap, cluster.free
        idle = sorted(s for k in range(1, cluster.max_cap + 1) for s in cluster.by_free[k] if cap[s] == k)
        for level in range(min_level, max_level + 1):
            if level == 0:
                fits = [s for s in idle if cap[s] >= num_gpus]
                if fits:
                    return [(min(fits, key=lambda s: (cap[s], s)), num_gpus)], level
            elif level == 1:
                best = None
                for servers in cluster.rack_servers:
                    counts = fill_largest_first([s for s in servers if free[s] == cap[s]], cap, num_gpus)
                    if counts is not None:
                        rank = (len(counts), sum(cap[s] for s, _ in counts))
                        if best is None or rank < best[0]:
                            best = (rank, counts)
                if best is not None:
                    return best[1], level
            else:
                counts = fill_largest_first(idle, cap, num_gpus)
                if counts is not None:
                    return counts, level
        return None


def random_topology(rng) -> Topology:
    """Servers of mixed sizes (1, 2, 4 or 8 GPUs) in racks of uneven size."""
    n = int(rng.integers(3, 40))
    racks = np.sort(rng.integers(0, max(1, n // 3), n))
    racks = np.unique(racks, return_inverse=True)[1]   # rack numbers 0..R-1, none empty
    return Topology(server_names=tuple(f"m{i}" for i in range(n)),
                    server_gpus=tuple(int(g) for g in rng.choice([1, 2, 4, 8], n, p=[0.1, 0.2, 0.3, 0.4])),
                    server_rack=tuple(int(r) for r in racks))


def check_index(cluster: ClusterState) -> None:
    """The index equals what a scan of every server gives."""
    idle = {s for s in range(len(cluster.cap)) if cluster.free[s] == cluster.cap[s]}
    assert cluster.idle_by_cap == [[s for s in sorted(idle) if cluster.cap[s] == k] for k in range(cluster.max_cap + 1)]
    for rack, servers in enumerate(cluster.rack_servers):
        assert cluster.rack_idle_by_cap[rack] == [[s for s in servers if s in idle and cluster.cap[s] == k]
                                                  for k in range(cluster.max_cap + 1)]
        assert cluster.rack_idle_gpus[rack] == sum(cluster.cap[s] for s in servers if s in idle)


@pytest.mark.parametrize("seed", range(6))
def test_same_choices_as_the_scan_on_random_cluster_states(seed):
    rng = np.random.default_rng(seed)
    cluster = ClusterState(random_topology(rng))
    indexed, scan = E.DedicatedPlacement(), ScanDedicatedPlacement()
    packers = [LocalityPlacement("best_fit"), LocalityPlacement("most_free"), indexed]
    running, compared, placed = {}, 0, 0
    for step in range(25):
        # jobs come (placed by any rule, so that servers are partly used) and go, in random order
        if running and (rng.random() < 0.4 or cluster.total_free == 0):
            job = list(running)[int(rng.integers(len(running)))]
            cluster.release(job, running.pop(job))
        else:
            g = int(rng.integers(1, min(cluster.total_free, 2 * cluster.max_cap) + 1))
            choice = packers[int(rng.integers(len(packers)))].choose(cluster, g, 0, 2)
            if choice is not None:
                running[step] = cluster.allocate(step, choice[0])
        check_index(cluster)
        # every gang size up to two large servers, and around the idle GPUs (where a gang just fits or not)
        sizes = {*range(1, 2 * cluster.max_cap + 2), cluster.idle_gpus, cluster.idle_gpus + 1, cluster.total_gpus}
        for g in sorted(sizes - {0}):
            for low in range(3):
                for high in range(low, 3):
                    got = indexed.choose(cluster, g, low, high)
                    assert got == scan.choose(cluster, g, low, high), (seed, step, g, low, high)
                    compared += 1
                    placed += got is not None
    assert compared > 500 and 0 < placed < compared   # placements found and refused alike


def _reclaim_for_ordering_every_running_job(sim, job, now):
    """``sim.sharing._reclaim_for`` as it was before the filter (commit 4b95085, then in the engine): the reference,
    which orders every running job of another VC."""
    from dlcluster.sim.preemption import choose_victims

    quota, used = sim.quota, sim.vc_used
    order = sim.reclaim.victim_order(r for r in sim.running.values()
                                     if r.vc != job.vc and not r.in_prerun and r.attempt_start < now)
    victims = choose_victims(sim, job, (r for r in order if used[r.vc] > quota[r.vc]))
    if victims is None:
        return False
    for victim in victims:
        sim.preempt_job(victim, now)
        if not sim.reclaim.keep_progress:
            victim.work_left = victim.target_work
    counts, level = sim.placement.choose(sim.cluster, job.gpus_now, job.min_level, job.level)
    sim.start(job, counts, level, now)
    return True


def real_jobs_with_sharing(racks: int):
    """3,000 real Pollux jobs on ``racks`` racks of the real machines, VCs capped at twice their quota and
    reclaiming lent GPUs after 30 s: a busy cluster where reclaim preempts (the calibrated replay's mechanism)."""
    inputs = grid.load_inputs("public", 3000, racks, "2017-10-03")
    vcs = sorted(set(inputs.workload.vc.astype(str)))
    sharing = sharing_options(ReplayParams(max_capacity_factor=2.0, reclaim_after_s=30.0), inputs.quotas,
                              inputs.topology.total_gpus, vcs)
    return inputs, sharing


def run_jobs(inputs, sharing, placement) -> pd.DataFrame:
    return simulate(inputs.workload, inputs.topology, "philly", quotas=inputs.quotas, seed=0,
                    **{**sharing, "placement": placement}).jobs


@pytest.mark.parametrize("racks, min_queue_s", [(16, 600), (6, 3 * 3600)])
def test_a_whole_run_is_the_same_as_with_the_scan(monkeypatch, racks, min_queue_s):
    """On 16 racks, and on 6 where the dedicated servers saturate (jobs wait hours for whole idle servers, as in
    the small grid), the simulator's job table equals that of the scan's run; so do the sweep cell's rows."""
    inputs, sharing = real_jobs_with_sharing(racks)
    jobs = run_jobs(inputs, sharing, E.DedicatedPlacement())
    pd.testing.assert_frame_equal(jobs, run_jobs(inputs, sharing, ScanDedicatedPlacement()))
    assert jobs["queueing_delay_s"].mean() > min_queue_s
    assert (jobs["num_servers"] > 1).any() and jobs["num_preemptions"].sum() > 0   # gangs spread, reclaim preempts
    cell = {"experiment": "interference", "placement": "dedicated", "migration": False, "interference": "paper",
            "colocated_one_server": 0.9, "colocated_spread": 0.8, "trace": "public", "start": "2017-10-03",
            "max_jobs": 3000, "racks": racks, "resample_block_days": 0.0, "seed": 0, "load": 1.0,
            "load_setting": "real", "inputs": "test"}
    rows = E.run_cell(cell)
    monkeypatch.setattr(interference, "DedicatedPlacement", ScanDedicatedPlacement)
    pd.testing.assert_frame_equal(rows, E.run_cell(cell))


@pytest.mark.parametrize("placement", ["most_free", "best_fit", "dedicated"])
def test_reclaim_runs_are_those_of_ordering_every_running_job(monkeypatch, placement):
    inputs, sharing = real_jobs_with_sharing(6)
    place = E.DedicatedPlacement() if placement == "dedicated" else placement
    jobs = run_jobs(inputs, sharing, place)
    monkeypatch.setattr(sharing_module, "_reclaim_for", _reclaim_for_ordering_every_running_job)
    pd.testing.assert_frame_equal(jobs, run_jobs(inputs, sharing, place))
    assert jobs["queueing_delay_s"].mean() > 600
    if placement != "best_fit":   # best fit leaves room: nothing to reclaim on these jobs
        assert jobs["num_preemptions"].sum() > 10


def test_the_dedicated_arm_is_one_simulation_under_every_interference_scenario():
    """No job shares a dedicated server, so an assumed colocation slowdown cannot change the arm: the sweep runs it
    once (``shared_simulations``), and that run's rows are the rows of the scenario's own run. A shared placement's
    rows do change with the scenario, and keep their own simulation."""
    cell = {"experiment": "interference", "placement": "dedicated", "migration": False, "interference": "paper",
            "colocated_one_server": 0.9, "colocated_spread": 0.8, "trace": "public", "start": "2017-10-03",
            "max_jobs": 3000, "racks": 6, "resample_block_days": 0.0, "seed": 0, "load": 1.0,
            "load_setting": "real", "inputs": "test"}
    shared = E.shared_simulations([cell])(cell)
    assert shared == {**cell, "interference": "none", "colocated_one_server": 1.0, "colocated_spread": 1.0}
    pd.testing.assert_frame_equal(E.run_cell(cell), E.run_cell(shared))
    pack = {**cell, "placement": "pack"}
    assert E.shared_simulations([cell, pack])(pack) == pack
    assert not E.run_cell(pack)["speed_mean"].equals(E.run_cell({**pack, **grid.NO_INTERFERENCE_CELL})["speed_mean"])


def test_philly_as_calibrated_is_one_simulation_for_the_three_experiments_that_name_it():
    """The failures experiment's arm without failures, early termination's arm without it and the policies' Philly
    arm replay Philly unchanged: at one load and seed they share the failures cell's run, whose rows hold every
    population the three read; a failures cell keeps its own run (its second population is its own failure
    model's), and so does an arm that changes anything."""
    common = {"trace": "public", "start": "2017-10-03", "max_jobs": 3000, "racks": 6, "resample_block_days": 0.0,
              "inputs": "test", "seed": 0, "load_setting": "real", "load": 1.0}
    failures = {**common, "experiment": "failures", "failure_model": "illustrative", "retry": "none"}
    other_model = {**failures, "failure_model": "fitted"}
    stop = {**common, "experiment": "early_stop", "tolerance": None, "curve_source": "pollux"}
    philly = {**common, "experiment": "policy", "policy": "philly"}
    cells = [philly, stop, failures, other_model, {**stop, "tolerance": 0.01}, {**philly, "policy": "fifo"},
             {**philly, "load_setting": "scaled", "load": 1.25}, {**failures, "retry": "philly"}]
    same_as = E.shared_simulations(cells)
    assert same_as(stop) == failures and same_as(philly) == failures
    assert [same_as(c) for c in cells[2:]] == cells[2:]
    rows = E.run_cell(failures)
    assert set(rows["population"]) == {"all jobs", "good jobs"}
    everyone = rows[rows["population"] == "all jobs"].reset_index(drop=True)
    pd.testing.assert_frame_equal(everyone, E.run_cell(philly))
    pd.testing.assert_frame_equal(everyone, E.run_cell(stop))
    assert E.shared_simulations([philly, stop])(stop) == philly   # no failures cell: the first of them
