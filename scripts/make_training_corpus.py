"""Train a seeded population of small models on CPU and record their true per-epoch losses.

The Philly trace has no training-loss logs, so the project makes its own real
training runs to measure epoch effectiveness on (section 4.1 of the paper):
scikit-learn networks and linear models on the datasets that ship inside
scikit-learn (no download), with architectures, optimizers, learning rates
(including ones too high, which diverge, and too low, which plateau), batch
sizes and epoch budgets drawn from a seeded generator.

After every epoch (one ``partial_fit`` pass over the training split) the
script evaluates, on the full training and validation splits:

- ``train_loss`` / ``val_loss``: log-loss (classifiers) or mean squared error
  on the standardized target (regressors); the data loss only, without the L2
  penalty, so values are comparable across runs;
- ``val_score``: accuracy (classifiers) or R^2 (regressors), higher is better;

and the CPU-seconds the ``partial_fit`` pass took (the stand-in for a GPU job's
GPU-seconds; BLAS is pinned to one thread). Two rules stop a run early, the
analogues of a user killing a job:

- *diverged*: sklearn refuses to go on (non-finite weights), a loss is not
  finite, or the training loss exceeds DIVERGENCE_FACTOR times the loss of the
  trivial predictor (class frequencies, or the training mean);
- *killed* (no progress): the training loss has not been below the trivial
  predictor's for NO_PROGRESS_EPOCHS epochs in a row.

Every other run trains its planned epochs (outcome *passed*).

Outputs (tidy schema of dlcluster.sources.curves):
    data/corpus/training_runs.csv.gz   per-epoch metrics of every run
    data/corpus/training_runs_jobs.csv one row per run: configuration, outcome

Losses are reproducible bit for bit for a given seed and library versions on one
machine (another CPU's BLAS rounds differently, which runs with a large step size
amplify: data/corpus/README.md); the CPU-seconds are measurements and differ
between rebuilds.

Usage: .venv/bin/python scripts/make_training_corpus.py [--runs 200] [--seed 0] [--out-dir data/corpus]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # must precede the numpy import: one BLAS thread, steady timings

import argparse  # noqa: E402
import gzip  # noqa: E402
import io  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import sklearn  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import SGDClassifier, SGDRegressor  # noqa: E402
from sklearn.metrics import accuracy_score, log_loss, r2_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier, MLPRegressor  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from dlcluster.sources.curves import CURVE_COLUMNS, validate_curves  # noqa: E402

DIVERGENCE_FACTOR = 3.0
NO_PROGRESS_EPOCHS = 5
# Datasets shipped inside scikit-learn, with how often a run draws each.
DATASETS = {
    "digits": ("classification", 0.35),
    "breast_cancer": ("classification", 0.2),
    "wine": ("classification", 0.15),
    "iris": ("classification", 0.1),
    "diabetes": ("regression", 0.2),
}
HIDDEN_LAYERS = [(8,), (32,), (64,), (128,), (32, 16), (64, 64)]
BATCH_SIZES = [8, 16, 32, 64, 128, 256]
EPOCH_BUDGETS = [10, 20, 40, 60, 100, 150]
EPOCH_BUDGET_WEIGHTS = [0.15, 0.2, 0.2, 0.2, 0.15, 0.1]


def load_dataset(name: str, seed: int):
    """Standardized train/validation split (75/25, stratified for classifiers)."""
    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    task = DATASETS[name][0]
    X_train, X_val, y_train, y_val = train_test_split(
        X, y, test_size=0.25, random_state=seed, stratify=y if task == "classification" else None)
    scaler = StandardScaler().fit(X_train)
    X_train, X_val = scaler.transform(X_train), scaler.transform(X_val)
    if task == "regression":
        mean, std = y_train.mean(), y_train.std()
        y_train, y_val = (y_train - mean) / std, (y_val - mean) / std
    return X_train, X_val, y_train, y_val


def draw_config(rng: np.random.Generator, index: int) -> dict:
    """One run's configuration; learning rates span too-low (plateau) to too-high (diverge)."""
    names = list(DATASETS)
    dataset = names[rng.choice(len(names), p=[DATASETS[n][1] for n in names])]
    task = DATASETS[dataset][0]
    family = "mlp" if rng.random() < 0.75 else "linear"
    config = {
        "job": f"run{index:03d}",
        "dataset": dataset,
        "task": task,
        "model": ("MLP" if family == "mlp" else "SGD") + ("Classifier" if task == "classification" else "Regressor"),
        "hidden_layers": "",
        "activation": "",
        "solver": "sgd",
        "momentum": 0.0,
        "alpha": float(rng.choice([1e-5, 1e-4, 1e-3])),
        "batch_size": int(rng.choice(BATCH_SIZES)),
        "planned_epochs": int(rng.choice(EPOCH_BUDGETS, p=EPOCH_BUDGET_WEIGHTS)),
        "random_state": int(rng.integers(2**31 - 1)),
    }
    if family == "mlp":
        config["hidden_layers"] = "x".join(map(str, HIDDEN_LAYERS[rng.integers(len(HIDDEN_LAYERS))]))
        config["activation"] = str(rng.choice(["relu", "tanh"]))
        config["solver"] = "adam" if rng.random() < 0.35 else "sgd"
        if config["solver"] == "sgd":
            config["momentum"] = float(rng.choice([0.0, 0.9]))
            config["learning_rate"] = float(10 ** rng.uniform(-4, 1))
        else:
            config["learning_rate"] = float(10 ** rng.uniform(-4.5, 0))
    else:
        config["batch_size"] = 1  # SGD linear models update per sample
        config["learning_rate"] = float(10 ** rng.uniform(-4, 0.5))
    return config


def make_model(config: dict):
    common = {"alpha": config["alpha"], "random_state": config["random_state"]}
    if config["model"].startswith("MLP"):
        cls = MLPClassifier if config["task"] == "classification" else MLPRegressor
        return cls(hidden_layer_sizes=tuple(int(h) for h in config["hidden_layers"].split("x")),
                   activation=config["activation"], solver=config["solver"],
                   learning_rate_init=config["learning_rate"], momentum=config["momentum"],
                   batch_size=config["batch_size"], **common)
    if config["task"] == "classification":
        return SGDClassifier(loss="log_loss", learning_rate="constant", eta0=config["learning_rate"], **common)
    return SGDRegressor(learning_rate="constant", eta0=config["learning_rate"], **common)


def data_loss(model, X, y, task: str, classes) -> float:
    if task == "classification":
        proba = model.predict_proba(X)
        if not np.isfinite(proba).all():
            return float("nan")
        return float(log_loss(y, proba, labels=classes))
    pred = model.predict(X)
    return float(np.mean((pred - y) ** 2)) if np.isfinite(pred).all() else float("nan")


def score(model, X, y, task: str) -> float:
    pred = model.predict(X)
    if task == "regression" and not np.isfinite(pred).all():
        return float("nan")
    return float(accuracy_score(y, pred) if task == "classification" else r2_score(y, pred))


def trivial_loss(y_train, task: str, classes) -> float:
    """Loss of predicting the class frequencies (or the mean): what training must beat."""
    if task == "classification":
        freq = np.array([(y_train == c).mean() for c in classes])
        return float(log_loss(y_train, np.tile(freq, (len(y_train), 1)), labels=classes))
    return float(np.mean((y_train - y_train.mean()) ** 2))


def train(config: dict, data) -> tuple[list[dict], dict]:
    """Run one configuration epoch by epoch; return its curve rows and its run record."""
    X_train, X_val, y_train, y_val = data
    task = config["task"]
    classes = np.unique(y_train) if task == "classification" else None
    trivial = trivial_loss(y_train, task, classes)
    model = make_model(config)
    rows, outcome, stop_reason, no_progress = [], "passed", "planned epochs done", 0
    for epoch in range(1, config["planned_epochs"] + 1):
        started = time.process_time()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", (ConvergenceWarning, RuntimeWarning))
                if task == "classification":
                    model.partial_fit(X_train, y_train, classes=classes)
                else:
                    model.partial_fit(X_train, y_train)
            failed = None
        except ValueError as exc:  # sklearn: "Solver produced non-finite parameter weights"
            failed = str(exc).splitlines()[0]
        seconds = time.process_time() - started
        if failed is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                metrics = {"train_loss": data_loss(model, X_train, y_train, task, classes),
                           "val_loss": data_loss(model, X_val, y_val, task, classes),
                           "val_score": score(model, X_val, y_val, task)}
        else:
            metrics = {"train_loss": float("nan"), "val_loss": float("nan"), "val_score": float("nan")}
        for metric, value in metrics.items():
            rows.append({"job": config["job"], "metric": metric,
                         "direction": "higher" if metric == "val_score" else "lower",
                         "epoch": epoch, "progress": float(epoch), "value": value, "seconds": seconds})
        no_progress = no_progress + 1 if not metrics["train_loss"] < trivial else 0
        if failed is not None:
            outcome, stop_reason = "diverged", failed
        elif not np.isfinite(metrics["train_loss"]):
            outcome, stop_reason = "diverged", "non-finite training loss"
        elif metrics["train_loss"] > DIVERGENCE_FACTOR * trivial:
            outcome, stop_reason = "diverged", f"training loss above {DIVERGENCE_FACTOR:g}x the trivial predictor's"
        elif no_progress >= NO_PROGRESS_EPOCHS:
            outcome, stop_reason = "killed", f"training loss not below the trivial predictor's for {no_progress} epochs"
        else:
            continue
        break
    record = dict(config, epochs_run=epoch, outcome=outcome, stop_reason=stop_reason, trivial_train_loss=trivial)
    return rows, record


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; these are shared data files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="number of training runs (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the configuration generator (default 0)")
    parser.add_argument("--out-dir", type=Path, default=Path("data/corpus"), help="output folder")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    configs = [draw_config(rng, i) for i in range(args.runs)]
    splits = {name: load_dataset(name, args.seed) for name in DATASETS}
    for config in configs:  # a batch cannot exceed the training split (sklearn would clip it anyway)
        config["batch_size"] = min(config["batch_size"], len(splits[config["dataset"]][0]))
    curve_rows, records = [], []
    started = time.perf_counter()
    for i, config in enumerate(configs, 1):
        rows, record = train(config, splits[config["dataset"]])
        curve_rows += rows
        records.append(record)
        if i % 25 == 0 or i == len(configs):
            print(f"{i}/{len(configs)} runs, {time.perf_counter() - started:.0f} s", file=sys.stderr)

    curves = pd.DataFrame(curve_rows)
    curves.insert(0, "source", "corpus")
    curves["seconds_kind"] = "cpu"
    curves["outcome"] = curves["job"].map({r["job"]: r["outcome"] for r in records})
    curves = curves[list(CURVE_COLUMNS)]
    validate_curves(curves, "generated corpus")

    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
        gz.write(curves.to_csv(index=False, float_format="%.10g", na_rep="nan", lineterminator="\n").encode())
    write_bytes_atomic(args.out_dir / "training_runs.csv.gz", buffer.getvalue())
    runs = pd.DataFrame(records)
    runs["sklearn_version"] = sklearn.__version__
    runs["numpy_version"] = np.__version__
    runs["seed"] = args.seed
    write_bytes_atomic(args.out_dir / "training_runs_jobs.csv",
                       runs.to_csv(index=False, float_format="%.10g", lineterminator="\n").encode())
    counts = runs["outcome"].value_counts().to_dict()
    print(f"wrote {len(runs)} runs ({counts}), {len(curves)} curve rows to {args.out_dir} "
          f"in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
