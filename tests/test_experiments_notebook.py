"""Notebook 05 run end to end on the small grid: its results, figures, sweep table, cache and comparisons."""

import json
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
STEM = "05-design-implications"


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from dlcluster.runner import execute_notebook

    out = tmp_path_factory.mktemp("nb05")
    cache = out / "cache"
    params = {"trace": "public", "seed": 0,
              "notebooks": {STEM: {"grid": "small", "seeds": [0, 1], "cache_dir": str(cache), "n_jobs": 2}}}
    execute_notebook(REPO / "notebooks" / f"{STEM}.ipynb", out, params, html=False, progress=False)
    return out, cache, json.loads((out / STEM / "results.json").read_text())


@pytest.mark.notebook
def test_small_grid_results(small_run):
    out, cache, doc = small_run
    r = doc["results"]
    assert r["jobs_replayed"] == 3000
    assert 0.5 < r["real_occupancy"] < 0.9
    assert 1 < r["load.calibrated_factor"] <= 8
    # small grid, 2 seeds: locality 10, interference 10, failures 8, early stop 4, policies 3 x 2 loads x 2 = 12
    assert r["sweep.cells"] == 44
    assert all(0 <= v <= 1 for k, v in r.items() if k.endswith("wasted_share"))
    assert all(0 < v <= 1 for k, v in r.items() if k.endswith("gpu_hours_saved"))
    assert all(0 <= v <= 0.01 for k, v in r.items() if k.endswith("quality_lost"))
    names = {f["name"] for f in doc["figures"]}
    assert names == {"calibration", "1_locality", "2_interference", "3_failures", "4_early_termination",
                     "5_policies"}
    assert all("simulated replay of the real Pollux workload" in f["data"] for f in doc["figures"])
    assert all((out / STEM / f["path"]).stat().st_size > 10_000 for f in doc["figures"])


@pytest.mark.notebook
def test_small_grid_sweep_table_cache_and_comparisons(small_run):
    out, cache, doc = small_run
    table = pd.read_parquet(out / STEM / "sweep.parquet")
    assert table["cell"].nunique() == 44
    assert set(table["experiment"]) == {"locality", "interference", "failures", "early_stop", "policy"}
    assert len(list(cache.glob("*.parquet"))) == 44 + 4  # experiment cells + 4 calibration loads
    keys = [c["key"] for c in doc["comparisons"]]
    assert keys == ["implications.locality", "implications.interference", "implications.failures",
                    "epochs.last_band_gpu_time_passed_pct", None]
    assert all(c["ours"] and "simulated replay" in c["data"] for c in doc["comparisons"])
    assert "calibrated to the real occupancy" in doc["comparisons"][0]["ours"]
