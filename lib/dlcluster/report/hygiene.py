"""What a reader must never meet in an executed notebook's outputs, checked by machine (``tests/test_hygiene.py``).

A reader opens a notebook (JupyterLab, the HTML report) to read figures, tables and sentences. Each check here
names something that reads as a leftover of the code instead:

* a figure saved for the index (``<stem>/figures/*.png``) that the notebook does not show as an image output;
* a warning or anything on stderr (a TqdmWarning, numpy's ``RuntimeWarning: Mean of empty slice``), an error;
* a bare repr: a cell whose result is a plain value with no label (``15``, ``{'a': 1}``, ``PosixPath('...')``,
  ``0.906890220919912``): an ``execute_result`` or ``display_data`` that has only ``text/plain``;
* a code key in a markdown or HTML output (``scope.jobs_in_paper``,
  ``04-failures-rtf:failures.users.p_fail_after_fail_pct``): results.json's names are for machines;
* a table that truncates a value (``RFold's rea...``) or repeats one long sentence in several rows (a caption's
  job);
* a JSON file a strict parser rejects (``NaN``, ``Infinity``): :func:`check_json`.

Each check returns sentences (``"cell 18: stderr: ..."``, cells of the source notebook counted from 1, markdown
cells included, papermill's parameters cell not); an empty list is a clean notebook.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

#: A code key: a dotted name with an underscore in it or three parts or more (``scope.jobs_in_paper``,
#: ``failures.users.p_fail_after_fail_pct``, ``official.fig2.rfold``), or a notebook-qualified key
#: (``04-failures-rtf:failures.x``). File names (``results.json``), numbers and versions are not keys.
DOTTED = re.compile(r"^[A-Za-z_][\w>-]*(\.[\w>-]+)+$")
QUALIFIED = re.compile(r"^\d\d-[a-z0-9-]+:\S+$")
#: Endings of dotted words that name a file or a site, not a key.
NOT_KEYS = re.compile(r"\.(json|ya?ml|png|csv|parquet|py|ipynb|html?|md|txt|gz|tar|zip|sqlite|pdf|jsonl|log|"
                      r"com|org|io|edu|net|ai)$", re.IGNORECASE)
#: Dotted words that are prose, not keys.
PROSE = {"e.g", "i.e", "et.al", "vs", "cf"}
#: A table cell longer than this, repeated in more than :data:`MAX_REPEATS` rows, is a caption's sentence.
LONG_CELL = 80
MAX_REPEATS = 2
#: What pandas puts at the end of a value cut at ``display.max_colwidth``.
TRUNCATED = re.compile(r"\w(\.\.\.|…)$")
WARNING = re.compile(r"\b\w*Warning\b[:(]|\bwarnings\.warn\b|^\s*warn\(", re.MULTILINE)


def code_keys(text: str) -> list[str]:
    """The code keys in a text (markdown or HTML; tags, links and addresses removed)."""
    text = re.sub(r"<a\b[^>]*>", " ", text, flags=re.IGNORECASE)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"\(?https?://\S+|\]\([^)]*\)", " ", text)
    found = []
    for token in text.split():
        word = token.strip("`'\"*_,;:()[]{}!?").rstrip(".")
        if QUALIFIED.match(word):
            found.append(word)
            continue
        if not DOTTED.match(word) or word.lower() in PROSE or NOT_KEYS.search(word):
            continue
        if any(ch.isupper() for ch in word) or any(part.isdigit() for part in word.split(".")):
            continue   # a class or library named in a quoted message (java.io.FileNotFoundException, libcudart.so.9.0)
        if "_" in word.strip("_") or word.count(".") >= 2:
            found.append(word)
    return found


def _joined(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _table_cells(html_text: str) -> list[list[str]]:
    """The rows of the HTML tables in an output, each a list of its cells' texts."""
    rows = []
    for row in re.findall(r"<tr\b.*?</tr>", html_text, flags=re.DOTALL | re.IGNORECASE):
        cells = re.findall(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", row, flags=re.DOTALL | re.IGNORECASE)
        rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def table_problems(html_text: str) -> list[str]:
    """A value cut short ('RFold's rea...'), or one long sentence repeated in more than two rows."""
    problems = []
    rows = _table_cells(html_text)
    cut = sorted({c for row in rows for c in row if TRUNCATED.search(c)})
    if cut:
        problems.append(f"table truncates {len(cut)} value(s), e.g. {cut[0]!r}")
    counts: dict[str, int] = {}
    for row in rows:
        for cell in set(row):
            if len(cell) > LONG_CELL:
                counts[cell] = counts.get(cell, 0) + 1
    for cell, n in counts.items():
        if n > MAX_REPEATS:
            problems.append(f"table repeats one {len(cell.split())}-word text in {n} rows (a caption's job): "
                            f"{cell[:60]!r}...")
    return problems


def _images(outputs) -> list[bytes]:
    found = []
    for out in outputs:
        data = out.get("data", {}) if isinstance(out, dict) else {}
        if "image/png" in data:
            found.append(base64.b64decode(_joined(data["image/png"])))
    return found


def saved_figures(executed: Path) -> list[Path]:
    """The PNGs the notebook saved: those its results.json lists (``<folder>/<stem>/results.json``), else every
    ``<stem>/figures/*.png``."""
    folder = executed.parent / executed.stem
    results = folder / "results.json"
    if results.exists():
        doc = json.loads(results.read_text())
        return [folder / f["path"] for f in doc.get("figures", [])]
    return sorted((folder / "figures").glob("*.png"))


def check_cells(cells, figures: list[Path] = ()) -> list[str]:
    """The problems of a notebook's cells (nbformat nodes or plain dicts); ``figures``: the PNGs it saved, each of
    which must be one of its image outputs."""
    problems = []
    shown: list[bytes] = []
    number = 0
    for cell in cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            continue
        number += 1
        if cell.get("cell_type") != "code":
            continue
        where = f"cell {number}"
        outputs = cell.get("outputs", [])
        shown += _images(outputs)
        for out in outputs:
            kind = out.get("output_type")
            if kind == "error":
                problems.append(f"{where}: error output {out.get('ename')}: {_joined(out.get('evalue'))[:80]}")
            elif kind == "stream":
                text = _joined(out.get("text"))
                if out.get("name") == "stderr":
                    problems.append(f"{where}: stderr output: {text.strip()[:120]!r}")
                elif WARNING.search(text):
                    problems.append(f"{where}: a warning in its printed output: {text.strip()[:120]!r}")
            elif kind in ("execute_result", "display_data"):
                data = out.get("data", {})
                if set(data) <= {"text/plain"}:
                    problems.append(f"{where}: bare repr output (a value without a label): "
                                    f"{_joined(data.get('text/plain')).strip()[:80]!r}")
                    continue
                for mime in ("text/markdown", "text/html"):
                    if mime not in data:
                        continue
                    text = _joined(data[mime])
                    keys = code_keys(text)
                    if keys:
                        problems.append(f"{where}: code key(s) in a {mime} output: {sorted(set(keys))[:4]}")
                    if mime == "text/html":
                        problems += [f"{where}: {p}" for p in table_problems(text)]
    for path in figures:
        png = Path(path).read_bytes() if Path(path).exists() else None
        if png is None:
            problems.append(f"figure {Path(path).name}: listed but not saved")
        elif png not in shown:
            problems.append(f"figure {Path(path).name}: saved but not shown as an image output")
    return problems


def check_notebook(path: str | Path, figures: list[Path] | None = None) -> list[str]:
    """The problems of an executed notebook's outputs (see the module's list); ``figures`` defaults to the PNGs
    beside it (:func:`saved_figures`)."""
    path = Path(path)
    doc = json.loads(path.read_text())
    return check_cells(doc.get("cells", []), saved_figures(path) if figures is None else figures)


def _refuse(token: str):
    raise ValueError(f"not strict JSON: {token}")


def check_json(path: str | Path) -> list[str]:
    """A JSON file a strict parser rejects: ``NaN``, ``Infinity`` or ``-Infinity`` tokens (Python's json writes
    them by default), or no JSON at all."""
    try:
        json.loads(Path(path).read_text(), parse_constant=_refuse)
    except ValueError as exc:   # JSONDecodeError is a ValueError
        return [f"{Path(path).name}: {exc}"]
    return []


def footnoted(table, column: str, longer_than: int = 60):
    """``table`` with each long text of ``column`` replaced by a note mark ('note a'), and the notes as markdown
    to display under it: a sentence several rows share is read once, in the caption, not once per row. Short texts
    stay in the table. Returns ``(table, notes)``; ``notes`` is '' when no text was long."""
    marks: dict[str, str] = {}

    def mark(text):
        if not isinstance(text, str) or len(text) <= longer_than:
            return text
        if text not in marks:
            k = len(marks)
            marks[text] = chr(ord("a") + k) if k < 26 else f"a{k}"
        return f"note {marks[text]}"

    out = table.copy()
    out[column] = out[column].map(mark)
    notes = "  \n".join(f"*Note {m}.* {text}" for text, m in marks.items())
    return out, notes


#: Key endings that name a unit, and how a reader reads them.
UNIT_SUFFIXES = (("_pct_points", " (percentage points)"), ("_pp", " (points)"), ("_pct", " (%)"),
                 ("_share", " (share)"), ("_min", " (min)"), ("_s", " (s)"), ("_h", " (h)"), ("_log", " (log scale)"))


def reader_name(key: str) -> str:
    """A result's name as a reader reads it: words, not snake case, its unit from its ending
    ('p_fail_after_fail_pct' -> 'p fail after fail (%)', 'typical_error_pp' -> 'typical error (points)')."""
    unit = ""
    for suffix, words in UNIT_SUFFIXES:
        if key.endswith(suffix):
            key, unit = key[: -len(suffix)], words
            break
    return key.replace("p_value", "p-value").replace("_", " ").strip() + unit


def reader_value(value) -> str:
    """A value as a reader reads it: counts with thousands separators, other numbers to four significant digits,
    a missing one as '-'."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        return str(value)
    number = float(value)
    return f"{number:,.0f}" if number.is_integer() and abs(number) < 1e15 else f"{number:,.4g}"


def labelled(values: dict, column: str = "value"):
    """A mapping of results as a table a reader reads: each key named in words with its unit, each value formatted
    (:func:`reader_name`, :func:`reader_value`)."""
    import pandas as pd

    return pd.DataFrame({column: [reader_value(v) for v in values.values()]},
                        index=pd.Index([reader_name(k) for k in values], name="quantity"))


def strict(value):
    """``value`` (nested dicts, lists, scalars) with every non-finite float (NaN, ±inf, numpy's too) and pandas' missing
    markers as None, so that ``json.dumps(..., allow_nan=False)`` writes strict JSON: ``null`` (nothing measured)."""
    import math

    import numpy as np
    import pandas as pd

    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is pd.NA or value is pd.NaT:
        return None
    return value
