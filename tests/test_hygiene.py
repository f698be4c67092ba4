"""The output hygiene of every executed notebook (dlcluster.report.hygiene), and the checks themselves on small
hand-made notebooks: each check passes a clean example and fails its bad one."""

import base64
import io
import json
import math
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from dlcluster.report import hygiene
from dlcluster.report.notebook import Report, in_kernel, show_saved

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def _png(colour: int = 0) -> bytes:
    """A tiny real PNG (a one-pixel figure) of a given grey."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(0.1, 0.1), dpi=10)
    fig.patch.set_facecolor(str(colour / 255))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _notebook(tmp_path, *outputs, figures=(), markdown="# 09 · Title") -> Path:
    """A notebook with a markdown cell and one code cell holding ``outputs``, saved with its figure PNGs."""
    nb = new_notebook(cells=[new_markdown_cell(markdown), new_code_cell("x", outputs=list(outputs))])
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "09-x.ipynb"
    nbformat.write(nb, path)
    folder = tmp_path / "09-x"
    (folder / "figures").mkdir(parents=True)
    listed = []
    for name, png in figures:
        (folder / "figures" / f"{name}.png").write_bytes(png)
        listed.append({"name": name, "path": f"figures/{name}.png"})
    (folder / "results.json").write_text(json.dumps({"figures": listed}))
    return path


def _image(png: bytes):
    return new_output("display_data", data={"image/png": base64.b64encode(png).decode(), "text/plain": "<Image>"})


def _html(text: str):
    return new_output("display_data", data={"text/html": text, "text/plain": "table"})


def test_a_clean_notebook_passes(tmp_path):
    png = _png()
    path = _notebook(tmp_path, new_output("stream", name="stdout", text="Jobs: 15 of 20 (75%)\n"), _image(png),
                     new_output("display_data", data={"text/markdown": "**Finding.** 75% of jobs (n=20); see "
                                                      "results.json, e.g. Figure 2.", "text/plain": "md"}),
                     _html("<table><tr><td>run time (min)</td><td>12.5</td></tr></table>"),
                     figures=[("fig", png)])
    assert hygiene.check_notebook(path) == []


def test_a_saved_figure_not_shown_fails(tmp_path):
    shown, other = _png(0), _png(200)
    assert shown != other
    path = _notebook(tmp_path, _image(shown), figures=[("a", shown), ("b", other)])
    assert hygiene.check_notebook(path) == ["figure b.png: saved but not shown as an image output"]


@pytest.mark.parametrize("output, found", [
    (new_output("stream", name="stderr", text="100%|###| 3/3\n"), "stderr output"),
    (new_output("stream", name="stdout", text="x.py:3: RuntimeWarning: Mean of empty slice\n"), "a warning"),
    (new_output("error", ename="ValueError", evalue="bad", traceback=[]), "error output ValueError"),
])
def test_warnings_stderr_and_errors_fail(tmp_path, output, found):
    problems = hygiene.check_notebook(_notebook(tmp_path, output))
    assert len(problems) == 1 and found in problems[0] and problems[0].startswith("cell 2: ")


@pytest.mark.parametrize("value", ["15", "{'a': 1}", "PosixPath('/tmp/x')", "0.906890220919912"])
def test_a_bare_repr_fails(tmp_path, value):
    out = new_output("execute_result", data={"text/plain": value}, execution_count=1)
    assert hygiene.check_notebook(_notebook(tmp_path, out)) == [
        f"cell 2: bare repr output (a value without a label): {value!r}"]


def test_a_labelled_value_passes(tmp_path):
    out = new_output("execute_result", data={"text/plain": "15", "text/markdown": "**Jobs:** 15"}, execution_count=1)
    assert hygiene.check_notebook(_notebook(tmp_path, out)) == []


@pytest.mark.parametrize("text, keys", [
    ("The paper's count (scope.jobs_in_paper) is 96,260.", ["scope.jobs_in_paper"]),
    ("<td>04-failures-rtf:failures.users.p_fail_after_fail_pct</td>",
     ["04-failures-rtf:failures.users.p_fail_after_fail_pct"]),
    ("see official.fig2.rfold", ["official.fig2.rfold"]),
    ("results.json and scorecard.json, e.g. 0.5 or numpy 1.26.4; U.S. data; https://x.org/a_b.c", []),
    ("java.io.FileNotFoundException: libcudart.so.9.0 (a quoted log message)", []),
])
def test_code_keys(text, keys):
    assert hygiene.code_keys(text) == keys


def test_a_code_key_in_a_markdown_output_fails(tmp_path):
    out = new_output("display_data", data={"text/markdown": "Ours: `scope.jobs_in_paper` = 3", "text/plain": "m"})
    assert hygiene.check_notebook(_notebook(tmp_path, out)) == [
        "cell 2: code key(s) in a text/markdown output: ['scope.jobs_in_paper']"]


def test_tables_that_truncate_or_repeat_a_sentence_fail(tmp_path):
    sentence = "a detail sentence that every row repeats, " * 3
    cut = _html("<table><tr><td>RFold's rea...</td></tr></table>")
    repeated = _html("<table>" + "".join(f"<tr><td>{k}</td><td>{sentence}</td></tr>" for k in range(3)) + "</table>")
    twice = _html("<table>" + "".join(f"<tr><td>{k}</td><td>{sentence}</td></tr>" for k in range(2)) + "</table>")
    assert hygiene.check_notebook(_notebook(tmp_path / "a", cut)) == [
        "cell 2: table truncates 1 value(s), e.g. \"RFold's rea...\""]
    (problem,) = hygiene.check_notebook(_notebook(tmp_path / "b", repeated))
    assert problem.startswith("cell 2: table repeats one 21-word text in 3 rows")
    assert hygiene.check_notebook(_notebook(tmp_path / "c", twice)) == []


def test_strict_json(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"a": None, "b": "NaN", "c": 1.5}))
    bad.write_text(json.dumps({"a": math.nan, "b": [1, math.inf]}))
    assert hygiene.check_json(good) == []
    assert hygiene.check_json(bad) == ["bad.json: not strict JSON: NaN"]


def test_report_figure_outside_a_kernel_saves_and_closes(tmp_path):
    """Outside a kernel nothing is displayed (no IPython display in a script), the PNG is saved, the figure closed."""
    import matplotlib.pyplot as plt

    assert not in_kernel() and show_saved(tmp_path / "none.png") is False
    rep = Report(tmp_path / "09-x", "09-x")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="x", ylabel="y")
    path = rep.figure(fig, "line", data="hand-made")
    assert path.exists() and path.read_bytes()[:4] == b"\x89PNG"
    assert fig.number not in plt.get_fignums()


def test_report_figure_in_a_kernel_displays_the_saved_png(tmp_path, monkeypatch):
    """In a kernel the saved PNG itself is displayed once (the bytes the index shows)."""
    import IPython.display
    import matplotlib.pyplot as plt

    from dlcluster.report import notebook

    shown = []
    monkeypatch.setattr(notebook, "in_kernel", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    rep = Report(tmp_path / "09-x", "09-x")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="x", ylabel="y")
    path = rep.figure(fig, "line", data="hand-made")
    assert len(shown) == 1 and shown[0].data == path.read_bytes()
    assert fig.number not in plt.get_fignums()


@pytest.mark.notebook
def test_every_executed_notebook_is_clean(ci_notebook):
    """Every notebook at CI parameters (the session's one run of each): its figures shown, no warning, no bare
    value, no code key, no truncated or repeated table text; its results.json strict JSON."""
    problems = []
    for nb in NOTEBOOKS:
        folder = ci_notebook(nb.stem)["folder"]
        executed = Path(ci_notebook.out_dir) / f"{nb.stem}.ipynb"
        problems += [f"{nb.stem}: {p}" for p in hygiene.check_notebook(executed)]
        problems += [f"{nb.stem}: {p}" for p in hygiene.check_json(folder / "results.json")]
    assert problems == []


@pytest.mark.notebook
def test_the_scorecard_is_strict_json(ci_notebook, tmp_path):
    """scorecard.json of the CI reports (written into a copy of their results, not beside the shared run) parses
    with NaN and infinities refused."""
    from dlcluster.report.reproduction import write_scorecard

    for nb in NOTEBOOKS:
        folder = ci_notebook(nb.stem)["folder"]
        (tmp_path / nb.stem).mkdir()
        (tmp_path / nb.stem / "results.json").write_bytes((folder / "results.json").read_bytes())
    _, path = write_scorecard(tmp_path)
    assert hygiene.check_json(path) == []
    assert json.loads(path.read_text())["rows"]


def test_footnoted_moves_a_repeated_sentence_to_one_note():
    import pandas as pd

    long_a, long_b = "A" * 70 + " sentence", "B" * 70 + " sentence"
    table = pd.DataFrame({"bucket": ["1", "2", "3", "4"], "detail": [long_a, "KS 0.2", long_a, long_b]})
    shown, notes = hygiene.footnoted(table, "detail")
    assert list(shown["detail"]) == ["note a", "KS 0.2", "note a", "note b"]
    assert notes == f"*Note a.* {long_a}  \n*Note b.* {long_b}"
    assert list(table["detail"])[0] == long_a   # the caller's table is left as it was
    assert hygiene.footnoted(table.iloc[[1]], "detail")[1] == ""


def test_the_html_report_embeds_each_figure_as_an_image(tmp_path):
    """The report's HTML (runner.render_html, code folded) shows every image output as an <img>, the PNG inline."""
    from dlcluster.report.runner import render_html

    pngs = [_png(0), _png(200)]
    path = _notebook(tmp_path, *[_image(p) for p in pngs])
    html_text = render_html(path).read_text()
    assert html_text.count("<img") == 2
    assert all(base64.b64encode(p).decode() in html_text for p in pngs)


def test_labelled_names_units_and_formats_values():
    import numpy as np

    table = hygiene.labelled({"users": 159.0, "p_fail_after_fail_pct": 78.592927, "difference_pct_points": 60.06,
                              "p_value_within_user": 0.004975, "typical_error_pp": 0.25, "pairs": np.int64(5751),
                              "median_s": float("nan"), "verdict": "reproduced"})
    assert table["value"].to_dict() == {"users": "159", "p fail after fail (%)": "78.59",
                                        "difference (percentage points)": "60.06", "p-value within user": "0.004975",
                                        "typical error (points)": "0.25", "pairs": "5,751", "median (s)": "-",
                                        "verdict": "reproduced"}
    assert table.index.name == "quantity"


def test_strict_writes_nulls_for_what_json_cannot_hold():
    import numpy as np
    import pandas as pd

    doc = {"a": [1.5, math.nan, np.float64("inf")], "b": {"c": np.float32("nan"), "d": pd.NA, "e": "NaN"}, "f": 2}
    text = json.dumps(hygiene.strict(doc), allow_nan=False)
    assert json.loads(text) == {"a": [1.5, None, None], "b": {"c": None, "d": None, "e": "NaN"}, "f": 2}


@pytest.mark.parametrize("n, m", [(1, 1), (3, 40), (2500, 1800)])
def test_ks_distance_is_scipys_statistic_without_a_warning(n, m):
    """The replay's KS distance (validation.measures.ks_distance) is scipy's two-sample statistic, computed without the
    p-value whose exact method warns on large samples (notebook 01's calibration) and asymptotic one on tiny ones."""
    import warnings

    import numpy as np
    from scipy import stats

    from dlcluster.validation.measures import ks_distance

    rng = np.random.default_rng(n)
    a, b = rng.lognormal(size=n).round(1), 1.1 * rng.lognormal(size=m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = ks_distance(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # scipy's exact method snaps the statistic to a multiple of 1 / lcm(n, m): equal to the last bits
        assert ours == pytest.approx(stats.ks_2samp(a, b).statistic, rel=1e-12, abs=1e-15)
