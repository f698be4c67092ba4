"""Each notebook opens with its findings: the one mapping from verdicts to findings, the sections' notebooks, and the
findings cell the report runner fills once every notebook has run (reused notebooks too)."""

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from dlcluster.report.findings import (FINDINGS_TAG, OUTCOMES, PLACEHOLDER, SECTIONS, finding, findings,
                                       findings_html, findings_markdown, notebook_findings, sentence)
from dlcluster.report.reference import load_reference
from dlcluster.report.reproduction import scorecard
from dlcluster.report.runner import write_findings

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _card(rows):
    base = {"published": "1 %", "provenance": "summary", "ours": None, "data": "", "like_for_like": ""}
    return pd.DataFrame([{**base, **row} for row in rows])


def test_each_verdict_says_what_holds_with_its_reason_as_a_sentence():
    assert finding("reproduced", "within 2 (ours - published = +1)") == (
        "holds", "Within 2 (ours - published = +1).")
    assert finding("differs", "by +5; tolerance 2") == ("does not hold", "By +5; tolerance 2.")
    assert finding("not comparable", "another job selection.") == ("cannot be tested on public data",
                                                                   "Another job selection.")
    assert set(OUTCOMES) == {"reproduced", "differs", "not comparable"}
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        finding("maybe", "")
    assert sentence("  two\n words ") == "Two words." and sentence("") == ""


def test_every_section_of_the_paper_has_its_notebook():
    sections = set(load_reference()["section"].astype(str))
    assert sections <= set(SECTIONS), sections - set(SECTIONS)
    for _, stem in SECTIONS.values():
        assert (REPO / "notebooks" / f"{stem}.ipynb").exists(), stem


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_opens_with_its_findings_cell(path):
    """Right under the title (06 keeps its introduction in the title cell), a markdown cell tagged `findings`
    that says, until the runner fills it, where its findings come from."""
    cells = nbformat.read(path, as_version=4).cells
    tagged = [i for i, c in enumerate(cells) if FINDINGS_TAG in c.metadata.get("tags", [])]
    assert tagged == [1], f"{path.name}: the findings cell must be the one under the title, found at {tagged}"
    assert cells[0].cell_type == "markdown" and cells[0].source.startswith("# ")
    assert cells[1].cell_type == "markdown" and cells[1].source == PLACEHOLDER


def test_findings_list_tested_claims_first_and_claims_whose_figure_another_notebook_computes():
    card = _card([
        {"key": "a", "section": "3.1", "what": "a claim not tested", "verdict": "not comparable",
         "detail": "another selection", "figure": "01-locality-queueing:x"},
        {"key": "b", "section": "3.1", "what": "Table 2 finding", "verdict": "reproduced", "detail": "tested: all",
         "figure": "05-simulator-validation:replay.table2.finding", "ours": "fragmentation grows"},
        {"key": "c", "section": "3.1", "what": "Figure 4 finding", "verdict": "differs", "detail": "fails: slope",
         "figure": "01-locality-queueing:y", "ours": 0.25},
        {"key": "d", "section": "4.2", "what": "a failure claim", "verdict": "reproduced", "detail": "ok",
         "figure": None}])
    table = findings(card)
    assert list(table["key"]) == ["c", "b", "d", "a"]   # does not hold, holds, then what cannot be tested
    assert list(notebook_findings(table, "01-locality-queueing")["key"]) == ["c", "b", "a"]
    assert list(notebook_findings(table, "05-simulator-validation")["key"]) == ["b"]
    assert list(notebook_findings(table, "04-failures-rtf")["key"]) == ["d"]
    text = findings_markdown(table, "01-locality-queueing")
    assert "does not hold 1 · holds 1 · cannot be tested on public data 1 (of 3)" in text
    assert "- **Does not hold**: Figure 4 finding: *1 %*; ours: 0.25. Fails: slope." in text
    assert "(our figure from notebook 05)" in text
    five = findings_markdown(table, "05-simulator-validation")
    assert "Table 2 finding (§3.1)" in five and "holds 1 (of 1)" in five
    assert "No claim of the paper rests" in findings_markdown(table, "00-trace-overview")
    page = findings_html(table)
    assert page.index("§3.1 queueing and locality") < page.index("§4.2 failures")
    assert "<b>does not hold</b>: Figure 4 finding" in page
    folded = page.split("<details>")[1]   # what cannot be tested is folded under its count, each with why
    assert folded.startswith("<summary>cannot be tested on public data: 1, each with why</summary>")
    assert "a claim not tested" in folded and "Figure 4 finding" not in folded


def _executed(out: Path, stem: str) -> Path:
    """A copy of the repository's notebook as the runner leaves it (unexecuted cells are enough here)."""
    path = out / f"{stem}.ipynb"
    path.write_text((REPO / "notebooks" / f"{stem}.ipynb").read_text())
    return path


def _results(out: Path, stem: str, results: dict) -> None:
    (out / stem).mkdir(parents=True, exist_ok=True)
    (out / stem / "results.json").write_text(json.dumps({"notebook": stem, "results": results}))


@pytest.mark.notebook
def test_the_runner_fills_every_notebooks_findings_reused_or_not_and_only_when_they_change(tmp_path):
    one, six = _executed(tmp_path, "01-locality-queueing"), _executed(tmp_path, "06-design-implications")
    # Figure 4's finding: the slope's interval includes zero for 5-8 GPUs (not shown), below zero for >8
    fig4 = {"queueing.fig4_finding": "mixed", "fig4.jobs.5-8": 150, "fig4.jobs.gt8": 120,
            "fig4.slope_ci_low.5-8": -0.05, "fig4.slope_ci_high.5-8": 0.02,
            "fig4.slope_ci_low.gt8": -0.09, "fig4.slope_ci_high.gt8": -0.01}
    _results(tmp_path, "01-locality-queueing", fig4)
    assert write_findings(tmp_path, [one, six]) == [one, six]
    cell = nbformat.read(one, as_version=4).cells[1]
    assert FINDINGS_TAG in cell.metadata["tags"] and cell.source.startswith("## Findings")
    verdict = scorecard(tmp_path).set_index("key").loc["queueing.fig4_finding", "verdict"]
    assert f"**{OUTCOMES[verdict].capitalize()}**: Figure 4 finding" in cell.source
    assert "Figure 4 finding" in one.with_suffix(".html").read_text()
    stamp = one.stat().st_mtime_ns
    assert write_findings(tmp_path, [one, six]) == []   # nothing changed: nothing written
    assert one.stat().st_mtime_ns == stamp

    # another result moved (as when only that notebook ran again): the unchanged notebook's findings follow it
    _results(tmp_path, "01-locality-queueing", {**fig4, "queueing.fig4_finding": "both",
                                                "fig4.slope_ci_low.5-8": -0.06, "fig4.slope_ci_high.5-8": -0.02})
    assert write_findings(tmp_path, [one, six], html=False) == [one]
    again = scorecard(tmp_path).set_index("key").loc["queueing.fig4_finding", "verdict"]
    assert again != verdict
    assert f"**{OUTCOMES[again].capitalize()}**: Figure 4 finding" in nbformat.read(one, as_version=4).cells[1].source


@pytest.mark.notebook
def test_ctrl_c_while_the_findings_are_written_leaves_the_index_as_it_was(tmp_path, monkeypatch):
    from dlcluster.report import runner

    (tmp_path / "nbs").mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('output_dir = "x"')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · Tiny"), params, nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "nbs" / "01-tiny.ipynb")
    (tmp_path / "p.yaml").write_text("seed: 0\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "write_findings", interrupted)
    with pytest.raises(runner.ReportsInterrupted, match=r"while writing the findings.*index\.html was not updated"):
        runner.run_reports(tmp_path / "p.yaml", tmp_path / "out", notebooks_dir=tmp_path / "nbs", html=False,
                           echo=lambda line: None)
    assert (tmp_path / "out" / "01-tiny.ipynb").exists() and not (tmp_path / "out" / "index.html").exists()
