"""Rule-based classification of failed jobs from their stdout/stderr logs.

The ATC'19 study assigned each failure a reason (and a category: infrastructure,
AI engine, user) with a rule-based classifier over job logs. Here the rules are
data, in ``failure_rules.yaml`` next to this module (or any file of the same
shape): each rule is a regular expression that maps a log line to a reason.
Rules are tried in file order and the first rule that matches any line wins, so
the file's order states which signature takes precedence when a log shows
several (an uncorrectable ECC error reported as a CUDA error is an ECC error).
A rule may also name a ``requires`` pattern that some line of the same log must
match, for signatures whose meaning depends on what the job was doing: "Permission
denied" on a checkpoint path is a checkpoint error only where the log shows the job
saving, otherwise a permission error. A log that no rule matches is
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

from dlcluster.paths import data_dir

NO_SIGNATURE = "no_signature"
RULES_PATH = Path(__file__).with_name("failure_rules.yaml")
MESSAGE_FIELDS = ("id", "source_url", "repo", "reason", "category", "split", "text", "note")
SPLITS = ("tuning", "heldout", "heldout2", "heldout3", "heldout4", "heldout5")  # heldout2-5: further held-out sets, data/failure_messages/README.md


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
    requires: re.Pattern | None = None  # the rule fires only if some line of the log matches this


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
            regex, requires = (self._compile(entry, field, where) for field in ("pattern", "requires"))
            self.rules.append(Rule(entry["id"], entry["reason"], entry["pattern"], entry["source"], regex, requires))
        unruled = sorted(set(self.reasons) - {r.reason for r in self.rules})
        if unruled:
            raise ValueError(f"{self.path}: reasons without any rule: {unruled}")

    def _compile(self, entry: dict, field: str, where: str) -> re.Pattern | None:
        if field not in entry:
            return None
        try:
            return re.compile(entry[field])
        except (re.error, TypeError) as exc:
            raise ValueError(f"{where}: rule {entry['id']!r} has an invalid pattern (field {field!r}): {exc}") from exc

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
        """The first rule (in file order) that matches any line of ``text`` (and whose ``requires``, if any, matches a line)."""
        lines = text.splitlines()
        for rule in self.rules:
            if rule.requires is not None and not any(rule.requires.search(line) for line in lines):
                continue
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


def load_messages(path: str | Path | None = None, rules: RuleSet | None = None) -> pd.DataFrame:
    """The hand-labelled set of real failure messages (default ``data/failure_messages/messages.yaml``).

    Every entry is checked, and any fault raises ``ValueError`` naming the file, the
    entry and the field: all fields present, a unique id, an https address of the
    thread the text came from, a reason the rules know (or no signature) with that
    reason's category, a split of ``tuning``/``heldout``/``heldout2``/``heldout3``/``heldout4``/``heldout5``,
    and all messages of one source in the same split (so no thread informs two splits). No entry is dropped.
    """
    rules = rules or load_rules()
    path = Path(path) if path else data_dir() / "failure_messages" / "messages.yaml"
    with open(path) as fh:
        doc = yaml.load(fh, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(doc, list) or not doc:
        raise ValueError(f"{path}: expected a non-empty list of messages")
    rows, seen, split_of_source = [], set(), {}
    for entry in doc:
        where = f"{path}:{entry.get('__line__', '?') if isinstance(entry, dict) else '?'}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: expected a mapping with the fields {list(MESSAGE_FIELDS)}")
        for field in MESSAGE_FIELDS:
            if not isinstance(entry.get(field), str) or not entry[field].strip():
                raise ValueError(f"{where}: message {entry.get('id')!r} lacks the text field {field!r}")
        where = f"{where}: message {entry['id']!r}"
        if entry["id"] in seen:
            raise ValueError(f"{where}: duplicate id")
        seen.add(entry["id"])
        if not entry["source_url"].startswith("https://"):
            raise ValueError(f"{where}: field 'source_url' must be the https address of the thread, "
                             f"got {entry['source_url']!r}")
        if entry["reason"] != NO_SIGNATURE and entry["reason"] not in rules.reasons:
            raise ValueError(f"{where}: field 'reason' {entry['reason']!r} is no reason of {rules.path.name} "
                             f"(known: {sorted(rules.reasons)} or {NO_SIGNATURE!r})")
        expected = rules.reason(entry["reason"]).category
        if entry["category"] != expected:
            raise ValueError(f"{where}: field 'category' is {entry['category']!r}, but reason "
                             f"{entry['reason']!r} has category {expected!r} in {rules.path.name}")
        if entry["split"] not in SPLITS:
            raise ValueError(f"{where}: field 'split' must be one of {list(SPLITS)}, got {entry['split']!r}")
        other = split_of_source.setdefault(entry["source_url"], entry["split"])
        if other != entry["split"]:
            raise ValueError(f"{where}: source {entry['source_url']} is in both splits "
                             f"({other!r} and {entry['split']!r}); a source belongs to one split")
        rows.append({field: entry[field] for field in MESSAGE_FIELDS})
    return pd.DataFrame(rows, columns=list(MESSAGE_FIELDS))


@dataclass(frozen=True)
class Evaluation:
    """The classifier against hand labels: per-message results, accuracy, confusion table."""

    results: pd.DataFrame  # one row per message: id, source_url, reason, predicted, rule_id, matched_line, correct
    accuracy: float  # share of messages whose predicted reason is the hand label
    confusion: pd.DataFrame  # counts; rows: hand label ("true reason"), columns: predicted reason

    def by_reason(self) -> pd.DataFrame:
        """Per hand-labelled reason: messages, correctly classified, recall."""
        g = self.results.groupby("reason")["correct"]
        return pd.DataFrame({"messages": g.size(), "correct": g.sum().astype(int), "recall": g.mean()})


def evaluate_classifier(messages: pd.DataFrame, rules: RuleSet | None = None) -> Evaluation:
    """Classify each message's ``text`` and compare with its hand label ``reason``."""
    if messages.empty:
        raise ValueError("no messages to evaluate")
    rules = rules or load_rules()
    matches = [rules.classify(text) for text in messages["text"]]
    results = messages[["id", "source_url", "reason"]].reset_index(drop=True).assign(
        predicted=[m.reason for m in matches], rule_id=[m.rule_id for m in matches],
        matched_line=[m.matched_line for m in matches])
    results["correct"] = results["reason"] == results["predicted"]
    labels = sorted(set(results["reason"]) | set(results["predicted"]))
    confusion = pd.crosstab(pd.Categorical(results["reason"], labels), pd.Categorical(results["predicted"], labels),
                            dropna=False)
    confusion.index.name, confusion.columns.name = "true reason", "predicted"
    return Evaluation(results, float(results["correct"].mean()), confusion)
