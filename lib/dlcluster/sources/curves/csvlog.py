"""Training curves from CSV logs: tidy, or wide like Keras' ``CSVLogger`` (one column per metric)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .tidy import (
    CURVE_KEY,
    OUTCOMES,
    SECONDS_KINDS,
    LoadedCurves,
    direction_for,
    drop_table,
    empty_curves,
    finite_or_nan,
    read_checked_csv,
    typed_curves,
    validate_curves,
)

TIDY_REQUIRED = ["job", "metric", "epoch", "value"]
TIDY_NUMERIC = ("epoch", "progress", "value", "seconds")


def load_csv_curves(
    path: str | Path,
    *,
    job: str | None = None,
    epoch_column: str = "epoch",
    metrics: list[str] | None = None,
    directions: dict[str, str] | None = None,
    seconds_column: str | None = None,
    seconds_kind: str = "gpu",
    outcome: str = "unknown",
    source: str | None = None,
) -> LoadedCurves:
    """Curves from a CSV log, in either of two layouts.

    - tidy: columns ``job, metric, epoch, value`` (and optionally any other
      column of :data:`CURVE_COLUMNS`); several jobs per file.
    - wide (e.g. Keras ``CSVLogger``): one row per epoch, column
      ``epoch_column`` plus one column per metric (``metrics``, default: all
      other columns but ``seconds_column``); one job per file, named ``job``
      or after the file.

    Directions come from a ``direction`` column, else ``directions``, else the
    metric's name (loss/error: lower; accuracy/f1/...: higher); an unknown name
    is an error. Rows are sorted by the logged epoch and renumbered 1..n (the
    logged value is kept as ``progress``). Empty value cells (metric not
    measured that epoch) are dropped and counted; 'nan'/'inf' are kept as NaN
    (the run diverged).
    """
    path = Path(path)
    source = source or str(path)
    if seconds_kind not in SECONDS_KINDS:
        raise ValueError(f"seconds_kind {seconds_kind!r} is not one of {SECONDS_KINDS}")
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r} is not one of {OUTCOMES}")
    header = pd.read_csv(path, nrows=0).columns
    if all(c in header for c in TIDY_REQUIRED):
        return _load_tidy_csv(path, source, directions, seconds_kind, outcome)
    if epoch_column not in header:
        raise ValueError(f"{path}: neither a tidy curve file (columns {TIDY_REQUIRED}) nor a wide log "
                         f"with an {epoch_column!r} column; columns: {list(header)}")
    job = job or path.stem
    if metrics is None:
        metrics = [c for c in header if c not in (epoch_column, seconds_column)]
    wanted = [epoch_column, *metrics] + ([seconds_column] if seconds_column else [])
    raw_text, raw = read_checked_csv(path, wanted, wanted)
    if raw[epoch_column].isna().any():
        line = int(np.flatnonzero(raw[epoch_column].isna().to_numpy())[0]) + 2
        raise ValueError(f"{path}: line {line}, field {epoch_column!r} is empty")
    if raw[epoch_column].duplicated().any():
        line = int(np.flatnonzero(raw[epoch_column].duplicated().to_numpy())[0]) + 2
        raise ValueError(f"{path}: line {line}, field {epoch_column!r}: epoch logged twice")
    frames = []
    drops = {"empty value cell (metric not logged that epoch)": 0}
    for metric in metrics:
        logged = raw_text[metric].str.strip() != ""
        drops["empty value cell (metric not logged that epoch)"] += int((~logged).sum())
        part = raw.loc[logged].sort_values(epoch_column, kind="stable")
        frames.append(pd.DataFrame({
            "source": source, "job": job, "metric": metric,
            "direction": direction_for(metric, directions, str(path)),
            "epoch": np.arange(1, len(part) + 1), "progress": part[epoch_column].to_numpy(),
            "value": finite_or_nan(part[metric]),
            "seconds": part[seconds_column].to_numpy() if seconds_column else np.nan,
            "seconds_kind": seconds_kind if seconds_column else "none", "outcome": outcome,
        }))
    curves = typed_curves(pd.concat(frames, ignore_index=True)) if frames else empty_curves()
    validate_curves(curves, str(path))
    return LoadedCurves(curves, drop_table(source, drops))


def _load_tidy_csv(path: Path, source: str, directions, seconds_kind: str, outcome: str) -> LoadedCurves:
    text, numbers = read_checked_csv(path, TIDY_REQUIRED, TIDY_NUMERIC)
    raw = text.drop(columns=list(numbers.columns)).join(numbers)
    for col in ("job", "metric"):
        empty = text[col].str.strip() == ""
        if empty.any():
            raise ValueError(f"{path}: line {int(np.flatnonzero(empty.to_numpy())[0]) + 2}, field {col!r} is empty")
    if raw["epoch"].isna().any():
        raise ValueError(f"{path}: line {int(np.flatnonzero(raw['epoch'].isna().to_numpy())[0]) + 2}, "
                         f"field 'epoch' is empty")
    unmeasured = (text["value"].str.strip() == "").to_numpy()
    df = raw.loc[~unmeasured].copy()
    df["line"] = np.flatnonzero(~unmeasured) + 2
    if "direction" not in df.columns:
        df["direction"] = [direction_for(m, directions, str(path)) for m in df["metric"]]
    if "seconds" not in df.columns:
        df["seconds"] = np.nan
    if "seconds_kind" not in df.columns:
        df["seconds_kind"] = seconds_kind if "seconds" in text.columns else "none"
    if "outcome" not in df.columns:
        df["outcome"] = outcome
    if "source" not in df.columns:
        df["source"] = source
    dup = df.duplicated(["source", "job", "metric", "epoch"])
    if dup.any():
        row = df.loc[dup].iloc[0]
        raise ValueError(f"{path}: line {row['line']}: job {row['job']!r} metric {row['metric']!r} "
                         f"has epoch {row['epoch']:g} twice")
    df = df.sort_values(["source", "job", "metric", "epoch"], kind="stable")
    if "progress" not in df.columns:
        df["progress"] = df["epoch"]
    df["epoch"] = df.groupby(CURVE_KEY, sort=False).cumcount() + 1
    df["value"] = finite_or_nan(df["value"])
    curves = typed_curves(df.reset_index(drop=True))
    validate_curves(curves, str(path))
    return LoadedCurves(curves, drop_table(source, {"empty value cell (not measured)": int(unmeasured.sum())}))
