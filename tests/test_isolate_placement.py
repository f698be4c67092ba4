"""The 'isolate gangs' arm of experiment 2 (issue 48): gangs alone on their servers, 1-GPU jobs packed best fit on
the others, migration to defragment that keeps the isolation. Hand-made clusters of 4-GPU servers m0, m1, m2
(``topology_from_spec(1, 3, 4)``), FIFO at ideal speed, every start time computed by hand."""

import numpy as np
import pandas as pd
import pytest

from dlcluster import experiments as E
from dlcluster.experiments import grid
from dlcluster.sim import Migration, simulate, topology_from_spec
from dlcluster.sim.isolation import IsolatePlacement, IsolatingMigration
from dlcluster.sim.topology import Topology
from dlcluster.sim.workload import Workload

THREE_BY_FOUR = topology_from_spec(1, 3, 4)


def make_workload(rows) -> Workload:
    """rows: (name, arrival_s, gpus, service_s), one VC."""
    return Workload(jobid=np.array([r[0] for r in rows], dtype=object), vc=np.array(["vc"] * len(rows), dtype=object),
                    user=np.array([f"u-{r[0]}" for r in rows], dtype=object),
                    arrival_s=np.array([float(r[1]) for r in rows]),
                    num_gpus=np.array([int(r[2]) for r in rows], dtype=np.int64),
                    service_s=np.array([float(r[3]) for r in rows]), epoch=pd.Timestamp("2017-10-03", tz="UTC"))


def run(rows, placement="isolate", topology=THREE_BY_FOUR, **options):
    w = make_workload(rows)
    if placement == "isolate":
        placement = IsolatePlacement(w.num_gpus > 1)
    result = simulate(w, topology, "fifo", placement=placement, slowdown=None, **options)
    return result, result.jobs.set_index("jobid")


def servers_of(result) -> dict:
    """Each job's servers, attempt by attempt: {jobid: [(machine, ...), ...]}."""
    p = result.placements().drop_duplicates(["jobid", "attempt", "machine"])
    return {j: [tuple(rows["machine"]) for _, rows in g.groupby("attempt")] for j, g in p.groupby("jobid")}


def shared_with_a_gang(result, gpus: dict) -> list[tuple]:
    """(machine, job, job) of every two attempts of different jobs that held one server at once, one a gang."""
    p = result.placements().drop_duplicates(["jobid", "attempt", "machine"])
    p = p.merge(result.attempts[["jobid", "attempt", "start_s", "end_s"]])
    p = p[p["end_s"] > p["start_s"]]
    found = []
    for machine, rows in p.groupby("machine"):
        spans = list(rows[["jobid", "start_s", "end_s"]].itertuples(index=False))
        for i, a in enumerate(spans):
            for b in spans[i + 1:]:
                if a.jobid != b.jobid and a.start_s < b.end_s and b.start_s < a.end_s \
                        and max(gpus[a.jobid], gpus[b.jobid]) > 1:
                    found.append((machine, a.jobid, b.jobid))
    return found


# a, b on m0; gang G takes idle m1 (2 of 4 GPUs); b packs onto m0, not beside G (best fit would take m1: 2 free);
# H takes idle m2; c, d fill m0. e finds 2 free GPUs, on G's m1 only: it waits until G ends at 51 and m1 is free
ROWS = [("a", 0, 1, 100), ("G", 1, 2, 50), ("b", 2, 1, 100), ("H", 3, 4, 100), ("c", 4, 1, 100),
        ("d", 5, 1, 100), ("e", 6, 1, 10)]


def test_gangs_get_idle_servers_and_one_gpu_jobs_pack_beside_no_gang():
    result, jobs = run(ROWS)
    assert servers_of(result) == {"a": [("m0",)], "G": [("m1",)], "b": [("m0",)], "H": [("m2",)], "c": [("m0",)],
                                  "d": [("m0",)], "e": [("m1",)]}
    assert jobs.loc["e", "first_start_s"] == 51 and jobs.loc["e", "wait_s"] == 45
    assert jobs["first_start_s"].drop("e").tolist() == [0, 1, 2, 3, 4, 5]   # nobody else waits
    assert shared_with_a_gang(result, jobs["num_gpus"].to_dict()) == []
    # packing alone (the 'pack' arm) puts G beside a on m0 (3 free GPUs: the best fit), then b there too
    packed, packed_jobs = run(ROWS, "best_fit")
    assert servers_of(packed)["G"] == [("m0",)] and servers_of(packed)["b"] == [("m0",)]
    assert packed_jobs.loc["e", "first_start_s"] == 6
    assert {("m0", "a", "G"), ("m0", "G", "b")} <= set(shared_with_a_gang(packed, packed_jobs["num_gpus"].to_dict()))


def test_a_gang_larger_than_a_server_takes_whole_idle_servers():
    # a 1-GPU job on m0; F (6 GPUs) takes the two idle servers (4 + 2, largest first, lowest index), not m0's 3 free
    # GPUs; the 1-GPU job b then packs onto m0, though m2 has 2 free GPUs
    result, jobs = run([("a", 0, 1, 100), ("F", 1, 6, 100), ("b", 2, 1, 100)])
    assert servers_of(result) == {"a": [("m0",)], "F": [("m1", "m2")], "b": [("m0",)]}
    assert jobs["first_start_s"].tolist() == [0, 1, 2]


# a..d, then e: 1-GPU jobs; G, K: gangs of a whole server. a, b, c, d fill m0 (G takes idle m1 at 2); e finds m0 and
# m1 full and takes idle m2; a ends at 20 (1 GPU free on m0). K (4 GPUs, t=30) finds no idle server
DEFRAG_ROWS = [("a", 0, 1, 20), ("b", 1, 1, 100), ("G", 2, 4, 1000), ("c", 3, 1, 100), ("d", 4, 1, 100),
               ("e", 5, 1, 100), ("K", 30, 4, 50)]


def test_migration_empties_a_server_of_one_gpu_jobs_for_a_gang():
    result, jobs = run(DEFRAG_ROWS, migration=IsolatingMigration(cost_s=5, consolidate=False))
    # m2 (one job to move) beats m0 (three): e moves to m0's free GPU (best fit, not beside G), K starts on m2 at 30.
    # e: 25 s done by 30, 75 left after a 5 s pause: ends 110
    assert servers_of(result)["e"] == [("m2",), ("m0",)] and servers_of(result)["K"] == [("m2",)]
    assert jobs.loc["K", ["first_start_s", "end_s"]].tolist() == [30, 80]
    assert result.attempts[result.attempts["jobid"] == "e"][["start_s", "end_s", "outcome"]].values.tolist() == \
        [[5, 30, "migrated"], [30, 110, "finished"]]
    assert shared_with_a_gang(result, jobs["num_gpus"].to_dict()) == []
    # without migration K waits for an idle server: m0 once b, c, d end (104), before m2 (105)
    plain, plain_jobs = run(DEFRAG_ROWS)
    assert plain_jobs.loc["K", ["first_start_s", "end_s"]].tolist() == [104, 154]
    assert servers_of(plain)["K"] == [("m0",)]


def test_migration_empties_the_smallest_server_that_holds_the_gang():
    # m0 has 8 GPUs, m1 and m2 4. a, b, c, d fill m1 (best fit: the lowest 4-free server); G takes idle m2; e finds
    # only m0. a, b end at 20, 21: m1 holds c, d (2 free), m0 holds e (7 free). K (4 GPUs, t=30) finds no idle
    # server: emptying m0 would move one job, but would leave K's 4 unused GPUs on it idle; m1 (two jobs) holds K
    # exactly. c and d move to m0; K runs 30-80
    topology = Topology(server_names=("m0", "m1", "m2"), server_gpus=(8, 4, 4), server_rack=(0, 0, 0))
    rows = [("a", 0, 1, 20), ("b", 1, 1, 20), ("c", 2, 1, 1000), ("d", 3, 1, 1000), ("G", 4, 4, 1000),
            ("e", 5, 1, 1000), ("K", 30, 4, 50)]
    result, jobs = run(rows, topology=topology, migration=IsolatingMigration(cost_s=5, consolidate=False))
    servers = servers_of(result)
    assert servers["G"] == [("m2",)] and servers["e"] == [("m0",)]
    assert servers["K"] == [("m1",)] and servers["c"] == servers["d"] == [("m1",), ("m0",)]
    assert jobs.loc["K", ["first_start_s", "end_s"]].tolist() == [30, 80]
    assert shared_with_a_gang(result, jobs["num_gpus"].to_dict()) == []


def test_plain_defragmentation_would_break_the_isolation():
    # a, b on m0; G (2 GPUs) alone on m1; H fills m2. K (3 GPUs) finds no idle server. Moving a and b frees m0 only
    # if they can go where no gang is: nowhere (m1 is G's, m2 H's), so K waits for m1 (G ends at 501)
    rows = [("a", 0, 1, 1000), ("G", 1, 2, 500), ("b", 2, 1, 1000), ("H", 3, 4, 1000), ("K", 10, 3, 50)]
    result, jobs = run(rows, migration=IsolatingMigration(cost_s=5, consolidate=False))
    assert jobs.loc["K", "first_start_s"] == 501 and servers_of(result)["K"] == [("m1",)]
    assert jobs["num_migrations"].sum() == 0
    assert shared_with_a_gang(result, jobs["num_gpus"].to_dict()) == []
    # the plain Migration moves b (one GPU: the fewest) onto G's m1 and starts K on m0 at 10, beside a
    plain, plain_jobs = run(rows, migration=Migration(cost_s=5, consolidate=False))
    assert plain_jobs.loc["K", "first_start_s"] == 10 and servers_of(plain)["K"] == [("m0",)]
    assert servers_of(plain)["b"] == [("m0",), ("m1",)]
    shared = {(m, frozenset(pair)) for m, *pair in shared_with_a_gang(plain, plain_jobs["num_gpus"].to_dict())}
    assert {("m1", frozenset("bG")), ("m0", frozenset("aK"))} <= shared


def test_no_gang_ever_shares_a_server_on_a_busy_cluster():
    """300 jobs of 1-12 GPUs (hours of queue) on 2 racks of 4 servers, with migration: gangs alone, 1-GPU jobs
    beside 1-GPU jobs only; defragmentation moved 1-GPU jobs, and consolidation a gang spread over two racks."""
    rng = np.random.default_rng(7)
    n = 300
    rows = [(f"j{i}", float(t), int(g), float(s)) for i, (t, g, s) in enumerate(zip(
        np.sort(rng.uniform(0, 5000, n)), rng.choice([1, 1, 1, 1, 2, 4, 8, 12], n), rng.exponential(1800, n) + 1,
        strict=True))]
    w = make_workload(rows)
    result = simulate(w, topology_from_spec(2, 4, 8), "philly", placement=IsolatePlacement(w.num_gpus > 1),
                      slowdown=None, migration=IsolatingMigration(min_remaining_s=0))
    jobs = result.jobs.set_index("jobid")
    assert (jobs["status"] == "Pass").all()
    assert shared_with_a_gang(result, jobs["num_gpus"].to_dict()) == []
    one = jobs[jobs["num_gpus"] == 1].index
    placed = result.placements().drop_duplicates(["jobid", "machine"])
    assert placed[placed["jobid"].isin(one)]["machine"].duplicated().any()   # 1-GPU jobs did share servers
    moved = result.attempts[result.attempts["outcome"] == "migrated"]
    assert moved["jobid"].isin(one).sum() == 3 and jobs.loc[moved["jobid"], "num_gpus"].max() == 12


CELL = {"experiment": "interference", "interference": "paper", "colocated_one_server": 0.9, "colocated_spread": 0.8,
        "trace": "public", "seed": 0, "load": 1.0, "load_setting": "real"}


@pytest.mark.parametrize("arm", [a for a in E.INTERFERENCE_ARMS if a["placement"] != "isolate"])
@pytest.mark.parametrize("slowdown", ["default", None])
def test_interference_options_are_grids_for_todays_arms(arm, slowdown):
    cell = {**CELL, **arm}
    w = make_workload(ROWS)
    philly = {"relax_after_s": 120.0, "backoff": "every"}
    ours = E.interference_options(cell, w, philly, slowdown)
    theirs = grid.simulation_options(cell, w, philly, slowdown)
    assert repr(ours[0]) == repr(theirs[0]) and ours[2] is theirs[2] is w and ours[3] == theirs[3] == {}
    assert ours[1].keys() == theirs[1].keys()
    assert repr(ours[1]["placement"]) == repr(theirs[1]["placement"])
    assert ours[1].get("migration") == theirs[1].get("migration")
    assert repr(ours[1]["slowdown"]) == repr(theirs[1]["slowdown"])


def test_the_isolate_arm_and_the_arm_names():
    w = make_workload(ROWS)
    policy, options, workload, extras = E.interference_options({**CELL, "placement": "isolate", "migration": True},
                                                               w, {}, None)
    assert isinstance(options["placement"], IsolatePlacement) and options["placement"].gangs == {1, 3}
    assert options["migration"] == IsolatingMigration() and options["migration"].defragment
    assert "migration" not in E.interference_options({**CELL, "placement": "isolate", "migration": False}, w)[1]
    assert [E.interference_arm(a) for a in E.INTERFERENCE_ARMS] == [
        "pack (best fit)", "spread (Philly)", "pack (best fit) + migration", "spread (Philly) + migration",
        "isolate gangs + migration", "dedicated servers (every job; by construction)"]
    with pytest.raises(ValueError, match="placement must be one of"):
        E.interference_options({**CELL, "placement": "scatter", "migration": False}, w)


class ScanIsolatePlacement(IsolatePlacement):
    """The placement as it was before it kept which servers a gang holds (issue 48's speed-up): every server's jobs
    read again on each call. The reference the kept one must match."""

    def no_gang(self, cluster):
        return [self.gangs.isdisjoint(on) for on in cluster.jobs_on]


def test_a_whole_run_equals_reading_every_server_again(monkeypatch):
    """3,000 real jobs on 6 racks, isolated with migration to defragment (the arm's cell): the same rows as when each
    call reads every server's jobs again."""
    from dlcluster.experiments import interference

    cell = {"experiment": "interference", "placement": "isolate", "migration": True, "interference": "paper",
            "colocated_one_server": 0.9, "colocated_spread": 0.8, "trace": "public", "start": "2017-10-03",
            "max_jobs": 3000, "racks": 6, "resample_block_days": 0.0, "seed": 0, "load": 1.0,
            "load_setting": "real", "inputs": "test"}
    kept = []
    no_gang = IsolatePlacement.no_gang
    monkeypatch.setattr(IsolatePlacement, "no_gang", lambda self, cluster: kept.append(1) or no_gang(self, cluster))
    rows = E.run_cell(cell)
    assert len(kept) > 1000
    monkeypatch.setattr(interference, "IsolatePlacement", ScanIsolatePlacement)
    pd.testing.assert_frame_equal(rows, E.run_cell(cell))
