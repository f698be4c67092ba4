"""Runs notebooks/03-epoch-effectiveness.ipynb (params/ci.yaml, and with a user CSV log) and checks results.json."""

import pytest

from dlcluster.paths import repo_root
from dlcluster.report import read_results_json

STEM = "03-epoch-effectiveness"
PERCENT_KEYS = ("need_all_epochs_pct", "mean_last_band_time_pct", "median_epochs_to_within_tol_pct",
                "within_tol_by_40pct_of_epochs_pct")


@pytest.mark.notebook
def test_results_keys_and_ranges_under_ci_params(ci_notebook):
    doc = ci_notebook(STEM)
    r, params = doc["results"], doc["params"]
    assert r["epochs.tolerance"] == params["tolerance"]
    for group in ("pollux", "corpus.passed", "corpus.killed"):
        for key in PERCENT_KEYS:
            assert 0 <= r[f"epochs.{group}.{key}"] <= 100, (group, key)
    max_runs = params["max_runs"]
    if max_runs is None or max_runs >= 40:
        # all 40 Pollux curves: the 6 two-epoch BERT runs, cifar10/bsz512 and yolov3/bsz256 peak at their last epoch
        assert r["epochs.pollux.curves"] == 40
        assert r["epochs.pollux.need_all_epochs_pct"] == pytest.approx(100 * 8 / 40)
    if max_runs is not None:
        assert r["epochs.corpus.curves"] <= max_runs
    assert {f["name"] for f in doc["figures"]} == {"pollux_curves", "gap_to_best", "cdf_epochs_and_time",
                                                   "tolerance_sweep", "early_stopping"}
    assert all("Pollux" in f["data"] or "this project" in f["data"] for f in doc["figures"])


@pytest.mark.notebook
def test_notebook_takes_a_users_csv_log(tmp_path):
    from dlcluster.report.runner import execute_notebook

    log = tmp_path / "my_run.csv"
    # best (0.2) at the last epoch; within 0.1% of it (<= 0.2002) first at epoch 4 of 5
    log.write_text("epoch,loss\n1,1.0\n2,0.5\n3,0.3\n4,0.2001\n5,0.2\n")
    params = {"trace": "public", "seed": 0, "curve_sources": ["pollux", f"csv:{log}"],
              "patience_values": [2], "tolerance_grid": [0.001, 0.01]}
    execute_notebook(repo_root() / "notebooks" / f"{STEM}.ipynb", tmp_path / "out", params, html=False)
    doc = read_results_json(tmp_path / "out" / STEM / "results.json")
    r = doc["results"]
    assert r["epochs.pollux.curves"] == 40 and "epochs.corpus.curves" not in r
    assert r["epochs.user.curves"] == 1
    assert r["epochs.user.need_all_epochs_pct"] == 100.0
    assert r["epochs.user.median_epochs_to_within_tol_pct"] == pytest.approx(80.0)
    assert r["epochs.user.mean_last_band_time_pct"] == pytest.approx(20.0)  # no seconds logged: equal epochs
    assert any(str(log) in f["data"] for f in doc["figures"])
