"""Notebook 05 under params/ci.yaml (the small grid, two seeds): its results, figures and comparisons."""

import pytest

STEM = "06-design-implications"


@pytest.mark.notebook
def test_small_grid_results(ci_notebook):
    doc = ci_notebook(STEM)
    assert doc["params"]["grid"] == "small" and doc["params"]["seeds"] == [0, 1]
    r = doc["results"]
    assert r["jobs_replayed"] == 3000
    assert 0.5 < r["real_occupancy"] < 0.9
    assert 1 < r["load.calibrated_factor"] <= 8
    # small grid, 2 seeds: locality 10, interference 10, failures 8, early stop 4, policies 3 x 2 loads x 2 = 12
    assert r["sweep.cells"] == 44
    wasted = [v for k, v in r.items() if k.endswith("wasted_share")]
    assert len(wasted) == 3 and all(0 <= v <= 1 for v in wasted)
    saved = [v for k, v in r.items() if k.endswith("gpu_hours_saved")]
    assert len(saved) == 1 and 0 < saved[0] <= 1
    assert all(0 <= v <= 0.01 for k, v in r.items() if k.endswith("quality_lost"))


@pytest.mark.notebook
def test_small_grid_figures_and_comparisons(ci_notebook):
    doc = ci_notebook(STEM)
    assert {f["name"] for f in doc["figures"]} == {"calibration", "1_locality", "2_interference", "3_failures",
                                                     "4_early_termination", "5_policies"}
    assert all("simulated replay of the real Pollux workload" in f["data"] for f in doc["figures"])
    keys = [c["key"] for c in doc["comparisons"]]
    assert keys == ["implications.locality", "implications.interference", "implications.failures",
                    "epochs.last_band_gpu_time_passed_pct", None]
    assert all(c["ours"] and "simulated replay" in c["data"] for c in doc["comparisons"])
    assert "the load calibrated to the real occupancy" in doc["comparisons"][0]["ours"]
