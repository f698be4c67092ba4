"""notebooks/05-simulator-validation.ipynb runs with params/ci.yaml (a shorter replay) and writes sane results.

The held-out figures are recomputed here by a second route: the replay is run again from the notebook's inputs
and the parameters it reports (a replay of this size takes about a second), and the figures are computed from
the run with pandas and scipy, not with :mod:`dlcluster.validation.measures`. So the checks hold
whatever values a later change of the simulator or of the calibration gives, and fail when a measure is wrong.
"""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

STEM = "05-simulator-validation"
DELAY_BUCKETS = ("2-4", "5-8", ">8")


def busy_servers_mae(result, occupancy: pd.DataFrame, span: tuple) -> float:
    """Hourly mean busy servers as counts, replay vs the record's active servers (minutes with active == 0 are
    monitoring gaps), the mean absolute difference in points of the record's hourly mean total, over ``span``."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    simulated = pd.Series(result.topology.num_servers - ts["idle_servers"].to_numpy(), index=times)
    real = occupancy[occupancy["active"] > 0].set_index("time")
    both = pd.concat([simulated.resample("1h").mean(), real["active"].resample("1h").mean(),
                      real["total"].resample("1h").mean()], axis=1, keys=["simulated", "real", "total"]).dropna()
    both = both[(both.index >= span[0]) & (both.index < span[1])]
    return 100 * ((both["simulated"] - both["real"]).abs() / both["total"]).mean()


def allocation_by_hand(result, cdf: pd.DataFrame, span: tuple) -> tuple[float, float]:
    """(the replay's mean allocated share of its GPUs in ``span``, 1 - the CDF's share at 0% utilization)."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    inside = (times >= span[0]) & (times < span[1])
    share = (ts["allocated_gpus"][inside] / result.topology.total_gpus).mean()
    return share, 1 - cdf.loc[cdf["gpu_util_percent"] == 0, "cdf_percent"].max() / 100


def paired_waits(rep, waits: pd.DataFrame, span: tuple) -> pd.DataFrame:
    """Real first waits of the DRE records submitted in ``span`` beside the same jobs' waits in the replay
    (queueing delay + the scheduler latency the job was given; every job of these runs starts)."""
    ids = rep.replay.dre_jobid
    mine = pd.notna(ids)
    simulated = pd.Series(rep.result.jobs["queueing_delay_s"].to_numpy(float)[mine] + rep.latency_s[mine],
                          index=ids[mine].astype(str))
    real = waits[(waits["submitted"] >= span[0]) & (waits["submitted"] < span[1])]
    real = real[real["jobid"].isin(simulated.index)]
    out = real.assign(simulated_s=simulated.reindex(real["jobid"]).to_numpy())
    assert out["simulated_s"].notna().all()
    return out


@pytest.fixture(scope="module")
def doc(ci_notebook):
    return ci_notebook(STEM)


@pytest.fixture(scope="module")
def rerun(doc):
    """The notebook's inputs rebuilt from its parameters, and its calibrated replay run again."""
    from dlcluster.trace import load_trace
    from dlcluster.validation import calibrate as vc, measures
    from dlcluster.validation import jobsets as js
    from dlcluster.validation import workload as vw

    p, r = doc["params"], doc["results"]
    pub = load_trace("public")
    rfold, pollux, dre = pub.rfold_jobs, pub.jobs_of("pollux"), pub.jobs_of("dre")
    alignment = js.align_offsets(rfold["arrival_offset_s"], rfold["num_gpus"], rfold["duration_s"],
                                 pollux["submitted"], pollux["num_gpus"], pollux["run_time_s"])
    warm = vw.rfold_replay_workload(pub, alignment, seed=p["seed"], warmup_days=p["warmup_days"])
    replay = vw.first_days(warm, p["replay_days"])
    waits, _ = vw.dre_first_waits(warm, dre)
    # the calibrated parameters as the notebook reports them (the overhead fit is rounded to 6 decimals when
    # fitted, so the JSON holds it exactly)
    fields = {k.removeprefix("calibrated."): v for k, v in r.items()
              if k.startswith("calibrated.") and not k.startswith("calibrated.latency.")}
    buckets = ["all", *[b for b in DELAY_BUCKETS if f"calibrated.latency.{b}.median_s" in r]]
    mixture = tuple((b, 1.0, r[f"calibrated.latency.{b}.median_s"], r[f"calibrated.latency.{b}.sigma"], 0.0, 0.0)
                    for b in buckets)
    span = measures.spans(pub.occupancy, p["fit_days"], p["replay_days"])
    # the attempt split, read off the DRE records by hand: records whose last start lies > 60 s after their first,
    # and 21 quantiles of the share of their duration before the last attempt
    earlier = waits["recorded_wait_s"] - waits["first_wait_s"]
    retried = earlier > 60
    before = (earlier / (earlier + waits["run_time_s"]))[retried]
    split = tuple(round(float(v), 6) for v in (retried.mean(), *np.quantile(before, np.linspace(0, 1, 21))))
    assert r["dre.retried_share.reconstructed"] == pytest.approx(retried.mean(), rel=1e-12)   # not rounded
    # the servers DRE's records of the fit span ran on, kept in service first (issue 47), by hand; the pools' shares
    # of the same records (sim/pools.py, tested on its own)
    from dlcluster.sim.pools import pool_shares
    fit_records = waits[(waits["submitted"] >= span["fit"][0]) & (waits["submitted"] < span["fit"][1])]
    seen = tuple(sorted(set(pub.placements.loc[pub.placements["jobid"].isin(fit_records["jobid"]), "machine"])))
    params = vc.ReplayParams(**fields, latency_mixture=mixture, attempt_split=split,
                             demand_span=tuple(str(t) for t in span["fit"]), servers_seen=seen,
                             pool_shares=pool_shares(pub.placements, pub.machines, fit_records))
    rep = vc.run_replay(replay, pub.machines, pub.vc_quotas, params)
    return {"pub": pub, "replay": replay, "waits": waits, "params": params, "span": span, "rep": rep, "dre": dre}


@pytest.mark.notebook
def test_job_set_evidence_and_workload(doc, rerun):
    r = doc["results"]
    # the job-set evidence does not depend on the parameters: of the 3,172 passed and 2,738 failed DRE records,
    # Pollux holds 3,001 and 37 (passed jobs only), RFold 3,163 and 2,731 (both statuses)
    dre = rerun["dre"]
    assert (dre["status"] == "Pass").sum() == 3172 and (dre["status"] == "Failed").sum() == 2738
    assert r["jobsets.dre_found.Pollux.Pass"] == pytest.approx(3001 / 3172)
    assert r["jobsets.dre_found.Pollux.Failed"] == pytest.approx(37 / 2738)
    assert r["jobsets.dre_found.RFold.Pass"] == pytest.approx(3163 / 3172)
    assert r["jobsets.dre_found.RFold.Failed"] == pytest.approx(2731 / 2738)
    assert r["alignment.offsets_are_wallclock"] is True
    assert r["alignment.origin_local"] == "2017-08-14 23:27:00"
    assert r["jobsets.pollux_in_rfold"] == 1.0
    assert r["demand.mean.RFold_gpu_share"] > 3 * r["demand.mean.Pollux_gpu_share"]
    assert r["jobsets.rfold_not_in_pollux_jobs_pct"] == pytest.approx(100 * (1 - r["jobsets.pollux_over_rfold_jobs"]))
    # beside it, the other public selection with a status: the failed DRE records, counted again
    assert r["failures.dre_records.unsuccessful_jobs_pct"] == pytest.approx(100 * 2738 / 5910, rel=1e-12)
    # the replay workload (7 days of warm-up + 12 days): where each job's VC comes from, counted again
    replay = rerun["replay"]
    sources = pd.Series(replay.vc_source).value_counts()
    assert r["workload.jobs"] == len(replay.workload) == 34656
    assert sources.to_dict() == {"pollux match": 27463, "drawn": 6277, "dre record": 916}
    for name, count in sources.items():
        assert r[f"workload.vc_source.{name.replace(' ', '_')}"] == pytest.approx(count / len(replay.workload))
    # monitoring gaps: minutes of the occupancy record with no active server
    assert r["heldout.gap_minutes"] == int((rerun["pub"].occupancy["active"] == 0).sum()) == 1131


def spanned_by_hand(rep, waits: pd.DataFrame, span: tuple) -> dict:
    """Per size bucket, the servers each DRE record of ``span`` spanned (its last attempt) against the same job's last
    attempt in the replay: (KS, real one-server share, replay's one-server share)."""
    att = rep.result.attempts.sort_values(["jobid", "attempt"]).groupby("jobid").tail(1).set_index("jobid")
    to_dre = pd.Series(rep.replay.dre_jobid, index=rep.replay.workload.jobid).dropna()
    simulated_servers = pd.Series(att["num_servers"].reindex(to_dre.index).to_numpy(), index=to_dre.to_numpy()).dropna()
    real = waits[(waits["submitted"] >= span[0]) & (waits["submitted"] < span[1])]
    real = real[real["jobid"].isin(simulated_servers.index)]
    out = {}
    for bucket, part in real.groupby("bucket"):
        simulated = simulated_servers.reindex(part["jobid"]).to_numpy()
        out[bucket] = (stats.ks_2samp(part["num_servers"], simulated).statistic, (part["num_servers"] == 1).mean(),
                       (simulated == 1).mean())
    return out


def spanned_ks_by_hand(rep, waits: pd.DataFrame, span: tuple) -> dict:
    """KS per size bucket of :func:`spanned_by_hand`."""
    return {bucket: ks for bucket, (ks, _, _) in spanned_by_hand(rep, waits, span).items()}


def objective_by_hand(rep, pub, waits, span) -> float:
    """Busy-server MAE + points below the allocation bound + 5 x mean |ln median ratio| + 10 x mean |ln p90 ratio|
    (waits floored at 60 s) + 2.5 x mean KS of the waits, over the size buckets (issue 47's weights)."""
    pairs = paired_waits(rep, waits, span)
    med, p90, ks = [], [], []
    for _, part in pairs.groupby("bucket"):
        real, simulated = part["first_wait_s"], part["simulated_s"]
        med.append(abs(math.log(max(simulated.median(), 60.0) / max(real.median(), 60.0))))
        p90.append(abs(math.log(max(simulated.quantile(0.9), 60.0) / max(real.quantile(0.9), 60.0))))
        ks.append(stats.ks_2samp(real, simulated).statistic)
    share, bound = allocation_by_hand(rep.result, pub.cluster_gpu_util_cdf, span)
    return (busy_servers_mae(rep.result, pub.occupancy, span) + max(0.0, 100 * (bound - share))
            + 5 * np.mean(med) + 10 * np.mean(p90) + 2.5 * np.mean(ks))


def violation_by_hand(rep, waits, span) -> float:
    """The placement constraint's violation: KS of the servers spanned above 0.2 in the worst bucket, plus the largest
    one-server gap above 10 points, in share units (0: feasible)."""
    spanned = spanned_by_hand(rep, waits, span).values()
    worst_ks = max(ks for ks, _, _ in spanned)
    gap = max(abs(simulated - real) for _, real, simulated in spanned)
    return max(0.0, worst_ks - 0.2) + max(0.0, gap - 0.1)


@pytest.mark.notebook
def test_calibration_beats_the_settings_it_starts_from(doc, rerun):
    r, p = doc["results"], doc["params"]
    assert p["calibration_trials"] == 4 and r["calibration.trials"] == 4
    from dlcluster.validation import calibrate as vc
    from dlcluster.validation.calibration import fit_span_replay
    pub, span, waits, params = rerun["pub"], rerun["span"], rerun["waits"], rerun["params"]
    # the search always evaluates the simulator's two earlier settings first (unlimited lending; caps at the
    # quotas, with Philly's 3-minute back-off): the calibrated setting scores no worse on the fit span, by hand
    fit_part = fit_span_replay(rerun["replay"], span["fit"])

    def score(candidate):
        """(violation, objective): the calibration keeps feasible placements first, then the lowest objective."""
        rep = vc.run_replay(fit_part, pub.machines, pub.vc_quotas, candidate, quota_workload=rerun["replay"].workload)
        return violation_by_hand(rep, waits, span["fit"]), objective_by_hand(rep, pub, waits, span["fit"])

    def step(violation: float) -> int:
        """Violations are compared in steps of 0.05 (within a step, the objective decides)."""
        return 0 if violation <= 1e-12 else math.ceil(round(violation / 0.05, 6))

    def no_worse(a, b) -> bool:
        return step(a[0]) < step(b[0]) or (step(a[0]) == step(b[0]) and a[1] <= b[1] + 1e-9)

    start = replace(params, max_capacity_factor=None, reclaim_after_s=None, relax_after_s=180.0, locality="relax",
                    placement="most_free", rack_size=16, unknown_vc_quota="none", servers_in_service=None,
                    cap_quantile=None, backoff="gangs", gang_hold=False)
    calibrated = score(params)
    assert no_worse(calibrated, score(start)) and no_worse(calibrated, score(replace(start, max_capacity_factor=1.0)))
    # the fourth start point: 360 servers in service with unlimited lending
    assert no_worse(calibrated, score(replace(start, servers_in_service=360)))
    # how close the kept set came to the constraint is recorded, as computed by hand
    assert r["calibration.placement_constraint.violation"] == pytest.approx(calibrated[0], abs=1e-9)
    assert r["calibration.placement_constraint.feasible"] is (calibrated[0] == 0)
    # the scheduler latency carries the launcher's overhead only: a lognormal of the fit span's real waits <= 40 s
    fit_waits = waits[(waits["submitted"] >= span["fit"][0]) & (waits["submitted"] < span["fit"][1])]
    fast = fit_waits[fit_waits["first_wait_s"] <= 40]
    for bucket, part in [("all", fast), *[(b, fast[fast["bucket"] == b]) for b in DELAY_BUCKETS]]:
        if f"calibrated.latency.{bucket}.median_s" not in r:
            continue
        x = np.log(np.maximum(part["first_wait_s"].to_numpy(float), 1.0))
        assert r[f"calibrated.latency.{bucket}.median_s"] == pytest.approx(np.exp(np.median(x)), rel=1e-6)
        assert r[f"calibrated.latency.{bucket}.sigma"] == pytest.approx(x.std(), rel=1e-5)
        assert r[f"calibrated.latency.{bucket}.median_s"] < 20   # seconds: no queueing in it
    assert r["real.fit_waits_above_overhead_share"] == pytest.approx((fit_waits["first_wait_s"] > 40).mean())


@pytest.mark.notebook
def test_held_out_figures_recomputed_from_a_second_run(doc, rerun, ci_notebook):
    r = doc["results"]
    pub, span, rep = rerun["pub"], rerun["span"], rerun["rep"]
    held = span["held_out"]
    # busy servers in the record's units: the same figure from a second run of the same replay, by hand
    mae = busy_servers_mae(rep.result, pub.occupancy, held)
    assert r["validation.heldout.busy_servers_mae_pp"] == pytest.approx(mae, rel=1e-9)
    complete = (held[0], min(held[1], pd.Timestamp(r["heldout.complete_until"])))
    mae_complete = busy_servers_mae(rep.result, pub.occupancy, complete)
    assert r["validation.heldout.busy_servers_mae_pp_complete"] == pytest.approx(mae_complete, rel=1e-9)
    assert r["ablation.calibrated.busy_servers_mae_pp_complete"] == pytest.approx(mae_complete, rel=1e-9)
    assert r["replay.servers_in_service"] == rep.topology.num_servers
    assert r["replay.servers_in_service"] == (rerun["params"].servers_in_service or 539)
    # GPU allocation against its lower bound: 32.2% of the reporting GPU-minutes at 0% leave at least 67.8%
    share, bound = allocation_by_hand(rep.result, pub.cluster_gpu_util_cdf, held)
    assert r["real_gpu_allocated_share_lower_bound"] == pytest.approx(bound) == pytest.approx(0.677678)
    assert r["validation.heldout.gpu_allocated_share"] == pytest.approx(share, rel=1e-9)
    assert r["validation.heldout.gpu_allocation_shortfall_pp"] == pytest.approx(100 * (bound - share), rel=1e-9)
    # waits per size bucket and the KS of the largest VCs, from the pairs of real and replayed waits
    pairs = paired_waits(rep, rerun["waits"], held)
    medians, p90s = [], []
    for bucket in DELAY_BUCKETS:
        part = pairs[pairs["bucket"] == bucket]
        real, simulated = part["first_wait_s"], part["simulated_s"]
        assert r[f"heldout.delay.{bucket}.real_median_s"] == pytest.approx(real.median(), rel=1e-9)
        assert r[f"heldout.delay.{bucket}.real_p90_s"] == pytest.approx(real.quantile(0.9), rel=1e-9)
        assert r[f"heldout.delay.{bucket}.simulated_median_s"] == pytest.approx(simulated.median(), rel=1e-9)
        assert r[f"heldout.delay.{bucket}.simulated_p90_s"] == pytest.approx(simulated.quantile(0.9), rel=1e-9)
        assert r[f"heldout.delay.{bucket}.ks_statistic"] == pytest.approx(stats.ks_2samp(real, simulated).statistic)
        medians.append(simulated.median() / real.median())
        p90s.append(simulated.quantile(0.9) / real.quantile(0.9))
    assert r["validation.heldout.max_median_ratio"] == pytest.approx(max(max(x, 1 / x) for x in medians), rel=1e-9)
    assert r["validation.heldout.max_p90_ratio"] == pytest.approx(max(max(x, 1 / x) for x in p90s), rel=1e-9)
    top = pairs["vc"].value_counts().head(doc["params"]["top_vcs"]).index
    ks = {vc: stats.ks_2samp(pairs.loc[pairs["vc"] == vc, "first_wait_s"],
                             pairs.loc[pairs["vc"] == vc, "simulated_s"]).statistic for vc in top}
    assert {k.removeprefix("heldout.ks."): v for k, v in r.items() if k.startswith("heldout.ks.")} == pytest.approx(ks)
    assert r["validation.heldout.max_ks"] == pytest.approx(max(ks.values()))
    # servers spanned: each DRE record's servers (its last attempt) against its job's last attempt in the replay
    span_ks = spanned_ks_by_hand(rep, rerun["waits"], held)
    real = rerun["waits"][(rerun["waits"]["submitted"] >= held[0]) & (rerun["waits"]["submitted"] < held[1])]
    for bucket, part in real.groupby("bucket"):
        assert r[f"heldout.servers.{bucket}.real_median"] == part["num_servers"].median()
        assert r[f"heldout.servers.{bucket}.real_one_server_share"] == pytest.approx((part["num_servers"] == 1).mean())
    assert r["validation.heldout.servers_spanned_max_ks"] == pytest.approx(max(span_ks.values()))
    # why the replay's jobs waited (jobs submitted in the held-out span): the drawn overhead's share of all waiting
    jobs = rep.result.jobs.assign(latency_s=rep.latency_s)
    jobs = jobs[jobs["queueing_delay_s"].notna()]
    submitted = pd.to_datetime(jobs["submitted"])
    jobs = jobs[(submitted >= held[0]) & (submitted < held[1])]
    causes = jobs[["delay_fair_share_s", "delay_fragmentation_s", "delay_backoff_s", "latency_s"]].sum()
    assert r["validation.heldout.latency_only_wait_share"] == pytest.approx(causes["latency_s"] / causes.sum(),
                                                                            rel=1e-9)
    # Table 2 of the replay (queueing delay only, as the paper's): fragmentation is the time the VC had the GPUs but no
    # placement met the job's locality; a back-off timer alone is other
    buckets = pd.cut(jobs["num_gpus"], [0, 1, 4, 8, np.inf], labels=["1", "2-4", "5-8", "gt8"])
    for b, part in jobs.groupby(buckets, observed=True):
        fragmentation = part[["locality_relaxed_s", "locality_placed_s", "locality_contended_s"]].to_numpy().sum()
        total = part["delay_fair_share_s"].sum() + fragmentation + part["held_by_timer_s"].sum()
        if total > 0:
            assert r[f"replay.table2.{b}.fragmentation_share"] == pytest.approx(fragmentation / total, abs=1e-12)
            assert r[f"replay.table2.{b}.fair_share_share"] == pytest.approx(
                part["delay_fair_share_s"].sum() / total, abs=1e-12)
        else:
            assert r[f"replay.table2.{b}.fair_share_share"] is None   # no queueing delay: shares undefined, not 0
        if fragmentation > 0:   # how it ended: each share from the simulator's per-job record
            for end in ("relaxed", "placed", "contended"):
                assert r[f"replay.table2.{b}.fragmentation_{end}_share"] == pytest.approx(
                    part[f"locality_{end}_s"].sum() / fragmentation, abs=1e-12)
    # what the record's active count is (real data), and the replay in its units: the count of servers with a job is
    # the validation target's, so its error is the held-out busy-server MAE to the completeness horizon
    assert r["busy.record.gap_minutes"] == r["busy.record.gap_minutes_with_jobs"] == 1131
    assert (r["busy.record.modal_total"], r["busy.record.servers_with_gpus"], r["busy.record.jump_active"]) == \
        (420, 539, 95)
    assert r["busy.record.inactive_share"] < r["busy.record.gpu_minutes_at_zero"]
    assert r["busy.replay.servers_with_a_job.mae_pp"] == pytest.approx(r["validation.heldout.busy_servers_mae_pp"],
                                                                        rel=1e-12)
    # preemptions: attempts ended by a reclaim among the jobs submitted in the held-out span, counted again
    att_all = rep.result.attempts
    mine = att_all[att_all["jobid"].isin(jobs["jobid"])]
    assert r["replay.preemptions"] == int((mine["outcome"] == "preempted").sum())
    # the scorecard: each held-out figure against its target (lower is better), counted from the figures
    figures = {"busy": r["validation.heldout.busy_servers_mae_pp_complete"],
               "alloc": r["validation.heldout.gpu_allocated_share"],
               "median": r["validation.heldout.max_median_ratio"], "p90": r["validation.heldout.max_p90_ratio"],
               "fig3_median": r.get("validation.fig3.median_ks"), "fig3_max": r.get("validation.fig3.max_ks"),
               "fig3_3min": r.get("validation.fig3.share_3min_within"),
               "spanned": r["validation.heldout.servers_spanned_max_ks"],
               "latency": r["validation.heldout.latency_only_wait_share"]}
    met = sum([figures["busy"] <= 5, figures["alloc"] >= r["real_gpu_allocated_share_lower_bound"],
               figures["median"] <= 1.5, figures["p90"] <= 2,
               figures["fig3_median"] is not None and figures["fig3_median"] <= 0.15,
               figures["fig3_max"] is not None and figures["fig3_max"] <= 0.3,
               figures["fig3_3min"] is not None and figures["fig3_3min"] > 0.5,
               figures["spanned"] <= 0.15, figures["latency"] <= 0.2])
    assert r["validation.heldout.targets_met"] == met
    assert r["validation.heldout.verdict"].startswith(f"{met} of 9 validation targets met")
    # the notebook opens (after its title and findings) with the targets table, its first line "k of 9" from the
    # results, and the sentence on the model without a mechanism (issue 47 point 4)
    assert r["validation.targets_table.headline"].startswith(f"The calibrated replay meets {met} of 9 held-out targets")
    assert r["validation.targets_table.met.calibrated"] == met
    assert "validation.targets_table.met.latency_fitted_to_the_real_waits_no_contention" in r
    import nbformat
    nb = nbformat.read(ci_notebook.out_dir / f"{STEM}.ipynb", as_version=4)
    opening = nb.cells[2]
    assert opening.cell_type == "code" and "the targets at a glance" in opening.source
    text, table = (o["data"] for o in opening.outputs)
    assert text["text/markdown"].startswith(f"**The calibrated replay meets {met} of 9 held-out targets")
    assert "Against the model without a mechanism" in text["text/markdown"]
    assert "targets met" in table["text/html"] and f"{met} of 9 met" in table["text/html"]
    # the ablation: the model before this work draws every wait (its latency is the whole waiting), the mechanism
    # leaves at most a fifth of it to the drawn overhead
    drawn = r["ablation.latency_fitted_to_the_real_waits_no_contention.latency_only_wait_share"]
    assert drawn > 0.9 and r["ablation.calibrated.latency_only_wait_share"] < 0.5 * drawn


@pytest.mark.notebook
def test_figures_and_peer_comparison(doc):
    from dlcluster.paths import data_dir

    r = doc["results"]
    figures = {"demand_vs_occupancy", "latency_fit", "calibration_search", "busy_servers_replay_vs_real",
               "dre_vc_cdfs_replay_vs_real", "servers_spanned_replay_vs_real", "table2_validated_replay",
               "long_waits_by_day", "peer_complete_log_per_vc"}
    if "validation.fig3.cells" in r:
        figures.add("fig3_replay_vs_full_trace")
    assert {f["name"] for f in doc["figures"]} == figures
    assert all(f["data"] for f in doc["figures"])
    assert any("SIMULATED" in f["data"] for f in doc["figures"])
    assert {c["key"] for c in doc["comparisons"]} >= {"failures.unsuccessful_jobs_pct",
                                                      "failures.unsuccessful_gpu_time_pct"}
    # the workload in Helios's complete-log window: each ratio's denominator is Helios's published mean, read here
    # from the CSV; ours is the peer-mode simulation of the fixed RFold workload (no fitted parameter, so
    # deterministic: re-pin when the simulator's peer mode changes)
    helios = pd.read_csv(data_dir() / "reference" / "helios_philly_complete_log.csv", dtype={"vc": str}).set_index("vc")
    ours = {}
    for policy in ("fifo", "sjf"):
        for metric in ("jct", "queue"):
            ours[policy, metric] = r[f"peer_complete_log.{policy}.{metric}_s"]
            assert r[f"peer_complete_log.{policy}.{metric}_ratio"] == pytest.approx(
                ours[policy, metric] / helios.loc["all", f"{policy}_{metric}_s"], rel=1e-12)
    assert ours == pytest.approx({("fifo", "jct"): 202670.7228576456, ("fifo", "queue"): 173150.402769224,
                                  ("sjf", "jct"): 39610.47496920641, ("sjf", "queue"): 10090.154880784798}, rel=1e-6)
    # as in Helios's run, shortest-job-first cuts both the mean wait and the mean JCT against FIFO
    assert ours["sjf", "queue"] < ours["fifo", "queue"] and ours["sjf", "jct"] < ours["fifo", "jct"]


@pytest.mark.notebook
def test_figure3_comparison_recomputed_from_the_replays_attempts(doc, rerun):
    """Each scored cell's KS and ratios by a second route: the replay's attempts read directly, the curve's points
    walked one by one."""
    r = doc["results"]
    from dlcluster.validation.calibration import official_fig3_or_none

    table = official_fig3_or_none()
    if table is None:
        # without the digitized figure the comparison is not made, and its targets are not met
        assert "validation.fig3.cells" not in r and r["validation.heldout.targets_met"] <= 6
        return
    rep, params = rerun["rep"], rerun["params"]
    from dlcluster.validation.latency import scheduler_latency
    # the attempts in the replay's own order (each job's attempts together): one overhead draw per later attempt,
    # in that order, as fig3.attempt_waits documents
    att = rep.result.attempts[~rep.result.attempts["prerun"]]
    assert (att["jobid"].shift() == att["jobid"])[att["attempt"] > 0].all()
    jobs = rep.result.jobs.set_index("jobid")
    latency = pd.Series(rep.latency_s, index=rep.result.jobs["jobid"])
    later = att["attempt"] > 0
    overhead = np.zeros(len(att))
    overhead[later.to_numpy()] = scheduler_latency(params, att.loc[later, "num_gpus"].to_numpy(), 1)
    previous_end = att.groupby("jobid")["end_s"].shift()
    first_wait = (att["start_s"] - jobs["arrival_s"].reindex(att["jobid"]).to_numpy()
                  + latency.reindex(att["jobid"]).to_numpy())
    wait = np.where(later, att["start_s"] - previous_end + overhead, first_wait)
    gpus = jobs["num_gpus"].reindex(att["jobid"]).to_numpy()
    bucket = np.select([gpus == 1, gpus <= 4, gpus <= 8], ["1", "2-4", "5-8"], ">8")
    mine = pd.DataFrame({"vc": jobs["vc"].reindex(att["jobid"]).astype(str).to_numpy(), "bucket": bucket,
                         "minutes": np.maximum(wait, 0) / 60})
    mine = mine[mine["minutes"] > 0]
    keys = {}
    for (vc, b), part in mine.groupby(["vc", "bucket"]):
        curve = table[(table["vc"] == vc) & (table["bucket"] == b) & table["flag"].isin(["observed", "interpolated"])]
        if len(part) < 100 or curve.empty:
            continue
        x = part["minutes"].to_numpy()
        gaps = []
        for point in curve.itertuples():
            # the point's pixel column, one more either side on the log axis
            left, right = point.x_left ** 2 / point.x_right, point.x_right ** 2 / point.x_left
            upto, below = (x <= right).mean(), (x < left).mean()
            gaps.append(max(0.0, point.cdf_low / 100 - upto, below - point.cdf_high / 100))
        keys[f"{vc}.{b.replace('>8', 'gt8')}"] = max(gaps)
    assert r["validation.fig3.cells"] == len(keys)
    for key, ks in keys.items():
        assert r[f"validation.fig3.{key}.ks"] == pytest.approx(ks, abs=1e-9), key
    assert r["validation.fig3.median_ks"] == pytest.approx(np.median(list(keys.values())), abs=1e-9)
    assert r["validation.fig3.max_ks"] == pytest.approx(max(keys.values()), abs=1e-9)


@pytest.mark.notebook
def test_replay_exports_are_the_replays_attempts_and_minutes(doc, rerun):
    out = doc["folder"]
    attempts = pd.read_parquet(out / "replay_attempts.parquet")
    minutes = pd.read_parquet(out / "replay_minutes.parquet")
    rep = rerun["rep"]
    assert len(attempts) == len(rep.result.attempts) == doc["results"]["export.attempts_rows"]
    assert len(minutes) == len(rep.result.timeseries) == doc["results"]["export.minutes_rows"]
    # the real submit is before the overhead the replay adds: submit + overhead = the replay's arrival
    jobs = rep.result.jobs.set_index("jobid")
    first = attempts[attempts["attempt"] == 0].set_index("jobid")
    arrival = jobs["submitted"].reindex(first.index)
    latency = pd.Series(rep.latency_s, index=rep.result.jobs["jobid"]).reindex(first.index)
    assert ((arrival - first["submitted"]).dt.total_seconds() - latency).abs().max() < 1e-3
    assert (minutes["busy_servers"] <= minutes["servers_in_service"]).all()
    assert (minutes["allocated_gpus"] <= minutes["gpus_in_service"]).all()


@pytest.mark.notebook
def test_the_held_out_figures_carry_the_objective_the_sensitivity_reuses(rerun):
    """The ablation's rows give the sensitivity analysis their objective (``evaluation``): the objective of
    :func:`evaluate` exactly, and the objective by hand."""
    from dlcluster.validation import heldout, measures
    pub, waits, rep, held = rerun["pub"], rerun["waits"], rerun["rep"], rerun["span"]["held_out"]
    figures = heldout.held_out_figures(rep, pub.occupancy, waits, held, pub.cluster_gpu_util_cdf)
    assert figures["evaluation"] == measures.evaluate(rep, pub.occupancy, waits, held, pub.cluster_gpu_util_cdf)
    assert figures["evaluation"].objective == pytest.approx(objective_by_hand(rep, pub, waits, held), rel=1e-9)
    assert figures["evaluation"].violation == pytest.approx(violation_by_hand(rep, waits, held), abs=1e-9)
    assert "evaluation" not in heldout.held_out_figures(rep, pub.occupancy, waits, held)   # no allocation bound given
