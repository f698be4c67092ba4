"""Rule-based classification of failed jobs from their stdout/stderr logs.

The ATC'19 study assigned each failure a reason (and a category: infrastructure,
AI engine, user) with a rule-based classifier over job logs. Here the rules are
data, in ``failure_rules.yaml`` next to this module (or any file of the same
shape): each rule is a regular expression that maps a log line to a reason.
Rules are tried in file order and the first rule that matches any line wins, so
the file's order states which signature takes precedence when a log shows
several (a checkpoint write that failed with "Permission denied" is a
checkpoint error, not a permission error). A log that no rule matches is
"no signature", never a guess. Every :class:`Match` says which rule fired and on
which line, so a reader can audit each decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd
import yaml

NO_SIGNATURE = "no_signature"
RULES_PATH = Path(__file__).with_name("failure_rules.yaml")


@dataclass(frozen=True)
class Reason:
    key: str
    label: str
    category: str
    retryable: bool
    definition: str


@dataclass(frozen=True)
class Rule:
    id: str
    reason: str
    pattern: str
    source: str
    regex: re.Pattern


@dataclass(frozen=True)
class Match:
    """The classification of one log: which reason, and the evidence for it."""

    reason: str
    label: str
    category: str
    retryable: bool
    rule_id: str | None
    matched_line: str | None
    line_number: int | None  # 1-based; None for no signature


class _LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers the line of each mapping (for error messages)."""


def _construct_mapping(loader, node, deep=False):
    mapping = loader.construct_mapping(node, deep=deep)
    mapping["__line__"] = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class RuleSet:
    """Validated rules and reasons loaded from one YAML file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        with open(self.path) as fh:
            doc = yaml.load(fh, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
        if not isinstance(doc, dict):
            raise ValueError(f"{self.path}: expected a mapping with categories, reasons, rules")
        for section in ("categories", "reasons", "no_signature", "rules"):
            if section not in doc:
                raise ValueError(f"{self.path}: missing top-level section {section!r}")
        self.categories = {k: v for k, v in doc["categories"].items() if k != "__line__"}
        self.reasons: dict[str, Reason] = {}
        for key, entry in doc["reasons"].items():
            if key == "__line__":
                continue
            self.reasons[key] = self._reason(key, entry, allowed_categories=set(self.categories))
        self.no_signature = self._reason(NO_SIGNATURE, doc["no_signature"],
                                         allowed_categories=set(self.categories) | {"unknown"})
        self.rules: list[Rule] = []
        seen: set[str] = set()
        for entry in doc["rules"]:
            line = entry.get("__line__", "?")
            where = f"{self.path}:{line}"
            for field in ("id", "reason", "pattern", "source"):
                if not entry.get(field):
                    raise ValueError(f"{where}: rule lacks the field {field!r}")
            if entry["id"] in seen:
                raise ValueError(f"{where}: duplicate rule id {entry['id']!r}")
            seen.add(entry["id"])
            if entry["reason"] not in self.reasons:
                raise ValueError(f"{where}: rule {entry['id']!r} names unknown reason {entry['reason']!r} "
                                 f"(field 'reason'; known: {sorted(self.reasons)})")
            try:
                regex = re.compile(entry["pattern"])
            except re.error as exc:
                raise ValueError(f"{where}: rule {entry['id']!r} has an invalid pattern (field 'pattern'): {exc}") from exc
            self.rules.append(Rule(entry["id"], entry["reason"], entry["pattern"], entry["source"], regex))
        unruled = sorted(set(self.reasons) - {r.reason for r in self.rules})
        if unruled:
            raise ValueError(f"{self.path}: reasons without any rule: {unruled}")

    def _reason(self, key: str, entry: dict, allowed_categories: set[str]) -> Reason:
        where = f"{self.path}:{entry.get('__line__', '?')}"
        for field in ("label", "category", "retryable", "definition"):
            if field not in entry:
                raise ValueError(f"{where}: reason {key!r} lacks the field {field!r}")
        if entry["category"] not in allowed_categories:
            raise ValueError(f"{where}: reason {key!r} has category {entry['category']!r} "
                             f"(field 'category'; expected one of {sorted(allowed_categories)})")
        if not isinstance(entry["retryable"], bool):
            raise ValueError(f"{where}: reason {key!r}: field 'retryable' must be true or false")
        return Reason(key, entry["label"], entry["category"], entry["retryable"], entry["definition"])

    def reason(self, key: str) -> Reason:
        return self.no_signature if key == NO_SIGNATURE else self.reasons[key]

    def classify(self, text: str) -> Match:
        """The first rule (in file order) that matches any line of ``text``."""
        lines = text.splitlines()
        for rule in self.rules:
            for number, line in enumerate(lines, start=1):
                if rule.regex.search(line):
                    r = self.reasons[rule.reason]
                    return Match(r.key, r.label, r.category, r.retryable, rule.id, line.strip(), number)
        ns = self.no_signature
        return Match(ns.key, ns.label, ns.category, ns.retryable, None, None, None)

    def reasons_table(self) -> pd.DataFrame:
        """Reasons with their category, retry flag and number of rules (for notebooks)."""
        counts = pd.Series([r.reason for r in self.rules]).value_counts()
        rows = [{"reason": r.key, "label": r.label, "category": r.category, "retryable": r.retryable,
                 "rules": int(counts.get(r.key, 0)), "definition": r.definition}
                for r in [*self.reasons.values(), self.no_signature]]
        return pd.DataFrame(rows)


@lru_cache(maxsize=8)
def _cached(path: str) -> RuleSet:
    return RuleSet(path)


def load_rules(path: str | Path | None = None) -> RuleSet:
    """The rule set in ``path`` (default: the packaged ``failure_rules.yaml``)."""
    return _cached(str(Path(path or RULES_PATH).resolve()))


def classify(text: str, rules: RuleSet | None = None) -> Match:
    """Classify one log's text; see :class:`RuleSet.classify`."""
    return (rules or load_rules()).classify(text)


def read_log(path: str | Path) -> str:
    """A log's text; bytes that are not UTF-8 become U+FFFD (logs hold binary junk)."""
    return Path(path).read_bytes().decode("utf-8", errors="replace")


def classify_dir(logs_dir: str | Path, rules: RuleSet | None = None, pattern: str = "*.log") -> pd.DataFrame:
    """Classify every log file in ``logs_dir`` matching ``pattern`` (sorted by name).

    Returns one row per log: ``log_file`` (name relative to ``logs_dir``), reason,
    label, category, retryable, rule_id, line_number, matched_line.
    """
    rules = rules or load_rules()
    logs_dir = Path(logs_dir)
    if not logs_dir.is_dir():
        raise FileNotFoundError(f"logs directory {logs_dir} does not exist")
    rows = []
    for path in sorted(logs_dir.glob(pattern)):
        if not path.is_file():
            continue
        m = rules.classify(read_log(path))
        rows.append({"log_file": path.name, "reason": m.reason, "label": m.label, "category": m.category,
                     "retryable": m.retryable, "rule_id": m.rule_id, "line_number": m.line_number,
                     "matched_line": m.matched_line})
    return pd.DataFrame(rows, columns=["log_file", "reason", "label", "category", "retryable",
                                       "rule_id", "line_number", "matched_line"])
