"""The paper's published numbers, each with its provenance.

They live in ``data/reference/atc19.yaml`` (copied from the project's list of
what is known of the paper). Notebooks show them *beside* their own results
through :func:`published_vs_ours`; no analysis reads them as an input.
"""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

import pandas as pd
import yaml

from ..paths import data_dir

PROVENANCE_TAGS = {"quoted", "summary", "trace"}
NOT_PUBLISHED = "not published here"
#: The fields of one published-vs-ours row (``Report.compare``, results.json, the index page).
COMPARISON_FIELDS = ("what", "ours", "key", "data")


def reference_path() -> Path:
    return data_dir() / "reference" / "atc19.yaml"


@lru_cache(maxsize=4)
def _load(path: str) -> dict:
    with open(path) as fh:
        entries = yaml.safe_load(fh)
    for key, entry in entries.items():
        for field in ("item", "value", "provenance"):
            if field not in entry:
                raise ValueError(f"{path}: entry {key!r} lacks the field {field!r}")
        if entry["provenance"] not in PROVENANCE_TAGS:
            raise ValueError(
                f"{path}: entry {key!r} has provenance {entry['provenance']!r}; "
                f"expected one of {sorted(PROVENANCE_TAGS)}"
            )
    return entries


def load_reference(path: str | Path | None = None) -> pd.DataFrame:
    """All published values as a table: key, section, item, value, unit, provenance, where."""
    entries = _load(str(path or reference_path()))
    rows = [{"key": k, "section": e.get("section"), "item": e["item"], "value": e["value"],
             "unit": e.get("unit", ""), "provenance": e["provenance"], "where": e.get("where", "")}
            for k, e in entries.items()]
    return pd.DataFrame(rows)


def published(key: str, path: str | Path | None = None) -> dict | None:
    """One published entry (dict with value, unit, provenance, ...) or None if not listed."""
    return _load(str(path or reference_path())).get(key)


def published_vs_ours(rows: list[dict], path: str | Path | None = None) -> pd.DataFrame:
    """Render the 'published vs this reproduction' table every notebook shows.

    Each row is ``{"what": label, "ours": value, "key": reference key or None,
    "data": which data our value comes from}``. Rows without a listed published
    value say "not published here" rather than leaving a blank.
    """
    out = []
    for row in rows:
        entry = published(row["key"], path) if row.get("key") else None
        if entry is None:
            pub, prov = NOT_PUBLISHED, ""
        else:
            unit = entry.get("unit", "")
            pub = f"{entry['value']} {unit}".strip() if isinstance(entry["value"], (int, float)) else entry["value"]
            prov = entry["provenance"] + (f" ({entry['where']})" if entry.get("where") else "")
        ours = row["ours"]
        if isinstance(ours, float):
            ours = f"{ours:.4g}"
        out.append({"what": row["what"], "this reproduction": ours,
                    "our data": row.get("data", ""), "published": pub, "provenance": prov})
    return pd.DataFrame(out, columns=["what", "this reproduction", "our data", "published", "provenance"])


class UnknownReferenceKey(ValueError):
    """A comparison row names a key that the reference file does not list."""


def check_keys(rows: list[dict], path: str | Path | None = None) -> None:
    """Raise :class:`UnknownReferenceKey` naming the row, the key and the reference file if a key is not listed.

    A row with no published value uses ``"key": None``; a misspelt or invented key is an error, so it can
    never reach a report as a comparison without its published value.
    """
    path = Path(path or reference_path())
    entries = _load(str(path))
    for row in rows:
        key = row.get("key")
        if key is None or key in entries:
            continue
        close = difflib.get_close_matches(str(key), list(entries), n=3)
        hint = f"; listed keys close to it: {', '.join(close)}" if close else ""
        raise UnknownReferenceKey(
            f"comparison {row.get('what')!r} names key {key!r}, which is not in {path}{hint}. "
            f"Add the published value there (with its provenance), or use key None for a row with no published value")


def comparison_rows(rows: list[dict]) -> list[dict]:
    """Comparison rows in the form ``Report.compare`` stores in results.json (checked; ``ours`` a number or text)."""
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "what" not in row or "ours" not in row:
            raise ValueError(f"comparison row {i}: expected a dict with at least 'what' and 'ours', got {row!r}")
        unknown = set(row) - set(COMPARISON_FIELDS)
        if unknown:
            raise ValueError(f"comparison row {i} ({row['what']!r}): unknown field(s) {sorted(unknown)}")
        ours = row["ours"]
        if hasattr(ours, "item"):
            ours = ours.item()
        if not isinstance(ours, (int, float, str)) or isinstance(ours, bool):
            ours = str(ours)
        out.append({"what": str(row["what"]), "ours": ours, "key": row.get("key"), "data": str(row.get("data", ""))})
    return out
