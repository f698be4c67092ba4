"""What every notebook writes: figures labelled with their data, and results.json.

A notebook creates one :class:`Report` for its ``output_dir``; figures go to
``<output_dir>/figures/<name>.png`` with the data source stamped on the figure,
and :meth:`Report.write` writes ``results.json`` atomically (a flat mapping of
documented key numbers). An interrupted run therefore never leaves a
``results.json`` that looks complete.

JSON has no literal for the floats that are not finite, so ``results.json``
spells a computed NaN as the string ``"NaN"``, +inf as ``"Infinity"`` and -inf
as ``"-Infinity"``; ``null`` (a value of None) means *not applicable* (e.g. a
job size the data does not hold). :func:`read_results_json` reads the file back
with those strings decoded to floats (a result that is one of these strings as
text therefore reads back as a float).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_write_text, umask_mode
from ..paths import repo_root
from .reference import check_keys, comparison_rows, published_vs_ours


#: How results.json spells each float that JSON has no literal for (None is written as null: not applicable).
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, (np.bool_,)):
        return bool(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    raise TypeError(f"results.json values must be scalars, got {type(value).__name__}: {value!r}")


def decode_value(value: Any) -> Any:
    """A value as read from results.json, with ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` back as floats."""
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    return value


def decode_results(doc: Any) -> Any:
    """A parsed results.json with its non-finite floats decoded (``results``, ``params``, comparisons' ``ours``).

    Anything that is not shaped like a results document is returned as it is.
    """
    if not isinstance(doc, dict):
        return doc
    doc = dict(doc)
    for field in ("results", "params"):
        if isinstance(doc.get(field), dict):
            doc[field] = {k: decode_value(v) for k, v in doc[field].items()}
    if isinstance(doc.get("comparisons"), list):
        doc["comparisons"] = [{**row, "ours": decode_value(row["ours"])} if isinstance(row, dict) and "ours" in row
                              else row for row in doc["comparisons"]]
    return doc


def read_results_json(path: str | Path) -> dict:
    """Read a notebook's results.json, NaN and infinities as floats (None stays None: not applicable).

    Raises ``OSError`` if the file cannot be read and ``json.JSONDecodeError`` if it is not JSON.
    """
    return decode_results(json.loads(Path(path).read_text()))


#: Font size of the data caption under each figure (points).
CAPTION_POINTS = 7


def caption_lines(text: str, width_in: float, points: float = CAPTION_POINTS) -> str:
    """``text`` wrapped to lines no wider than ``width_in`` inches of a ``points``-point font.

    A character of the default sans-serif font is at most about 0.6 em wide on average over a line, so
    ``width_in * 72 / (0.6 * points)`` characters fit; a caption then never widens its figure.
    """
    import textwrap

    return textwrap.fill(text, width=max(20, int(width_in * 72 / (0.6 * points))), break_long_words=True)


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (a notebook, papermill's run), where a figure can be displayed."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_saved(path: Path) -> bool:
    """Display a saved PNG as the cell's image output, inside a kernel only: the reader sees the figure where the
    notebook discusses it (JupyterLab, the HTML report), exactly as the index shows it, while the backend stays
    non-interactive (Agg). Whether it was displayed."""
    if not in_kernel():
        return False
    from IPython.display import Image, display

    display(Image(filename=str(path)))
    return True


class Report:
    """Collects a notebook's figures and key numbers."""

    def __init__(self, output_dir: str | Path, notebook: str, params: dict | None = None):
        # a relative folder is the repository's, wherever the kernel runs (JupyterLab starts it in notebooks/)
        self.output_dir = Path(output_dir) if Path(output_dir).is_absolute() else repo_root() / output_dir
        self.figures_dir = self.output_dir / "figures"
        self.figures_dir.mkdir(parents=True, exist_ok=True)
        self.notebook = notebook
        self.params = dict(params or {})
        self.results: dict[str, Any] = {}
        self.descriptions: dict[str, str] = {}
        self.figures: list[dict] = []
        self.comparisons: list[dict] = []

    def add(self, key: str, value: Any, description: str = "") -> Any:
        """Record one key number (flat key, e.g. ``queueing.median_s.1gpu``)."""
        self.results[key] = _jsonable(value)
        if description:
            self.descriptions[key] = description
        return value

    def compare(self, rows: list[dict]):
        """Render the published-vs-ours table and keep its rows for results.json and the index page.

        Raises :class:`~dlcluster.report.reference.UnknownReferenceKey` if a row names a key the
        reference file does not list (so the notebook run fails instead of the report showing it).
        """
        checked = comparison_rows(rows)
        check_keys(checked)
        self.comparisons.extend(checked)
        return published_vs_ours(rows)

    def figure(self, fig, name: str, data: str, dpi: int = 110) -> Path:
        """Save ``fig`` as PNG with a footnote naming the data it was drawn from, wrapped at the figure's width.

        What a machine can check of the figure rules (:func:`dlcluster.report.plotting.figure_problems`: legends
        over data, legend entries without a curve, axes without a name, log axes without a unit) is recorded with
        the figure in results.json (``problems``); the tests run every notebook and fail on any. Inside a kernel the
        saved PNG is displayed as the cell's output (:func:`show_saved`), and the figure is closed either way.
        """
        from .plotting import figure_problems

        try:
            problems = figure_problems(fig, dpi=dpi)
        except Exception as exc:
            problems = [f"the figure checks could not run: {type(exc).__name__}: {exc}"]
        fig.text(0.005, 0.0, caption_lines(f"Data: {data}", fig.get_size_inches()[0]), fontsize=CAPTION_POINTS,
                 color="0.35", ha="left", va="top")
        path = self.figures_dir / f"{name}.png"
        fd, tmp = tempfile.mkstemp(dir=self.figures_dir, prefix=f".{name}.", suffix=".png")
        os.close(fd)
        try:
            fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
            os.chmod(tmp, umask_mode())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.figures.append({"name": name, "path": str(path.relative_to(self.output_dir)), "data": data,
                             "problems": problems})
        show_saved(path)
        import matplotlib.pyplot as plt

        plt.close(fig)   # shown once: a backend that shows open figures at the cell's end has none left to show
        return path

    def write(self) -> Path:
        """Write results.json (atomically): results, descriptions, figures, comparisons, params."""
        doc = {
            "notebook": self.notebook,
            "params": {k: _jsonable(v) if not isinstance(v, (list, dict)) else v
                       for k, v in self.params.items()},
            "results": self.results,
            "descriptions": self.descriptions,
            "figures": self.figures,
            "comparisons": [{**row, "ours": _jsonable(row["ours"])} for row in self.comparisons],
        }
        # allow_nan=False: a non-finite float that escaped the spelling above fails here, not in a reader
        return atomic_write_text(self.output_dir / "results.json",
                                 json.dumps(doc, indent=2, sort_keys=True, allow_nan=False))
