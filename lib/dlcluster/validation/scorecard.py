"""How far the replay is validated: each held-out figure beside its target, and what rests on the replay.

The targets (issue 29), each a figure of :func:`.heldout.held_out_figures`,
lower is better:

* busy servers in the occupancy record's own units (a count, errors in points
  of its total), held-out, up to the job set's completeness horizon: MAE <= 5;
* GPU allocation: the replay's allocated share of its GPUs in service at or
  above the real lower bound (1 - the reporting GPU-minutes at 0%): a shortfall
  of at most 0 points;
* median and p90 first waits per size bucket (DRE records, held-out): within a
  factor of 1.5 and 2, either way;
* the full trace's Figure 3 (:mod:`.fig3`), over the cells with enough jobs:
  median KS <= 0.15, largest <= 0.3, and the share of delays at or under 3
  minutes within 10 points of the curve's in most cells (more than half);
* servers spanned per job against the DRE records: KS <= 0.15 per size bucket;
* at most 20% of the waiting left to the drawn scheduler overhead (the rest
  must come from the mechanism).

:func:`scorecard` turns the figures into that table, so every conclusion drawn
from the replay can say how well it was validated ("k of n targets met"); each
target's "met" is decided by the project's one function
(:func:`dlcluster.report.verdicts.judge`, as a target). The replay's Figure 3
under the official definition is like for like with the full trace's in
definition and selection, but it is SIMULATED: it validates the model (a
target), it never reproduces the paper (a reproduction verdict needs a
measurement of the cluster).
:func:`replay_table2` is Table 2 (why jobs waited) from the calibrated replay,
through the same :func:`dlcluster.analysis.table2.causes_by_bucket` as the
trace-based one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import table2
from ..ordering import decision_value
from ..report import verdicts as vd
from .replay import Replay

#: figure key -> (what, target, True when the target is a lower bound on the figure ("at least"))
TARGETS = {
    "busy_servers_mae_pp_complete": ("busy servers MAE in the record's units, to the completeness horizon (points)",
                                     5.0, False),
    "gpu_allocation_shortfall_pp": ("GPU allocation below the real lower bound (points)", 0.0, False),
    "max_median_ratio": ("largest median first-wait ratio per size bucket, either way", 1.5, False),
    "max_p90_ratio": ("largest p90 first-wait ratio per size bucket, either way", 2.0, False),
    "fig3_median_ks": ("full trace's Figure 3: median KS over the cells with enough jobs", 0.15, False),
    "fig3_max_ks": ("full trace's Figure 3: largest KS over those cells", 0.3, False),
    "fig3_share_3min_within": (("full trace's Figure 3: share of cells whose share of waits <= 3 min is within "
                                "10 points"), 0.5, True),
    "servers_spanned_max_ks": ("largest KS distance of servers spanned per job, per size bucket", 0.15, False),
    "latency_only_wait_share": ("share of waiting that is scheduler latency only", 0.20, False),
}


#: Both sides of every target: the replay and the real data, each measured by the held-out figure's own definition
#: (:func:`.calibrate.held_out_figures` computes the two alike) over the held-out span.
HELD_OUT = "the held-out span (the calibration never sees it)"
#: Jobs a target needs: none of its own. A target is an aggregate over the held-out span; the distributions behind it
#: apply the floor where they are computed (a Figure 3 cell counts from validation.fig3.MIN_WAITS = MIN_JOBS jobs).
TARGET_MIN_JOBS = 0


def scorecard(held: dict) -> pd.DataFrame:
    """One row per validation figure: the replay's value, the target, whether it is met and why, decided by the
    project's one standard (:func:`dlcluster.report.verdicts.judge`, as a target: the replay is simulated on purpose).

    "Most cells" is more than half: the 3-minute figure meets its target when it is above 0.5. A figure that
    could not be measured (NaN, e.g. Figure 3 without its digitized table) is not met.
    """
    rows = []
    for key, (what, target, at_least) in TARGETS.items():
        value = held.get(key)
        value = float(value) if value is not None and np.isfinite(value) else np.nan
        judged = vd.judge(vd.threshold(value, target, at_least, what, decide=decision_value),
                          vd.Side(what, HELD_OUT, "SIMULATED calibrated replay"), vd.Side(what, HELD_OUT, "real data"),
                          None, min_n=TARGET_MIN_JOBS, target=True)
        rows.append({"figure": what, "key": key, "replay": value, "target": target,
                     "direction": "more than" if at_least else "at most", "met": judged.verdict == vd.MET,
                     "reason": judged.reason})
    return pd.DataFrame(rows).set_index("figure")


def scorecard_text(card: pd.DataFrame) -> str:
    """One sentence for every conclusion drawn from the replay: which targets it met."""
    met = card[card["met"]]
    missed = card[~card["met"]]
    parts = [f"{len(met)} of {len(card)} validation targets met"]
    if len(missed):
        parts.append("missed: " + "; ".join(f"{what} {r.replay:.2f} (target {r.direction} {r.target:g})"
                                             for what, r in missed.iterrows()))
    return ", ".join(parts[:1]) + (f" ({parts[1]})" if len(parts) > 1 else "")


def _replay_jobs(rep: Replay, span: tuple | None) -> pd.DataFrame:
    """The replay's jobs submitted in ``span``, with the scheduler latency each waited (0 for jobs never started)."""
    jobs = rep.result.jobs.assign(latency_s=rep.latency_s)
    jobs["latency_s"] = jobs["latency_s"].where(jobs["queueing_delay_s"].notna(), 0.0)
    if span is not None:
        t = pd.to_datetime(jobs["submitted"])
        jobs = jobs[(t >= span[0]) & (t < span[1])]
    return jobs


def replay_table2(rep: Replay, span: tuple | None = None, with_latency: bool = True) -> pd.DataFrame:
    """Table 2 from the replay's own accounting of each job's waiting, jobs submitted in ``span``: the one
    Table 2 of the replay, which notebooks 01 and 05 both show.

    Fair-share, fragmentation (the VC had the GPUs, no placement met the
    job's locality: :data:`dlcluster.analysis.table2.SIM_CAUSE_COLUMNS`) and
    other (a back-off timer alone held the job) come from the simulator; the
    drawn scheduler latency, which every job waits before it can be placed, is
    also "other", or left out (``with_latency=False``: the shares are of the
    queueing delay only, as in the paper's table).
    """
    columns = dict(table2.SIM_CAUSE_COLUMNS)
    if with_latency:
        columns["other"] = [columns["other"], "latency_s"]
    return table2.causes_by_bucket(_replay_jobs(rep, span), columns)


def replay_fragmentation_endings(rep: Replay, span: tuple | None = None) -> pd.DataFrame:
    """How the replay's fragmentation delay (:func:`replay_table2`'s) ended, per size bucket, jobs submitted in
    ``span`` (:func:`dlcluster.analysis.table2.fragmentation_endings`)."""
    return table2.fragmentation_endings(_replay_jobs(rep, span))
