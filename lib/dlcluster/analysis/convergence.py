"""Epoch effectiveness: how much of a job's training bought how little improvement.

Section 4.1 of the paper measured, from training-loss logs, how many epochs a
job needed to reach its best loss and to come within 0.1% of it, and which
share of its GPU time went to that last 0.1%. This module computes those
measures for any curve in the tidy schema of :mod:`dlcluster.sources.curves`.

Definitions (``tol`` is the tolerance, 0.001 = 0.1%; epochs are 1-based):

- *best*: the lowest value (``direction='lower'``) or highest
  (``'higher'``) over the curve's finite values. Non-finite values (NaN, inf:
  a diverged run) never count as best, but their epochs still count as epochs
  run and their time as time spent.
- *best epoch*: the first epoch that attains the best value.
- *needs all epochs*: the best epoch is the last epoch (a curve whose best is
  only tied by its last epoch reached it earlier, so does not need all).
- *within tolerance*: ``value <= best + tol*|best|`` for lower-is-better,
  ``value >= best - tol*|best|`` for higher-is-better; for a positive loss
  that is ``value <= best*(1+tol)``. Using ``|best|`` keeps the band on the
  worse side of the best for negative values; for best == 0 the band is the
  single value 0.
- *within-tolerance epoch*: the first epoch within tolerance of the best.
- *last-band share*: the share of the curve's time spent after its
  within-tolerance epoch, i.e. on gaining the last ``tol`` of improvement.
- time per epoch: the curve's ``seconds`` when every epoch has a finite,
  non-negative value; otherwise every epoch weighs the same (``time_basis``
  says which was used), which is exact when each epoch costs the same GPU time.

:func:`early_termination_fractions` is the input for a simulator that ends
jobs early: per curve, the fraction of its epochs and of its time after which
it is within tolerance of its best.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ..sources.curves import CURVE_KEY, DIRECTIONS

DEFAULT_TOLERANCE = 0.001


@dataclass(frozen=True)
class CurveMeasures:
    """The convergence measures of one curve (see the module docstring)."""

    n_epochs: int
    n_finite: int
    best_value: float
    best_epoch: int | None
    needs_all_epochs: bool | None
    within_tol_epoch: int | None
    epochs_to_best_frac: float
    epochs_to_within_tol_frac: float
    time_total: float
    time_to_best_frac: float
    time_to_within_tol_frac: float
    last_band_time_share: float
    time_basis: str  # 'seconds' or 'equal per epoch'


def within_tolerance(values, best: float, direction: str, tolerance: float) -> np.ndarray:
    """Boolean mask: which values are within ``tolerance`` (relative) of ``best``; NaN is never within."""
    _check_direction(direction)
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    values = np.asarray(values, dtype="float64")
    band = tolerance * abs(best)
    with np.errstate(invalid="ignore"):
        if direction == "lower":
            return np.isfinite(values) & (values <= best + band)
        return np.isfinite(values) & (values >= best - band)


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def _epoch_weights(seconds, n: int) -> tuple[np.ndarray, str]:
    if seconds is not None:
        seconds = np.asarray(seconds, dtype="float64")
        if len(seconds) != n:
            raise ValueError(f"seconds has {len(seconds)} entries for {n} epochs")
        if np.isfinite(seconds).all() and (seconds >= 0).all() and seconds.sum() > 0:
            return seconds, "seconds"
    return np.ones(n), "equal per epoch"


def _best_index(values: np.ndarray, direction: str) -> int | None:
    finite = np.isfinite(values)
    if not finite.any():
        return None
    masked = np.where(finite, values, np.inf if direction == "lower" else -np.inf)
    return int(np.argmin(masked) if direction == "lower" else np.argmax(masked))


def measure_curve(values, seconds=None, direction: str = "lower",
                  tolerance: float = DEFAULT_TOLERANCE) -> CurveMeasures:
    """Convergence measures of one curve (values in epoch order; seconds per epoch or None)."""
    _check_direction(direction)
    values = np.asarray(values, dtype="float64")
    n = len(values)
    if n == 0:
        raise ValueError("a curve needs at least one epoch")
    weights, basis = _epoch_weights(seconds, n)
    total = float(weights.sum())
    n_finite = int(np.isfinite(values).sum())
    best_i = _best_index(values, direction)
    if best_i is None:
        nan = float("nan")
        return CurveMeasures(n, 0, nan, None, None, None, nan, nan, total, nan, nan, nan, basis)
    best = float(values[best_i])
    tol_i = int(np.flatnonzero(within_tolerance(values, best, direction, tolerance))[0])
    cumulative = np.cumsum(weights)
    return CurveMeasures(
        n_epochs=n,
        n_finite=n_finite,
        best_value=best,
        best_epoch=best_i + 1,
        needs_all_epochs=best_i == n - 1,
        within_tol_epoch=tol_i + 1,
        epochs_to_best_frac=(best_i + 1) / n,
        epochs_to_within_tol_frac=(tol_i + 1) / n,
        time_total=total,
        time_to_best_frac=float(cumulative[best_i] / total),
        time_to_within_tol_frac=float(cumulative[tol_i] / total),
        last_band_time_share=float((total - cumulative[tol_i]) / total),
        time_basis=basis,
    )


def _curves(curves: pd.DataFrame):
    """Yield (key dict, curve rows) per (source, job, metric), rows in epoch order."""
    for key, rows in curves.groupby(CURVE_KEY, sort=True):
        yield dict(zip(CURVE_KEY, key, strict=True)), rows.sort_values("epoch", kind="stable")


def summarize_curves(curves: pd.DataFrame, tolerance: float = DEFAULT_TOLERANCE) -> pd.DataFrame:
    """One row per curve: its key, direction, outcome, seconds_kind and :class:`CurveMeasures`."""
    rows = []
    for key, rows_ in _curves(curves):
        measures = measure_curve(rows_["value"].to_numpy(), rows_["seconds"].to_numpy(),
                                 rows_["direction"].iloc[0], tolerance)
        rows.append({**key, "direction": rows_["direction"].iloc[0], "outcome": rows_["outcome"].iloc[0],
                     "seconds_kind": rows_["seconds_kind"].iloc[0], **asdict(measures)})
    columns = CURVE_KEY + ["direction", "outcome", "seconds_kind"] + list(CurveMeasures.__dataclass_fields__)
    return pd.DataFrame(rows, columns=columns)


def early_termination_fractions(curves: pd.DataFrame, tolerance: float = DEFAULT_TOLERANCE) -> pd.DataFrame:
    """Per curve, the fraction of its epochs and of its time after which it is within tolerance of its best.

    The input for a simulator that terminates jobs early: a job assigned a
    curve can be ended after ``time_fraction`` of its GPU time (or
    ``epoch_fraction`` of its epochs) having lost at most ``tolerance`` of its
    final quality. Curves without a finite value get NaN fractions.
    Columns: source, job, metric, outcome, n_epochs, epoch_fraction, time_fraction, time_basis.
    """
    summary = summarize_curves(curves, tolerance)
    return summary[CURVE_KEY + ["outcome", "n_epochs", "epochs_to_within_tol_frac", "time_to_within_tol_frac",
                                "time_basis"]].rename(columns={"epochs_to_within_tol_frac": "epoch_fraction",
                                                               "time_to_within_tol_frac": "time_fraction"})


def patience_stop_epoch(values, direction: str, patience: int, min_delta: float = 0.0) -> int:
    """The epoch (1-based) at which a patience rule stops training; len(values) if it never fires.

    An epoch improves when its value beats the best so far by more than
    ``min_delta`` relative to that best (``value < best - min_delta*|best|`` for
    lower-is-better); the first finite value always improves, a non-finite one
    never does. Training stops after ``patience`` epochs in a row without
    improvement (as Keras' EarlyStopping with a relative delta).
    """
    _check_direction(direction)
    if patience < 1:
        raise ValueError(f"patience must be >= 1, got {patience}")
    values = np.asarray(values, dtype="float64")
    best, waited = None, 0
    for i, value in enumerate(values):
        if np.isfinite(value) and (
                best is None
                or (direction == "lower" and value < best - min_delta * abs(best))
                or (direction == "higher" and value > best + min_delta * abs(best))):
            best, waited = value, 0
        else:
            waited += 1
            if waited >= patience:
                return i + 1
    return len(values)


def early_stopping_outcome(values, seconds=None, direction: str = "lower", patience: int = 5,
                           min_delta: float = 0.0) -> dict:
    """What a patience rule would have done to one curve.

    Returns stop_epoch, stopped (bool), time_saved_frac (share of the curve's
    time after the stop), best_at_stop (best finite value up to the stop,
    restoring the best checkpoint) and regret: how much worse that is than the
    curve's overall best, relative to ``|best|`` (0 = lost nothing; NaN when
    either is undefined or best is 0 and the two differ).
    """
    values = np.asarray(values, dtype="float64")
    stop = patience_stop_epoch(values, direction, patience, min_delta)
    weights, basis = _epoch_weights(seconds, len(values))
    best_i = _best_index(values, direction)
    best_stop_i = _best_index(values[:stop], direction)
    if best_i is None or best_stop_i is None:
        best, at_stop, regret = np.nan, np.nan, np.nan
    else:
        best, at_stop = float(values[best_i]), float(values[best_stop_i])
        gap = (at_stop - best) if direction == "lower" else (best - at_stop)
        regret = 0.0 if gap == 0 else (gap / abs(best) if best != 0 else np.nan)
    return {"stop_epoch": stop, "stopped": stop < len(values),
            "time_saved_frac": float(weights[stop:].sum() / weights.sum()),
            "best_value": best, "best_at_stop": at_stop, "regret": regret, "time_basis": basis}


def early_stopping_table(curves: pd.DataFrame, patience_values, min_delta: float = 0.0) -> pd.DataFrame:
    """One row per (curve, patience): :func:`early_stopping_outcome` with the curve key and outcome."""
    rows = []
    for key, rows_ in _curves(curves):
        values, seconds = rows_["value"].to_numpy(), rows_["seconds"].to_numpy()
        for patience in patience_values:
            result = early_stopping_outcome(values, seconds, rows_["direction"].iloc[0], int(patience), min_delta)
            rows.append({**key, "outcome": rows_["outcome"].iloc[0], "patience": int(patience), **result})
    return pd.DataFrame(rows)


def effectiveness_stats(summary: pd.DataFrame, by: list[str] | str, within_frac: float = 0.4) -> pd.DataFrame:
    """Per group of a :func:`summarize_curves` table, the paper's four statements as our numbers.

    Columns: curves, need_all_epochs_pct (share whose best is at the last
    epoch), mean_last_band_time_pct, median_epochs_to_within_tol_pct and
    within_tol_by_frac_pct (share of curves within tolerance by ``within_frac``
    of their epochs). Curves without a finite value are left out of the
    percentages (``no_finite_value`` counts them).
    """
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, group in summary.groupby(by, sort=True):
        measured = group[group["best_epoch"].notna()]
        rows.append({
            **dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True)),
            "curves": len(measured),
            "no_finite_value": len(group) - len(measured),
            "need_all_epochs_pct": 100 * measured["needs_all_epochs"].astype(bool).mean(),
            "mean_last_band_time_pct": 100 * measured["last_band_time_share"].mean(),
            "median_epochs_to_within_tol_pct": 100 * measured["epochs_to_within_tol_frac"].median(),
            "within_tol_by_frac_pct": 100 * (measured["epochs_to_within_tol_frac"] <= within_frac).mean(),
        })
    return pd.DataFrame(rows)
