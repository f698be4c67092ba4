"""Every verdict every notebook writes at CI parameters keeps the one standard (dlcluster.report.verdicts).

The scan reads each notebook's results.json (run once per session at params/ci.yaml, shared with
tests/test_notebooks.py) and fails on a ``reproduced`` or ``differs`` on fewer than 100 jobs, without both sides'
definition and selection, without a like-for-like statement, or with a data label that is not like for like.
"""

from pathlib import Path

import pytest

from dlcluster.report import Report
from dlcluster.report import reproduction as rp
from dlcluster.report import verdicts as vd

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]-*.ipynb"))


@pytest.mark.notebook
def test_every_verdict_of_every_notebook_keeps_the_standard(ci_notebook):
    for nb in NOTEBOOKS:
        ci_notebook(nb.stem)
    reports = ci_notebook.out_dir
    assert rp.results_violations(reports) == []
    official = rp.official_card(reports)
    assert len(official) > 0 and official["n"].notna().all() and (official["like_for_like"] != "").all()
    # the example: a Figure 3 cell of two jobs is no longer reproduced
    row = official.set_index("comparison").loc["fig3.51b7ef.2-4"]
    assert row["verdict"] == "not comparable"


def test_the_scan_catches_what_breaks_the_standard(tmp_path):
    """The scan itself, on a hand-made report: each way to break the standard is found, and nothing else."""
    rep = Report(tmp_path / "09-x", "09-x")
    good = vd.Side("run time", "every job", "real trace").statement()
    like = "like for like: the same definition (run time); the same selection (every job)"
    cases = {
        "fine": ("reproduced", 500, like, good),
        "few": ("reproduced", 2, like, good),
        "unstated": ("differs", 500, like, vd.Side("run time", "", "real").statement()),
        "simulated": ("reproduced", 500, like, vd.Side("run time", "every job", "SIMULATED replay").statement()),
        "unlike": ("differs", 500, "not like for like: another selection", good),
        "not.compared": ("not comparable", 2, "", ""),
    }
    for name, (verdict, n, statement, ours) in cases.items():
        for part, value in (("verdict", verdict), ("n", n), ("like_for_like", statement), ("ours", ours),
                            ("reference", good)):
            rep.add(f"official.{name}.{part}", value)
    rep.add("other.thing.verdict", "reproduced")   # a verdict word outside official.*, without n or statement
    rep.write()
    problems = rp.results_violations(tmp_path)
    flagged = sorted({p.split(": ")[1] for p in problems})
    assert flagged == ["official.few", "official.simulated", "official.unlike", "official.unstated",
                       "other.thing.verdict"]
