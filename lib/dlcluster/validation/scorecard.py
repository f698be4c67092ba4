"""How far the replay is validated: each held-out figure beside its target, and what rests on the replay.

The targets: occupancy within 5 percentage points up to the job set's
completeness horizon, median first waits per size bucket within a factor of 1.5
and p90s within 2, a KS distance of at most 0.15 for the five largest VCs and
for the servers each job spanned (per size bucket), and at most 20% of the
waiting left to the scheduler latency (the rest must come from contention). :func:`scorecard` turns
:func:`.calibrate.held_out_figures` into that table, so every conclusion drawn
from the replay can say how well it was validated. :func:`replay_table2` is
Table 2 (why jobs waited) from the calibrated replay, through the same
:func:`dlcluster.analysis.table2.causes_by_bucket` as the trace-based one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import table2
from ..ordering import decision_value
from .replay import Replay

TARGETS = {
    "occupancy_mae_pp_complete": ("occupancy MAE up to the job set's completeness horizon (points)", 5.0),
    "max_median_ratio": ("largest median first-wait ratio per size bucket, either way", 1.5),
    "max_p90_ratio": ("largest p90 first-wait ratio per size bucket, either way", 2.0),
    "max_ks": ("largest KS distance of the wait CDF, five largest VCs", 0.15),
    "servers_spanned_max_ks": ("largest KS distance of servers spanned per job, per size bucket", 0.15),
    "latency_only_wait_share": ("share of waiting that is scheduler latency only", 0.20),
}


def scorecard(held: dict) -> pd.DataFrame:
    """One row per validation figure: the replay's value, the target, and whether it is met (lower is better)."""
    rows = []
    for key, (what, target) in TARGETS.items():
        value = held.get(key)
        value = float(value) if value is not None and np.isfinite(value) else np.nan
        rows.append({"figure": what, "replay": value, "target": target,
                     "met": bool(decision_value(value) <= target) if np.isfinite(value) else False})
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


def replay_table2(rep: Replay, span: tuple | None = None, with_latency: bool = True) -> pd.DataFrame:
    """Table 2 from the replay's own accounting of each job's first wait, jobs submitted in ``span``.

    Fair-share and fragmentation (with the locality back-off, as the paper's
    two-way split counts it) come from the simulator; the drawn scheduler
    latency, which every job waits before it can be placed, is "other", or left
    out (``with_latency=False``: the shares are of the queueing delay only, as
    in the paper's table).
    """
    jobs = rep.result.jobs.assign(latency_s=rep.latency_s)
    jobs["latency_s"] = jobs["latency_s"].where(jobs["queueing_delay_s"].notna(), 0.0)
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        jobs = jobs[(t >= span[0]) & (t < span[1])]
    columns = dict(table2.SIM_CAUSE_COLUMNS)
    if with_latency:
        columns["other"] = "latency_s"
    return table2.causes_by_bucket(jobs, columns)
