"""How far the replay is validated: each held-out figure beside its target, and what rests on the replay.

The targets are the ones the validation set itself (issue 10): occupancy within
5 percentage points, median waits per size bucket within a factor of 1.5, and a
KS distance of at most 0.15 for the largest VCs. :func:`scorecard` turns
:func:`.calibrate.held_out_figures` into that table, so every conclusion drawn
from the replay can say how well it was validated. :func:`replay_table2` is
Table 2 (why jobs waited) from the calibrated replay, through the same
:func:`dlcluster.analysis.table2.causes_by_bucket` as the trace-based one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import table2
from .replay import Replay

TARGETS = {
    "occupancy_mae_pp": ("occupancy MAE, held-out span (percentage points)", 5.0),
    "occupancy_mae_pp_complete": ("occupancy MAE up to the job set's completeness horizon (points)", 5.0),
    "max_median_ratio": ("largest median-wait ratio per size bucket, either way", 1.5),
    "max_ks": ("largest KS distance of the wait CDF, largest VCs", 0.15),
}


def scorecard(held: dict) -> pd.DataFrame:
    """One row per validation figure: the replay's value, the target, and whether it is met (lower is better)."""
    rows = []
    for key, (what, target) in TARGETS.items():
        value = held.get(key)
        value = float(value) if value is not None and np.isfinite(value) else np.nan
        rows.append({"figure": what, "replay": value, "target": target,
                     "met": bool(value <= target) if np.isfinite(value) else False})
    return pd.DataFrame(rows).set_index("figure")


def scorecard_text(card: pd.DataFrame) -> str:
    """One sentence for every conclusion drawn from the replay: which targets it met."""
    met = card[card["met"]]
    missed = card[~card["met"]]
    parts = [f"{len(met)} of {len(card)} validation targets met"]
    if len(missed):
        parts.append("missed: " + "; ".join(f"{what} {r.replay:.2f} (target {r.target:g})"
                                             for what, r in missed.iterrows()))
    return ", ".join(parts[:1]) + (f" ({parts[1]})" if len(parts) > 1 else "")


def replay_table2(rep: Replay, span: tuple | None = None) -> pd.DataFrame:
    """Table 2 from the replay's own accounting of each job's first wait, jobs submitted in ``span``.

    Fair-share and fragmentation (with the locality back-off, as the paper's
    two-way split counts it) come from the simulator; the calibrated scheduler
    latency, which every job waits before it can be placed, is "other".
    """
    jobs = rep.result.jobs.assign(latency_s=rep.latency_s)
    jobs["latency_s"] = jobs["latency_s"].where(jobs["queueing_delay_s"].notna(), 0.0)
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        jobs = jobs[(t >= span[0]) & (t < span[1])]
    return table2.causes_by_bucket(jobs, {**table2.SIM_CAUSE_COLUMNS, "other": "latency_s"})
