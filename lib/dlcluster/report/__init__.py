"""From results to what a reader sees: notebook reports, the index page, published numbers, plots, the runner.

Not to be confused with ``reports/``, the folder these write into.

* :mod:`.notebook`: :class:`Report`, what every notebook writes (figures labelled with their data, results.json);
* :mod:`.reference`: the paper's published numbers with provenance, and the published-vs-ours table;
* :mod:`.plotting`: shared figure style and helpers;
* :mod:`.runner`: ``make reports`` (papermill per notebook, HTML, atomic outputs, progress, cache, Ctrl-C);
* :mod:`.progress`: progress lines in the terminal, also from code running in a notebook's kernel (sweeps);
* :mod:`.findings`: each claim of the paper as holds / does not hold / cannot be tested, from the scorecard;
* :mod:`.index`: ``reports/<config>/index.html``.
"""

from ..atomic import atomic_write_text
from .notebook import Report, read_results_json

__all__ = ["Report", "atomic_write_text", "read_results_json"]
