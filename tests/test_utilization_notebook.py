"""Runs notebooks/02-utilization-colocation.ipynb under params/ci.yaml and checks its results.json."""


import numpy as np
import pandas as pd
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


@pytest.fixture(scope="module")
def job_minutes(public_trace):
    """The public per-GPU minutes that are a job's, by a second route: minutes 0-3 after start (the DRE windows
    also hold -10..-1), utilization known, and the GPU in the job's placement; with the job's size."""
    util = public_trace.gpu_util
    util = util[(util["minute"] >= 0) & util["util"].notna()]
    placed = public_trace.placements[["jobid", "machine", "gpu"]].drop_duplicates()
    sizes = public_trace.jobs.drop_duplicates("jobid")[["jobid", "num_gpus"]]
    return util.merge(placed, on=["jobid", "machine", "gpu"]).merge(sizes, on="jobid")


@pytest.mark.notebook
def test_table3_recomputed_from_the_utilization_minutes(results, job_minutes):
    r = results["results"]
    assert results["params"]["trace"] == "public"
    # Table 3 weighs every GPU-minute alike: the plain mean of the job's minutes of each size
    for size in (4, 8, 16):
        expected = job_minutes.loc[job_minutes["num_gpus"] == size, "util"].mean()
        assert r[f"util.table3.{size}gpu"] == pytest.approx(expected, rel=1e-9), size
    assert r["util.table3.all"] == pytest.approx(job_minutes["util"].mean(), rel=1e-9)
    assert r["util.mean_in_use"] == pytest.approx(job_minutes["util"].mean(), rel=1e-9)
    assert r["util.wasted_cycles_pct"] == pytest.approx(100 - job_minutes["util"].mean(), rel=1e-9)
    # the job-weighted variant: the mean of each job's own mean
    assert r["util.table3_job_weighted.all"] == pytest.approx(job_minutes.groupby("jobid")["util"].mean().mean(),
                                                              rel=1e-9)
    # today's values on the embedded data (8-GPU jobs highest, 16-GPU lowest)
    assert [round(r[f"util.table3.{k}"], 4) for k in ("4gpu", "8gpu", "16gpu", "all")] == [43.2057, 46.6533, 39.0879,
                                                                                          42.4526]
    # the public data holds no 1-GPU job: the value is missing, not invented
    assert r["util.table3.1gpu"] is None and r["util.table3_job_weighted.1gpu"] is None   # null: no 1-GPU job, not NaN
    # counts on fixed data: 158,904 GPU-minutes of 5,838 jobs; a job contributes at most minutes 0-3
    assert r["util.gpu_minutes"] == len(job_minutes) == 158904
    assert r["util.jobs_with_samples"] == job_minutes["jobid"].nunique() == 5838
    assert r["util.minutes_per_job.median"] == job_minutes.groupby("jobid")["minute"].nunique().median() == 4.0


@pytest.mark.notebook
def test_table3_comparisons_name_only_published_keys(results):
    keys = {c["what"]: c["key"] for c in results["comparisons"] if c["what"].startswith("Table 3")}
    assert keys["Table 3 mean GPU utilization, 8 GPU jobs"] is None  # the paper publishes no 8-GPU value
    assert keys["Table 3 mean GPU utilization, 16 GPU jobs"] == "util.table3.16gpu"
    assert keys["Table 3, all jobs"] == "util.table3.all"


@pytest.mark.notebook
def test_figure6_cluster_and_table4_recomputed(results, job_minutes, public_trace):
    r = results["results"]
    # Figure 6: attempts that hold every GPU of each of their servers, 8 GPUs on one server or 16 on two
    per_server = (public_trace.placements.groupby(["jobid", "attempt", "machine"]).size().rename("used").reset_index()
                  .merge(public_trace.machines[["machine", "num_gpus"]], on="machine", how="left"))
    per_server["whole"] = per_server["used"] == per_server["num_gpus"]
    attempts = per_server.groupby(["jobid", "attempt"]).agg(gpus=("used", "sum"), whole=("whole", "all")).reset_index()
    dedicated = attempts[attempts["whole"] & attempts["gpus"].isin([8, 16])][["jobid", "gpus"]]
    assert dedicated["gpus"].value_counts().to_dict() == {8: 1832, 16: 182}
    gpu = job_minutes.merge(dedicated, on="jobid")
    host = public_trace.host_util[public_trace.host_util["minute"] >= 0].merge(
        public_trace.placements[["jobid", "machine"]].drop_duplicates(), on=["jobid", "machine"]
    ).merge(dedicated, on="jobid")
    for size in (8, 16):
        assert r[f"util.dedicated.{size}gpu.gpu_util_mean"] == pytest.approx(
            gpu.loc[gpu["gpus"] == size, "util"].mean(), rel=1e-9)
        for name in ("cpu_util", "mem_util"):
            assert r[f"util.dedicated.{size}gpu.{name}_mean"] == pytest.approx(
                host.loc[host["gpus"] == size, name].dropna().mean(), rel=1e-9)
    # the finding: 16-GPU jobs on two dedicated servers use their GPUs less than 8-GPU jobs on one
    assert r["util.dedicated.16gpu.gpu_util_mean"] < r["util.dedicated.8gpu.gpu_util_mean"]
    # the published whole-cluster quantiles: mean = sum of value x probability step; the step CDF beside ours
    cdf = public_trace.cluster_gpu_util_cdf.sort_values(["cdf_percent", "gpu_util_percent"])
    steps = np.diff(cdf["cdf_percent"].to_numpy(), prepend=0.0)
    assert r["util.cluster.published_cdf_mean"] == pytest.approx(
        (cdf["gpu_util_percent"] * steps).sum() / steps.sum(), rel=1e-9)
    grid = np.linspace(0, 100, 201)
    ours = 100 * np.searchsorted(np.sort(job_minutes["util"].to_numpy()), grid, side="right") / len(job_minutes)
    published = [cdf.loc[cdf["gpu_util_percent"] <= x, "cdf_percent"].max() if (cdf["gpu_util_percent"] <= x).any()
                 else 0.0 for x in grid]
    assert r["util.cluster.max_cdf_gap"] == pytest.approx(np.abs(ours - published).max(), rel=1e-9)
    assert r["util.cluster.published_cdf_zero_pct"] == published[0] == pytest.approx(32.2322)
    # (b) the benchmark: per round, alone's images/s over a colocated process's, median over the 5 rounds
    bench = pd.read_csv(repo_root() / results["params"]["colocation_csv"])
    ok = bench[bench["status"] == "ok"].assign(
        per_process=lambda d: d["images_per_s_per_job"] / d["processes_per_job"])
    alone = ok[ok["config"] == "alone"].set_index("repeat")["per_process"]
    for config in ("colocated_gpu2", "colocated_gpu3", "dataparallel", "dataparallel_colocated"):
        rows = ok[ok["config"] == config]
        assert r[f"bench.{config}.slowdown_vs_alone"] == pytest.approx(
            (rows["repeat"].map(alone) / rows["per_process"]).median(), rel=1e-9), config
    # more processes sharing the CPU, each slower
    assert 1 < r["bench.colocated_gpu2.slowdown_vs_alone"] < r["bench.colocated_gpu3.slowdown_vs_alone"]
    # (c) spread placements: step time / the one-server step time of the same model, GPUs and per-GPU batch
    # (repeats averaged first), median per model, then the median of the six models
    per_model, ratios = {}, {}
    for file in sorted((repo_root() / "data" / "external" / "learning_curves").glob("*/placements.csv")):
        table = pd.read_csv(file, dtype={"placement": str})
        table["gpus"] = table["placement"].map(lambda p: sum(map(int, p)))
        mean = table.groupby(["placement", "gpus", "local_bsz"], as_index=False)["step_time"].mean()
        one = mean[mean["placement"].str.len() == 1].set_index(["gpus", "local_bsz"])["step_time"]
        spread = mean[mean["placement"].str.len() > 1]
        base = one.reindex(pd.MultiIndex.from_frame(spread[["gpus", "local_bsz"]])).to_numpy()
        per_model[file.parent.name] = np.nanmedian(spread["step_time"].to_numpy() / base)
        # the simulator's spread factor: one-server / spread step time, repeats not averaged
        single = table[table["placement"].str.len() == 1].groupby(["gpus", "local_bsz"])["step_time"].mean()
        multi = table[table["placement"].str.len() > 1]
        ratios[file.parent.name] = np.nanmedian(
            single.reindex(pd.MultiIndex.from_frame(multi[["gpus", "local_bsz"]])).to_numpy() / multi["step_time"])
    for model, median in per_model.items():
        assert r[f"placement.spread_slowdown_median.{model}"] == pytest.approx(median, rel=1e-9), model
        assert median > 1, model  # every model steps slower spread over servers
    assert r["placement.spread_slowdown_median.all"] == pytest.approx(np.median(list(per_model.values())), rel=1e-9)
    # the simulator's spread factor is fitted to these measurements, the median over the six models; colocation
    # is measured by no data here, so the default model assumes none
    assert r["slowdown_model.spread"] == pytest.approx(np.median(list(ratios.values())), rel=1e-9)
    assert r["slowdown_model.spread_resnet50"] == pytest.approx(1 / per_model["imagenet"], rel=1e-9)
    assert r["slowdown_model.colocated"] == 1.0
    names = {f["name"] for f in results["figures"]}
    assert names == {"fig5_gpu_util_cdf", "fig6_dedicated_8_vs_16", "cluster_gpu_util_cdf",
                     "table4b_benchmark_slowdown", "table4c_placement_slowdown", "slowdown_model",
                     "fig5_vs_full_trace", "fig6_fig7_vs_full_trace"}
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


@pytest.mark.notebook
def test_figures5_to_7_held_against_the_full_trace(results, job_minutes, public_trace):
    """Each curve of ours beside the full trace's own (the official notebook's, digitized): KS recomputed from the
    minutes by a second route, the digitized means, and the paper's Table 3 between the statuses' means."""
    from dlcluster.sources.official import curves, load_official

    r = results["results"]
    tables = load_official()
    points, summary = tables["cdf_points"], tables["cdf_summary"].set_index(["figure", "panel", "series"])
    status = public_trace.jobs.drop_duplicates("jobid").set_index("jobid")["status"]
    minutes = job_minutes.assign(status=job_minutes["jobid"].map(status))
    for size in (4, 8, 16):
        ours = minutes.loc[(minutes["status"] == "Pass") & (minutes["num_gpus"] == size), "util"]
        curve = points[(points["figure"] == 5) & (points["panel"] == "pass") & (points["series"] == str(size))]
        assert r[f"official.fig5.pass.{size}.ks_dre"] == pytest.approx(curves.ks_distance(curve, ours)[0], abs=1e-9)
        assert r[f"official.fig5.pass.{size}.mean"] == pytest.approx(summary.loc[(5, "pass", str(size)), "mean"])
    # no 1-GPU and no killed job in the public samples: the full trace is the only data there
    assert r["official.fig5.pass.1.verdict"] == r["official.fig5.killed.8.verdict"] == "not comparable"
    assert r["official.fig5.pass.1.ks_dre"] is None
    # minutes 0-3 after start are another selection than every minute of every attempt: not comparable, whatever
    # the distance, on a thousand jobs as on none
    assert r["official.fig5.pass.4.n"] > 1000 and r["official.fig5.pass.4.verdict"] == "not comparable"
    assert "Another selection: ours is minutes 0-3 after each DRE record's" in r["official.fig5.pass.4.detail"]
    # a mean over all statuses lies between the statuses' means: the paper's Table 3 does, for 1, 4 and 16 GPUs
    assert all(r[f"official.table3.{size}gpu.consistent"] for size in (1, 4, 16))
    for name in ("cpu", "memory"):
        assert 0 <= r[f"official.fig7.{name}.mean"] <= 100
        # DRE's servers around its records' starts, not every server's every minute: another selection
        assert r[f"official.fig7.{name}.verdict"] == "not comparable"
        assert "another selection: ours is the dre records' servers" in r[f"official.fig7.{name}.detail"].lower()
    # the full trace's servers used most of their memory; DRE's memory series does not measure that
    assert r["official.fig7.memory.mean"] > 80 and r["official.fig7.memory.ks_dre"] > 50
    assert r["official.fig6.16.mean"] < r["official.fig6.8.mean"]
