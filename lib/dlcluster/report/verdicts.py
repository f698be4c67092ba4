"""The one standard every verdict follows, and the one function that applies it: :func:`judge`.

Every verdict the project prints is decided here: the paper's scorecard (:mod:`.reproduction`, rules in
``reproduction.yaml``), the comparisons with the full trace's own figures (:mod:`dlcluster.analysis.official`) and
the replay's validation targets (:mod:`dlcluster.validation.scorecard`). The standard, in order:

1. **Both sides say what they measure.** Ours and the reference each state their data, definition and selection
   (:class:`Side`). Where the definitions or the selections differ, the comparison is ``not comparable``, unless
   the difference is argued away in words (``same_definition`` / ``same_selection``: why it does not change the
   quantity, e.g. a within-selection contrast).
2. **A measurement of the real cluster.** A reproduction verdict compares real records with the reference: our data
   label must not name a simulated, synthetic or assumed input or another selection (:data:`NOT_LIKE_FOR_LIKE`).
   (A validation target compares a simulated replay with real data on purpose: that rule does not apply to it, the
   others do.)
3. **Enough jobs.** At least :data:`MIN_JOBS` jobs behind our side, or ``not comparable: too few jobs (n)``.
4. **Then the test.** It holds: ``reproduced`` (a target: ``met``); it fails: ``differs`` (``not met``); it can
   reject neither answer (an interval of a direction that includes zero): ``not comparable``, "not shown on this
   data"; no value: ``not comparable`` (a target: ``not met``, not measured).

A direction ("less", "more") holds only when its interval excludes zero on the claimed side (:func:`direction`).

**The label** (:attr:`Verdict.label`, one of :data:`KINDS`): what a reader is told of the claim, the most informative
honest statement first, decided by :func:`judge` from the same inputs:

1. ``reproduced`` / ``differs``: like for like, as above;
2. ``holds on <selection>`` / ``does not hold on <selection>`` / ``not shown on <selection>``: a direction (an
   :class:`Outcome` with ``direction=True``, i.e. an interval) tested on a named public selection (``where``) of at
   least ``min_n`` real jobs that is not the reference's; not shown where the interval includes zero;
3. ``on <selection>, ours is X``: our value (``value``) of the quantity on a named public selection of real data that
   differs from the reference's (the reason says how);
4. ``cannot be tested``: no public selection measures it (no ``where``, no value, or only a simulated or assumed
   input).

A selection that differs from the reference's counts as the same (``same_selection``) only where a measurement shows
that the quantity does not move with it; otherwise the comparison is one of labels 2-4.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

REPRODUCED, DIFFERS, NOT_COMPARABLE = "reproduced", "differs", "not comparable"
VERDICTS = (REPRODUCED, DIFFERS, NOT_COMPARABLE)
MET, NOT_MET = "met", "not met"

#: The fewest jobs behind any verdict. Why 100: a KS distance's 5% sampling margin is 136 / sqrt(n) CDF points, 13.6
#: at n = 100 and 96 at n = 2, so below 100 almost any curve passes; a share's 95% interval at n = 100 is at most
#: +-10 points wide. The replay's Figure 3 scores a cell from the same count (dlcluster.validation.fig3.MIN_WAITS).
MIN_JOBS = 100

#: Words of a data label for data that is not like for like with a measurement of the real cluster's jobs: a
#: simulated, synthetic or assumed input, or another selection (of minutes, of jobs, of hardware). Lower case.
NOT_LIKE_FOR_LIKE = ("simulated", "synthetic", "assumed", "assumption", "illustrative", "on a cpu", "minutes 0-3",
                     "start-up", "another selection", "biased selection", "corpus composition", "an inference")

#: The labels a claim can get (:attr:`Verdict.kind`), most informative first (the module doc).
HOLDS_ON, NOT_HOLDS_ON, NOT_SHOWN_ON = "holds on", "does not hold on", "not shown on"
OURS_ON, CANNOT = "on another selection", "cannot be tested"
KINDS = (REPRODUCED, DIFFERS, HOLDS_ON, NOT_HOLDS_ON, NOT_SHOWN_ON, OURS_ON, CANNOT)

# A test's outcome: the claim holds, it fails, the data cannot tell, or there is no value to test.
HOLDS, FAILS, UNDECIDED, MISSING = "holds", "fails", "undecided", "missing"
_SIDE_FIELDS = ("definition", "selection", "data")


#: Words of a data label for data that is not a measurement at all (a model's output or an assumption), which no
#: label of a public selection (2-3) may rest on. Lower case.
NOT_MEASURED = ("simulated", "synthetic", "assumed", "assumption", "illustrative")


def not_measured(label: str) -> list[str]:
    """The words of :data:`NOT_MEASURED` that a data label uses."""
    text = str(label or "").lower()
    return [word for word in NOT_MEASURED if word in text]


def not_like_for_like(label: str) -> list[str]:
    """The words of :data:`NOT_LIKE_FOR_LIKE` that a data label uses."""
    text = str(label or "").lower()
    return [word for word in NOT_LIKE_FOR_LIKE if word in text]


@dataclass(frozen=True)
class Side:
    """What one side of a comparison measures: its definition (the quantity, computed how), its selection (which
    jobs, minutes or span) and its data (the label of the records it comes from)."""

    definition: str
    selection: str
    data: str = ""

    def statement(self) -> str:
        """``definition: ... | selection: ... | data: ...`` (:meth:`parse` reads it back)."""
        for name in _SIDE_FIELDS:
            if "|" in getattr(self, name):
                raise ValueError(f"a side's {name} may not contain '|': {getattr(self, name)!r}")
        return " | ".join(f"{name}: {getattr(self, name)}" for name in _SIDE_FIELDS)

    @classmethod
    def parse(cls, text) -> Side | None:
        """The side a :meth:`statement` wrote, or None when ``text`` is not one."""
        match = re.fullmatch(r"definition: (.*) \| selection: (.*) \| data: (.*)", str(text or ""), re.S)
        return cls(*match.groups()) if match else None


@dataclass(frozen=True)
class Outcome:
    """What a test found (one of HOLDS, FAILS, UNDECIDED, MISSING) and, in words, how; ``direction``: the test is
    of a direction, by an interval (:func:`direction`), so it can be told on a selection that is not the
    reference's."""

    result: str
    text: str
    direction: bool = False


@dataclass(frozen=True)
class Verdict:
    """``verdict``: the strict word (reproduced, differs, not comparable; a target's met / not met); ``label``: what
    a reader is told (``kind``, one of :data:`KINDS`, with its selection and value: "holds on DRE's records"),
    and ``reason`` why, a sentence."""

    verdict: str
    reason: str
    n: float | None
    like_for_like: str
    label: str = ""
    kind: str = ""

    @property
    def compares(self) -> bool:
        """Whether the verdict says something about the numbers (reproduced/differs, or a target met/not met on a
        like-for-like basis)."""
        return self.verdict in (REPRODUCED, DIFFERS) or (self.verdict in (MET, NOT_MET)
                                                         and self.like_for_like.startswith("like for like"))


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def basis_problems(ours: Side, reference: Side, same_definition: str = "", same_selection: str = "",
                   simulated_allowed: bool = False) -> list[str]:
    """Why ``ours`` and ``reference`` are not like for like (sentences); empty when they are."""
    problems = []
    for name, side in (("our", ours), ("the reference's", reference)):
        lacking = [part for part in ("definition", "selection") if not str(getattr(side, part)).strip()]
        if lacking:
            problems.append(f"{name} side does not state its {' or '.join(lacking)}")
    if problems:
        return problems
    if ours.definition != reference.definition and not same_definition.strip():
        problems.append(f"another definition: ours is {ours.definition}, the reference's is {reference.definition}")
    if ours.selection != reference.selection and not same_selection.strip():
        problems.append(f"another selection: ours is {ours.selection}, the reference's is {reference.selection}")
    words = [] if simulated_allowed else not_like_for_like(ours.data)
    if words:
        problems.append(f"our data ({ours.data}) names {' and '.join(words)}: not a measurement of the real "
                        "cluster's jobs by the reference's terms")
    return problems


def like_for_like_statement(ours: Side, reference: Side, same_definition: str = "", same_selection: str = "",
                            simulated_allowed: bool = False) -> str:
    """One sentence: why the comparison is like for like, or why not."""
    problems = basis_problems(ours, reference, same_definition, same_selection, simulated_allowed)
    if problems:
        return "not like for like: " + "; ".join(problems)
    definition = (f"the same definition ({ours.definition})" if ours.definition == reference.definition else
                  f"definitions in other words but the same quantity ({same_definition.strip()})")
    selection = (f"the same selection ({ours.selection})" if ours.selection == reference.selection else
                 f"selections that differ without changing the quantity ({same_selection.strip()})")
    return f"like for like: {definition}; {selection}"


def judge(outcome: Outcome, ours: Side, reference: Side, n: float | None, *, same_definition: str = "",
          same_selection: str = "", min_n: int = MIN_JOBS, target: bool = False, where: str = "", value: str = "",
          why_not: str = "") -> Verdict:
    """The verdict and label of one comparison, by the standard of the module doc.

    ``n``: the jobs behind our side (None: not stated, which no verdict on the numbers accepts). ``target``: a
    validation target (words ``met`` / ``not met``; our side may be simulated). ``min_n`` other than
    :data:`MIN_JOBS` must be argued where it is passed. ``where``: the short name of the public selection our side
    measures ("DRE's records"), for labels 2-3; ``value``: our value as a reader reads it ("43.2%"), for label 3;
    ``why_not``: why the sides are not like for like, where it is known beforehand (a sentence).
    """
    statement = like_for_like_statement(ours, reference, same_definition, same_selection, simulated_allowed=target)
    n_value = None if _missing(n) else float(n)

    def verdict(word: str, reason: str, label: str = "", kind: str = "") -> Verdict:
        return Verdict(word, _sentence(reason), n_value, statement, label or word, kind or word)

    missed = NOT_MET if target else NOT_COMPARABLE
    if why_not.strip():   # known beforehand: the sides' own statements would only repeat it
        problems = [why_not.strip().rstrip(".")]
        statement = f"not like for like: {problems[0]}"
    else:
        problems = basis_problems(ours, reference, same_definition, same_selection, simulated_allowed=target)
    if n_value is None and min_n > 0:
        problems.append("the number of jobs behind our side is not stated")
    elif n_value is not None and n_value < min_n:
        problems.append(f"too few jobs ({n_value:,.0f}; at least {min_n} needed)")
    if target:
        return _target_verdict(outcome, problems, verdict)
    if problems:
        return _label_elsewhere(outcome, ours, n_value, min_n, where, value, problems, verdict)
    if outcome.result == MISSING:
        return verdict(missed, outcome.text or "no value on this data", CANNOT, CANNOT)
    if outcome.result == UNDECIDED:
        shown_on = f"{NOT_SHOWN_ON} {where or 'this data'}"
        return verdict(missed, f"not shown on this data: {outcome.text}", shown_on, NOT_SHOWN_ON)
    if outcome.result == HOLDS:
        return verdict(REPRODUCED, outcome.text)
    if outcome.result == FAILS:
        return verdict(DIFFERS, outcome.text)
    raise ValueError(f"unknown test outcome {outcome.result!r}")


def _sentence(reason: str) -> str:
    return reason[:1].upper() + reason[1:].rstrip(".") + "."


def _target_verdict(outcome: Outcome, problems: list[str], verdict) -> Verdict:
    if problems:
        return verdict(NOT_MET, "; ".join(problems))
    if outcome.result == MISSING:
        return verdict(NOT_MET, outcome.text or "no value on this data")
    if outcome.result == UNDECIDED:
        return verdict(NOT_MET, f"not shown on this data: {outcome.text}")
    if outcome.result in (HOLDS, FAILS):
        return verdict(MET if outcome.result == HOLDS else NOT_MET, outcome.text)
    raise ValueError(f"unknown test outcome {outcome.result!r}")


def _label_elsewhere(outcome: Outcome, ours: Side, n_value, min_n: int, where: str, value: str, problems: list[str],
                     verdict) -> Verdict:
    """Labels 2-4 of a comparison that is not like for like (or rests on too few jobs): the strict verdict stays
    ``not comparable`` with the reasons as before; the label says what the named public selection shows."""
    strict = "; ".join(problems)
    real = not not_measured(ours.data)
    enough = n_value is not None and n_value >= min_n
    if where and real and enough and outcome.direction and outcome.result in (HOLDS, FAILS, UNDECIDED):
        kind = {HOLDS: HOLDS_ON, FAILS: NOT_HOLDS_ON, UNDECIDED: NOT_SHOWN_ON}[outcome.result]
        why = f"{outcome.text} (n = {n_value:,.0f}); not the paper's selection: {strict}"
        return verdict(NOT_COMPARABLE, why, f"{kind} {where}", kind)
    if where and real and str(value).strip():
        n_text = f" (n = {n_value:,.0f})" if n_value is not None else ""
        return verdict(NOT_COMPARABLE, f"{strict}{n_text}", f"on {where}, ours is {value}", OURS_ON)
    return verdict(NOT_COMPARABLE, strict, CANNOT, CANNOT)


# ------------------------------------------------------------------------ tests a verdict rests on


def within(ours, published, tolerance: float, decide=float) -> Outcome:
    """A number: holds when ``|ours - published| <= tolerance`` (``decide`` rounds the difference first)."""
    if _missing(ours):
        return Outcome(MISSING, "no value of ours on this data")
    diff = float(ours) - float(published)
    rel = f" ({diff / published:+.1%})" if published else ""
    if decide(abs(diff)) <= float(tolerance):
        return Outcome(HOLDS, f"within {tolerance:g} (ours - published = {diff:+.3g}{rel})")
    return Outcome(FAILS, f"by {diff:+,.3g}{rel}, beyond the tolerance of {tolerance:g}")


def direction(low, high, sign: str, what: str, bounds: tuple[float, float] | None = None) -> Outcome:
    """A direction: ``sign`` '-' (the claim: below zero) or '+' (above). Holds when the interval [low, high]
    excludes zero on the claimed side, fails when it excludes zero on the other side, else undecided. ``bounds``:
    the range the quantity can take (a difference of two shares in points: (-100, 100)); an interval outside it is
    an error of the interval's method, refused."""
    if sign not in "+-" or len(sign) != 1:
        raise ValueError(f"a direction's sign is '+' or '-', got {sign!r}")
    if _missing(low) or _missing(high):
        return Outcome(MISSING, f"{what} has no interval on this data", True)
    if bounds is not None and not (bounds[0] <= float(low) <= float(high) <= bounds[1]):
        raise ValueError(f"{what}: interval [{low}, {high}] leaves the quantity's range {list(bounds)} (a share's "
                         "interval stays in it: Wilson, Newcombe or a percentile bootstrap, not a normal one)")
    interval = f"{what}: interval [{float(low):+.3g}, {float(high):+.3g}]"
    claimed_above = sign == "+"
    if (low > 0) if claimed_above else (high < 0):
        return Outcome(HOLDS, f"{interval}, {'above' if claimed_above else 'below'} zero as claimed", True)
    if (high < 0) if claimed_above else (low > 0):
        return Outcome(FAILS, f"{interval}, {'below' if claimed_above else 'above'} zero: the opposite direction", True)
    return Outcome(UNDECIDED, f"{interval} includes zero, so neither direction is shown", True)


def at_most(value, limit: float, what: str, decide=float) -> Outcome:
    """A distance or error: holds when ``value <= limit``."""
    if _missing(value):
        return Outcome(MISSING, f"{what} could not be measured")
    if decide(float(value)) <= limit:
        return Outcome(HOLDS, f"{what} {float(value):.3g} <= {limit:.3g}")
    return Outcome(FAILS, f"{what} {float(value):.3g}, {float(value) - limit:.3g} beyond the {limit:.3g} allowed")


def threshold(value, limit: float, at_least: bool, what: str, decide=float) -> Outcome:
    """A target: holds when ``value > limit`` (``at_least``) or ``value <= limit``."""
    if not at_least:
        return at_most(value, limit, what, decide)
    if _missing(value):
        return Outcome(MISSING, f"{what} could not be measured")
    if decide(float(value)) > limit:
        return Outcome(HOLDS, f"{what} {float(value):.3g} > {limit:.3g}")
    return Outcome(FAILS, f"{what} {float(value):.3g}, not above {limit:.3g}")


def combine(outcomes: list[Outcome]) -> Outcome:
    """Several tests of one finding: missing if any is, fails if any fails, undecided if any cannot tell, else holds;
    the texts of those that decide it."""
    for result in (MISSING, FAILS, UNDECIDED, HOLDS):
        chosen = [o.text for o in outcomes if o.result == result]
        if chosen:
            return Outcome(result, "; ".join(chosen), all(o.direction for o in outcomes))
    raise ValueError("no test to combine")


def recorded_violations(verdict: str, n, like_for_like: str, ours: str | None = None,
                        reference: str | None = None) -> list[str]:
    """What breaks the standard in a verdict as a report recorded it (the scan of every results.json): a
    ``reproduced`` or ``differs`` on fewer than :data:`MIN_JOBS` jobs (or an unstated n), without a like-for-like
    statement, or, where the sides' statements are recorded (:meth:`Side.statement`), a side without its
    definition and selection, or our data label naming a simulated, synthetic or assumed input or another
    selection."""
    if verdict not in (REPRODUCED, DIFFERS):
        return []
    problems = []
    if _missing(n) or float(n) < MIN_JOBS:
        problems.append(f"says {verdict} on {'an unstated number of' if _missing(n) else f'{float(n):,.0f}'} jobs "
                        f"(at least {MIN_JOBS} needed)")
    if not str(like_for_like or "").startswith("like for like"):
        problems.append(f"says {verdict} without a like-for-like statement ({like_for_like!r})")
    if ours is None and reference is None:
        return problems
    sides = {"our": Side.parse(ours), "the reference's": Side.parse(reference)}
    for name, side in sides.items():
        if side is None or not side.definition.strip() or not side.selection.strip():
            problems.append(f"says {verdict}, but {name} side does not state its definition and selection")
    if sides["our"] is not None and not_like_for_like(sides["our"].data):
        problems.append(f"says {verdict}, but our data label {sides['our'].data!r} names "
                        f"{not_like_for_like(sides['our'].data)}")
    return problems


#: How the index page folds the rows that do not compare: the first group whose words a reason uses (lower case).
REASON_GROUPS = (
    (("simulated", "by construction"),
     "It rests on the simulated replay or on an assumption, not on a measurement of the cluster."),
    (("another definition",), "Ours is another quantity: another definition."),
    (("no job of ours", "no sample", "not loaded"), "No data of ours for it."),
    (("another selection", "another job selection", "keep jobs that ran at least 5 minutes", "selection is not public"),
     "Ours is another selection of jobs or minutes."),
    (("too few jobs",), "Too few jobs behind ours."),
    (("not shown on this data",), "The data show the paper's direction no more than its opposite."),
    (("quoted sentence", "a sentence on"), "A quoted sentence: its numbers have rows of their own."),
    (("an input of ours", "input of the simulator", "the method", "which we read as an input"),
     "An input or method of ours, not a result."),
    (("on a cpu", "cpu run", "philly's gpus"), "Our benchmark ran on other hardware."),
)
OTHER_REASONS = "The public data do not hold what it needs."


def reason_group(reason: str) -> str:
    """The group (a sentence) a not-comparable verdict's reason falls in, for folding rows on the index page."""
    text = str(reason or "").lower()
    for words, group in REASON_GROUPS:
        if any(word in text for word in words):
            return group
    return OTHER_REASONS
