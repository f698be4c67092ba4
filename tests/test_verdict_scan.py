"""Every verdict every notebook writes at CI parameters keeps the one standard (dlcluster.report.verdicts), and every
claim whose rule names a public selection is told what that selection shows (not "cannot be tested").

The scan reads each notebook's results.json (run once per session at params/ci.yaml, shared with
tests/test_notebooks.py) and fails on a ``reproduced`` or ``differs`` on fewer than 100 jobs, without both sides'
definition and selection, without a like-for-like statement, or with a data label that is not like for like.
"""

from pathlib import Path

import pandas as pd

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
    # and no claim is left "cannot be tested" while its rule names a public selection that measures it
    assert rp.untested_but_measured(rp.scorecard(reports)) == []
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


# ------------------------------------------------------------------ labels (issue 49): nothing left untold


def _spec(tmp_path, text):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return rp.load_spec(str(path))


def test_the_scan_catches_a_claim_left_untested_while_a_public_selection_measures_it(tmp_path, monkeypatch):
    """A rule that names a public selection (``where``) whose figure has no value in the reports ends up
    "cannot be tested": the scan names it; the same rule with its figure gets "on <selection>, ours is X"."""
    monkeypatch.setattr(rp, "load_reference", lambda: pd.DataFrame([
        {"key": "a.level", "section": "3.2", "item": "a level", "value": 45.18, "unit": "%", "provenance": "summary",
         "where": ""},
        {"key": "a.untested", "section": "3.2", "item": "no data", "value": "x", "unit": "", "provenance": "summary",
         "where": ""}]))
    spec = _spec(tmp_path, "a.level: {ours: '02-u:t4', where: DRE's records, data: real DRE records, "
                           "not_comparable: another selection of minutes}\n"
                           "a.untested: {not_comparable: no public data measure it}\n")
    card = rp.scorecard_from({"02-u": {"t4": None}}, spec)
    assert rp.untested_but_measured(card) == [
        ("a.level: labelled 'cannot be tested' while its rule names a public selection (DRE's records): Another "
         "selection of minutes.")]
    card = rp.scorecard_from({"02-u": {"t4": 43.2}}, spec)
    assert list(card["label"]) == ["on DRE's records, ours is 43.2%", "cannot be tested"]
    assert rp.untested_but_measured(card) == []


def test_no_claim_of_the_golden_results_is_left_untested_while_a_public_selection_measures_it():
    """At default parameters (the golden figures): every rule that names a public selection gets a label that says
    what it shows, and every claim still "cannot be tested" has a rule naming no public selection, with why."""
    from dlcluster.report.findings import golden_findings
    from dlcluster.report.golden import SCORECARD_SECTION, golden_dir, load_golden

    golden = load_golden(golden_dir() / "default.yaml")
    card = rp.scorecard_from({k: v for k, v in golden.items() if k != SCORECARD_SECTION})
    assert rp.untested_but_measured(card) == []
    spec = rp.load_spec()
    untested = card[card["kind"] == vd.CANNOT]
    assert all("where" not in spec[key] for key in untested["key"])
    assert (untested["detail"].str.len() > 20).all()
    assert len(golden_findings()) == len(card) == 48


def test_no_verdict_rests_on_a_selection_argued_away_in_words():
    """A selection counts as the reference's only where a measurement shows the quantity does not move with it:
    no rule of the scorecard argues one away (the spec refuses same_selection), nor Figure 2's job sets."""
    from dlcluster.analysis.official import FIG2_ARGUMENTS

    assert not [key for key, entry in rp.load_spec().items() if "same_selection" in entry]
    assert all(not selection for _, selection in FIG2_ARGUMENTS.values())
