"""Golden results: every notebook's key figures at default parameters, kept in git and checked by CI.

``golden/<config>.yaml`` holds, per notebook, each key of its ``results.json``
and, under ``scorecard``, the label of each published value (its kind:
reproduced, differs, holds on, not shown on, ..., :data:`.verdicts.KINDS`;
:mod:`.reproduction`). ``golden/tolerances.yaml`` says how closely each figure
must match, with the reason: the first rule whose pattern matches
``<notebook>:<key>`` decides. ``dlcluster check-results`` (``make check-results``)
compares a reports folder with the golden file and fails, naming each figure
that moved, went missing or is new; ``dlcluster golden`` (``make golden``)
rewrites the file on purpose, so a change of a headline figure shows as a diff
in the commit that made it.

Why not pytest-regressions or syrupy: both run only inside pytest, and this
check is a command of its own that CI and users run on a reports folder.
``num_regression`` holds one tolerance per column, so per-figure tolerances
need one column per figure: one CSV line for all of a notebook's figures, and a
diff that cannot show which one moved; ``data_regression`` and syrupy compare
exactly. The comparison here is :func:`numpy.isclose` and equality; the rest is
reading, writing and the table.
"""

from __future__ import annotations

import fnmatch
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..atomic import atomic_write_text
from ..paths import repo_root
from .notebook import read_results_json

SCORECARD_SECTION = "scorecard"
HEADER = """\
# Golden results of `make reports` with params/{config}.yaml: every notebook's results.json keys, and the
# verdict of every published value (section `scorecard`). Written by `make golden` (dlcluster golden);
# checked by `make check-results` (dlcluster check-results) with the tolerances of golden/tolerances.yaml.
# Review a change of this file like code: each moved line is a result that moved.
"""


def golden_dir() -> Path:
    return repo_root() / "golden"


@dataclass(frozen=True)
class Tolerance:
    """How closely one figure must match: ``rel``/``abs`` as :func:`numpy.isclose`'s rtol/atol, or ``skip``."""

    pattern: str
    rel: float = 0.0
    abs: float = 0.0
    skip: bool = False
    why: str = ""

    def describe(self) -> str:
        if self.skip:
            return "not checked"
        if self.rel == 0 and self.abs == 0:
            return "exact"
        return " + ".join(p for p in (f"rel {self.rel:g}" if self.rel else "", f"abs {self.abs:g}" if self.abs else "")
                          if p)


def load_tolerances(path: str | Path | None = None) -> list[Tolerance]:
    """The rules of ``golden/tolerances.yaml``, in order; the last must match everything (``"*"``)."""
    path = Path(path or golden_dir() / "tolerances.yaml")
    rules = yaml.safe_load(path.read_text()) or []
    out = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict) or "match" not in rule or "why" not in rule:
            raise ValueError(f"{path}: rule {i + 1} needs 'match' and 'why', got {rule!r}")
        unknown = set(rule) - {"match", "rel", "abs", "skip", "why"}
        if unknown:
            raise ValueError(f"{path}: rule {i + 1} ({rule['match']!r}) has unknown field(s) {sorted(unknown)}")
        out.append(Tolerance(str(rule["match"]), float(rule.get("rel", 0.0)), float(rule.get("abs", 0.0)),
                             bool(rule.get("skip", False)), str(rule["why"])))
    if not out or out[-1].pattern != "*":
        raise ValueError(f"{path}: the last rule must be the default, match: '*'")
    return out


def tolerance_for(name: str, rules: list[Tolerance]) -> Tolerance:
    """The first rule whose pattern matches ``notebook:key`` (fnmatch, case-sensitive)."""
    return next(r for r in rules if fnmatch.fnmatchcase(name, r.pattern))


def collect(reports_dir: str | Path) -> dict[str, dict]:
    """``{notebook: {key: value}}`` from every ``<stem>/results.json``, plus the scorecard's labels (each row's kind,
    which refines its verdict: a scorecard.json written before labels gives its verdict)."""
    reports_dir = Path(reports_dir)
    out: dict[str, dict] = {}
    for path in sorted(reports_dir.glob("[0-9][0-9]-*/results.json")):
        doc = read_results_json(path)
        out[path.parent.name] = dict(sorted(doc["results"].items()))
    card = reports_dir / "scorecard.json"
    if card.exists():
        rows = json.loads(card.read_text())["rows"]
        out[SCORECARD_SECTION] = {row["key"]: row.get("kind") or row["verdict"] for row in rows}
    return out


def _float(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _matches(old, new, tol: Tolerance) -> bool:
    if tol.skip:
        return True
    a, b = _float(old), _float(new)
    if a is not None and b is not None:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return bool(np.isclose(b, a, rtol=tol.rel, atol=tol.abs))
    return type(old) is type(new) and old == new


def compare(golden: dict[str, dict], current: dict[str, dict], rules: list[Tolerance]) -> pd.DataFrame:
    """One row per figure: notebook, key, golden, new, tolerance and status (ok, moved, missing, new, skipped)."""
    rows = []
    for notebook in sorted(set(golden) | set(current)):
        old, new = golden.get(notebook, {}), current.get(notebook, {})
        for key in sorted(set(old) | set(new)):
            tol = tolerance_for(f"{notebook}:{key}", rules)
            if tol.skip:
                status = "skipped"
            elif key not in new:
                status = "missing"
            elif key not in old:
                status = "new"
            else:
                status = "ok" if _matches(old[key], new[key], tol) else "moved"
            rows.append({"notebook": notebook, "key": key, "golden": old.get(key), "new": new.get(key),
                         "tolerance": tol.describe(), "status": status})
    return pd.DataFrame(rows, columns=["notebook", "key", "golden", "new", "tolerance", "status"])


def load_golden(path: str | Path) -> dict[str, dict]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no golden file {path}: write one with `make golden` (dlcluster golden)")
    doc = yaml.safe_load(path.read_text()) or {}
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ValueError(f"{path}: expected a mapping of notebook -> {{key: value}}")
    return doc


def write_golden(reports_dir: str | Path, path: str | Path, config: str, rules_path: str | Path | None = None) -> Path:
    """Rewrite the golden file from a reports folder (``make golden``); NaN and inf are written as YAML's.

    A figure whose tolerance rule says ``skip`` (a wall time) is written as null, so that rewriting the file
    changes only figures that are checked.
    """
    current = collect(reports_dir)
    if not any(k != SCORECARD_SECTION for k in current):
        raise FileNotFoundError(f"{reports_dir} holds no <notebook>/results.json: run `make reports` first")
    rules = load_tolerances(rules_path)
    current = {nb: {k: None if tolerance_for(f"{nb}:{k}", rules).skip else v for k, v in figures.items()}
               for nb, figures in current.items()}
    body = yaml.safe_dump(current, sort_keys=True, allow_unicode=True, width=1000, default_flow_style=False)
    return atomic_write_text(Path(path), HEADER.format(config=config) + body)


def _cell(value) -> str:
    if isinstance(value, float):
        return repr(value)   # every digit: a move of 1e-9 must show
    text = "—" if value is None else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_table(table: pd.DataFrame) -> str:
    """The rows as aligned text: figure, golden, new, tolerance, status."""
    if table.empty:
        return ""
    diff = [f"{_float(b) - _float(a):+.3g}" if _float(a) is not None and _float(b) is not None else ""
            for a, b in zip(table["golden"], table["new"], strict=True)]
    shown = pd.DataFrame({"figure": table["notebook"] + ":" + table["key"], "golden": table["golden"].map(_cell),
                          "new": table["new"].map(_cell), "new - golden": diff, "tolerance": table["tolerance"],
                          "status": table["status"]})
    with pd.option_context("display.max_colwidth", 200, "display.width", 250):
        return shown.to_string(index=False)


def check(reports_dir: str | Path, golden_path: str | Path, rules_path: str | Path | None = None,
          show_all: bool = False) -> tuple[bool, str]:
    """Compare a reports folder with a golden file: (passed, the text to print)."""
    table = compare(load_golden(golden_path), collect(reports_dir), load_tolerances(rules_path))
    bad = table[table["status"].isin(["moved", "missing", "new"])]
    counts = table["status"].value_counts(sort=False)
    summary = (f"{len(table)} figures of {Path(reports_dir)} against {golden_path}: "
               + ", ".join(f"{counts.get(s, 0)} {s}" for s in ("ok", "moved", "missing", "new", "skipped")))
    lines = [summary]
    shown = table if show_all else bad
    if len(shown):
        lines += ["", format_table(shown)]
    if len(bad):
        lines += ["", ("FAILED: figures moved, went missing or are new. If the change is intended, run `make golden` "
                       "and commit golden/ with the change that moved them (say why in the commit).")]
    return bad.empty, "\n".join(lines)
