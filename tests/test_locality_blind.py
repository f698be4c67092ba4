"""The 'no locality (any GPUs)' arm of experiment 1 (issue 48): a placement that knows nothing of servers, so that the
locality arms differ in locality, not only in how long jobs wait. Hand-made clusters of 4-GPU servers
(``topology_from_spec``), FIFO at ideal speed."""

import pandas as pd

from dlcluster.experiments.locality import LocalityBlindPlacement, options
from dlcluster.sim import simulate, topology_from_spec
from dlcluster.sim.cluster import ClusterState
from dlcluster.sim.placement import Locality
from test_isolate_placement import make_workload   # (name, arrival_s, gpus, service_s) rows, one VC


class FixedStart(LocalityBlindPlacement):
    """The blind placement with its random start pinned, to compute by hand."""

    def __init__(self, start):
        super().__init__()
        self._rng.randrange = lambda n: start % n


def test_it_takes_gpus_in_list_order_from_its_start_whatever_the_locality():
    cluster = ClusterState(topology_from_spec(2, 2, 4))   # racks {m0, m1}, {m2, m3}; 4 GPUs each
    cluster.free[:] = [1, 4, 2, 4]
    cluster.total_free = 11
    # from m0: 1 GPU there, 3 on m1 (one rack), though m1 and m3 each hold the 4 alone
    assert FixedStart(0).choose(cluster, 4, 0, 2) == ([(0, 1), (1, 3)], int(Locality.RACK))
    # from m2: 2 there, 4 on m3, wrapping to m0: three servers on two racks
    assert FixedStart(2).choose(cluster, 7, 0, 2) == ([(2, 2), (3, 4), (0, 1)], int(Locality.ANYWHERE))
    # a job that fits where the list starts stays on one server
    assert FixedStart(1).choose(cluster, 3, 0, 2) == ([(1, 3)], int(Locality.SERVER))
    # no looser level than the job accepts, and no more GPUs than are free
    assert FixedStart(0).choose(cluster, 4, 0, int(Locality.SERVER)) is None
    assert FixedStart(0).choose(cluster, 12, 0, 2) is None


def spread_share(result, gpus):
    p = result.placements().drop_duplicates(["jobid", "attempt", "machine"])
    servers = p[p["attempt"] == p.groupby("jobid")["attempt"].transform("min")].groupby("jobid")["machine"].nunique()
    gangs = [j for j, g in gpus.items() if g == 2]
    return float((servers[gangs] > 1).mean())


def test_the_locality_arms_differ_in_how_often_they_spread_a_job_that_fits_one_server():
    # four 3-GPU jobs hold GPUs for the whole run (at seed 0 the blind arm leaves m0 and m4 with one GPU free, m7 with
    # two, m6 with none); 2-GPU jobs then come one at a time, while four servers stand empty. Philly's placement
    # (relaxing after the calibrated timeout) puts each on one server; the arm without locality takes the GPUs where
    # its list starts, and spreads those that start on m0 or m4: about 2 of 8 (binomial, 40 jobs)
    rows = [(f"s{i}", i, 3, 10_000) for i in range(4)]
    rows += [(f"g{i}", 10 + 100 * i, 2, 50) for i in range(40)]
    w = make_workload(rows)
    gpus = dict(zip(w.jobid, w.num_gpus, strict=True))
    topology = topology_from_spec(2, 4, 4)
    cell = {"locality": "any", "long_jobs": "as-others", "seed": 0}
    policy, opts, _, _ = options(cell, w, {"relax_after_s": 180.0}, None)
    assert isinstance(opts["placement"], LocalityBlindPlacement)
    blind = simulate(w, topology, policy, **opts)
    relax_policy, relax_opts, _, _ = options({**cell, "locality": "relax"}, w, {"relax_after_s": 180.0}, None)
    assert "placement" not in relax_opts
    relaxed = simulate(w, topology, relax_policy, placement="most_free", **relax_opts)
    assert spread_share(relaxed, gpus) == 0.0
    assert 0.1 < spread_share(blind, gpus) < 0.4
    # the same seed, the same placements
    assert spread_share(simulate(w, topology, policy, **options(cell, w, {"relax_after_s": 180.0}, None)[1]),
                        gpus) == spread_share(blind, gpus)


def test_the_relax_tradeoff_puts_the_wait_saved_beside_the_locality_given_up():
    from dlcluster.experiments.locality import relax_tradeoff, relax_tradeoff_sentence

    philly = "relax after 3.8 min"
    rows = []
    # 7 weekly blocks of 5-8-GPU jobs: strict waits 10 h, relaxed 2 h (every block); strict spreads none, relaxed 30%
    for arm, wait_h, spread, useful, jct_h in (("strict locality", 10.0, 0.0, 0.95, 30.0),
                                               (philly, 2.0, 0.3, 0.85, 25.0)):
        for b in range(7):
            noise = 1 + 0.02 * ((b % 3) - 1)
            rows.append({"experiment": "locality", "arm": arm, "load_label": "L", "bucket": "5-8", "seed": b,
                         "block": b, "block_days": 7.0, "jobs": 100, "rejected": 0, "gpu_hours": 1000.0,
                         "queue_mean_s": wait_h * 3600 * noise, "spread_share": spread * noise,
                         "useful_share": useful, "jct_mean_s": jct_h * 3600 * noise})
    table = relax_tradeoff(pd.DataFrame(rows), "L", philly).set_index("GPUs per job")
    assert list(table.index) == ["5-8"]   # no 2-4-GPU rows
    row = table.loc["5-8"]
    assert row["mean first wait, strict → relaxed"].startswith("10.0 h → 2.0 h, −80%")
    assert row["mean first wait, strict → relaxed"].endswith(": lower")
    assert row["jobs spread over servers, strict → relaxed"].startswith("0% → 30%, +30 points [95% CI +")
    assert row["useful share of their GPU time"] == "95% → 85%"
    sentence = relax_tradeoff_sentence(pd.DataFrame(rows), "L", philly)
    assert sentence.startswith("[mechanism] The tradeoff of relaxing locality at L, strict locality → "
                               f"'{philly}': 5-8-GPU jobs' mean first wait 10.0 h → 2.0 h")
    assert "(shorter), for 30% of them spread over servers instead of 0% (+30 points" in sentence
    assert relax_tradeoff(pd.DataFrame(rows), "L", "relax after 1 min").empty
