"""The paper's design implications answered from the sweep: one row each, in the words the scorecard shares.

Each row reads **supported** (the interval of the change lies on the side the implication predicts),
**contradicted** (on the other side), **no effect larger than X** (the interval includes no change; X is the larger
end of the interval, so the design excludes any larger effect), **unstable: <arm> queue grows X per week** (an arm
without a steady state, :func:`.intervals.stability`: a ratio over the run would depend on how long the run lasts, so
no interval is shown and the row is never scored) or **cannot be tested on public data** (why), and
carries what it rests on (:data:`KINDS`): only a *mechanism* row is a finding; a *by construction* or an
*assumption* row is shown with its tag.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .common import metric_weights, paired_ratio, percent_text, ratio_text, short_duration
from .intervals import Interval, Stability, combine_runs, replicate_unit, stability
from .interference import ISOLATE_ARM, PACK_ARM, SPREAD_ARM
from .kinds import ASSUMPTION, KINDS  # noqa: F401  (KINDS: the tag vocabulary, re-exported)
from .locality import LONG_JOBS_ARMS

#: The headline target: a 95% interval on a relative change no wider than this either side of its estimate.
TARGET_HALF_WIDTH = 0.10
#: An effect of at least this factor (or at most its inverse) is large: its interval misses the target for its size
#: (:func:`interval_target`), since an interval scales with the effect it brackets.
LARGE_EFFECT = 2.0
#: The implications, in the order of notebook 06's opening table, with their results.json key part.
IMPLICATIONS = {
    "prioritize locality": "prioritize_locality",
    "relax it after a bounded wait": "relax_after_wait",
    "migrate long jobs": "migrate_long_jobs",
    "pack against interference": "pack",
    "isolate gangs against interference": "isolate_gangs",
    "class-aware retries": "class_aware_retries",
    "pre-run on one GPU": "prerun",
    "early termination": "early_termination",
}
UNTESTABLE = "cannot be tested on public data"
#: the answer where the grid runs no arm the implication compares
NOT_IN_GRID = "not in this grid"
#: How an answer on an arm without a steady state starts (:func:`unstable_words`); such an answer is never scored.
UNSTABLE = "unstable"
#: The answers that are verdicts (scored): every other answer counts as neither.
VERDICTS = ("supported", "contradicted")


@dataclass(frozen=True)
class Answer:
    """One implication's answer: the words, the comparison behind them and its interval, what it rests on."""

    implication: str
    answer: str
    comparison: str
    change: Interval | None
    kind: str
    replicates: str
    why: str = ""
    #: what the interval's replicates are worth as independent ones (:func:`.intervals.effective_n` of the per-block
    #: log ratios; runs x effective blocks for :func:`.intervals.combine_runs`); NaN where not computed
    effective_n: float = float("nan")

    @property
    def key(self) -> str:
        return IMPLICATIONS[self.implication]

    @property
    def unstable(self) -> bool:
        """An arm of the comparison has no steady state: no interval, never scored (:func:`unstable_words`)."""
        return self.answer.startswith(f"{UNSTABLE}:")

    @property
    def verdict(self) -> str | None:
        """'supported' or 'contradicted' where the answer is one (a scored verdict), else None."""
        return self.answer if self.answer in VERDICTS else None

    def row(self) -> dict:
        ci = self.change
        digits = interval_digits(ci)
        shown = "" if ci is None or not np.isfinite(ci.mean) else (
            percent_text(ci.mean, digits)
            + (f" [95% CI {percent_text(ci.low, digits)}, {percent_text(ci.high, digits)}]" if ci.known else ""))
        detectable = "" if ci is None or not np.isfinite(ci.detectable) else f"±{100 * ci.detectable:.{digits}f}%"
        return {"implication": self.implication, "answer": self.answer, "change": shown, "comparison": self.comparison,
                "smallest detectable change": detectable, "±10-point target": interval_target(ci, self.kind, self.why),
                "rests on": self.kind, "replicates": self.replicates,
                "effective replicates": effective_text(self.effective_n, ci), "why": self.why}


def effective_text(n_eff: float, change: Interval | None) -> str:
    """'3.4 of 7 blocks': what the replicates are worth as independent ones beside their count ('' when unknown)."""
    if change is None or not np.isfinite(n_eff):
        return ""
    unit = replicate_unit(change)
    return f"{n_eff:.1f} of {change.n} {unit}{'' if change.n == 1 else 's'}"


def interval_target(change: Interval | None, kind: str = "", assumed: str = "") -> str:
    """Whether a change's 95% interval meets the ±10-point target (:data:`TARGET_HALF_WIDTH`), and why not, from its
    numbers: 'met (±3.1 points)'; for a large effect (:data:`LARGE_EFFECT`) whose direction is certain, that an effect
    that large has an interval wider than ±10 points in relative terms (its ends as shares of the effect itself);
    otherwise that the blocks disagree more than the design resolves (its smallest detectable change). ``kind``
    'assumption' adds that the effect rests on an assumed input (``assumed``: which). '' without an interval."""
    if change is None or not change.known:
        return ""
    half = max(change.high - change.mean, change.mean - change.low)
    if half <= TARGET_HALF_WIDTH:
        return f"met (±{100 * half:.1f} points)"
    span = (f"{percent_text(change.low)} to {percent_text(change.high)}, {100 * (change.high - change.low):.0f} "
            "points")
    certain = change.above(0.0) or change.below(0.0)
    effect = 1.0 + change.mean
    if certain and not 1 / LARGE_EFFECT < effect < LARGE_EFFECT:
        ends = f"{percent_text((1 + change.low) / effect - 1)} to {percent_text((1 + change.high) / effect - 1)}"
        text = (f"not met ({span}): an effect of {ratio_text(change.mean, as_factor=change.mean >= 1.0)} has an "
                f"interval wider than ±10 points although its direction is certain (the whole interval lies "
                f"{'above' if change.above(0.0) else 'below'} no change): relative to the effect itself it spans "
                f"{ends}, and ±10 points would need the effect known to ±{100 * TARGET_HALF_WIDTH / effect:.1f}% of "
                "itself")
    else:
        detectable = ("" if not np.isfinite(change.detectable)
                      else f"; the smallest change it could detect is ±{100 * change.detectable:.0f}%")
        text = (f"not met ({span}): the blocks disagree more than this design resolves{detectable}"
                + ("; its direction is certain all the same" if certain else ""))
    if kind == ASSUMPTION:
        text += "; and it rests on an assumed input" + (f" ({assumed})" if assumed else "")
    return text


def target_note(answers: list[Answer]) -> str:
    """The answers whose interval misses the ±10-point target, each with why (:func:`interval_target`); '' when every
    answer with an interval meets it."""
    missed = [(a, interval_target(a.change, a.kind, a.why)) for a in answers]
    missed = [(a, why) for a, why in missed if why.startswith("not met")]
    if not missed:
        return ""
    return ("Intervals wider than the ±10-point target: " + "; ".join(f"*{a.implication}* ({a.comparison}): {why}"
                                                                    for a, why in missed) + ".")


def interval_digits(change: Interval | None) -> int:
    """Decimals of a change's percentages: one where its interval is narrower than 5 points, so that '−2.4% [95% CI
    −3.1%, −1.9%]' does not print as '−2% [95% CI −3%, −2%]', whose rounded ends hide how narrow it is."""
    return 1 if change is not None and change.known and change.high - change.low < 0.05 else 0


def answer_words(change: Interval, predicted: str = "down") -> str:
    """'supported' when the interval lies on the ``predicted`` side of no change ('down': the implication predicts a
    reduction), 'contradicted' on the other side, else 'no effect larger than X%' (X: the interval's larger end)."""
    if not change.known:
        return "not computable (no interval)"
    if change.below(0.0):
        return "supported" if predicted == "down" else "contradicted"
    if change.above(0.0):
        return "contradicted" if predicted == "down" else "supported"
    bound = max(abs(change.low), abs(change.high))
    # one decimal under 1%, so that a bound of 0.15% does not read 'no effect larger than 0%'
    return f"no effect larger than {100 * bound:.{1 if bound < 0.01 else 0}f}%"


def unstable_words(stabilities: dict[str, Stability]) -> str:
    """'unstable: strict locality queue grows 4.5 h per week' for the arms of ``stabilities`` (arm: its
    :func:`.intervals.stability`) that are unstable, joined by '; '; '' when every arm is stable."""
    parts = [f"{arm} queue grows {s.growth_text}" for arm, s in stabilities.items() if not s.stable]
    return f"{UNSTABLE}: " + "; ".join(parts) if parts else ""


def _compare(rows: pd.DataFrame, base: str, arm: str, metric: str = "jct_mean_s") -> Interval | None:
    rows = rows[rows["bucket"] == "all"]
    if not {base, arm} <= set(rows["arm"]):
        return None
    return paired_ratio(rows, base, arm, metric)


def _answer(implication, rows, base, arm, kind, replicates, what, metric="jct_mean_s", why=""):
    """One implication's answer from the change of ``metric`` from ``base`` to ``arm``; when either arm's queue has no
    steady state (:func:`.intervals.stability`) in any run, 'unstable: ...' with no interval (never scored), the why
    giving the growth.

    ``rows``: one run's rows, or a list of whole runs (the first the main one; the others the same arms under other
    draws). With several runs that hold both arms the interval combines them (:func:`combined_change`: each run's
    blocks kept together, the runs independent), and ``replicates`` says so."""
    runs = list(rows) if isinstance(rows, (list, tuple)) else [rows]
    rows = runs[0]
    change = _compare(rows, base, arm, metric)
    if change is None:
        return Answer(implication, NOT_IN_GRID, f"{arm} vs {base}", None, kind, replicates,
                      f"the grid has no '{arm}' or '{base}' arm")
    comparison = f"{what}: '{arm}' vs '{base}'"
    others = [r for r in runs[1:] if _compare(r, base, arm, metric) is not None]
    reasons = []
    for i, run in enumerate([rows, *others]):
        stabilities = {name: stability(run[run["arm"] == name]) for name in dict.fromkeys((arm, base))}
        where = f" (run {i + 1})" if others else ""
        reasons += [(f"{name}{where}", s) for name, s in stabilities.items() if not s.stable]
    if reasons:
        return Answer(implication, unstable_words(dict(reasons)), comparison, None, kind, replicates,
                      "no steady state, so a ratio over the run depends on how long it lasts ("
                      + "; ".join(f"'{name}': {s.reason}" for name, s in reasons) + ")" + (f"; {why}" if why else ""))
    if others and change.known:
        try:
            change = combined_change([rows, *others], base, arm, metric)
            replicates = f"{1 + len(others)} whole runs (VC and latency draws), each run's blocks kept together"
        except ValueError as err:   # a run without two paired blocks: the main run's interval, and why
            why = (f"{why}; " if why else "") + f"the other draws' runs not combined ({err})"
    return Answer(implication, answer_words(change), comparison, change, kind, replicates, why,
                  change.effective_n if np.isfinite(change.effective_n) else float(change.n))


def run_blocks(rows: pd.DataFrame, base: str, arm: str, metric: str = "jct_mean_s") -> tuple:
    """One run's paired blocks of ``metric`` (its sweep table's 'all' bucket): ``(after, after_weights, before,
    before_weights)`` in block order, as :func:`.intervals.combine_runs` takes them."""
    rows = rows[rows["bucket"] == "all"] if "bucket" in rows.columns else rows
    after = rows[rows["arm"] == arm].groupby("seed", sort=True).first()
    before = rows[rows["arm"] == base].groupby("seed", sort=True).first().reindex(after.index)
    return (after[metric].to_numpy(float), metric_weights(after, metric), before[metric].to_numpy(float),
            metric_weights(before, metric))


def combined_change(runs: list[pd.DataFrame], base: str, arm: str, metric: str = "jct_mean_s") -> Interval:
    """The change from ``base`` to ``arm`` over several whole runs (their sweep tables, one per draw), each run's
    blocks kept together (:func:`.intervals.combine_runs`)."""
    return combine_runs([run_blocks(rows, base, arm, metric) for rows in runs])


def implication_answers(table: pd.DataFrame, main_load: str, philly_arm: str, replicates: str,
                        earliest_rtf_s: float, prerun_s: float, interference_scenario: str | None = "paper",
                        slowdown: str = "the slowdown model fitted to measured step times",
                        runs: tuple[pd.DataFrame, ...] | list[pd.DataFrame] = ()) -> list[Answer]:
    """The seven rows of notebook 06's opening table from the sweep table (:func:`.grid.with_arms`'s).

    ``runs``: the same arms' sweep tables under other VC and latency draws (whole runs: the ensemble's draw members,
    :func:`.ensemble.draw_runs`); every interval then combines ``table``'s run with them (:func:`combined_change`).

    ``philly_arm``: the locality experiment's arm for Philly's calibrated relax timeout; ``replicates``: what the
    intervals are over, in words; ``earliest_rtf_s``: the fitted failure model's earliest runtime to failure and
    ``prerun_s`` the pre-run's length (a pre-run can only catch a failure before its end).
    """
    every = [t[(t["load_label"] == main_load) & (t["population"] == "all jobs")] for t in (table, *runs)]
    locality = [t[t["experiment"] == "locality"] for t in every]
    answers = [
        _answer("prioritize locality", locality, "no locality (any GPUs)", philly_arm, "mechanism", replicates,
                f"mean JCT of all jobs, with {slowdown} for spread jobs",
                why="locality held until the relax timeout, against none at all"),
        _answer("relax it after a bounded wait", locality, "strict locality", philly_arm, "mechanism", replicates,
                f"mean JCT of all jobs, with {slowdown}",
                why="relaxing after Philly's calibrated timeout, against never relaxing"),
        _answer("migrate long jobs", locality, philly_arm,
                f"{philly_arm}, {LONG_JOBS_ARMS['migrate']}", "mechanism", replicates,
                f"mean JCT of all jobs, with {slowdown}; jobs of at least 1 h moved to a tighter placement"),
    ]
    interference = [t[t["experiment"] == "interference"] for t in every]
    scenarios = list(dict.fromkeys(interference[0]["interference"])) if len(interference[0]) else []
    scenario = interference_scenario if interference_scenario in scenarios else (scenarios[-1] if scenarios else None)
    interference_rows = (("pack against interference", SPREAD_ARM, PACK_ARM,
                          "packing (best fit) against Philly's spreading"),
                         ("isolate gangs against interference", PACK_ARM, ISOLATE_ARM + " + migration",
                          ("multi-GPU gangs on servers of their own with migration to defragment (1-GPU jobs packed), "
                           "against packing as the replay places")))
    for implication, base, arm, what in interference_rows:
        if scenario is None:
            answers.append(Answer(implication, NOT_IN_GRID, "", None, "assumption", replicates))
            continue
        part = [t[t["interference"] == scenario] for t in interference]
        kind = "mechanism" if scenario == "none" else "assumption"
        answers.append(_answer(
            implication, part, base, arm, kind, replicates,
            f"mean JCT of all jobs under the interference scenario '{scenario}'",
            why=(f"{what}; colocation interference assumed (no public data measure it): the answer follows from the "
                 "assumption" if kind == "assumption" else f"{what}; no interference: what it costs or gains in "
                 "placement and waiting alone")))
    answers.append(Answer(
        "class-aware retries", UNTESTABLE, "GPU-hours on failed attempts, class-aware vs retry everything", None,
        "by construction", replicates,
        "the public data hold no failure class per job: the classes' shares are the log corpus's composition (not a "
        "frequency) and every class draws its runtime to failure from the same DRE failed attempts, so not retrying "
        "the classes marked deterministic wastes less by definition"))
    answers.append(Answer(
        "pre-run on one GPU", UNTESTABLE, "failing jobs a pre-run catches", None, "by construction", replicates,
        f"the DRE records hold only jobs that ran at least 5 minutes, so the fitted runtime to failure starts at "
        f"{short_duration(earliest_rtf_s)}, not before the pre-run's {short_duration(prerun_s)} ends: a pre-run "
        "catches no failure of the fitted model by construction, and no public data show the early failures it is "
        "meant to catch"))
    stop = [t[t["experiment"] == "early_stop"] for t in every]
    if len(stop[0]):
        arms = [a for a in dict.fromkeys(stop[0]["arm"]) if a != "no early stop"]
        tolerance_arm = arms[0] if arms else None
    else:
        tolerance_arm = None
    if tolerance_arm is None:
        answers.append(Answer("early termination", NOT_IN_GRID, "", None, "by construction", replicates))
    else:
        answers.append(_answer(
            "early termination", stop, "no early stop", tolerance_arm, "by construction", replicates,
            "GPU-hours of the run", metric="gpu_hours",
            why="each job ends at a convergence point drawn from the real learning curves (notebook 03): the GPU "
                "time saved restates those points, the quality lost is at most the tolerance"))
    return answers


def answers_table(answers: list[Answer]) -> pd.DataFrame:
    return pd.DataFrame([a.row() for a in answers]).set_index("implication")


def scorecard_words(answers: list[Answer], implications: tuple[str, ...]) -> str:
    """The answers of ``implications`` in one line for the scorecard's row: 'prioritize locality: supported
    (−12% [−15%, −9%]); ...'."""
    parts = []
    for a in answers:
        if a.implication in implications:
            row = a.row()
            parts.append(f"{a.implication}: {a.answer}" + (f" ({row['change']}; {a.kind})" if row["change"] else
                                                            f" ({a.kind})"))
    return "; ".join(parts)


#: The columns that tell one arm's rows from another's in the sweep table (those present are used).
ARM_KEYS = ("experiment", "load_label", "interference", "arm")


def arm_stability(table: pd.DataFrame) -> pd.DataFrame:
    """Every arm's :func:`.intervals.stability` from the sweep table (:func:`.grid.with_arms`'s; its 'all' bucket of
    all jobs), in the table's order: whether its queue has a steady state, the mean wait's and the mean JCT's growth
    per week (hours) with the wait's one-sided 95% lower bound, the blocks and why in a few words (the numbers are
    the columns beside it; :attr:`.intervals.Stability.reason` has them in a sentence). An unstable arm's ratio is
    never scored (:func:`_answer`)."""
    rows = table
    if "bucket" in rows.columns:
        rows = rows[rows["bucket"] == "all"]
    if "population" in rows.columns:
        rows = rows[rows["population"] == "all jobs"]
    keys = [k for k in ARM_KEYS if k in rows.columns]
    out = []
    for key, group in rows.groupby(keys, sort=False, dropna=False):
        s = stability(group)
        out.append({**dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)), "stable": s.stable,
                    "wait growth per week (h)": s.growth_per_week_s / 3600,
                    "its one-sided 95% lower bound (h)": s.growth_lower_s / 3600,
                    "JCT growth per week (h)": s.jct_growth_per_week_s / 3600, "blocks": s.n,
                    "why": s.why})
    return pd.DataFrame(out, columns=[*keys, "stable", "wait growth per week (h)", "its one-sided 95% lower bound (h)",
                                      "JCT growth per week (h)", "blocks", "why"])
