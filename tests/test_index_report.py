"""The reports' entry page: comparisons beside published values, links, data, command and versions."""

import json

import nbformat
import pytest

from dlcluster.report.index import comparisons_table, write_index
from dlcluster.report.reference import comparison_rows
from dlcluster.report import Report


def _executed(out_dir, stem, title="# 09 · A test notebook\ntext"):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(title), nbformat.v4.new_code_cell("x = 1")]
    path = out_dir / f"{stem}.ipynb"
    nbformat.write(nb, path)
    return path


def _results(out_dir, stem, rows=None):
    rep = Report(out_dir / stem, stem, params={"seed": 0})
    rep.add("failures.unsuccessful_jobs_pct", 41.25, "killed or failed jobs (%)")
    rep.add("jobs.count", 5910)
    if rows is not None:
        rep.compare(rows)
    return rep.write()


ROWS = [
    {"what": "killed or unsuccessful jobs", "ours": 41.25, "key": "failures.unsuccessful_jobs_pct",
     "data": "real DRE records"},
    {"what": "mean attempts per job", "ours": "1.00", "key": None, "data": "real DRE records"},
]


def test_report_compare_stores_checked_rows_and_returns_the_table(tmp_path):
    rep = Report(tmp_path / "09-x", "09-x")
    table = rep.compare(ROWS)
    doc = json.loads(rep.write().read_text())
    assert doc["comparisons"][0] == {"what": "killed or unsuccessful jobs", "ours": 41.25,
                                     "key": "failures.unsuccessful_jobs_pct", "data": "real DRE records"}
    assert table.loc[0, "published"] == "30.7 % of jobs" and table.loc[0, "provenance"] == "summary"
    assert table.loc[1, "published"] == "not published here"


def test_results_json_tells_nan_and_infinity_from_not_applicable(tmp_path):
    import math

    import numpy as np

    from dlcluster.report import read_results_json
    from dlcluster.report.index import read_results

    rep = Report(tmp_path / "09-x", "09-x", params={"alpha": float("nan")})
    rep.add("a.nan", np.float64("nan"))
    rep.add("a.inf", float("inf"))
    rep.add("a.minus_inf", np.float32("-inf"))
    rep.add("a.none", None)
    rep.add("a.value", 2.5)
    rep.add("a.text", "n/a")
    rep.compare([{"what": "a ratio with a zero baseline", "ours": float("nan"), "key": None}])
    path = rep.write()
    stored = json.loads(path.read_text())  # plain, strict JSON: no NaN or Infinity literal
    assert stored["results"] == {"a.nan": "NaN", "a.inf": "Infinity", "a.minus_inf": "-Infinity", "a.none": None,
                                 "a.value": 2.5, "a.text": "n/a"}
    assert stored["params"]["alpha"] == "NaN" and stored["comparisons"][0]["ours"] == "NaN"
    for doc in (read_results_json(path), read_results(path)[0]):
        r = doc["results"]
        assert math.isnan(r["a.nan"]) and r["a.inf"] == math.inf and r["a.minus_inf"] == -math.inf
        assert r["a.none"] is None and r["a.value"] == 2.5 and r["a.text"] == "n/a"
        assert math.isnan(doc["params"]["alpha"]) and math.isnan(doc["comparisons"][0]["ours"])


def test_comparison_rows_are_checked():
    with pytest.raises(ValueError, match="at least 'what' and 'ours'"):
        comparison_rows([{"what": "x"}])
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['note'\]"):
        comparison_rows([{"what": "x", "ours": 1, "note": "y"}])
    import numpy as np
    assert comparison_rows([{"what": "x", "ours": np.float64(2.5)}])[0] == {"what": "x", "ours": 2.5, "key": None,
                                                                             "data": ""}


def test_bad_comparisons_are_reported_not_fatal():
    doc = {"results": {}, "comparisons": [{"what": "a"}, {"what": "b", "ours": 1, "key": "no.such.key"}]}
    table, problems = comparisons_table(doc)
    assert len(table) == 1 and table.loc[0, "published"] == "not published here"
    assert any("malformed" in p for p in problems)
    assert any("'no.such.key', which is not in data/reference/atc19.yaml" in p for p in problems)


def test_index_lists_notebooks_comparisons_data_command_and_versions(tmp_path):
    params = tmp_path / "ci.yaml"
    params.write_text("trace: public\nseed: 0\nnotebooks:\n  09-x:\n    grid: small\n")
    with_rows = _executed(tmp_path, "09-x")
    (tmp_path / "09-x.html").write_text("<html></html>")
    _results(tmp_path, "09-x", ROWS)
    without_rows = _executed(tmp_path, "10-y", title="# 10 · Another")
    _results(tmp_path, "10-y")
    failed = _executed(tmp_path, "11-z", title="# 11 · Failed one")
    page = write_index(tmp_path, params, [with_rows, without_rows, failed],
                       command=["dlcluster", "reports", "--params", "params/ci.yaml"]).read_text()
    assert page.count("<h2 id=") == 7  # the findings, the scorecard, three notebooks, data, how it was built
    assert page.index("<h2 id='findings'>") < page.index("<h2 id='scorecard'>") < page.index("<h2 id='09-x'>")
    findings = page.split("<h2 id='findings'>")[1].split("<h2 id='scorecard'>")[0]   # what the study finds, first
    assert "§4.2 failures" in findings and "killed or unsuccessful jobs" in findings
    assert (tmp_path / "scorecard.json").exists()
    assert "<a href='09-x.html'>09 · A test notebook</a>" in page
    assert "<a href='10-y.ipynb'>10 · Another</a>" in page  # no HTML rendered: link the notebook
    assert "killed or unsuccessful jobs" in page and "30.7 % of jobs" in page
    assert "<span class='tag summary'>summary</span>" in page
    assert "41.25" in page
    assert "declares no comparisons" in page
    assert "no results.json: the notebook failed or wrote none" in page
    assert "dlcluster reports --params params/ci.yaml" in page
    assert "grid: small" in page  # the parameters used
    assert "pandas" in page and "Package versions" in page
    assert "pollux_jobs.csv.gz" in page  # data/README.md and the manifest of the public tables
    assert "sha256" in page
    # published values that no notebook compared are listed, the compared one is not
    unused = page.split("Published values no notebook compares yet")[1]
    assert "failures.unsuccessful_jobs_pct" not in unused and "util.table3.1gpu" in unused


def test_invalid_results_json_is_reported(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("trace: public\n")
    nb = _executed(tmp_path, "12-bad")
    (tmp_path / "12-bad").mkdir()
    (tmp_path / "12-bad" / "results.json").write_text("{not json")
    page = write_index(tmp_path, params, [nb], command=["x"]).read_text()
    assert "is not valid JSON" in page


def test_a_relative_output_dir_is_the_repositorys_wherever_the_kernel_runs(tmp_path, monkeypatch):
    from dlcluster.paths import repo_root
    monkeypatch.chdir(tmp_path)   # JupyterLab starts kernels in notebooks/
    monkeypatch.setenv("DLCLUSTER_ROOT", str(tmp_path / "repo"))
    rep = Report("reports/adhoc/09-x", "09-x")
    assert rep.output_dir == repo_root() / "reports" / "adhoc" / "09-x" \
        == tmp_path / "repo" / "reports" / "adhoc" / "09-x"
    assert rep.figures_dir.is_dir() and not (tmp_path / "reports").exists()


def test_a_long_data_caption_wraps_at_the_figure_width(tmp_path):
    """A caption of several hundred characters must not widen the image (it made some 2,000 pixels wide)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import matplotlib.pyplot as plt

    rep = Report(tmp_path / "09-x", "09-x")
    sizes = {}
    for name, data in (("short", "real DRE records"), ("long", "SIMULATED calibrated replay of 111,549 real RFold "
                                                               "jobs (quotas=on, lending=up to 1.16x quota) " * 8)):
        fig, ax = plt.subplots(figsize=(7, 3.6))
        ax.plot([0, 1], [0, 1])
        sizes[name] = mpimg.imread(rep.figure(fig, name, data=data)).shape[:2]
        plt.close(fig)
    (short_h, short_w), (long_h, long_w) = sizes["short"], sizes["long"]
    assert long_w <= 7 * 110 * 1.02 and long_w <= short_w * 1.05   # as wide as the figure, at most
    assert long_h > short_h + 5 * 7   # the caption took lines of its own instead


def test_scorecard_rows_without_a_figure_show_no_nan(tmp_path):
    params = tmp_path / "p.yaml"
    params.write_text("trace: public\n")
    page = write_index(tmp_path, params, [], command=["x"]).read_text()
    scorecard = page.split("<h2 id='scorecard'>")[1].split("<h2")[0]
    assert ">nan<" not in scorecard and "nan</small>" not in scorecard and "nan ·" not in scorecard
    assert "How Philly scheduled: an input of the simulator" in scorecard


def test_the_full_trace_is_a_second_reference_on_the_index_page(tmp_path):
    """Every official.<comparison>.verdict a notebook writes is a row of the second reference, with its detail."""
    from dlcluster.report.reproduction import official_card

    rep = Report(tmp_path / "09-x", "09-x", params={"seed": 0})
    rep.add("official.fig3.abc.2-4.ks_dre", 3.0)
    rep.add("official.fig3.abc.2-4.verdict", "reproduced", "Figure 3, VC abc, 2-4 GPU vs the full trace")
    rep.add("official.fig3.abc.2-4.detail", "KS 3.0 <= 5.8 points")
    rep.add("official.fig5.pass.8.verdict", "differs", "Figure 5, Pass, 8 GPU vs the full trace")
    rep.add("official.fig5.pass.8.detail", "KS 6.6 points, 2.2 beyond the 4.4 allowed")
    rep.add("official.fig2.finding", "not a verdict")
    rep.write()
    card = official_card(tmp_path)
    assert card["comparison"].tolist() == ["fig3.abc.2-4", "fig5.pass.8"]
    assert card["verdict"].tolist() == ["reproduced", "differs"]
    assert card.loc[1, "detail"] == "KS 6.6 points, 2.2 beyond the 4.4 allowed"
    page = write_index(tmp_path, tmp_path / "none.yaml", [_executed(tmp_path, "09-x")]).read_text()
    assert "Second reference: full trace (official notebook figure, digitized)" in page
    assert "Figure 5, Pass, 8 GPU vs the full trace" in page and "2.2 beyond the 4.4 allowed" in page
    scorecard = json.loads((tmp_path / "scorecard.json").read_text())
    assert scorecard["official"]["counts"] == {"reproduced": 1, "differs": 1, "not comparable": 0}


def _official(rep, comparison, verdict, detail, n, like):
    rep.add(f"official.{comparison}.verdict", verdict, f"{comparison} vs the full trace")
    rep.add(f"official.{comparison}.detail", detail)
    rep.add(f"official.{comparison}.n", n)
    rep.add(f"official.{comparison}.like_for_like", like)


def test_the_index_shows_n_and_like_for_like_and_folds_what_does_not_compare(tmp_path):
    """Rows that compare come first with their n and like-for-like statement; the others are folded under their
    reasons, each a sentence (no code), in the page and in scorecard.json."""
    rep = Report(tmp_path / "09-x", "09-x", params={"seed": 0})
    _official(rep, "fig2.1.rfold", "reproduced", "KS 3.0 <= 5.8 points.", 4000,
              "like for like: the same definition (run time); the same selection (every job)")
    for vc in ("abc", "def"):
        _official(rep, f"fig3.{vc}.2-4", "not comparable", "Another definition: ours is first waits, the "
                  "reference's is every attempt's wait; too few jobs (2; at least 100 needed).", 2,
                  "not like for like: another definition")
    _official(rep, "fig5.pass.4", "not comparable", "Another selection: ours is minutes 0-3, the reference's is "
              "every minute.", 900, "not like for like: another selection")
    rep.write()
    page = write_index(tmp_path, tmp_path / "none.yaml", [_executed(tmp_path, "09-x")]).read_text()
    second = page.split("<h3 id='official'>")[1].split("<h2")[0]
    compared, folded = second.split("<details>", 1)
    assert "fig2.1.rfold vs the full trace" in compared and "4,000" in compared
    assert "like for like: the same definition (run time)" in compared
    assert "Not comparable: Ours is another quantity: another definition. (2)" in folded
    assert "Not comparable: Ours is another selection of jobs or minutes. (1)" in folded
    assert folded.index("another definition. (2)") < folded.index("another selection of jobs or minutes. (1)")
    scorecard = page.split("<h2 id='scorecard'>")[1].split("<h3")[0]
    assert "<details><summary>Not comparable: " in scorecard and " is not == " not in scorecard
    doc = json.loads((tmp_path / "scorecard.json").read_text())
    assert doc["official"]["counts"] == {"reproduced": 1, "differs": 0, "not comparable": 3}
    row = next(r for r in doc["official"]["rows"] if r["comparison"] == "fig3.abc.2-4")
    assert row["n"] == 2 and row["like_for_like"] == "not like for like: another definition"
    assert all({"n", "like_for_like", "detail"} <= set(r) for r in doc["rows"])


def test_a_title_computed_from_the_results_replaces_the_heading(tmp_path):
    params = tmp_path / "ci.yaml"
    params.write_text("trace: public\nseed: 0\n")
    executed = _executed(tmp_path, "12-t", title="# 12 · Static heading")
    rep = Report(tmp_path / "12-t", "12-t", params={"seed": 0})
    rep.add("notebook.title", "12 · Validation: 3 of 9 targets met")
    rep.write()
    page = write_index(tmp_path, params, [executed], command=["dlcluster", "reports"]).read_text()
    assert "<a href='12-t.ipynb'>12 · Validation: 3 of 9 targets met</a>" in page and "Static heading" not in page


def test_the_index_opens_with_the_counts_per_label_and_the_scorecard_shows_each_label(tmp_path):
    """The first section states how many claims get each label; the scorecard's rows say what the public data show,
    and scorecard.json is strict JSON with the same counts."""
    rep = Report(tmp_path / "02-utilization-colocation", "02-utilization-colocation", params={"seed": 0})
    rep.add("util.table3.4gpu", 43.2)
    rep.add("util.table3.1gpu", float("nan"))
    rep.write()
    page = write_index(tmp_path, tmp_path / "none.yaml", [_executed(tmp_path, "02-utilization-colocation")]).read_text()
    first = page.split("<h2 id='findings'>")[1].split("<h2")[0]
    assert "<p><b>48 claims:</b> measured on another public selection 1 · cannot be tested on public data 47.</p>" \
        in first
    assert "<b>on DRE&#x27;s multi-GPU records, minutes 0-3 after start, ours is 43.2%</b>" in first
    scorecard = page.split("<h2 id='scorecard'>")[1].split("<h3")[0]
    assert "what the public data show" in scorecard
    text = (tmp_path / "scorecard.json").read_text()
    doc = json.loads(text, parse_constant=lambda name: pytest.fail(f"scorecard.json holds {name}"))
    assert doc["labels"]["on another selection"] == 1 and doc["labels"]["cannot be tested"] == 47
    assert sum(doc["labels"].values()) == sum(doc["counts"].values()) == 48
