"""The committed training-run corpus (data/corpus) and the seeded script that makes it."""

import importlib.util

import numpy as np
import pandas as pd
import pytest

from dlcluster.sources.curves import corpus_path, load_corpus, load_corpus_runs
from dlcluster.paths import repo_root


@pytest.fixture(scope="module")
def corpus():
    return load_corpus().curves, load_corpus_runs()


def test_committed_corpus_is_complete_and_consistent(corpus):
    curves, runs = corpus
    assert 100 <= len(runs) <= 300 and runs["job"].is_unique
    assert set(curves["metric"]) == {"train_loss", "val_loss", "val_score"}
    assert set(curves["seconds_kind"]) == {"cpu"} and (curves["seconds"] > 0).all()
    lengths = curves.groupby(["job", "metric"])["epoch"].max().unstack()
    assert (lengths.nunique(axis=1) == 1).all()  # the three metrics of a run share its epochs
    runs = runs.set_index("job")
    assert (lengths["train_loss"] == runs.loc[lengths.index, "epochs_run"]).all()
    outcome = curves.groupby("job")["outcome"].first()
    assert (outcome == runs.loc[outcome.index, "outcome"]).all()
    assert {"passed", "killed", "diverged"} <= set(runs["outcome"])
    passed = runs[runs["outcome"] == "passed"]
    assert (passed["epochs_run"] == passed["planned_epochs"]).all()
    assert (runs["epochs_run"] <= runs["planned_epochs"]).all()


def test_stop_rules_hold_in_the_committed_data(corpus):
    curves, runs = corpus
    script = _script()
    factor, patience = script.DIVERGENCE_FACTOR, script.NO_PROGRESS_EPOCHS
    losses = {job: part["value"].to_numpy() for job, part in curves[curves["metric"] == "train_loss"].groupby("job")}
    for run in runs.itertuples():
        loss = losses[run.job]
        blew_up = ~np.isfinite(loss) | (loss > factor * run.trivial_train_loss)
        stalled = ~(loss < run.trivial_train_loss)
        if run.outcome == "diverged":
            assert blew_up[-1] and not blew_up[:-1].any(), run.job
        elif run.outcome == "killed":
            assert stalled[-patience:].all() and not blew_up.any(), run.job
        else:
            assert not blew_up.any(), run.job


def _script():
    spec = importlib.util.spec_from_file_location("make_training_corpus",
                                                  repo_root() / "scripts" / "make_training_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Columns of training_runs_jobs.csv drawn by the seeded configuration generator: no float arithmetic of the
#: training touches them, so they are equal on every machine.
CONFIG_COLUMNS = ["job", "dataset", "task", "model", "hidden_layers", "activation", "solver", "momentum", "alpha",
                  "batch_size", "planned_epochs", "random_state", "learning_rate", "seed"]
#: The run's fate, from its losses against thresholds far from them in the three runs the test trains (below).
FATE_COLUMNS = ["epochs_run", "outcome", "stop_reason"]
#: Effective step size (learning rate / (1 - momentum)) below which training damps rounding differences.
SMALL_STEP = 0.01
#: Tolerance for values that a different BLAS kernel changes only by rounding (epoch 1; small-step runs).
ROUNDING_RTOL = 1e-4


def _effective_step(runs: pd.DataFrame) -> pd.Series:
    return runs["learning_rate"] / (1 - runs["momentum"])


def test_script_is_seeded_and_reproduces_the_committed_runs(tmp_path):
    """Same seed, same machine: equal bits. Against the committed corpus (made on another CPU): what a different
    BLAS kernel leaves alone, and what a broken script (seeds, model, loss, training loop) would change.

    Why not every value at a tight tolerance: rounding differences of a BLAS kernel (another CPU, another
    OpenBLAS code path) grow during training wherever the step size is large. Measured on an AMD EPYC
    (OpenBLAS, avx512) against the committed corpus, all 200 runs retrained: the 79 runs with an effective
    step (learning rate / (1 - momentum)) below 0.0164 are bit-identical (71 of them below SMALL_STEP), no
    run below 0.023 differs by more than 1e-9; of the runs above it, 17 differ by more than 1e-6 (2,008 of
    27,243 values, up to 50x; in the three runs trained here 9 of 75 values, all of run000 from epoch 7 on,
    its final losses by 119% and 169%), and two (run081, run128) even stop at another epoch. Epoch 1 (one
    pass from the seeded initialisation) differs by at most 9.4e-6 over all 597 finite values. Hence, on the
    three runs trained here (run000 large-step, run001 and run002 small-step):

    * configurations exactly (seeded generator only), and the same rows, outcomes and stopping epochs: the
      three runs' stop decisions have wide margins (run000 peaks at 1.35x the trivial loss against the
      divergence threshold of 3x, and only one epoch is above it where five in a row would kill it; run001
      stays below 0.9x the trivial loss; run002 stays between 1.12x and 1.15x, so it is killed at epoch 5);
    * epoch 1 of every run at rtol 1e-4 (10x the largest difference measured);
    * the whole curve of the small-step runs at rtol 1e-4 (measured: 0);
    * nothing more of run000 after epoch 1: its curve is chaotic, as measured.

    Checked to fail when the script breaks: a model seeded with random_state + 1, the data split with
    seed + 1, the configuration generator seeded with 1 whatever --seed, tanh for relu, or two passes per
    epoch from epoch 2 on.
    """
    script = _script()
    for out in ("a", "b"):
        assert script.main(["--runs", "3", "--seed", "0", "--out-dir", str(tmp_path / out)]) == 0
    a = pd.read_csv(tmp_path / "a" / "training_runs.csv.gz")
    b = pd.read_csv(tmp_path / "b" / "training_runs.csv.gz")
    # same seed, same machine: same losses bit for bit (as written, 10 significant digits);
    # only the measured CPU-seconds may differ
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"), check_exact=True)
    a_runs = pd.read_csv(tmp_path / "a" / "training_runs_jobs.csv")
    pd.testing.assert_frame_equal(a_runs, pd.read_csv(tmp_path / "b" / "training_runs_jobs.csv"), check_exact=True)

    committed_runs = load_corpus_runs()
    committed_runs = committed_runs[committed_runs["job"].isin(a_runs["job"])].reset_index(drop=True)
    assert a_runs["job"].tolist() == committed_runs["job"].tolist() == ["run000", "run001", "run002"]
    pd.testing.assert_frame_equal(a_runs[CONFIG_COLUMNS + FATE_COLUMNS], committed_runs[CONFIG_COLUMNS + FATE_COLUMNS],
                                  check_exact=True)
    np.testing.assert_allclose(a_runs["trivial_train_loss"], committed_runs["trivial_train_loss"], rtol=1e-9)

    committed = pd.read_csv(corpus_path())
    committed = committed[committed["job"].isin(a["job"].unique())].reset_index(drop=True)
    pd.testing.assert_frame_equal(a.drop(columns=["seconds", "value"]), committed.drop(columns=["seconds", "value"]),
                                  check_exact=True)  # same runs, metrics, epochs, outcomes, in the same order
    assert (a["value"].isna() == committed["value"].isna()).all()
    first = (a["epoch"] == 1).to_numpy()
    np.testing.assert_allclose(a.loc[first, "value"], committed.loc[first, "value"], rtol=ROUNDING_RTOL)
    small = a["job"].isin(a_runs.loc[_effective_step(a_runs) < SMALL_STEP, "job"]).to_numpy()
    assert sorted(a.loc[small, "job"].unique()) == ["run001", "run002"]
    np.testing.assert_allclose(a.loc[small, "value"], committed.loc[small, "value"], rtol=ROUNDING_RTOL)

    rng0, rng1 = np.random.default_rng(0), np.random.default_rng(1)
    assert [script.draw_config(rng0, i) for i in range(3)] != [script.draw_config(rng1, i) for i in range(3)]
