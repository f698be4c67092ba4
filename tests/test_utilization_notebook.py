"""Runs notebooks/02-utilization-colocation.ipynb under params/ci.yaml and checks its results.json."""

import pytest

from dlcluster.paths import repo_root
from dlcluster.report import read_results_json

STEM = "02-utilization-colocation"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from dlcluster.report.runner import execute_notebook, read_params

    out = tmp_path_factory.mktemp("nb")
    params = read_params(repo_root() / "params" / "ci.yaml")
    execute_notebook(repo_root() / "notebooks" / f"{STEM}.ipynb", out, params, html=False)
    doc = read_results_json(out / STEM / "results.json")
    doc["out"] = out / STEM
    return doc


@pytest.mark.notebook
def test_table3_keys_and_ranges(results):
    r = results["results"]
    for key in ("util.table3.1gpu", "util.table3.4gpu", "util.table3.8gpu", "util.table3.16gpu", "util.table3.all",
                "util.mean_in_use", "util.wasted_cycles_pct"):
        assert key in r, key
    for key in ("util.table3.4gpu", "util.table3.8gpu", "util.table3.16gpu", "util.table3.all"):
        assert 0 < r[key] < 100, key
    # the public data holds no 1-GPU job: the value is missing, not invented
    if results["params"]["trace"] == "public":
        assert r["util.table3.1gpu"] is None and r["util.table3_job_weighted.1gpu"] is None
        assert 1 <= r["util.minutes_per_job.median"] <= 4
    assert r["util.wasted_cycles_pct"] == pytest.approx(100 - r["util.mean_in_use"])
    assert r["util.gpu_minutes"] > 0 and r["util.jobs_with_samples"] > 0


@pytest.mark.notebook
def test_table3_comparisons_name_only_published_keys(results):
    keys = {c["what"]: c["key"] for c in results["comparisons"] if c["what"].startswith("Table 3")}
    assert keys["Table 3 mean GPU utilization, 8 GPU jobs"] is None  # the paper publishes no 8-GPU value
    assert keys["Table 3 mean GPU utilization, 16 GPU jobs"] == "util.table3.16gpu"
    assert keys["Table 3, all jobs"] == "util.table3.all"


@pytest.mark.notebook
def test_figure6_cluster_and_table4_keys(results):
    r = results["results"]
    for size in (8, 16):
        for name in ("gpu_util", "cpu_util", "mem_util"):
            assert 0 <= r[f"util.dedicated.{size}gpu.{name}_mean"] <= 100
    assert 0 < r["util.cluster.published_cdf_mean"] < 100
    assert 0 <= r["util.cluster.max_cdf_gap"] <= 100
    assert r["bench.alone.slowdown_vs_alone"] == pytest.approx(1.0)
    assert 1 < r["placement.spread_slowdown_median.all"] < 4
    assert 0 < r["slowdown_model.cross_rack"] <= 1
    names = {f["name"] for f in results["figures"]}
    assert names == {"fig5_gpu_util_cdf", "fig6_dedicated_8_vs_16", "cluster_gpu_util_cdf",
                     "table4b_benchmark_slowdown", "table4c_placement_slowdown", "slowdown_model"}
    for figure in results["figures"]:
        assert (results["out"] / figure["path"]).stat().st_size > 10_000


@pytest.mark.notebook
def test_full_trace_path_on_the_raw_format_fixture(tmp_path):
    """The absolute-time path of the notebook on tests/fixtures/raw_small, with hand-computed answers."""
    import papermill as pm

    out = tmp_path / "raw"
    pm.execute_notebook(str(repo_root() / "notebooks" / f"{STEM}.ipynb"), str(tmp_path / "out.ipynb"),
                        parameters={"trace": str(repo_root() / "tests" / "fixtures" / "raw_small"),
                                    "output_dir": str(out)},
                        kernel_name="python3", cwd=str(repo_root()), progress_bar=False)
    r = read_results_json(out / "results.json")["results"]
    # job 0001 (4 GPUs): 10, 20, 30, 40 on m1 and 50, 60 on m2; job 0006 (1 GPU): 11 and 22
    assert r["util.table3.4gpu"] == pytest.approx(35.0)
    assert r["util.table3.1gpu"] == pytest.approx(16.5)
    assert r["util.table3.all"] == pytest.approx((6 * 35.0 + 2 * 16.5) / 8)
    assert r["util.table3_job_weighted.all"] == pytest.approx((35.0 + 16.5) / 2)
    assert r["util.gpu_minutes"] == 8 and r["util.jobs_with_samples"] == 2
    assert r["util.table3.16gpu"] is None
    # every non-NA GPU-minute of the fixture, idle GPUs included
    assert r["util.cluster.ours_mean"] == pytest.approx(604 / 28)
