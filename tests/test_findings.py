"""Each notebook opens with its findings: the one mapping from verdicts to findings, the sections' notebooks, and the
findings cell the report runner fills once every notebook has run (reused notebooks too)."""

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from dlcluster.report import findings as fd
from dlcluster.report.findings import (FINDINGS_TAG, PLACEHOLDER, SECTIONS, finding, findings, findings_html,
                                       findings_markdown, notebook_findings, sentence)
from dlcluster.report.reference import load_reference
from dlcluster.report.reproduction import scorecard
from dlcluster.report.runner import write_findings

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _card(rows):
    base = {"published": "1 %", "provenance": "summary", "ours": None, "data": "", "like_for_like": ""}
    return pd.DataFrame([{**base, **row} for row in rows])


def test_a_bare_verdict_stands_for_its_label_with_its_reason_as_a_sentence():
    assert finding("reproduced", "within 2 (ours - published = +1)") == (
        "reproduced", "Within 2 (ours - published = +1).")
    assert finding("differs", "by +5; tolerance 2") == ("differs", "By +5; tolerance 2.")
    assert finding("not comparable", "another job selection.") == ("cannot be tested", "Another job selection.")
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


def test_findings_list_the_most_informative_first_and_claims_whose_figure_another_notebook_computes():
    card = _card([
        {"key": "a", "section": "3.1", "what": "a claim not tested", "verdict": "not comparable",
         "detail": "another selection", "figure": "01-locality-queueing:x", "kind": "cannot be tested",
         "label": "cannot be tested", "ours": "supported"},
        {"key": "b", "section": "3.1", "what": "Table 2 finding", "verdict": "reproduced", "detail": "tested: all",
         "figure": "05-simulator-validation:replay.table2.finding", "ours": "fragmentation grows",
         "kind": "reproduced", "label": "reproduced"},
        {"key": "c", "section": "3.1", "what": "Figure 4 finding", "verdict": "not comparable",
         "detail": "slope: interval [-0.05, -0.01], below zero as claimed (n = 258); not the paper's selection: x",
         "figure": "01-locality-queueing:y", "ours": 0.25, "kind": "holds on", "label": "holds on DRE's records"},
        {"key": "d", "section": "4.2", "what": "a failure claim", "verdict": "not comparable", "detail": "minutes",
         "figure": "04-failures-rtf:z", "ours": 43.2, "kind": "on another selection",
         "label": "on DRE's records, ours is 43.2%"}])
    table = findings(card)
    assert list(table["key"]) == ["b", "c", "d", "a"]   # reproduced, a direction, another selection, untested
    assert list(notebook_findings(table, "01-locality-queueing")["key"]) == ["b", "c", "a"]
    assert list(notebook_findings(table, "05-simulator-validation")["key"]) == ["b"]
    assert list(notebook_findings(table, "04-failures-rtf")["key"]) == ["d"]
    text = findings_markdown(table, "01-locality-queueing")
    assert "holds on a public selection 1 · cannot be tested on public data 1 (of 3)" in text
    assert ("- Figure 4 finding: the paper *1 %*; **holds on DRE's records**. Slope: interval [-0.05, "
            "-0.01], below zero as claimed (n = 258); not the paper's selection: x.") in text
    assert "ours: 0.25" not in text   # a direction's bare figure is not its finding: the interval and n are
    assert "(our figure from notebook 05)" in text
    four = findings_markdown(table, "04-failures-rtf")   # the label already holds our value: not twice
    assert "**on DRE's records, ours is 43.2%**. Minutes." in four and "ours: 43.2" not in four
    five = findings_markdown(table, "05-simulator-validation")
    assert "Table 2 finding (§3.1)" in five and "reproduced 1 (of 1)" in five
    assert "No claim of the paper rests" in findings_markdown(table, "00-trace-overview")
    page = findings_html(table)
    assert "<p><b>4 claims:</b> reproduced 1 · holds on a public selection 1 · measured on another public selection 1" \
           " · cannot be tested on public data 1.</p>" in page
    assert page.index("§3.1 queueing and locality") < page.index("§4.2 failures")
    assert "<b>holds on DRE&#x27;s records</b>. Slope: interval" in page
    assert "<b>reproduced</b>; ours: fragmentation grows" in page   # like for like: our value beside it
    folded = page.split("<details>")[1]   # what cannot be tested is folded under its count, each with why
    assert folded.startswith("<summary>cannot be tested on public data: 1, each with why</summary>")
    assert "a claim not tested" in folded and "Figure 4 finding" not in folded
    assert "supported" not in page and "supported" not in text   # a model's answer is not shown as ours
    block = fd.readme_block(table)
    assert block.startswith(fd.README_BEGIN) and block.endswith(fd.README_END)
    assert "**4 claims of the paper, each with what the public data show:** reproduced 1 · holds on" in block
    assert ("  - Figure 4 finding (§3.1): the paper *1 %*; holds on DRE's records (Slope: interval [-0.05, -0.01], "
            "below zero as claimed (n = 258))") in block
    assert "- **Cannot be tested on public data** (1): a claim not tested (§3.1)." in block


def test_a_scorecard_without_labels_still_lists_its_verdicts():
    card = _card([{"key": "a", "section": "2", "what": "w", "verdict": "differs", "detail": "by 5", "figure": None}])
    assert list(findings(card)[["outcome", "label"]].iloc[0]) == ["differs", "differs"]


def test_the_readme_opens_with_the_findings_the_golden_results_give():
    """The README's first lines are the block `dlcluster findings --golden --readme` writes: regenerate it after
    `make golden` (a drift fails here)."""
    readme = (REPO / "README.md").read_text()
    assert readme.splitlines()[2] == fd.README_BEGIN   # right under the title
    table = fd.golden_findings()
    assert fd.readme_in_text(readme) == fd.readme_block(table), \
        "README.md's findings block is stale: run `dlcluster findings --golden --readme`"
    assert len(table) == 48 and "reproduced" not in readme.splitlines()[0]
    with pytest.raises(ValueError, match="markers are missing"):
        fd.replace_readme_block("# title\n", "x")
    assert fd.replace_readme_block(f"a\n{fd.README_BEGIN}\nold\n{fd.README_END}\nb", "new") == "a\nnew\nb"


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
    verdict = scorecard(tmp_path).set_index("key").loc["queueing.fig4_finding", "label"]
    assert f"**{verdict}**" in cell.source and "Figure 4 finding" in cell.source
    assert "Figure 4 finding" in one.with_suffix(".html").read_text()
    stamp = one.stat().st_mtime_ns
    assert write_findings(tmp_path, [one, six]) == []   # nothing changed: nothing written
    assert one.stat().st_mtime_ns == stamp

    # another result moved (as when only that notebook ran again): the unchanged notebook's findings follow it
    _results(tmp_path, "01-locality-queueing", {**fig4, "queueing.fig4_finding": "both",
                                                "fig4.slope_ci_low.5-8": -0.06, "fig4.slope_ci_high.5-8": -0.02})
    assert write_findings(tmp_path, [one, six], html=False) == [one]
    again = scorecard(tmp_path).set_index("key").loc["queueing.fig4_finding", "label"]
    assert again != verdict and again.startswith("holds on DRE's")
    assert f"**{again}**" in nbformat.read(one, as_version=4).cells[1].source


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


def test_the_findings_command_prints_the_block_it_would_write(capsys):
    from dlcluster.cli import main

    assert main(["findings", "--golden"]) == 0
    printed = capsys.readouterr().out
    assert printed.strip() == fd.readme_block(fd.golden_findings())
    assert printed.startswith(fd.README_BEGIN) and "48 claims of the paper" in printed


def test_notebook_05s_findings_open_with_its_headline_read_from_its_results(tmp_path):
    """Its first screen says how many held-out targets the replay meets (issue 49): the runner puts the headline the
    notebook wrote first under "Findings"; a notebook with no headline key gets none."""
    five, one = _executed(tmp_path, "05-simulator-validation"), _executed(tmp_path, "01-locality-queueing")
    line = "The calibrated replay meets 3 of 9 held-out targets."
    _results(tmp_path, "05-simulator-validation", {"validation.targets_table.headline": line})
    _results(tmp_path, "01-locality-queueing", {"validation.targets_table.headline": "not 01's"})
    assert fd.headline(five) == line and fd.headline(one) == ""
    text = fd.with_findings(five, findings(scorecard(tmp_path))).cells[1].source
    assert text.startswith(f"## Findings\n\n**{line}**\n\n")
    assert "not 01's" not in fd.with_findings(one, findings(scorecard(tmp_path))).cells[1].source
