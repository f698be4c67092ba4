"""The reproduction scorecard: a verdict beside every published value.

For each entry of ``data/reference/atc19.yaml``, ``reproduction.yaml`` (next to
this module) names the figure of ours that stands beside it and how the verdict
is reached. :func:`scorecard` reads the notebooks' ``results.json`` of a reports
folder and gives each published value one of three verdicts, decided by the one
function every verdict of the project goes through (:func:`.verdicts.judge`):

* ``reproduced``: within the stated tolerance, or every check of a finding holds
  (a direction: its interval excludes zero on the paper's side);
* ``differs``: by how much, or which check of the finding fails (a direction:
  its interval excludes zero on the other side);
* ``not comparable``: why (another job selection, another definition, a
  simulated or assumed input, an input of ours rather than a result, too few
  jobs, no value on the data at hand, or a finding the data can show neither way).

The standard: ``reproduced`` and ``differs`` mean that our figure measures the
same quantity, by the same definition and selection, on at least
:data:`.verdicts.MIN_JOBS` real jobs, so every entry that can reach them states
both sides (``ours_side``, ``paper_side``), its data label and its n;
:func:`standard_violations` finds a verdict that compares while breaking it.

Beside its verdict every row gets a label (``label``, ``kind``: what the findings tell a reader, decided by the
same call to :func:`.verdicts.judge`): where an entry names the public selection its figure is measured on
(``where``), a direction there is "holds / does not hold / not shown on <where>" and a level "on <where>, ours is
X" (with ``also``: the quantity on other cuts of the public data); only an entry that names none is "cannot be
tested". :func:`untested_but_measured` finds a claim left "cannot be tested" while its rule names a selection.

Published values are only read to be shown and compared here: no result is
computed from them. ``make reports`` writes ``reports/<config>/scorecard.json``
and puts the table at the top of the index page; the golden file keeps the verdicts.

A second reference, the full trace's own figures (the official notebook's, digitized), gets a table of its own:
:func:`official_card` collects every ``official.<comparison>.verdict`` a notebook wrote.
"""

from __future__ import annotations

import json
import math
import operator
import re
from functools import lru_cache
from pathlib import Path

import pandas as pd
import yaml

from ..atomic import atomic_write_text
from ..ordering import decision_value
from .notebook import read_results_json
from . import verdicts as vd
from .reference import load_reference

VERDICTS = vd.VERDICTS
NOT_LIKE_FOR_LIKE = vd.NOT_LIKE_FOR_LIKE

SPEC_PATH = Path(__file__).with_name("reproduction.yaml")
OPERATORS = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le, "==": operator.eq}
WAYS = ("within", "checks", "directions", "not_comparable")
#: What each side of an entry that can reach a verdict on the numbers states (the paper's side has no data label).
SIDE_PARTS = ("definition", "selection")
FIELDS = {*WAYS, "ours", "tests", "data", "when_missing", "ours_side", "paper_side", "same_definition",
          "same_selection", "n", "significance", "where", "unit", "also", "ours_label"}


def _check_entry(path, key: str, entry: dict) -> None:
    ways = [w for w in WAYS if w in entry]
    if len(ways) != 1:
        raise ValueError(f"{path}: entry {key!r} needs exactly one of {WAYS}, has {ways}")
    unknown = set(entry) - FIELDS
    if unknown:
        raise ValueError(f"{path}: entry {key!r} has unknown field(s) {sorted(unknown)}")
    if "within" in entry and "ours" not in entry:
        raise ValueError(f"{path}: entry {key!r} compares a number (within) but names no figure of ours")
    for item in entry.get("also", []):
        if not (isinstance(item, list) and len(item) in (2, 3)):
            raise ValueError(f"{path}: entry {key!r}: an also is [label, figure] or [label, figure, unit], got "
                             f"{item!r}")
    for check in entry.get("checks", []):
        if len(check) != 3 or check[1] not in OPERATORS:
            raise ValueError(f"{path}: entry {key!r}: a check is [figure, one of {list(OPERATORS)}, "
                             f"figure or value], got {check!r}")
    for item in entry.get("directions", []):
        if len(item) != 4 or item[3] not in ("+", "-"):
            raise ValueError(f"{path}: entry {key!r}: a direction is [what, interval low, interval high, '+' or "
                             f"'-'], got {item!r}")
    if "where" in entry and not (str(entry["where"]).strip() and str(entry.get("data", "")).strip()):
        raise ValueError(f"{path}: entry {key!r} names a public selection (where) but not its name or its data label")
    if "where" in entry and not ("ours" in entry or "also" in entry or "directions" in entry or "checks" in entry):
        raise ValueError(f"{path}: entry {key!r} names a public selection (where) but no figure of ours measured on it")
    if "same_selection" in entry:
        raise ValueError(f"{path}: entry {key!r} argues a selection away in words (same_selection); a selection "
                         "counts as the paper's only where a measurement shows the quantity does not move with it: "
                         "name the public selection (where) instead, and the label says what it shows")
    if "not_comparable" in entry:
        if not str(entry["not_comparable"]).strip():
            raise ValueError(f"{path}: entry {key!r} is not comparable but does not say why")
        return
    missing = [f"{side}.{part}" for side in ("ours_side", "paper_side") for part in SIDE_PARTS
               if not str((entry.get(side) or {}).get(part, "")).strip()]
    missing += [field for field in ("data", "n") if not entry.get(field)]
    if missing:
        raise ValueError(f"{path}: entry {key!r} can be reproduced, so it must state both sides' definition and "
                         f"selection, its data label and the jobs behind it (n); missing {missing} (or make it "
                         "not_comparable, with why)")


@lru_cache(maxsize=2)
def load_spec(path: str = str(SPEC_PATH)) -> dict:
    """The scorecard's entries, checked: one way each (:data:`WAYS`), known operators, and both sides stated where
    the entry can reach a verdict on the numbers."""
    spec = yaml.safe_load(Path(path).read_text()) or {}
    for key, entry in spec.items():
        _check_entry(path, key, entry)
    return spec


def _split(ref: str) -> tuple[str, str]:
    notebook, _, key = ref.partition(":")
    return notebook, key


class _Figures:
    """The notebooks' results of one reports folder, looked up as ``notebook:key``."""

    def __init__(self, results: dict[str, dict]):
        self.results = results

    def has(self, ref: str) -> bool:
        notebook, key = _split(ref)
        return key in self.results.get(notebook, {})

    def get(self, ref):
        if not isinstance(ref, str) or ":" not in ref:
            return ref   # a literal number or boolean
        notebook, key = _split(ref)
        return self.results.get(notebook, {}).get(key)


def is_missing(value) -> bool:
    """No value: None, or a NaN (a figure the data at hand cannot give)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _name(ref) -> str:
    return _split(ref)[1] if isinstance(ref, str) and ":" in ref else _fmt(ref)


def _checks(entry: dict, figures: _Figures) -> vd.Outcome:
    failed = []
    for a, op, b in entry["checks"]:
        left, right = figures.get(a), figures.get(b)
        if is_missing(left) or is_missing(right):
            return vd.Outcome(vd.MISSING, f"{_name(a if is_missing(left) else b)} has no value in these reports")
        if not OPERATORS[op](*(decision_value(v) if isinstance(v, float) else v for v in (left, right))):
            shown = f"{_name(b)} = {_fmt(right)}" if isinstance(b, str) and ":" in b else _fmt(right)
            failed.append(f"{_name(a)} = {_fmt(left)} is not {op} {shown}")
    tests = entry.get("tests", "")
    if failed:
        return vd.Outcome(vd.FAILS, f"tested: {tests}; fails: " + "; ".join(failed))
    significance = entry.get("significance")
    if significance:
        p_ref, alpha = significance
        p = figures.get(p_ref)
        if is_missing(p):
            return vd.Outcome(vd.MISSING, f"{_name(p_ref)} has no value in these reports")
        if not decision_value(float(p)) < float(alpha):
            return vd.Outcome(vd.UNDECIDED, f"tested: {tests}; the direction holds but {_name(p_ref)} = {_fmt(p)} "
                                            f"is not below {alpha:g}, so chance is not ruled out")
    return vd.Outcome(vd.HOLDS, f"tested: {tests}")


def _directions(entry: dict, figures: _Figures) -> vd.Outcome:
    tests = entry.get("tests", "")
    outcome = vd.combine([vd.direction(figures.get(low), figures.get(high), sign, what)
                          for what, low, high, sign in entry["directions"]])
    return vd.Outcome(outcome.result, f"tested: {tests}; {outcome.text}" if tests else outcome.text, outcome.direction)


def _n(entry: dict, figures: _Figures):
    refs = entry.get("n")
    refs = refs if isinstance(refs, list) else [refs]
    values = [figures.get(ref) for ref in refs if ref is not None]
    return None if not values or any(is_missing(v) for v in values) else min(float(v) for v in values)


def entry_sides(entry: dict) -> tuple[vd.Side, vd.Side]:
    """Our side and the paper's side of an entry that can reach a verdict on the numbers."""
    ours, paper = entry.get("ours_side") or {}, entry.get("paper_side") or {}
    return (vd.Side(str(ours.get("definition", "")), str(ours.get("selection", "")), str(entry.get("data", ""))),
            vd.Side(str(paper.get("definition", "")), str(paper.get("selection", "")), "the paper"))


def verdict(entry: dict, published, figures: _Figures) -> tuple[str, str, object, float | None, str]:
    """(verdict, reason, our value, n, like-for-like statement) of one published value, by :func:`.verdicts.judge`."""
    judged, ours = judge_entry(entry, published, figures)
    return judged.verdict, judged.reason, ours, judged.n, judged.like_for_like


def judge_entry(entry: dict, published, figures: _Figures, unit: str = "") -> tuple[vd.Verdict, object]:
    """The :class:`.verdicts.Verdict` (verdict and label) of one published value, and our value; ``unit``: the
    published value's, which our value is shown in (an entry's own ``unit`` comes first)."""
    ours_ref = entry.get("ours")
    ours = figures.get(ours_ref) if ours_ref else None
    where = str(entry.get("where", ""))
    unit = str(entry.get("unit", unit) or "")
    value = _value_text(entry, ours if ours_ref else None, unit, figures)
    mine, paper = entry_sides(entry)
    if "not_comparable" in entry:
        n = _n(entry, figures) if entry.get("n") else None
        result = vd.judge(vd.Outcome(vd.MISSING, ""), mine, paper, n, min_n=vd.MIN_JOBS if entry.get("n") else 0,
                          where=where, value=value, why_not=str(entry["not_comparable"]))
        return result, ours
    if "within" in entry:
        if is_missing(ours):
            why = entry.get("when_missing") or (f"{ours_ref} is not in the reports" if not figures.has(ours_ref)
                                                else f"{ours_ref} has no value on this data")
            outcome = vd.Outcome(vd.MISSING, why)
        else:
            if not isinstance(published, (int, float)):
                raise ValueError(f"reproduction.yaml compares {ours_ref} with a published value that is not a "
                                 f"number: {published!r}")
            outcome = vd.within(ours, published, float(entry["within"]), decide=decision_value)
    elif "checks" in entry:
        outcome = _checks(entry, figures)
    else:
        outcome = _directions(entry, figures)
    result = vd.judge(outcome, mine, paper, _n(entry, figures), same_definition=str(entry.get("same_definition", "")),
                      same_selection=str(entry.get("same_selection", "")), where=where, value=value)
    return result, ours


def _with_unit(value, unit: str) -> str:
    return f"{_fmt(value)}{'' if unit.startswith('%') else ' '}{unit}".strip()


def _value_text(entry: dict, ours, unit: str, figures: _Figures) -> str:
    """Our value as a reader reads it: the figure in its unit (after ``ours_label``), then each of ``also`` ([label,
    figure, and its own unit where it is not the entry's]: the same quantity on a part or another cut of the public
    data) that has a value; empty when none has."""
    label = f"{entry['ours_label']} " if entry.get("ours_label") else ""
    parts = [] if is_missing(ours) else [label + _with_unit(ours, unit)]
    for label, ref, *own_unit in entry.get("also", []):
        value = figures.get(ref)
        if not is_missing(value):
            parts.append(f"{label} {_with_unit(value, own_unit[0] if own_unit else unit)}")
    return "; ".join(parts)


def _sentence(text: str) -> str:
    text = str(text).strip()
    return text[:1].upper() + text[1:].rstrip(".") + "."


def read_notebook_results(reports_dir: Path) -> dict[str, dict]:
    """Each notebook's results; one whose results.json cannot be read is left out (the index page says why)."""
    out = {}
    for path in sorted(Path(reports_dir).glob("[0-9][0-9]-*/results.json")):
        try:
            results = read_results_json(path)["results"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        out[path.parent.name] = results
    return out


def scorecard(reports_dir: str | Path, spec: dict | None = None) -> pd.DataFrame:
    """One row per published value: key, section, what, published, provenance, ours, verdict, detail (the reason, a
    sentence), n (the jobs behind ours, where the entry compares), figure, data, like_for_like (a sentence) and, for a
    row that does not compare, reason_group (the sentence the index page folds it under)."""
    return scorecard_from(read_notebook_results(Path(reports_dir)), spec)


def scorecard_from(results: dict[str, dict], spec: dict | None = None) -> pd.DataFrame:
    """:func:`scorecard` of each notebook's results given as ``{notebook: {key: value}}`` (the golden file's
    figures, say: :func:`dlcluster.report.findings.golden_findings`)."""
    spec = load_spec() if spec is None else spec
    reference = load_reference()
    unknown = sorted(set(spec) - set(reference["key"]))
    if unknown:
        raise ValueError(f"{SPEC_PATH.name} names keys that data/reference/atc19.yaml does not list: {unknown}")
    lacking = sorted(set(reference["key"]) - set(spec))
    if lacking:
        raise ValueError(f"{SPEC_PATH.name} has no entry for these published values: {lacking}")
    figures = _Figures(results)
    rows = []
    for ref in reference.itertuples():
        entry = spec[ref.key]
        unit = ref.unit if isinstance(ref.unit, str) else ""
        judged, ours = judge_entry(entry, ref.value, figures, unit if isinstance(ref.value, (int, float)) else "")
        published = f"{ref.value:g} {ref.unit}".strip() if isinstance(ref.value, (int, float)) else str(ref.value)
        rows.append({"key": ref.key, "section": ref.section, "what": ref.item, "published": published,
                     "provenance": ref.provenance, "ours": None if is_missing(ours) else ours,
                     "verdict": judged.verdict, "label": judged.label, "kind": judged.kind, "detail": judged.reason,
                     "n": judged.n, "figure": entry.get("ours"), "data": entry.get("data", ""),
                     "where": entry.get("where", ""), "like_for_like": judged.like_for_like,
                     "reason_group": vd.reason_group(judged.reason) if judged.verdict == vd.NOT_COMPARABLE else ""})
    return pd.DataFrame(rows)


not_like_for_like = vd.not_like_for_like


def figure_data_labels(reports_dir: str | Path) -> dict[tuple[str, str], list[str]]:
    """(notebook, published key) -> the data labels the notebook printed beside its figure for that published value
    (its published-vs-ours rows, results.json ``comparisons``)."""
    labels: dict[tuple[str, str], list[str]] = {}
    for path in sorted(Path(reports_dir).glob("[0-9][0-9]-*/results.json")):
        try:
            rows = read_results_json(path).get("comparisons") or []
        except (json.JSONDecodeError, OSError):
            continue
        for row in rows:
            if isinstance(row, dict) and row.get("key"):
                labels.setdefault((path.parent.name, row["key"]), []).append(str(row.get("data", "")))
    return labels


def standard_violations(card: pd.DataFrame, labels: dict[tuple[str, str], list[str]] | None = None) -> list[str]:
    """Rows of ``card`` that compare (``reproduced`` or ``differs``) while breaking the standard: fewer jobs than
    :data:`.verdicts.MIN_JOBS`, no like-for-like statement, or a label of their data (the entry's ``data``, or a
    label the figure's notebook printed beside it: :func:`figure_data_labels`) that names another selection or a
    simulated, synthetic or assumed input. Empty when the scorecard keeps the standard."""
    labels = labels or {}
    problems = []
    for row in card[card["verdict"].isin([vd.REPRODUCED, vd.DIFFERS])].itertuples():
        notebook = _split(row.figure)[0] if isinstance(row.figure, str) else ""
        for label in [row.data, *labels.get((notebook, row.key), [])]:
            words = not_like_for_like(label)
            if words:
                problems.append(f"{row.key} says {row.verdict}, but its data label {label!r} names {words}: "
                                f"not like for like (make the entry not_comparable, with why)")
        problems += [f"{row.key}: {p}" for p in vd.recorded_violations(row.verdict, getattr(row, "n", None),
                                                                        row.like_for_like)]
    return problems


def counts(card: pd.DataFrame) -> dict[str, int]:
    return {v: int((card["verdict"] == v).sum()) for v in VERDICTS}


def label_counts(card: pd.DataFrame) -> dict[str, int]:
    """How many claims get each label (:data:`.verdicts.KINDS`, in that order), zeros included."""
    return {kind: int((card["kind"] == kind).sum()) for kind in vd.KINDS}


def untested_but_measured(card: pd.DataFrame) -> list[str]:
    """Claims labelled ``cannot be tested`` although their rule names a public selection (``where``) that measures
    the quantity or its direction: each such row is a finding the reader is not told. Empty when none is."""
    rows = card[(card["kind"] == vd.CANNOT) & (card["where"].fillna("").astype(str).str.strip() != "")]
    return [f"{r.key}: labelled 'cannot be tested' while its rule names a public selection ({r.where}): {r.detail}"
            for r in rows.itertuples()]


#: The second reference: the full trace's own figures (the official notebook's, digitized). A notebook holds a
#: curve of ours against one by writing, through :func:`dlcluster.analysis.official.add_verdict`,
#: ``official.<comparison>.verdict`` (one of VERDICTS), ``.detail`` (the reason), ``.n`` (the jobs behind ours),
#: ``.ours`` and ``.reference`` (each side's definition, selection and data: :meth:`.verdicts.Side.statement`) and
#: ``.like_for_like`` (a sentence) into its results.
OFFICIAL_REFERENCE = "full trace (official notebook figure, digitized)"
_OFFICIAL_VERDICT = re.compile(r"^official\.(?P<comparison>.+)\.verdict$")
OFFICIAL_COLUMNS = ["notebook", "comparison", "what", "verdict", "detail", "n", "like_for_like", "ours", "reference"]


def official_card(reports_dir: str | Path) -> pd.DataFrame:
    """One row per comparison with the full trace's own figures: notebook, comparison, what, verdict, detail (the
    reason), n, like_for_like, ours and reference (the sides' statements)."""
    rows = []
    for path in sorted(Path(reports_dir).glob("[0-9][0-9]-*/results.json")):
        try:
            doc = read_results_json(path)
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        results, descriptions = doc.get("results", {}), doc.get("descriptions", {})
        for key, value in results.items():
            match = _OFFICIAL_VERDICT.match(key)
            if not match or value not in VERDICTS:
                continue
            prefix = key[: -len(".verdict")]
            n = results.get(f"{prefix}.n")
            rows.append({"notebook": path.parent.name, "comparison": match["comparison"],
                         "what": descriptions.get(key, match["comparison"]), "verdict": value,
                         "detail": results.get(f"{prefix}.detail") or "", "n": None if is_missing(n) else n,
                         "like_for_like": results.get(f"{prefix}.like_for_like") or "",
                         "ours": results.get(f"{prefix}.ours") or "",
                         "reference": results.get(f"{prefix}.reference") or ""})
    card = pd.DataFrame(rows, columns=OFFICIAL_COLUMNS)
    card["reason_group"] = [vd.reason_group(d) if v == vd.NOT_COMPARABLE else "" for v, d in
                            zip(card["verdict"], card["detail"], strict=True)]
    return card


def official_violations(card: pd.DataFrame) -> list[str]:
    """Comparisons with the full trace's figures that compare while breaking the standard (too few jobs, a side
    that does not state its definition and selection, not like for like, or data that is not a measurement)."""
    problems = []
    for row in card.itertuples():
        found = vd.recorded_violations(row.verdict, row.n, row.like_for_like, row.ours, row.reference)
        problems += [f"{row.notebook}: official.{row.comparison}: {p}" for p in found]
    return problems


def write_scorecard(reports_dir: str | Path) -> tuple[pd.DataFrame, Path]:
    """Compute the scorecard of a reports folder and write ``scorecard.json`` beside its notebooks (the published
    values' rows, and under ``official`` the comparisons with the full trace's own figures), with each verdict's
    label, n and like-for-like statement, and the counts per verdict and per label; strict JSON (no NaN)."""
    card = scorecard(reports_dir)
    official = official_card(reports_dir)
    doc = {"counts": counts(card), "labels": label_counts(card), "min_jobs": vd.MIN_JOBS,
           "rows": card.to_dict(orient="records"),
           "official": {"reference": OFFICIAL_REFERENCE, "counts": counts(official),
                        "rows": official.to_dict(orient="records")}}
    from .hygiene import strict   # NaN (nothing measured) as null: strict JSON parsers read the file

    path = atomic_write_text(Path(reports_dir) / "scorecard.json",
                             json.dumps(strict(doc), indent=2, default=str, allow_nan=False))
    return card, path


def results_violations(reports_dir: str | Path) -> list[str]:
    """Every verdict of a reports folder that breaks the standard: the paper's scorecard
    (:func:`standard_violations`, with the labels the notebooks printed), the comparisons with the full trace's
    figures (:func:`official_violations`), and any other ``<prefix>.verdict`` a notebook wrote that says
    ``reproduced`` or ``differs`` without its ``<prefix>.n`` and ``<prefix>.like_for_like`` keeping the standard."""
    reports_dir = Path(reports_dir)
    problems = standard_violations(scorecard(reports_dir), figure_data_labels(reports_dir))
    problems += official_violations(official_card(reports_dir))
    for notebook, results in read_notebook_results(reports_dir).items():
        for key, value in results.items():
            if not key.endswith(".verdict") or key.startswith("official.") or value not in VERDICTS:
                continue
            prefix = key[: -len(".verdict")]
            found = vd.recorded_violations(value, results.get(f"{prefix}.n"), results.get(f"{prefix}.like_for_like"),
                                           results.get(f"{prefix}.ours"), results.get(f"{prefix}.reference"))
            problems += [f"{notebook}: {key}: {p}" for p in found]
    return problems
