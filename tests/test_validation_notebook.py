"""notebooks/05-simulator-validation.ipynb runs with params/ci.yaml (a shorter replay) and writes sane results."""

import math

import pytest


@pytest.mark.notebook
def test_validation_notebook_results(ci_notebook):
    doc = ci_notebook("05-simulator-validation")
    r = doc["results"]
    # the job-set evidence does not depend on the parameters: Pollux holds passed jobs, RFold both statuses
    assert r["jobsets.dre_found.Pollux.Pass"] > 0.9 and r["jobsets.dre_found.Pollux.Failed"] < 0.05
    assert r["jobsets.dre_found.RFold.Pass"] > 0.99 and r["jobsets.dre_found.RFold.Failed"] > 0.99
    assert r["alignment.offsets_are_wallclock"] is True
    assert r["alignment.origin_local"] == "2017-08-14 23:27:00"
    assert r["jobsets.pollux_in_rfold"] == 1.0
    assert r["demand.mean.RFold_gpu_share"] > 3 * r["demand.mean.Pollux_gpu_share"]
    # the workload: every VC source counted, shares add up
    shares = [r[f"workload.vc_source.{s}"] for s in ("dre_record", "pollux_match", "drawn")]
    assert math.isclose(sum(shares), 1.0) and all(s > 0 for s in shares)
    # calibration ran the grid of params/ci.yaml (relax after 60 and 180 s) and picked one of its values
    assert r["calibration.simulations"] == 2 and r["calibrated.relax_after_s"] in (60, 180)
    # the scheduler latency fitted first, on the fit span's real waits: a fast mode and a slower one, for all sizes
    # and for the 2-4 GPU bucket (which has most records)
    for bucket in ("all", "2-4"):
        assert 0 < r[f"calibrated.latency.{bucket}.fast_share"] < 1
        assert r[f"calibrated.latency.{bucket}.fast_median_s"] < r[f"calibrated.latency.{bucket}.slow_median_s"]
    # the mixture refitted on each span; a bucket with fewer than 20 real waits in a span has no fit: null, not NaN
    # (params/ci.yaml's 12-day replay leaves the held-out span too few >8-GPU waits)
    assert r["heldout.fast_share.>8.held_out"] is None and 0 < r["heldout.fast_share.>8.fit"] < 1
    assert all(0 < r[f"heldout.fast_share.{b}.{span}"] < 1 for b in ("all", "2-4") for span in ("fit", "held_out"))
    # held-out figures exist, are finite and within their ranges
    assert 0 <= r["heldout.occupancy_mae_pp"] <= 100
    for bucket in ("2-4", "5-8", ">8"):
        assert r[f"heldout.delay.{bucket}.real_median_s"] <= r[f"heldout.delay.{bucket}.real_p90_s"]
        assert 0 <= r[f"heldout.delay.{bucket}.ks_statistic"] <= 1
    ks = [v for k, v in r.items() if k.startswith("heldout.ks.")]
    assert len(ks) == 5 and max(ks) == r["heldout.max_ks"]
    assert r["heldout.gap_minutes"] == 1131
    # the ablation rows asked for in params/ci.yaml, beside the calibrated replay
    for key in ("calibrated", "cold_start", "Pollux_workload"):
        assert 0 <= r[f"ablation.{key}.occupancy_mae_pp"] <= 100
    assert r["ablation.calibrated.occupancy_mae_pp"] == r["heldout.occupancy_mae_pp"]
    assert {f["name"] for f in doc["figures"]} == {"demand_vs_occupancy", "latency_fit", "occupancy_replay_vs_real",
                                                  "fig3_vc_cdfs_replay_vs_real", "table2_validated_replay",
                                                  "peer_complete_log_per_vc"}
    # Table 2 shares of the calibrated replay add up per bucket; the scorecard counts the targets met
    for b in ("2-4", "5-8", "gt8"):
        assert math.isclose(sum(r[f"table2.replay.{b}.{c}_share"] for c in ("fair_share", "fragmentation", "other")), 1.0)
    assert 0 <= r["heldout.targets_met"] <= 4 and r["heldout.verdict"].startswith(f"{r['heldout.targets_met']} of 4")
    # the workload in Helios's complete-log window: Helios's published means are the denominators
    assert math.isclose(r["peer_complete_log.fifo.queue_s"] / r["peer_complete_log.fifo.queue_ratio"], 56531)
    assert math.isclose(r["peer_complete_log.sjf.jct_s"] / r["peer_complete_log.sjf.jct_ratio"], 34272)
    assert all(f["data"] for f in doc["figures"])
    assert any("SIMULATED" in f["data"] for f in doc["figures"])
    assert {c["key"] for c in doc["comparisons"]} >= {"failures.unsuccessful_jobs_pct",
                                                      "failures.unsuccessful_gpu_time_pct"}
