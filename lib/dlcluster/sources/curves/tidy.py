"""The tidy schema of training curves, and checks and filters shared by every loader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

CURVE_COLUMNS: dict[str, str] = {
    "source": "which data the curve comes from: 'pollux', 'corpus', or the log file/dir it was read from",
    "job": "job (run) name, unique within its source",
    "metric": "what is measured, e.g. 'train_loss', 'val_loss', 'top1_accuracy'",
    "direction": "'lower' or 'higher': which way the metric is better",
    "epoch": "1-based position of this evaluation within its curve (loaders renumber)",
    "progress": "the x value as logged (epoch number, step, Pollux progress); NaN if none",
    "value": "metric value; NaN where the logged value was not finite (a diverged run)",
    "seconds": "time spent on this epoch, of the kind in seconds_kind; NaN if unknown",
    "seconds_kind": "'gpu' GPU-seconds, 'cpu' CPU-seconds, 'wall' wall-clock seconds, 'none' unknown",
    "outcome": "how the job ended: 'passed', 'killed', 'failed', 'diverged' or 'unknown'",
}
DIRECTIONS = ("lower", "higher")
SECONDS_KINDS = ("gpu", "cpu", "wall", "none")
OUTCOMES = ("passed", "killed", "failed", "diverged", "unknown")
CURVE_KEY = ["source", "job", "metric"]
DROPPED_COLUMNS = ["source", "reason", "rows", "curves"]  # curves: whole curves removed (0 for single cells)

# Metric name fragments that tell the direction when the caller gives none.
# Checked in order; the first match wins (so 'val_error' is lower-is-better).
_LOWER_HINTS = ("loss", "error", "err", "wer", "cer", "perplexity", "ppl", "mse", "mae", "rmse", "nll")
_HIGHER_HINTS = ("acc", "f1", "auc", "precision", "recall", "map", "hit", "bleu", "r2", "score", "iou")


@dataclass
class LoadedCurves:
    """A tidy curve table plus what was dropped on the way (source, reason, rows, curves)."""

    curves: pd.DataFrame
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DROPPED_COLUMNS))


def concat_curves(parts: list[LoadedCurves]) -> LoadedCurves:
    """Stack loaded curve sets; curves must not collide on (source, job, metric)."""
    seen: set = set()
    for part in parts:
        keys = set(part.curves[CURVE_KEY].drop_duplicates().itertuples(index=False, name=None))
        if keys & seen:
            raise ValueError(f"curve {sorted(keys & seen)[0]} is loaded twice (the same source given twice?)")
        seen |= keys
    curves = pd.concat([p.curves for p in parts], ignore_index=True) if parts else empty_curves()
    dropped = [p.dropped for p in parts if len(p.dropped)]
    dropped = pd.concat(dropped, ignore_index=True) if dropped else pd.DataFrame(columns=DROPPED_COLUMNS)
    validate_curves(curves, "combined curve sources")
    return LoadedCurves(curves, dropped)


def empty_curves() -> pd.DataFrame:
    return typed_curves(pd.DataFrame({c: [] for c in CURVE_COLUMNS}))


def typed_curves(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(CURVE_COLUMNS)].copy()
    for col in ("source", "job", "metric", "direction", "seconds_kind", "outcome"):
        df[col] = df[col].astype(str)
    df["epoch"] = df["epoch"].astype("int64")
    for col in ("progress", "value", "seconds"):
        df[col] = df[col].astype("float64")
    return df


def guess_direction(metric: str) -> str | None:
    """'lower'/'higher' from a metric's name (loss, error, wer... / accuracy, f1, ...), else None."""
    name = metric.lower()
    for hint in _LOWER_HINTS:
        if re.search(rf"(^|[^a-z]){hint}", name):
            return "lower"
    for hint in _HIGHER_HINTS:
        if re.search(rf"(^|[^a-z]){hint}", name):
            return "higher"
    return None


def direction_for(metric: str, directions: dict[str, str] | None, where: str) -> str:
    if directions and metric in directions:
        direction = directions[metric]
    else:
        direction = guess_direction(metric)
        if direction is None:
            raise ValueError(
                f"{where}: cannot tell whether metric {metric!r} is better lower or higher; "
                f"pass directions={{{metric!r}: 'lower' or 'higher'}}"
            )
    if direction not in DIRECTIONS:
        raise ValueError(f"{where}: direction {direction!r} for metric {metric!r} is not one of {DIRECTIONS}")
    return direction


def validate_curves(df: pd.DataFrame, where: str) -> None:
    """Raise ValueError naming ``where`` and the curve if ``df`` breaks the tidy schema."""
    missing = [c for c in CURVE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: missing curve columns {missing}")
    for col, allowed in (("direction", DIRECTIONS), ("seconds_kind", SECONDS_KINDS), ("outcome", OUTCOMES)):
        bad = df.loc[~df[col].isin(allowed), col]
        if len(bad):
            raise ValueError(f"{where}: field {col!r} has value {bad.iloc[0]!r} (row {bad.index[0]}); "
                             f"allowed: {allowed}")
    negative = df.index[df["seconds"] < 0]
    if len(negative):
        raise ValueError(f"{where}: negative seconds at row {negative[0]} (job {df.at[negative[0], 'job']!r})")
    if df.empty:
        return
    grouped = df.groupby(CURVE_KEY, sort=False)
    for col in ("direction", "seconds_kind", "outcome"):
        n_values = grouped[col].nunique()
        if (n_values > 1).any():
            key = n_values.index[n_values > 1][0]
            raise ValueError(f"{where}: curve {key} mixes several values of field {col!r}")
    in_order = df["epoch"].to_numpy() == (grouped.cumcount() + 1).to_numpy()
    if not in_order.all():
        row = df.index[~in_order][0]
        raise ValueError(f"{where}: curve {tuple(df.loc[row, CURVE_KEY])} has epoch {df.at[row, 'epoch']} "
                         f"at row {row}; epochs must run 1, 2, ... in order")


def drop_table(source: str, counts: dict[str, int]) -> pd.DataFrame:
    rows = [{"source": source, "reason": r, "rows": int(n), "curves": 0} for r, n in counts.items() if n]
    return pd.DataFrame(rows, columns=DROPPED_COLUMNS)


def without_curves(loaded: LoadedCurves, remove: pd.Series, reason: str) -> LoadedCurves:
    """Remove the curves whose rows ``remove`` marks, counting rows and curves per source."""
    removed = loaded.curves[remove]
    rows = [{"source": src, "reason": reason, "rows": len(part), "curves": len(part.groupby(CURVE_KEY))}
            for src, part in removed.groupby("source", sort=True)]
    dropped = pd.concat([loaded.dropped, pd.DataFrame(rows, columns=DROPPED_COLUMNS)], ignore_index=True) \
        if rows else loaded.dropped
    return LoadedCurves(loaded.curves[~remove].reset_index(drop=True), dropped)


def keep_metric(loaded: LoadedCurves, source: str, metric: str) -> LoadedCurves:
    """Keep only ``metric`` among ``source``'s curves (other sources untouched); the rest is counted."""
    if source in set(loaded.curves["source"]) and metric not in set(
            loaded.curves.loc[loaded.curves["source"] == source, "metric"]):
        raise ValueError(f"source {source!r} has no metric {metric!r}")
    remove = (loaded.curves["source"] == source) & (loaded.curves["metric"] != metric)
    return without_curves(loaded, remove, f"metric other than {metric!r} not analysed")


def drop_short_curves(loaded: LoadedCurves, min_epochs: int) -> LoadedCurves:
    """Remove curves with fewer than ``min_epochs`` epochs (their measures are trivial); counted."""
    length = loaded.curves.groupby(CURVE_KEY, sort=False)["epoch"].transform("size")
    return without_curves(loaded, length < min_epochs, f"curve shorter than {min_epochs} epochs")


def sample_jobs(loaded: LoadedCurves, max_jobs: int | None, seed: int) -> LoadedCurves:
    """At most ``max_jobs`` jobs per source, drawn reproducibly with ``seed``; the rest counted."""
    if max_jobs is None:
        return loaded
    rng = np.random.default_rng(seed)
    keep = set()
    for source, jobs in loaded.curves.groupby("source", sort=True)["job"]:
        names = np.array(sorted(jobs.unique()))
        chosen = names if len(names) <= max_jobs else rng.choice(names, size=max_jobs, replace=False)
        keep |= {(source, job) for job in chosen}
    pairs = pd.Series(list(zip(loaded.curves["source"], loaded.curves["job"], strict=True)), index=loaded.curves.index)
    return without_curves(loaded, ~pairs.isin(keep), f"job not among the {max_jobs} sampled (max_runs)")




def finite_or_nan(values) -> np.ndarray:
    arr = np.asarray(values, dtype="float64")
    return np.where(np.isfinite(arr), arr, np.nan)


def read_checked_csv(path: Path, required: list[str], numeric) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a CSV as text, and parse its ``numeric`` columns (those present) as float.

    Returns (text cells, parsed numbers). A numeric cell that is not a number
    raises ValueError naming file, line and field; 'nan'/'inf' are numbers
    (a diverged value) and empty cells become NaN.
    """
    text = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in required:
        if col not in text.columns:
            raise ValueError(f"{path}: missing column {col!r} (columns: {list(text.columns)})")
    numbers = pd.DataFrame(index=text.index)
    for col in (c for c in numeric if c in text.columns):
        cells = text[col].str.strip()
        parsed = pd.to_numeric(cells.where(cells != "", "nan"), errors="coerce")
        bad = parsed.isna() & ~cells.str.lower().isin(["", "nan", "-nan", "inf", "-inf", "+inf", "infinity",
                                                         "-infinity"])
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{path}: line {row + 2}, field {col!r}: {text[col].iloc[row]!r} is not a number")
        numbers[col] = parsed.astype("float64")
    return text, numbers
