"""When a job's loss has converged: the early-termination attribute of jobs.

The paper finds most jobs come within 0.1% of their lowest loss after about
40% of their epochs (provenance 'summary'). The default distribution of the
convergence point comes from the real learning curves of the public data
(Pollux artifact, six models, one curve per batch size): for each curve, the
fraction of training progress at which the validation metric first comes
within ``tolerance`` (relative) of its best value. Whether a metric is better
high or low is read off the curve itself (the direction it moves from its
first to its last point), since the files do not name their metric.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from .. import paths
from .workload import Workload


def convergence_fractions_from_learning_curves(directory: str | Path | None = None, tolerance: float = 0.001,
                                               min_points: int = 5) -> np.ndarray:
    """Fraction of progress to come within ``tolerance`` of the best metric, per learning curve."""
    directory = Path(directory) if directory else paths.external_dir() / "learning_curves"
    fractions = []
    for file in sorted(directory.glob("*/validation-*.csv")):
        curve = pd.read_csv(file)
        for column in ("progress", "metric"):
            if column not in curve.columns:
                raise ValueError(f"{file}: missing column {column!r}")
        curve = curve.dropna(subset=["progress", "metric"]).sort_values("progress", kind="stable")
        if len(curve) < min_points or curve["progress"].iloc[-1] <= 0:
            continue
        metric = curve["metric"].to_numpy(dtype=float)
        if metric[-1] >= metric[0]:
            best = metric.max()
            ok = metric >= best - tolerance * abs(best)
        else:
            best = metric.min()
            ok = metric <= best + tolerance * abs(best)
        fractions.append(curve["progress"].to_numpy()[np.argmax(ok)] / curve["progress"].iloc[-1])
    if not fractions:
        raise ValueError(f"no learning curve with >= {min_points} points under {directory}")
    return np.clip(np.asarray(fractions), 1e-6, 1.0)


def assign_convergence(workload: Workload, fractions=None, seed: int = 0) -> Workload:
    """The workload with each job's convergence point drawn (with replacement) from ``fractions``."""
    fractions = convergence_fractions_from_learning_curves() if fractions is None else np.asarray(fractions, float)
    if fractions.size == 0 or ((fractions <= 0) | (fractions > 1)).any():
        raise ValueError("assign_convergence: fractions must be non-empty and in (0, 1]")
    rng = np.random.default_rng([seed, 0xC0])
    return replace(workload, converge_frac=rng.choice(fractions, size=len(workload)))
