"""The reproduction scorecard: a verdict beside every published value.

For each entry of ``data/reference/atc19.yaml``, ``reproduction.yaml`` (next to
this module) names the figure of ours that stands beside it and how the verdict
is reached. :func:`scorecard` reads the notebooks' ``results.json`` of a reports
folder and gives each published value one of three verdicts:

* ``reproduced``: within the stated tolerance, or every check of a finding holds;
* ``differs``: by how much, or which check of the finding fails;
* ``not comparable``: why (another job selection, another definition, a
  simulated or assumed input, an input of ours rather than a result, or no
  value on the data at hand).

The standard: ``reproduced`` and ``differs`` mean that our figure measures the
same quantity on comparable data as the published one, so every entry that can
reach them states why in ``like_for_like`` (its data, definition and
selection); :func:`standard_violations` finds a ``reproduced`` verdict whose
data label names another selection or a simulated, synthetic or assumed input.

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
from .reference import load_reference

SPEC_PATH = Path(__file__).with_name("reproduction.yaml")
VERDICTS = ("reproduced", "differs", "not comparable")
OPERATORS = {">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le, "==": operator.eq}
WAYS = ("within", "checks", "not_comparable")
#: What an entry that can reach a verdict on the numbers says about why the comparison is like for like.
LIKE_FOR_LIKE = ("data", "definition", "selection")
#: Words of a data label for data that is not like for like with a measurement of the real cluster's jobs: a
#: simulated, synthetic or assumed input, or another selection (of minutes, of jobs, of hardware). Lower case.
NOT_LIKE_FOR_LIKE = ("simulated", "synthetic", "assumed", "assumption", "illustrative", "on a cpu", "minutes 0-3",
                     "start-up", "another selection", "biased selection", "corpus composition", "an inference")


@lru_cache(maxsize=2)
def load_spec(path: str = str(SPEC_PATH)) -> dict:
    """The scorecard's entries, checked: one of ``within``/``checks``/``not_comparable`` each, known operators."""
    spec = yaml.safe_load(Path(path).read_text()) or {}
    for key, entry in spec.items():
        ways = [w for w in WAYS if w in entry]
        if len(ways) != 1:
            raise ValueError(f"{path}: entry {key!r} needs exactly one of {WAYS}, has {ways}")
        unknown = set(entry) - {*WAYS, "ours", "tests", "data", "when_missing", "like_for_like"}
        if unknown:
            raise ValueError(f"{path}: entry {key!r} has unknown field(s) {sorted(unknown)}")
        if "within" in entry and "ours" not in entry:
            raise ValueError(f"{path}: entry {key!r} compares a number (within) but names no figure of ours")
        for check in entry.get("checks", []):
            if len(check) != 3 or check[1] not in OPERATORS:
                raise ValueError(f"{path}: entry {key!r}: a check is [figure, one of {list(OPERATORS)}, "
                                 f"figure or value], got {check!r}")
        if "not_comparable" in entry:
            if not str(entry["not_comparable"]).strip():
                raise ValueError(f"{path}: entry {key!r} is not comparable but does not say why")
        else:
            stated = entry.get("like_for_like") or {}
            missing = [part for part in LIKE_FOR_LIKE if not str(stated.get(part, "")).strip()]
            if missing:
                raise ValueError(f"{path}: entry {key!r} can be reproduced, so like_for_like must state why the "
                                 f"comparison is like for like: {list(LIKE_FOR_LIKE)}; missing {missing} (or make "
                                 "it not_comparable, with why)")
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


def verdict(entry: dict, published, figures: _Figures) -> tuple[str, str, object]:
    """(verdict, detail, our value) of one published value."""
    ours_ref = entry.get("ours")
    ours = figures.get(ours_ref) if ours_ref else None
    if "not_comparable" in entry:
        return "not comparable", entry["not_comparable"], ours
    if "within" in entry:
        if is_missing(ours):
            why = entry.get("when_missing") or (f"{ours_ref} is not in the reports" if not figures.has(ours_ref)
                                                else f"{ours_ref} has no value on this data")
            return "not comparable", why, ours
        if not isinstance(published, (int, float)):
            raise ValueError(f"reproduction.yaml compares {ours_ref} with a published value that is not a number: "
                             f"{published!r}")
        diff = float(ours) - float(published)
        rel = f" ({diff / published:+.1%})" if published else ""
        if decision_value(abs(diff)) <= float(entry["within"]):
            return "reproduced", f"within {entry['within']:g} (ours - published = {diff:+.3g}{rel})", ours
        return "differs", f"by {diff:+,.3g}{rel}; tolerance {entry['within']:g}", ours
    failed = []
    for a, op, b in entry["checks"]:
        left, right = figures.get(a), figures.get(b)
        if is_missing(left) or is_missing(right):
            missing = a if is_missing(left) else b
            return "not comparable", f"{missing} has no value in these reports", ours
        if not OPERATORS[op](*(decision_value(v) if isinstance(v, float) else v for v in (left, right))):
            failed.append(f"{_split(a)[1]} = {_fmt(left)} is not {op} "
                          f"{_split(b)[1] + ' = ' if isinstance(b, str) and ':' in b else ''}{_fmt(right)}")
    tests = entry.get("tests", "")
    if failed:
        return "differs", f"tested: {tests}; fails: " + "; ".join(failed), ours
    return "reproduced", f"tested: {tests}", ours


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
    """One row per published value: what, published, provenance, ours, verdict, detail, figure, data."""
    spec = load_spec() if spec is None else spec
    reference = load_reference()
    unknown = sorted(set(spec) - set(reference["key"]))
    if unknown:
        raise ValueError(f"{SPEC_PATH.name} names keys that data/reference/atc19.yaml does not list: {unknown}")
    lacking = sorted(set(reference["key"]) - set(spec))
    if lacking:
        raise ValueError(f"{SPEC_PATH.name} has no entry for these published values: {lacking}")
    figures = _Figures(read_notebook_results(Path(reports_dir)))
    rows = []
    for ref in reference.itertuples():
        entry = spec[ref.key]
        outcome, detail, ours = verdict(entry, ref.value, figures)
        published = f"{ref.value:g} {ref.unit}".strip() if isinstance(ref.value, (int, float)) else str(ref.value)
        stated = entry.get("like_for_like") or {}
        rows.append({"key": ref.key, "section": ref.section, "what": ref.item, "published": published,
                     "provenance": ref.provenance, "ours": None if is_missing(ours) else ours, "verdict": outcome,
                     "detail": detail, "figure": entry.get("ours"), "data": entry.get("data", ""),
                     "like_for_like": "; ".join(f"{part}: {stated[part]}" for part in LIKE_FOR_LIKE if part in stated)})
    return pd.DataFrame(rows)


def not_like_for_like(label: str) -> list[str]:
    """The words of :data:`NOT_LIKE_FOR_LIKE` that a data label uses."""
    text = str(label or "").lower()
    return [word for word in NOT_LIKE_FOR_LIKE if word in text]


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
    """Rows of ``card`` that say ``reproduced`` while a label of their data (the entry's ``data``, or a label the
    figure's notebook printed beside it: :func:`figure_data_labels`) names another selection or a simulated,
    synthetic or assumed input. Empty when the scorecard keeps the standard."""
    labels = labels or {}
    problems = []
    for row in card[card["verdict"] == "reproduced"].itertuples():
        notebook = _split(row.figure)[0] if isinstance(row.figure, str) else ""
        for label in [row.data, *labels.get((notebook, row.key), [])]:
            words = not_like_for_like(label)
            if words:
                problems.append(f"{row.key} says reproduced, but its data label {label!r} names {words}: "
                                f"not like for like (make the entry not_comparable, with why)")
    return problems


def counts(card: pd.DataFrame) -> dict[str, int]:
    return {v: int((card["verdict"] == v).sum()) for v in VERDICTS}


#: The second reference: the full trace's own figures (the official notebook's, digitized). A notebook holds a
#: curve of ours against one by writing ``official.<comparison>.verdict`` (one of VERDICTS) and
#: ``official.<comparison>.detail`` into its results (see :mod:`dlcluster.analysis.official`).
OFFICIAL_REFERENCE = "full trace (official notebook figure, digitized)"
_OFFICIAL_VERDICT = re.compile(r"^official\.(?P<comparison>.+)\.verdict$")


def official_card(reports_dir: str | Path) -> pd.DataFrame:
    """One row per comparison with the full trace's own figures: notebook, comparison, what, verdict, detail."""
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
            rows.append({"notebook": path.parent.name, "comparison": match["comparison"],
                         "what": descriptions.get(key, match["comparison"]), "verdict": value,
                         "detail": results.get(f"{prefix}.detail") or ""})
    return pd.DataFrame(rows, columns=["notebook", "comparison", "what", "verdict", "detail"])


def write_scorecard(reports_dir: str | Path) -> tuple[pd.DataFrame, Path]:
    """Compute the scorecard of a reports folder and write ``scorecard.json`` beside its notebooks (the published
    values' rows, and under ``official`` the comparisons with the full trace's own figures)."""
    card = scorecard(reports_dir)
    official = official_card(reports_dir)
    doc = {"counts": counts(card), "rows": card.to_dict(orient="records"),
           "official": {"reference": OFFICIAL_REFERENCE, "counts": counts(official),
                        "rows": official.to_dict(orient="records")}}
    path = atomic_write_text(Path(reports_dir) / "scorecard.json", json.dumps(doc, indent=2, default=str))
    return card, path
