"""An implication answered across the replays the data allow: a small, named ensemble of members.

Every member is one replay the data do not rule out (the calibrated replay; a placement variant that meets the
placement targets; the slowdown factor at either end of its measured range; another VC or latency draw), named by the
choice it changes and that choice's value: "calibrated", "slowdown 0.47", "placement: best fit + pools", "VC draw 1".
An implication is **supported** only when every member's interval excludes no change on the predicted side, and
**contradicted** only when every member's excludes it on the other side (:func:`ensemble_answer`). Otherwise it
**depends on** the choice(s) whose member flips the answer, named, with every member's value beside it: one replay's
sign is not a finding when another replay the data allow gives the other sign. A member whose queue has no steady
state (:func:`.intervals.stability`) has no interval: it is listed as unstable and makes the answer depend on its
choice, unless every member is unstable. :func:`forest_plot` draws every member's interval on one axis per
implication.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .common import percent_text
from .implications import NOT_IN_GRID, interval_digits
from .intervals import Interval

#: What a member's interval says: below no change, above it, across it, no interval, or no steady state.
DOWN, UP, ACROSS, NO_INTERVAL, UNSTABLE = "below no change", "above no change", "across no change", "no interval", \
    "unstable"
#: The member every other one changes one choice of: the reference side a flip is read against.
CALIBRATED = "calibrated"
#: A member's name: its choice, then the choice's value after a colon or as a trailing number ("slowdown 0.47").
_TRAILING_VALUE = re.compile(r"^(?P<choice>.*?)\s+[-+−]?\d[\d.,]*\s*%?$")


def member_choice(name: str) -> str:
    """The choice a member changes: the part of its name before the value. 'slowdown 0.47' → 'slowdown',
    'placement: best fit + pools' → 'placement', 'VC draw 1' → 'VC draw', 'calibrated' → 'calibrated'."""
    name = str(name).strip()
    if ":" in name:
        return name.split(":", 1)[0].strip()
    match = _TRAILING_VALUE.match(name)
    return match.group("choice").strip() if match and match.group("choice").strip() else name


@dataclass(frozen=True)
class Member:
    """One member's change and what its interval says (:data:`DOWN`, :data:`UP`, :data:`ACROSS`,
    :data:`NO_INTERVAL`, :data:`UNSTABLE`); ``note``: why it is unstable (its growth)."""

    name: str
    change: Interval | None
    outcome: str
    note: str = ""

    @property
    def choice(self) -> str:
        return member_choice(self.name)

    def text(self) -> str:
        """'slowdown 0.47: −2.4% [−3.1%, −1.9%]', or 'VC draw 2: unstable (queue grows 3.0 h per week)'."""
        if self.outcome == UNSTABLE:
            return f"{self.name}: unstable" + (f" ({self.note})" if self.note else "")
        ci = self.change
        if ci is None or not np.isfinite(ci.mean):
            return f"{self.name}: no value"
        digits = interval_digits(ci)
        ends = f" [{percent_text(ci.low, digits)}, {percent_text(ci.high, digits)}]" if ci.known else \
            " (no interval)"
        return f"{self.name}: {percent_text(ci.mean, digits)}{ends}"


@dataclass(frozen=True)
class EnsembleAnswer:
    """One implication's answer across the ensemble: the words, the members with their values, the choices that flip
    it (for 'depends on')."""

    implication: str
    answer: str
    predicted: str
    members: tuple[Member, ...]
    choices: tuple[str, ...] = ()

    @property
    def verdict(self) -> str | None:
        """'supported' or 'contradicted' where the answer is one (scored), else None."""
        return self.answer if self.answer in ("supported", "contradicted") else None

    @property
    def agreeing(self) -> tuple[str, ...]:
        """The members whose interval says what the answer's side is: all for a verdict or a 'no effect'; for 'depends
        on', those that agree with the reference (the calibrated member, else the most common outcome)."""
        side = _reference_outcome(self.members)
        if side in (UNSTABLE, NO_INTERVAL):   # no member's interval says anything
            return ()
        return tuple(m.name for m in self.members if m.outcome == side)

    def values(self) -> str:
        """Every member's value, in order: 'calibrated: −2.4% [−3.1%, −1.9%]; slowdown 0.47: ...'."""
        return "; ".join(m.text() for m in self.members)

    def row(self) -> dict:
        """The implications table's row: the answer, the members that agree ('4 of 5: ...'), every member's value."""
        agree = self.agreeing
        return {"implication": self.implication, "answer": self.answer,
                "members that agree": f"{len(agree)} of {len(self.members)}: {', '.join(agree)}" if agree else
                f"0 of {len(self.members)}", "every member": self.values()}


def _outcome(change: Interval | None) -> str:
    if change is None or not change.known:
        return NO_INTERVAL
    if change.below(0.0):
        return DOWN
    if change.above(0.0):
        return UP
    return ACROSS


def _member(name: str, value, unstable: dict[str, str]) -> Member:
    """A member from an :class:`Interval`, None (no interval) or an :class:`.implications.Answer` (its change, and its
    'unstable: ...' answer)."""
    if name in unstable:
        change = getattr(value, "change", value)
        return Member(name, change if isinstance(change, Interval) else None, UNSTABLE, unstable[name])
    if hasattr(value, "answer") and hasattr(value, "change"):   # an implications.Answer
        if getattr(value, "unstable", False):
            return Member(name, None, UNSTABLE, value.answer.removeprefix("unstable: "))
        value = value.change
    if value is not None and not isinstance(value, Interval):
        raise TypeError(f"ensemble member {name!r}: an Interval, an implications.Answer or None, not {type(value)}")
    return Member(name, value, _outcome(value))


def _reference_outcome(members: tuple[Member, ...]) -> str:
    """The side a flip is read against: the calibrated member's outcome, else the most common one (ties: the first
    member's)."""
    for m in members:
        if m.name.strip().lower().startswith(CALIBRATED):
            return m.outcome
    counts = Counter(m.outcome for m in members)
    most = max(counts.values())
    return next(m.outcome for m in members if counts[m.outcome] == most)


def ensemble_answer(implication: str, members: dict, predicted: str = "down",
                    unstable: dict[str, str] | list[str] | tuple[str, ...] = ()) -> EnsembleAnswer:
    """``implication`` answered on every member (name: its :class:`Interval` of the relative change, an
    :class:`.implications.Answer`, or None without one; ``unstable``: the members without a steady state, with
    their growth where a dict).

    * **supported**: every member's interval lies on the ``predicted`` side of no change ('down': a reduction);
    * **contradicted**: every member's lies on the other side;
    * **no effect larger than X%**: every member's interval includes no change (X: the largest end of any);
    * **unstable on every member**: no member has a steady state; **not computable** where no member has an
      interval;
    * else **depends on <choice>[, <choice>...]**: the choices (:func:`member_choice`) of the members whose outcome
      differs from the calibrated member's (or, without one, from the most common outcome); an unstable member or
      one without an interval counts as differing. Never scored.
    """
    if predicted not in ("down", "up"):
        raise ValueError(f"predicted must be 'down' or 'up', got {predicted!r}")
    if not members:
        raise ValueError("ensemble_answer: no member")
    marks = dict(unstable) if isinstance(unstable, dict) else {name: "" for name in unstable}
    unknown = set(marks) - set(members)
    if unknown:
        raise ValueError(f"ensemble_answer: unstable members {sorted(unknown)} are not members")
    result = tuple(_member(name, value, marks) for name, value in members.items())
    outcomes = {m.outcome for m in result}
    on_side, other_side = (DOWN, UP) if predicted == "down" else (UP, DOWN)
    if outcomes == {UNSTABLE}:
        return EnsembleAnswer(implication, "unstable on every member", predicted, result)
    if outcomes == {on_side}:
        return EnsembleAnswer(implication, "supported", predicted, result)
    if outcomes == {other_side}:
        return EnsembleAnswer(implication, "contradicted", predicted, result)
    if outcomes <= {UNSTABLE, NO_INTERVAL} and NO_INTERVAL in outcomes:
        return EnsembleAnswer(implication, "not computable (no member has an interval)", predicted, result)
    if outcomes == {ACROSS}:
        bound = max(max(abs(m.change.low), abs(m.change.high)) for m in result)
        return EnsembleAnswer(implication, f"no effect larger than {100 * bound:.{1 if bound < 0.01 else 0}f}%",
                              predicted, result)
    side = _reference_outcome(result)
    choices = tuple(dict.fromkeys(m.choice for m in result if m.outcome != side))
    return EnsembleAnswer(implication, f"depends on {', '.join(choices)}", predicted, result, choices)


# --------------------------------------------------------------------------- the forest plot

#: A member's colour by what its interval says against the implication: on the predicted side, the other, across.
SIDE_COLORS = {"predicted": "#4C72B0", "other": "#C44E52", ACROSS: "#8C8C8C"}


def forest_plot(answers: list[EnsembleAnswer], title: str = "The implications across the replays the data allow"):
    """One panel per implication, stacked: every member's point and 95% interval on one horizontal axis of the
    relative change (a log axis of after / before, ticked in percent where the range is narrow, as
    :func:`.plots.plot_paired_changes`; no change marked), the member names as y labels, coloured by the side the
    interval lies on (the predicted one, the other, across no change); an unstable member has no interval and says
    so at no change. Each panel's title is the implication and its answer."""
    import matplotlib.pyplot as plt

    from ..report.plotting import legend_points, wrap_labels
    from .plots import MARKERS, ratio_axis

    if not answers:
        raise ValueError("forest_plot: no answer to draw")
    heights = [max(len(a.members), 1) * 0.42 + 0.9 for a in answers]
    fig, axes = plt.subplots(len(answers), 1, figsize=(8.5, sum(heights) + 0.6), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    drawn: dict[str, object] = {}
    for ax, answer in zip(axes[:, 0], answers, strict=True):
        names = [m.name for m in answer.members]
        ratios = [1.0]
        for y, member in enumerate(answer.members):
            ci = member.change
            if member.outcome == UNSTABLE or ci is None or not np.isfinite(ci.mean) or ci.mean <= -1:
                what = "unstable: no steady state, no interval" if member.outcome == UNSTABLE else "no value"
                ax.annotate(what, (1.0, y), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8,
                            color="0.35", style="italic")
                continue
            point = 1 + ci.mean
            low = 1 + ci.low if ci.known and ci.low > -1 else point
            high = 1 + ci.high if ci.known and np.isfinite(ci.high) else point
            predicted_side = (member.outcome == DOWN) == (answer.predicted == "down")
            key = ACROSS if member.outcome in (ACROSS, NO_INTERVAL) else "predicted" if predicted_side else "other"
            label = {"predicted": "on the predicted side", "other": "on the other side",
                     ACROSS: "across no change"}[key]
            handle = ax.errorbar([point], [y], xerr=[[point - low], [high - point]],
                                 fmt=MARKERS[list(SIDE_COLORS).index(key)], color=SIDE_COLORS[key], ms=6, capsize=3,
                                 lw=1.4, label=label)
            drawn.setdefault(label, handle)
            ratios.extend([low, high])
        ratio_axis(ax, ratios)
        ax.set_yticks(range(len(names)), wrap_labels(names, 28))
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xlabel("relative change against the arm it is compared with (log scale; 0: no change)", fontsize=8)
        ax.set_title(f"{answer.implication}: {answer.answer}", fontsize=9, loc="left")
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(f"{title} · each member's change with its 95% interval", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))   # room for the suptitle above the first panel
    if drawn:
        fig.legend(list(drawn.values()), list(drawn), loc="center left", bbox_to_anchor=(1.0, 0.5),
                   fontsize=legend_points(8), frameon=False, title="the member's interval lies",
                   title_fontsize=legend_points(8))
    return fig


def ensemble_answers(member_answers: dict[str, list], predicted: dict[str, str] | None = None) -> list[EnsembleAnswer]:
    """Every implication answered across the ensemble, from each member's :func:`.implications.implication_answers`
    (member name: its answers), in the order of the first member's. An implication no member can test keeps that
    answer ('cannot be tested on public data'); one a member's grid lacks has no interval on it. ``predicted``: the
    side each implication predicts where not 'down' (every implication of notebook 06 predicts a reduction)."""
    predicted = predicted or {}
    by_member = {name: {a.implication: a for a in answers} for name, answers in member_answers.items()}
    if not by_member:
        raise ValueError("ensemble_answers: no member")
    order = list(next(iter(by_member.values())))
    result = []
    for implication in order:
        answers = {name: got.get(implication) for name, got in by_member.items()}
        # a member that cannot run an arm (a pooled placement cannot migrate) is not asked: it neither agrees nor
        # differs, as long as another member answers
        asked = {name: a for name, a in answers.items() if a is None or a.answer != NOT_IN_GRID}
        answers = asked or answers
        words = {a.answer for a in answers.values() if a is not None}
        if all(a is not None and a.change is None and not a.unstable for a in answers.values()) and len(words) == 1:
            # untestable (or absent) on every member alike: its own words, no member's interval
            members = tuple(Member(name, None, NO_INTERVAL) for name in answers)
            result.append(EnsembleAnswer(implication, words.pop(), predicted.get(implication, "down"), members))
            continue
        result.append(ensemble_answer(implication, answers, predicted.get(implication, "down")))
    return result


def baseline_stability(rows: pd.DataFrame, main_load: str):
    """The stability (:func:`.intervals.stability`) of a member's replay as calibrated: its policies' Philly arm
    (every job, at ``main_load``), or None where the rows hold no such arm."""
    from .intervals import stability

    base = rows[(rows["experiment"] == "policy") & (rows["arm"] == "Philly") & (rows["bucket"] == "all")
                & (rows["population"] == "all jobs") & (rows["load_label"] == main_load)]
    return stability(base) if len(base) else None


def draw_runs(members_table: pd.DataFrame | None, members: list[str], main_load: str) -> list[pd.DataFrame]:
    """The ensemble's other VC and latency draws (members 'VC and latency draw <k>') as whole runs of the same arms,
    for :func:`.implications.implication_answers`' ``runs``: the main answers' intervals then combine independent
    runs, not only the blocks of one. A draw whose replay as calibrated has no steady state
    (:func:`baseline_stability`) is left out, as :func:`ensemble_implications` leaves it out of the verdicts."""
    from .members import is_draw, member_of

    if members_table is None or not len(members_table):
        return []
    of = member_of(members_table)
    runs = []
    for member in members:
        if not is_draw(member):
            continue
        rows = members_table[of == member]
        steady = baseline_stability(rows, main_load)
        if len(rows) and (steady is None or steady.stable):
            runs.append(rows)
    return runs


def ensemble_implications(main: pd.DataFrame, members_table: pd.DataFrame | None, members: list[str], *args,
                          excluded: dict | None = None, **kwargs):
    """Every implication answered across ``members`` (:func:`ensemble_answers`): the calibrated member from the main
    sweep ``main``, the others from ``members_table`` (:func:`.grid.ensemble_cells`' sweep); ``args``/``kwargs`` go to
    :func:`.implications.implication_answers` for each member (``args[0]``: the main load).

    A member whose replay as calibrated has no steady state (its Philly arm's queue grows week after week,
    :func:`baseline_stability`) is not a replay the data allow: the real cluster's queue did not grow without bound
    over the record (its occupancy stays below the servers in service). Such a member is left out of the verdicts and
    named in ``excluded`` (a dict the caller passes: member -> why). Returns ``(answers, per member answers)``, the
    latter for the members kept."""
    from .implications import implication_answers
    from .members import CALIBRATED, member_of

    per_member = {}
    of = member_of(members_table) if members_table is not None else None
    for member in members:
        rows = main if member == CALIBRATED else members_table[of == member]
        if member != CALIBRATED and args:
            steady = baseline_stability(rows, args[0])
            if steady is not None and not steady.stable:
                if excluded is not None:
                    excluded[member] = (f"no steady state: its replay as calibrated (Philly's arm) has a queue that "
                                        f"grows {steady.growth_text}")
                continue
        per_member[member] = implication_answers(rows, *args, **kwargs)
    return ensemble_answers(per_member), per_member
