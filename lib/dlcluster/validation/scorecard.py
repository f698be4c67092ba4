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

from dataclasses import dataclass

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


#: The ablation row of the model without a mechanism (:func:`.heldout.ablation_variants`): the scheduler latency
#: fitted to the real waits, no contention. The replay must beat it to say its mechanism explains the waits.
NULL_ROW = "latency fitted to the real waits, no contention"
#: The ablation row of the calibrated replay itself
CALIBRATED_ROW = "calibrated"
#: Names of the placement rules (:attr:`.calibrate.ReplayParams.placement`) in the targets table
PLACEMENT_NAMES = {"most_free": "spreading (most_free)", "best_fit": "best fit", "packed": "Philly's packing",
                   "whole_servers": "whole servers"}


def placement_kind(params) -> str:
    """A parameter set's placement in words: the rule, and "+ GPU-type pools" where jobs stay in their pool."""
    name = PLACEMENT_NAMES.get(params.placement, params.placement)
    return f"{name} + GPU-type pools" if params.gpu_pools else name


def _rank(card: pd.DataFrame, objective: float) -> tuple:
    """Order of rows within a placement: most targets met, then the lowest held-out objective (NaN last)."""
    return -int(card["met"].sum()), objective if np.isfinite(objective) else np.inf


@dataclass(frozen=True)
class TargetsTable:
    """The targets of :data:`TARGETS` against the calibrated replay, the model without a mechanism and the best row
    of each placement (:func:`targets_table`)."""

    values: pd.DataFrame       # one row per target (its words), one column per replay shown
    met: pd.DataFrame          # the same shape: True where the target is met (:func:`scorecard`'s judge)
    target: pd.Series          # per target: "at most 5", "more than 0.5"
    sources: dict              # column -> the ablation row it shows
    comparison: pd.DataFrame   # per target: the calibrated replay's value, the null model's, and which is closer
    sentence: str              # where the mechanism beats the fitted distribution and where not

    def met_count(self, column: str) -> int:
        return int(self.met[column].sum())

    def headline(self) -> str:
        """The first line of notebook 05: "k of 9 targets met" by the calibrated replay, and the best other column."""
        first = self.values.columns[0]
        k, n = self.met_count(first), len(self.values)
        others = [(self.met_count(c), c) for c in self.values.columns[1:]]
        line = f"The calibrated replay meets {k} of {n} held-out targets"
        if others:
            best_k, best = max(others, key=lambda item: item[0])
            line += f" (the best other row shown, {best}, meets {best_k})"
        return line + "."

    def shown(self) -> pd.DataFrame:
        """The table as a reader sees it: each value with "✓" where it meets its target, the target beside."""
        cells = self.values.map(lambda v: "n/a" if not np.isfinite(v) else f"{v:.3g}") + \
            self.met.map(lambda m: " ✓" if m else "")
        cells.insert(0, "target", self.target)
        counts = {"target": f"{len(self.values)} targets",
                  **{c: f"{self.met_count(c)} of {len(self.values)} met" for c in self.values.columns}}
        return pd.concat([cells, pd.DataFrame([counts], index=["targets met"])]).rename_axis("held-out target")


def targets_table(ablation: pd.DataFrame, params: dict, calibrated: str = CALIBRATED_ROW,
                  null: str = NULL_ROW) -> TargetsTable:
    """Notebook 05's first table (issue 47): every target of :data:`TARGETS` for the calibrated replay, the model
    without a mechanism (``null``: the latency fitted to the real waits, no contention) and the best row of each
    placement among ``ablation``'s rows, side by side, with which targets each meets.

    ``ablation``: :func:`.heldout.ablation`'s table (index: row names; the target keys as columns, and
    ``evaluation.objective`` where measured); ``params``: ``{row name: ReplayParams}`` of the rows that replay the
    calibrated workload (rows of other workloads are not placements of this replay). Each row's targets are judged
    as the scorecard judges them (:func:`scorecard`). The best row of a placement (:func:`placement_kind`) meets the
    most targets, then has the lowest held-out objective; the null row is no placement's candidate, and a placement
    whose best is the calibrated replay shows no second column.
    """
    if calibrated not in ablation.index:
        raise ValueError(f"targets_table: the ablation has no row {calibrated!r}")
    cards = {name: scorecard(ablation.loc[name].to_dict()) for name in ablation.index
             if name == calibrated or name == null or name in params}
    objective = ablation["evaluation.objective"] if "evaluation.objective" in ablation.columns else \
        pd.Series(np.nan, index=ablation.index)
    columns = {f"calibrated replay ({placement_kind(params[calibrated])})" if calibrated in params
               else "calibrated replay": calibrated}
    if null in cards:
        columns["no contention, fitted latency"] = null
    best: dict = {}
    for name in params:
        if name == null or name not in cards:
            continue
        kind = placement_kind(params[name])
        key = (_rank(cards[name], float(objective.get(name, np.nan))), name != calibrated, list(params).index(name))
        if kind not in best or key < best[kind][0]:
            best[kind] = (key, name)
    for kind, (_, name) in best.items():
        if name != calibrated:
            columns[f"best with {kind}: {name}"] = name
    first = cards[calibrated]
    values = pd.DataFrame({c: cards[name]["replay"].to_numpy() for c, name in columns.items()}, index=first.index)
    met = pd.DataFrame({c: cards[name]["met"].to_numpy(bool) for c, name in columns.items()}, index=first.index)
    target = pd.Series([f"{r.direction} {r.target:g}" for r in first.itertuples()], index=first.index)
    comparison = _against_null(first, cards.get(null))
    return TargetsTable(values.rename_axis("held-out target"), met.rename_axis("held-out target"), target, columns,
                        comparison, _null_sentence(comparison))


def _against_null(mechanism: pd.DataFrame, null: pd.DataFrame | None) -> pd.DataFrame:
    """Per target: the calibrated replay's value and met, the null model's, and which is closer to the target
    ("mechanism", "fitted distribution", "tie"; "not measured" where either is NaN). Lower is closer for an "at most"
    target, higher for a "more than" one."""
    if null is None:
        return pd.DataFrame()
    rows = []
    for what, r in mechanism.iterrows():
        n = null.loc[what]
        a, b = float(r["replay"]), float(n["replay"])
        if not (np.isfinite(a) and np.isfinite(b)):
            better = "not measured"
        elif r["met"] and n["met"]:
            better = "tie"   # both meet it: neither is better at what the target asks
        elif decision_value(a) == decision_value(b):
            better = "tie"
        else:
            lower = r["direction"] == "at most"
            better = "mechanism" if (a < b) == lower else "fitted distribution"
        rows.append({"held-out target": what, "mechanism": a, "mechanism_met": bool(r["met"]),
                     "fitted_distribution": b, "fitted_distribution_met": bool(n["met"]), "closer": better})
    return pd.DataFrame(rows).set_index("held-out target")


def _null_sentence(comparison: pd.DataFrame) -> str:
    """Where the mechanism beats the fitted distribution and where it does not, in one sentence from ``comparison``."""
    if comparison.empty:
        return "The model without a mechanism (latency fitted to the real waits, no contention) was not measured."

    def listed(part: pd.DataFrame) -> str:
        return "; ".join(f"{what} ({r.mechanism:.3g} against {r.fitted_distribution:.3g})"
                         for what, r in part.iterrows())

    wins = comparison[comparison["closer"] == "mechanism"]
    losses = comparison[comparison["closer"] == "fitted distribution"]
    ties = comparison[comparison["closer"] == "tie"]
    parts = [f"Against the model without a mechanism (the latency fitted to the real waits, no contention), the "
             f"calibrated replay is closer to the target on {len(wins)} of {len(comparison)} targets"
             + (f": {listed(wins)}" if len(wins) else "")]
    if len(losses):
        parts.append(f"the fitted distribution is closer on {len(losses)}: {listed(losses)}")
    if len(ties):
        parts.append(f"{len(ties)} {'is a tie' if len(ties) == 1 else 'are ties'} (both meet the target, or equal)")
    return ". ".join(parts) + "."
