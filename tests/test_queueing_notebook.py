"""notebooks/01-locality-queueing.ipynb runs with small parameters and writes sane results.

Run through papermill (slow): once on the embedded public data, once on a
simulated run written in the raw Philly format, which takes the trace-based
Table 2 path that the full trace takes.
"""

import math
from pathlib import Path

import pytest

from dlcluster.paths import repo_root
from dlcluster.report import read_results_json

NOTEBOOK = repo_root() / "notebooks" / "01-locality-queueing.ipynb"
SMALL = {"sim_max_jobs": 20000, "agreement_max_jobs": 4000}
BUCKETS = ("1", "2-4", "5-8", "gt8")


def run_notebook(tmp_path: Path, **params) -> dict:
    import papermill as pm

    out = tmp_path / "out"
    pm.execute_notebook(str(NOTEBOOK), str(tmp_path / "executed.ipynb"), parameters={"output_dir": str(out), **params},
                        cwd=str(repo_root()), progress_bar=False, kernel_name="python3")
    doc = read_results_json(out / "results.json")
    for fig in doc["figures"]:
        assert (out / fig["path"]).stat().st_size > 10_000, fig
        assert fig["data"], fig
    return doc["results"]


def check_table2(results: dict, source: str) -> None:
    present = [b for b in BUCKETS if f"table2.{source}.{b}.waits" in results]
    assert present, f"no Table 2 rows for {source}"
    for b in present:
        shares = [results.get(f"table2.{source}.{b}.{c}_share") for c in ("fair_share", "fragmentation", "other")]
        defined = [s for s in shares if s is not None]
        if results[f"table2.{source}.{b}.wait_h"] > 0:
            assert all(0 <= s <= 1 for s in defined)
            assert math.isclose(sum(defined), 1.0, abs_tol=1e-6)
        else:
            assert not defined  # no waiting time: shares undefined, not 0


@pytest.mark.notebook
def test_notebook_on_public_data(tmp_path):
    r = run_notebook(tmp_path, trace="public", **SMALL)
    # the public waits are those of the 5,910 DRE records: multi-GPU only
    assert r["queueing.waits_total"] == 5910
    assert "queueing.median_s.1" not in r
    for b in ("2-4", "5-8", "gt8"):
        assert 0 < r[f"queueing.median_s.{b}"] <= r[f"queueing.p90_s.{b}"]
    for b in ("5-8", "gt8"):
        assert r[f"fig4.slope_ci_low.{b}"] <= r[f"fig4.slope_log10_per_server.{b}"] <= r[f"fig4.slope_ci_high.{b}"]
        assert 0 <= r[f"fig4.p_negative.{b}"] <= 1 and 0 <= r[f"fig4.median_p_negative.{b}"] <= 1
        assert isinstance(r[f"fig4.supports_claim.{b}"], bool)
    # Figure 4's input: every job of the public data (82,247 Pollux + 5,910 DRE) kept or counted by reason
    left_out = {k.removeprefix("fig4.left_out."): v for k, v in r.items() if k.startswith("fig4.left_out.")}
    assert r["fig4.jobs_read"] == 82247 + 5910 == r["fig4.jobs_kept"] + sum(left_out.values())
    assert r["fig4.jobs_kept"] == r["fig4.jobs.5-8"] + r["fig4.jobs.gt8"]
    assert left_out["servers_of_the_first_attempt_unknown"] > 0  # 5+ GPU Pollux jobs: no placement published
    assert set(left_out) == {"servers_of_the_first_attempt_unknown", "job_size_outside_the_buckets_studied"}
    check_table2(r, "simulator")
    assert "table2.trace.5-8.waits" not in r  # the public data cannot rebuild the cluster
    for text in ("queueing.causes", "queueing.table2_finding", "queueing.fig4_finding"):
        assert isinstance(r[text], str) and len(r[text]) > 20
    # the trace-based attribution recovers the simulator's causes from a written raw trace
    assert r["agreement.philly.per_job"] > 0.99 and r["agreement.strict.per_job"] > 0.99
    assert 0 <= r["replay.busy_servers_share"] <= 1 and 0 < r["replay.real_busy_servers_share"] <= 1
    for b in ("2-4", "5-8", "gt8"):
        assert r[f"real_vs_sim.{b}.real_n"] > 0 and r[f"real_vs_sim.{b}.simulated_n"] > 0
        assert 0 <= r[f"real_vs_sim.{b}.ks_statistic"] <= 1


@pytest.mark.notebook
def test_notebook_on_a_raw_format_directory(tmp_path):
    from dlcluster.validation.replay import replay_public_workload
    from dlcluster.sim import write_raw_trace
    from dlcluster.trace import load_trace

    public = load_trace("public")
    run = replay_public_workload(public, max_jobs=3000, start=public.jobs_of("dre")["submitted"].min(), racks=6)
    raw = write_raw_trace(run.result, tmp_path / "raw", util_hours=0)
    r = run_notebook(tmp_path, trace=str(raw), **SMALL)
    assert r["queueing.waits_total"] == 3000  # one wait per job: the replay has no failures
    assert "queueing.median_s.1" in r
    check_table2(r, "trace")
    check_table2(r, "simulator")
    assert 0 <= r["table2.trace.max_time_over_quota"] <= 1
