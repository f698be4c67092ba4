"""The real measured validation curves of the Pollux artifact (``data/external/learning_curves``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...paths import external_dir
from .tidy import (
    LoadedCurves,
    drop_table,
    finite_or_nan,
    read_checked_csv,
    typed_curves,
    validate_curves,
)

# The Pollux artifact stores each model's validation metric under the column
# 'metric' without naming it. Names and directions below are ours, checked
# against the values (see tests/test_curves.py) and against the Pollux
# simulator itself, which decides a metric "increases" when its first value is
# below its last (simulator/applications.py, get_best_metric):
#   cifar10, imagenet: top-1 accuracy as a fraction (0.44 -> 0.95; 0.07 -> 0.76): higher.
#   bert: SQuAD F1 in percent (86.7 -> 88.6 over its 2 epochs): higher.
#   ncf: hit rate as a fraction (0.63 -> 0.69): higher.
#   deepspeech2: word error rate in percent (100 -> ~24): lower.
#   yolov3: falls from ~22 to ~12 over 50 epochs; not a mAP (which would rise),
#     so a validation loss: lower. Pollux's first-vs-last rule agrees.
POLLUX_METRICS: dict[str, tuple[str, str]] = {
    "bert": ("squad_f1_pct", "higher"),
    "cifar10": ("top1_accuracy", "higher"),
    "deepspeech2": ("wer_pct", "lower"),
    "imagenet": ("top1_accuracy", "higher"),
    "ncf": ("hit_rate", "higher"),
    "yolov3": ("val_loss", "lower"),
}
POLLUX_COLUMNS = ["progress", "iteration", "metric", "grad_sqr", "grad_var"]


def pollux_curves_dir() -> Path:
    return external_dir() / "learning_curves"


def load_pollux_curves(root: str | Path | None = None) -> LoadedCurves:
    """Real measured validation curves from the Pollux artifact, one curve per (model, batch size).

    Each file is one complete training run at a fixed batch size, so the
    outcome is 'passed'. The artifact has no per-epoch GPU time; ``seconds`` is
    NaN ('none') and the analysis then weighs every epoch equally (each epoch
    is one pass over the data at a fixed batch size).
    """
    root = Path(root) if root is not None else pollux_curves_dir()
    files = sorted(root.glob("*/validation-*.csv"))
    if not files:
        raise FileNotFoundError(f"{root}: no <model>/validation-<batch size>.csv files")
    frames = []
    for path in files:
        model = path.parent.name
        if model not in POLLUX_METRICS:
            raise ValueError(f"{path}: unknown Pollux model {model!r}; known: {sorted(POLLUX_METRICS)}")
        match = re.fullmatch(r"validation-(\d+)\.csv", path.name)
        if not match:
            raise ValueError(f"{path}: file name is not validation-<batch size>.csv")
        text, raw = read_checked_csv(path, POLLUX_COLUMNS, POLLUX_COLUMNS)
        if list(text.columns) != POLLUX_COLUMNS:
            raise ValueError(f"{path}: columns {list(text.columns)}; expected {POLLUX_COLUMNS}")
        metric, direction = POLLUX_METRICS[model]
        frames.append(pd.DataFrame({
            "source": "pollux", "job": f"{model}/bsz{int(match.group(1))}", "metric": metric,
            "direction": direction, "epoch": np.arange(1, len(raw) + 1), "progress": raw["progress"],
            "value": finite_or_nan(raw["metric"]), "seconds": np.nan, "seconds_kind": "none",
            "outcome": "passed",
        }))
    curves = typed_curves(pd.concat(frames, ignore_index=True))
    validate_curves(curves, str(root))
    return LoadedCurves(curves, drop_table("pollux", {}))
