"""notebooks/04-failures-rtf.ipynb under params/ci.yaml: its key results are those of the library."""

import numpy as np
import pytest

from dlcluster.analysis import failures as F
from dlcluster.analysis.classify import evaluate_classifier, measured_messages
from dlcluster.analysis.fallback import FALLBACK_RULE_ID, FallbackSettings


@pytest.mark.notebook
def test_failures_notebook_results(ci_notebook, public_trace, fallback_cross_validation):
    doc = ci_notebook("04-failures-rtf")
    r = doc["results"]
    dre = public_trace.jobs_of("dre")
    # the public trace's status-bearing jobs are the complete records: Pass/Failed only
    assert r["failures.jobs_with_status"] == len(dre)
    assert r["failures.unsuccessful_jobs_pct"] == pytest.approx(100 * (dre["status"] == "Failed").mean())
    assert r["failures.killed_jobs_pct"] == 0.0
    failed = dre["status"] == "Failed"
    assert r["failures.failed_jobs_pct"] == pytest.approx(100 * 2738 / 5910) and failed.sum() == 2738
    # GPU time = GPUs x run time of the single attempt; the failed jobs' share of it, recomputed
    gpu_time = dre["num_gpus"] * dre["run_time_s"]
    assert r["failures.unsuccessful_gpu_time_pct"] == pytest.approx(100 * gpu_time[failed].sum() / gpu_time.sum(),
                                                                    rel=1e-9)
    # failed jobs hold less of the GPU time (32%) than of the jobs (46%): they fail before running as long
    assert r["failures.unsuccessful_gpu_time_pct"] < r["failures.unsuccessful_jobs_pct"]
    assert r["failures.mean_attempts"] == 1.0 and r["failures.retried_jobs_pct"] == 0.0
    # beside them, each public selection with a label of its own (the same tables as notebook 05's): the DRE records
    # are these; the share of DRE jobs retried, reconstructed from the data, beside the full log's check, quoted
    assert r["failures.dre_records.unsuccessful_jobs_pct"] == r["failures.unsuccessful_jobs_pct"]
    assert r["dre.retried_share.extract"] == pytest.approx(593 / 2521)
    assert r["dre.retried_share.reconstructed"] > r["dre.retried_share.reconstructed_passed"]
    # one attempt per record: the RTF percentiles are those of the failed records' run times (linear interpolation)
    for p in (50, 90, 95):
        assert r[f"failures.rtf_p{p}_s"] == pytest.approx(np.percentile(dre.loc[failed, "run_time_s"], p), rel=1e-9)
    assert r["failures.rtf_p50_s"] >= 300  # the records were selected as jobs that ran 5 minutes or more
    for b, (low, high) in {"2-4": (2, 4), "5-8": (5, 8), "gt8": (9, 10**6)}.items():
        size = dre["num_gpus"].between(low, high)
        assert r[f"failures.failed_pct.{b}"] == pytest.approx(100 * failed[size].mean(), rel=1e-9)
    # the finding: the largest jobs fail most often
    assert r["failures.failed_pct.gt8"] > max(r["failures.failed_pct.2-4"], r["failures.failed_pct.5-8"])
    assert "failures.failed_pct.1" not in r  # no single-GPU job has a status in the public data
    assert r["failures.users.users"] == dre["user"].nunique() == 159
    # a user's next job (by submit time) after a failed one fails 79% of the time, after a passed one 19%
    ordered = dre.sort_values(["user", "submitted", "jobid"])
    previous = (ordered["status"] == "Failed").groupby(ordered["user"]).shift()
    pairs = ordered.assign(previous=previous, failed=ordered["status"] == "Failed")[previous.notna()]
    after_fail = pairs.loc[pairs["previous"].astype(bool), "failed"].mean()
    after_other = pairs.loc[~pairs["previous"].astype(bool), "failed"].mean()
    assert r["failures.users.pairs"] == len(pairs) == 5910 - 159
    assert r["failures.users.p_fail_after_fail_pct"] == pytest.approx(100 * after_fail, rel=1e-9)
    assert r["failures.users.p_fail_after_other_pct"] == pytest.approx(100 * after_other, rel=1e-9)
    # a 60-point difference: none of the 200 seeded permutations reaches it, so p is the smallest possible, 1/201
    n = doc["params"]["n_permutations"]
    assert n == 200
    assert r["failures.users.p_value_within_user"] == pytest.approx(1 / (n + 1))
    assert r["failures.users.p_value_across_users"] == pytest.approx(1 / (n + 1))
    # the default logs are the corpus, every log of which has a known true reason
    assert r["logs.count"] == 49 and r["logs.accuracy_pct"] == 100.0
    # the real user-posted messages: the per-split accuracies recorded are the library's, rules alone
    messages = measured_messages()  # a set not yet measured is evaluated nowhere until its one measurement
    assert r["messages.count"] == len(messages)
    for split, size in (("heldout", 61), ("heldout2", 95), ("heldout3", 102), ("heldout4", 97), ("heldout5", 100),
                        ("heldout6", 100), ("heldout7", 80), ("heldout8", 165), ("heldout9", 165)):
        rules_alone = evaluate_classifier(messages[messages["split"] == split], fallback=False)
        assert r[f"messages.{split}.count"] == len(rules_alone.results) == size
        assert r[f"messages.{split}.accuracy_pct"] == pytest.approx(100 * rules_alone.accuracy)
    assert r["messages.heldout9.accuracy_pct"] == pytest.approx(100 * 134 / 165)  # heldout9's blind measurement, rules
    assert r["messages.tuning.accuracy_pct"] == 100.0
    # rules + fallback, leave-one-split-out with the chosen settings, as the library computes it (the rows of these
    # settings in the cross-validation of the whole grid, the same trainings)
    settings, cv = FallbackSettings(), fallback_cross_validation
    cv = cv[(cv["C"] == settings.C) & (cv["with_corpus"] == settings.with_corpus)
            & (cv["threshold"] == settings.threshold) & (cv["refine"] == settings.refine)]
    assert len(cv) == 10 and set(cv["split"]) == set(messages["split"])
    for row in cv.itertuples():
        assert r[f"messages.{row.split}.fallback_cv.accuracy_pct"] == pytest.approx(
            100 * row.hybrid_correct / row.messages)
    assert r["messages.heldout4.fallback_cv.accuracy_pct"] > r["messages.heldout4.accuracy_pct"]
    # current settings, out of fold
    assert r["messages.heldout9.fallback_cv.accuracy_pct"] == pytest.approx(100 * 148 / 165)
    assert r["messages.heldout9.blind_measurement_pct"] == pytest.approx(100 * 150 / 165)  # its one blind measurement
    hybrid = evaluate_classifier(messages)
    assert r["messages.fallback_decisions"] == (hybrid.results["rule_id"] == FALLBACK_RULE_ID).sum() > 0
    # the second annotator (README, "A second annotator")
    assert r["messages.heldout5.annotator_agreement_pct"] == 96.0
    assert r["messages.heldout6.annotator_agreement_pct"] == 99.0
    assert r["messages.heldout7.annotator_agreement_pct"] == 97.5
    assert r["messages.heldout8.annotator_agreement_pct"] == pytest.approx(100 * 161 / 165)
    assert r["messages.heldout9.annotator_agreement_pct"] == pytest.approx(100 * 164 / 165)
    assert r["messages.heldout9.blind_vs_second_pct"] == pytest.approx(100 * 149 / 165)
    assert r["messages.heldout9.blind_on_agreed_pct"] == pytest.approx(100 * 149 / 164)
    assert r["logs.fallback_pct"] == 0.0  # every corpus log is decided by a rule, or rightly left without signature
    assert r["model.p_job_fails"] == pytest.approx(r["failures.failed_jobs_pct"] / 100)
    assert r["model.classes"] == 18
    assert {f["name"] for f in doc["figures"]} == {"status_shares", "rtf", "failures_by_size", "repeated_failures",
                                                    "failure_reasons", "classifier_by_split"}
    assert r["failures.users.top10pct_users_failure_share_pct"] == pytest.approx(
        F.user_failure_summary(public_trace.jobs)[1]["top10pct_users_failure_share_pct"])


@pytest.mark.notebook
def test_failures_notebook_on_a_raw_trace_without_any_failed_attempt(tmp_path, raw_small):
    """Any raw-format directory works, also one where nothing failed: each section says so instead of crashing."""
    import json
    import shutil

    import papermill as pm

    from dlcluster.paths import repo_root
    from dlcluster.report import read_results_json
    from dlcluster.trace import load_trace

    raw = tmp_path / "raw"
    shutil.copytree(raw_small, raw)
    records = json.loads((raw / "cluster_job_log").read_text())
    for record in records:  # the hand-written trace with every failure taken out: Failed -> Pass, last attempt only
        record["status"] = "Pass" if record["status"] == "Failed" else record["status"]
        record["attempts"] = (record.get("attempts") or [])[-1:]
    (raw / "cluster_job_log").write_text(json.dumps(records))
    before, after = (load_trace(d, with_util=False) for d in (raw_small, raw))
    assert F.attempt_outcomes(before.jobs, before.attempts)[0]["failed"].any()  # the fixture itself has failures
    assert not F.attempt_outcomes(after.jobs, after.attempts)[0]["failed"].any()

    out = tmp_path / "out"
    pm.execute_notebook(str(repo_root() / "notebooks" / "04-failures-rtf.ipynb"), str(tmp_path / "executed.ipynb"),
                        parameters={"trace": str(raw), "output_dir": str(out), "n_permutations": 20,
                                    "evaluate_messages": False},
                        cwd=str(repo_root()), progress_bar=False, kernel_name="python3")
    doc = read_results_json(out / "results.json")
    r = doc["results"]
    final, _ = F.final_status_jobs(after.jobs)
    assert r["failures.jobs_with_status"] == len(final) > 0 and set(final["status"]) == {"Pass", "Killed"}
    assert r["failures.failed_attempts"] == 0 and r["failures.failed_jobs_pct"] == 0.0
    assert r["failures.unsuccessful_jobs_pct"] == r["failures.killed_jobs_pct"] == pytest.approx(
        100 * (final["status"] == "Killed").mean())
    assert not [k for k in r if k.startswith(("failures.rtf_", "failures.km_", "model."))]  # no RTF, no model
    assert r["failures.users.failures"] == 0
    for key in ("p_fail_after_fail_pct", "p_value_within_user", "p_value_across_users"):
        assert r[f"failures.users.{key}"] is None, key  # not applicable: nothing failed
    assert r["logs.count"] == 49 and "messages.count" not in r
    assert {f["name"] for f in doc["figures"]} == {"status_shares", "failures_by_size", "failure_reasons"}
    executed = (tmp_path / "executed.ipynb").read_text()
    assert "No failed attempt in this trace" in executed and "No failure model fitted" in executed
