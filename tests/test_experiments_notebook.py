"""Notebook 06 under params/ci.yaml (the small grid, two seeds): its results, figures and comparisons."""

import pytest

STEM = "06-design-implications"


@pytest.mark.notebook
def test_small_grid_results(ci_notebook):
    doc = ci_notebook(STEM)
    assert doc["params"]["grid"] == "small" and doc["params"]["seeds"] == [0, 1]
    r = doc["results"]
    # the validated replay: every RFold job, two 1-day windows of the held-out span measured
    assert r["jobs_replayed"] == 111549 and 1000 < r["jobs_measured"] < 20000
    assert 0.5 < r["real_occupancy"] < 1
    assert 0 < r["validation.heldout.occupancy_mae_pp"] < 50 and r["validation.heldout.max_median_ratio"] >= 1
    assert 0 <= r["validation.heldout.max_ks"] <= 1
    assert 0.3 < r["load.real.busy_server_share"] <= 1
    assert "load.calibrated_factor" not in r
    # small grid, 2 seeds: locality 12 (strict, any, relax 60 s and 180 s, long jobs strict or migrated),
    # interference 10, failures 8, early stop 4, policies 3 x 2 loads x 2 = 12
    assert r["sweep.cells"] == 46
    wasted = [v for k, v in r.items() if k.endswith("wasted_share")]
    assert len(wasted) == 3 and all(0 <= v <= 1 for v in wasted)
    assert all(k.startswith(("failures.real.", "early_stop.real.", "locality.real.")) for k in r
               if k.startswith(("failures.", "early_stop.", "locality.")))
    saved = [v for k, v in r.items() if k.endswith("gpu_hours_saved")]
    assert len(saved) == 1 and 0 < saved[0] <= 1
    assert all(0 <= v <= 0.01 for k, v in r.items() if k.endswith("quality_lost"))
    assert "x1.25" in r["sensitivity.policies"] and "real load" not in r["sensitivity.policies"]


@pytest.mark.notebook
def test_small_grid_figures_and_comparisons(ci_notebook):
    doc = ci_notebook(STEM)
    assert {f["name"] for f in doc["figures"]} == {"1_locality", "2_interference", "3_failures",
                                                     "4_early_termination", "5_policies",
                                                     "5_policies_load_sensitivity"}
    assert all("simulated replay of the validated RFold workload" in f["data"]
               and "held-out occupancy MAE" in f["data"] for f in doc["figures"])
    keys = [c["key"] for c in doc["comparisons"]]
    assert keys == ["implications.locality", "implications.interference", "implications.failures",
                    "epochs.last_band_gpu_time_passed_pct", None]
    assert all(c["ours"] and "simulated replay" in c["data"] for c in doc["comparisons"])
    assert "the real load (x1)" in doc["comparisons"][0]["ours"]
    assert "x1.25" not in doc["comparisons"][4]["ours"]
