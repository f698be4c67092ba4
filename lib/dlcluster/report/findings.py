"""What the study finds: each of the paper's claims, section by section, as *holds*, *does not hold* or *cannot be
tested on public data*, and why.

One function, :func:`finding`, turns a scorecard verdict (:func:`dlcluster.report.reproduction.scorecard`) into that
answer, and every place a reader meets the findings shows its output: the cell tagged ``findings`` under each
notebook's title, the index page's first section, and the README (a link to that section).

A notebook cannot show its own findings while it runs: a claim of its section may rest on another notebook's
result (Table 2's finding comes from notebook 05's replay), and a notebook runs top-down. So each notebook holds a
markdown cell tagged :data:`FINDINGS_TAG` right under its title, and the report runner fills it
(:func:`with_findings`) once every notebook has run, reused ones too, then renders that notebook's HTML again.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

#: The tag of the markdown cell under each notebook's title that the report runner fills with its findings.
FINDINGS_TAG = "findings"
#: What a findings cell says before the report runner has filled it (a notebook run on its own, in JupyterLab).
PLACEHOLDER = ("## Findings\n\n*Filled in by `dlcluster reports` (`make reports`) once every notebook has run: some of "
               "this section's claims rest on other notebooks' results. The index page lists them too.*")
#: The paper's sections, each with a short name and the notebook that reproduces it (the README's notebook table).
SECTIONS = {"2": ("the trace and the cluster", "00-trace-overview"),
            "3.1": ("queueing and locality", "01-locality-queueing"),
            "3.2": ("GPU utilization", "02-utilization-colocation"),
            "4.1": ("training epochs", "03-epoch-effectiveness"),
            "4.2": ("failures", "04-failures-rtf"),
            "5": ("design implications", "06-design-implications")}
#: A scorecard verdict -> what it says of the paper's claim.
OUTCOMES = {"reproduced": "holds", "differs": "does not hold", "not comparable": "cannot be tested on public data"}
#: The order findings are listed in: what compares something first.
ORDER = ("does not hold", "holds", "cannot be tested on public data")
#: Our value is shown up to this many characters (a finding's value can be a paragraph).
SHORT = 90


def sentence(text) -> str:
    """``text`` as a sentence: capital first letter, a full stop at the end."""
    text = " ".join(str(text or "").split())
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def finding(verdict: str, detail) -> tuple[str, str]:
    """(what the verdict says of the claim, why, as a sentence): the one mapping every findings list uses."""
    if verdict not in OUTCOMES:
        raise ValueError(f"unknown verdict {verdict!r}; expected one of {list(OUTCOMES)}")
    return OUTCOMES[verdict], sentence(detail)


def _figure_notebook(figure) -> str:
    return figure.split(":", 1)[0] if isinstance(figure, str) and ":" in figure else ""


def _short(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, bool):
        text = str(value)
    elif isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, float):
        text = f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    else:
        text = " ".join(str(value).split()).rstrip(".")
    return text if len(text) <= SHORT else text[:SHORT].rsplit(" ", 1)[0].rstrip(",;:") + " (…)"


def findings(card: pd.DataFrame) -> pd.DataFrame:
    """One row per claim of the scorecard: section, notebook (of its section), source (the notebook its figure comes
    from), what, published, ours (shortened), outcome, why; tested claims first within each section."""
    rows = []
    for position, row in enumerate(card.itertuples()):
        outcome, why = finding(row.verdict, row.detail)
        notebook = SECTIONS.get(str(row.section), ("", ""))[1]
        rows.append({"key": row.key, "section": str(row.section), "notebook": notebook,
                     "source": _figure_notebook(row.figure) or notebook, "what": row.what,
                     "published": row.published, "ours": _short(row.ours), "outcome": outcome, "why": why,
                     "order": (ORDER.index(outcome), position)})
    frame = pd.DataFrame(rows, columns=["key", "section", "notebook", "source", "what", "published", "ours",
                                        "outcome", "why", "order"])
    return frame.sort_values("order", kind="stable").drop(columns="order").reset_index(drop=True)


def notebook_findings(table: pd.DataFrame, stem: str) -> pd.DataFrame:
    """The claims a notebook answers: those of its paper section, and those whose figure it computes."""
    return table[(table["notebook"] == stem) | (table["source"] == stem)]


def _tally(rows: pd.DataFrame) -> str:
    counts = {outcome: int((rows["outcome"] == outcome).sum()) for outcome in ORDER}
    return " · ".join(f"{outcome} {n}" for outcome, n in counts.items() if n)


def _item_markdown(row, stem: str) -> str:
    ours = f"; ours: {row.ours}" if row.ours else ""
    elsewhere = f" (our figure from notebook {row.source[:2]})" if row.source != stem else ""
    section = f" (§{row.section})" if row.notebook != stem else ""
    return (f"- **{row.outcome.capitalize()}**: {row.what}{section}: *{_escape_md(row.published)}*{ours}"
            f"{elsewhere}. {_escape_md(row.why)}")


def _escape_md(text) -> str:
    return str(text).replace("*", r"\*").replace("_", r"\_").replace("<", "&lt;")


def findings_markdown(table: pd.DataFrame, stem: str) -> str:
    """The findings cell of notebook ``stem``: each of its claims with what holds and why (generated)."""
    rows = notebook_findings(table, stem)
    sections = [s for s, (_, nb) in SECTIONS.items() if nb == stem]
    claims = (f"claim of section {', '.join(sections)} of the paper" if sections else
              "claim of the paper whose figure this notebook computes")
    intro = (f"*Generated from the reproduction scorecard once every notebook had run (`dlcluster reports`); the rest "
             f"of this notebook is the evidence. For each {claims}: whether it **holds** on the public data, "
             f"**does not hold**, or **cannot be tested on public data**, and why.*")
    head = ["## Findings", "", intro, ""]
    if rows.empty:
        return "\n".join([*head, "No claim of the paper rests on this notebook's results."])
    return "\n".join([*head, f"{_tally(rows)} (of {len(rows)})", "",
                      *(_item_markdown(row, stem) for row in rows.itertuples())])


def findings_html(table: pd.DataFrame) -> str:
    """The index page's first section: one block per section of the paper, each claim with what holds and why."""
    parts = [("<h2 id='findings'>What the study finds</h2><p>Each claim of the paper, section by section: whether it "
              "<b>holds</b> on the public data, <b>does not hold</b>, or <b>cannot be tested on public data</b>, and "
              "why (generated from the scorecard below; each notebook opens with the same list).</p>")]
    untested = ORDER[-1]
    for section, (name, stem) in SECTIONS.items():
        rows = table[table["section"] == section]
        if rows.empty:
            continue
        parts.append(f"<h3>§{html.escape(section)} {html.escape(name)} (<a href='#{html.escape(stem)}'>"
                     f"{html.escape(stem)}</a>): {html.escape(_tally(rows))}</h3>")
        tested = rows[rows["outcome"] != untested]
        if len(tested):
            parts.append(f"<ul>{_items_html(tested)}</ul>")
        rest = rows[rows["outcome"] == untested]
        if len(rest):   # folded: what compares something is what a reader sees first
            parts.append(f"<details><summary>{html.escape(untested)}: {len(rest)}, each with why</summary>"
                         f"<ul>{_items_html(rest)}</ul></details>")
    return "".join(parts)


def _items_html(rows: pd.DataFrame) -> str:
    return "".join(f"<li><b>{html.escape(r.outcome)}</b>: {html.escape(str(r.what))}: <i>"
                   f"{html.escape(str(r.published))}</i>{'; ours: ' + html.escape(r.ours) if r.ours else ''}. "
                   f"{html.escape(r.why)}</li>" for r in rows.itertuples())


def with_findings(executed: Path, table: pd.DataFrame):
    """The executed notebook with its findings cell filled from ``table``, or None when it has no findings cell or
    the cell already says this (so an unchanged notebook is not written again)."""
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    cells = [c for c in nb.cells if FINDINGS_TAG in c.get("metadata", {}).get("tags", [])]
    if not cells:
        return None
    text = findings_markdown(table, executed.stem)
    if cells[0].source == text:
        return None
    cells[0].source = text
    return nb
