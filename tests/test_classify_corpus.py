"""The failure-log corpus (data/failure_logs/) and the classifier's accuracy on it.

The rules and the corpus were written together, so a perfect score here shows
that every reason's rules fire on real (or library-worded) logs and that their
precedence holds; it is no estimate of accuracy on unseen cluster logs.
"""

import importlib.util
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

from dlcluster.analysis.classify import classify, classify_dir, load_rules

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "data" / "failure_logs"
PRODUCED_HOW = {"real run on CPU", "real run on CPU; YARN diagnostic lines appended in YARN's wording",
                "pattern text from library error message (hardware unavailable)"}


@pytest.fixture(scope="module")
def index():
    return pd.read_csv(CORPUS / "index.csv", dtype={"exit_code": "Int64"})


def test_index_lists_exactly_the_logs(index):
    on_disk = sorted(p.name for p in CORPUS.glob("*.log"))
    assert sorted(index["log_file"]) == on_disk
    assert set(index["produced_how"]) <= PRODUCED_HOW
    rules = load_rules()
    for row in index.itertuples():
        assert row.category == rules.reason(row.true_reason).category, row.log_file
    real = index[index["produced_how"].str.startswith("real run")]
    assert (real["exit_code"] > 0).all()
    assert real["runtime_s"].notna().all()
    pattern = index[~index["produced_how"].str.startswith("real run")]
    assert pattern["text_source"].notna().all()


def test_every_reason_has_a_log(index):
    rules = load_rules()
    assert set(index["true_reason"]) == set(rules.reasons) | {"no_signature"}


def test_every_corpus_log_is_classified_to_its_true_reason(index):
    got = classify_dir(CORPUS).merge(index, on="log_file", validate="one_to_one")
    reasons = sorted(set(got["true_reason"]) | set(got["reason"]))
    number = {r: f"{i:2d}" for i, r in enumerate(reasons, start=1)}
    confusion = pd.crosstab(got["true_reason"].map(lambda r: f"{number[r]} {r}"), got["reason"].map(number))
    confusion.index.name, confusion.columns.name = "true reason", "classified as"
    wrong = got[got["true_reason"] != got["reason"]]
    # the confusion table is shown only when a log is misclassified (a test prints nothing on success)
    assert wrong.empty, (f"\nfailure-log corpus: {len(got)} logs; confusion table (columns: reason numbers of the "
                         f"rows)\n{confusion.to_string()}\n"
                         + wrong[["log_file", "true_reason", "reason", "rule_id", "matched_line"]].to_string())


def _corpus_script():
    spec = importlib.util.spec_from_file_location("make_failure_corpus", REPO / "scripts" / "make_failure_corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["syntax_error__python2_print", "incorrect_inputs__missing_train_file",
                                  "job_preempted__sigterm", "cpu_out_of_memory__python_list"])
def test_corpus_jobs_really_fail_that_way(name, tmp_path):
    """Re-run a few corpus jobs: the failure is produced now, not just stored."""
    mk = _corpus_script()
    case = next(c for c in mk.real_cases() if c.name == name)
    tools = mk.Tools(python=sys.executable, plain_python=shutil.which("python3") or sys.executable,
                     mpi_bin=tmp_path, cuda_home=tmp_path, cudart=None)
    text, exit_code, runtime = mk.run_job(case, tmp_path / name, tools, timeout_s=60)
    assert exit_code != 0 and runtime > 0
    assert classify(text).reason == case.reason
