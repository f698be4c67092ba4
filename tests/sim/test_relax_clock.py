"""The relax clock (issue 47; sim/policies/base.py RELAX_CLOCKS, sim/causes.py): with ``relax_clock="headroom"`` a
waiting job's locality timer runs only while its VC, user limit and pool could give it its GPUs (YARN's delay
scheduling counts missed offers only past the headroom check), pausing while it waits for quota; ``"first_pass"``
starts it at the first pass, whatever the job waits for.

Hand-timed scenarios on one rack of three 4-GPU servers (s0, s1, s2), Philly's spreading placement, relax after
30 s, lending off. B1 (3 GPUs) takes s0, B2 (3 GPUs) s1, B3 (4 GPUs) s2: one GPU is free on s0 and one on s1, so a
2-GPU job has no server to itself (fragmentation) but may spread across the rack once relaxed."""

from __future__ import annotations

import pytest
from sim_helpers import check_invariants, job, make_workload

from dlcluster.analysis.table2 import fragmentation_endings
from dlcluster.sim import PhillyPolicy, simulate, topology_from_spec

ONE_RACK_OF_THREE = topology_from_spec(1, 3, 4)
SPLIT = ["held_by_timer_s", "locality_relaxed_s", "locality_placed_s", "locality_contended_s"]
#: VC b holds s0 (3 GPUs), s1 (3) and s2 (4) until 1000; VC a may use 2 GPUs
BACKGROUND = [("B1", 0, 3, 1000), ("B2", 0, 3, 1000), ("B3", 0, 4, 1000)]
QUOTAS = {"a": 2, "b": 10}


def run(rows, vcs, clock, **options):
    workload = make_workload(rows, vcs=vcs)
    result = simulate(workload, ONE_RACK_OF_THREE, PhillyPolicy(relax_after_s=30, relax_clock=clock),
                      quotas=QUOTAS, lending=False, slowdown=None, **options)
    check_invariants(result, workload, ONE_RACK_OF_THREE)
    return result


#: A1 and A2 (VC a, 1 GPU each, 0-50) take the free GPU of s0 and of s1: G (VC a, 2 GPUs, at 5) waits for its
#: VC's quota until 50, then has it, and 1 + 1 free GPUs, but no server with 2 free
QUOTA_THEN_FRAGMENTED = [*BACKGROUND, ("A1", 0, 1, 50), ("A2", 0, 1, 50), ("G", 5, 2, 10)]
QUOTA_VCS = ["b", "b", "b", "a", "a", "a"]


def test_the_headroom_clock_starts_when_the_quota_wait_ends():
    # quota wait 5..50 (X = 45 s), then headroom without a local placement: the timer runs from 50 and relaxes G to
    # the rack at 50 + 30 = 80, where it spreads over s0 and s1
    g = job(run(QUOTA_THEN_FRAGMENTED, QUOTA_VCS, "headroom"), "G")
    assert g[["first_start_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [80, 2, 45, 30]
    assert g[SPLIT].tolist() == [0, 30, 0, 0]


def test_the_first_pass_clock_runs_through_the_quota_wait():
    # the old clock: armed at G's first pass (5), it fires at 35 while G still waits for quota; at 50 G is already
    # relaxed and spreads at once: no fragmentation at all
    g = job(run(QUOTA_THEN_FRAGMENTED, QUOTA_VCS, "first_pass"), "G")
    assert g[["first_start_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [50, 2, 45, 0]
    assert g[SPLIT].tolist() == [0, 0, 0, 0]


def test_a_placement_before_the_timeout_ends_the_stretch_as_placed():
    # B2 ends at 60 and frees s1 whole: under the headroom clock G (timer from 50, due at 80) gets one server at 60;
    # under the first-pass clock it had relaxed at 35 and spread at 50
    rows = [("B1", 0, 3, 1000), ("B2", 0, 3, 60), ("B3", 0, 4, 1000), *QUOTA_THEN_FRAGMENTED[3:]]
    g = job(run(rows, QUOTA_VCS, "headroom"), "G")
    assert g[["first_start_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [60, 1, 45, 10]
    assert g[SPLIT].tolist() == [0, 0, 10, 0]
    old = job(run(rows, QUOTA_VCS, "first_pass"), "G")
    assert old[["first_start_s", "num_servers"]].tolist() == [50, 2]


#: G (VC a, 2 GPUs, at 10) has headroom but no server with 2 free GPUs; A1 (VC a, 1 GPU, 20-35) takes s0's free GPU:
#: from 20 to 35 only one GPU is free (fair share), then two again
HEADROOM_LOST_MIDWAY = [*BACKGROUND, ("G", 10, 2, 10), ("A1", 20, 1, 15)]
MIDWAY_VCS = ["b", "b", "b", "a", "a"]


def test_a_job_that_loses_headroom_midway_pauses_its_timer_and_resumes_it():
    # the timer runs 10..20 (10 s), pauses 20..35, resumes with 20 s left: G relaxes at 55 and spreads.
    # Stretches: 10..20 ended by the GPUs going (contended), 35..55 by the timeout (relaxed)
    r = run(HEADROOM_LOST_MIDWAY, MIDWAY_VCS, "headroom")
    assert job(r, "A1")[["first_start_s", "end_s"]].tolist() == [20, 35]
    g = job(r, "G")
    assert g[["first_start_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [55, 2, 15, 30]
    assert g[SPLIT].tolist() == [0, 20, 0, 10]


def test_the_first_pass_clock_counts_the_pause_too():
    # armed at 10, due at 40 whatever happened between: G relaxes at 40 and spreads (back-off 10..20 and 35..40)
    g = job(run(HEADROOM_LOST_MIDWAY, MIDWAY_VCS, "first_pass"), "G")
    assert g[["first_start_s", "num_servers", "delay_fair_share_s", "delay_backoff_s"]].tolist() == [40, 2, 15, 15]
    assert g[SPLIT].tolist() == [0, 5, 0, 10]


@pytest.mark.parametrize("rows", [
    [("A", 0, 3, 100), ("B", 0, 3, 100), ("G", 5, 2, 10)],
    [("A", 0, 3, 100), ("B", 0, 3, 20), ("G", 5, 2, 10)],
    [("A", 0, 3, 100), ("B", 0, 3, 100), ("G", 5, 2, 10), ("C", 10, 1, 200)],
])
def test_the_clocks_agree_while_every_wait_has_headroom_from_the_first_pass(rows):
    # sim/test_sim_locality_endings.py's scenarios (no quotas): a job that has headroom at its first pass starts
    # both clocks then; where it loses it (C at 10) the first-pass clock's timer fires while it waits for GPUs,
    # which changes nothing the headroom clock would not (the job cannot start either way until A and B end)
    topology = topology_from_spec(1, 2, 4)
    workload = make_workload(rows)
    old, new = (simulate(workload, topology, PhillyPolicy(relax_after_s=30, relax_clock=clock), slowdown=None).jobs
                for clock in ("first_pass", "headroom"))
    assert old[["first_start_s", "wait_s", *SPLIT]].equals(new[["first_start_s", "wait_s", *SPLIT]])


def test_the_clock_is_checked_and_named():
    with pytest.raises(ValueError, match="relax_clock must be one of"):
        PhillyPolicy(relax_clock="wall")
    assert "relax_clock='headroom'" in repr(PhillyPolicy(relax_clock="headroom"))
    assert "relax_clock" not in repr(PhillyPolicy())


def test_the_per_size_table_says_how_the_stretches_ended():
    # the midway scenario under the headroom clock: G (2-4 GPUs) has 10 s ended by the GPUs going and 20 s by the
    # timeout; no other job waited for locality (B1, B2, B3 are 2-4-GPU jobs too)
    jobs = run(HEADROOM_LOST_MIDWAY, MIDWAY_VCS, "headroom").jobs
    endings = fragmentation_endings(jobs[jobs["status"] != "Rejected"])
    row = endings.loc["2-4"]
    assert (row["rows"], row["fragmented"], row["relaxed_jobs"], row["contended_jobs"], row["placed_jobs"]) == \
        (4, 1, 1, 1, 0)
    assert (row["relaxed_h"] * 3600, row["contended_h"] * 3600, row["placed_h"]) == pytest.approx((20, 10, 0))
    assert row["relaxed_share"] == pytest.approx(2 / 3)
    assert endings.loc["1", "fragmented"] == 0


def test_the_headroom_clock_stops_at_the_loosest_level():
    """A job relaxed to ANYWHERE keeps no time left: else the causes, seeing headroom and no timer, armed it again
    and every timeout moved it one level past ANYWHERE for as long as it waited (an arm whose queue grows, like
    notebook 06's dedicated servers, then spent minutes on relax events)."""
    from types import SimpleNamespace

    from dlcluster.sim.jobs import Cause
    from dlcluster.sim.placement import Locality

    class Sim:
        def set_level(self, job, level, now):
            job.level = level

        def schedule(self, *args):
            self.scheduled.append(args)

    sim, policy = Sim(), PhillyPolicy(relax_after_s=30, relax_clock="headroom")
    sim.scheduled = []
    job = SimpleNamespace(level=int(Locality.RACK), min_level=int(Locality.SERVER), relax_due=None, relax_left=30.0,
                          cause=int(Cause.FRAGMENTATION), wait_token=0, num_gpus=2, gpus_now=2)
    policy.on_relax(job, 100.0, sim)
    assert job.level == int(Locality.ANYWHERE) and job.relax_left is None and job.relax_due is None
    assert sim.scheduled == []
    # one level below, the next level's clock starts at once (the job has headroom)
    job.level, job.relax_left = int(Locality.SERVER), 30.0
    policy.on_relax(job, 100.0, sim)
    assert job.level == int(Locality.RACK) and job.relax_due == 130.0 and len(sim.scheduled) == 1
