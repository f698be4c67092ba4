"""Golden results (dlcluster check-results / golden) and the reproduction scorecard, on hand-made reports folders."""

import json
import math
import shutil

import pytest
import yaml

from dlcluster.cli import main
from dlcluster.paths import repo_root
from dlcluster.report import Report
from dlcluster.report import golden as g
from dlcluster.report import reproduction as rp

RULES = [g.Tolerance("09-b:fitted.*", abs=0.5, why="a fit"), g.Tolerance("09-b:wall_s", skip=True, why="time"),
         g.Tolerance("*", rel=1e-9, why="deterministic")]


def _reports(root, values_a=None, values_b=None):
    for stem, values in (("09-a", values_a or {}), ("09-b", values_b or {})):
        rep = Report(root / stem, stem)
        for key, value in values.items():
            rep.add(key, value)
        rep.write()
    return root


A = {"jobs": 5910, "share": 0.25, "finding": "fragmentation dominates", "supported": True, "none": None}
B = {"fitted.slope": -0.031, "wall_s": 12.5, "ratio": 2.4823852798659565}


@pytest.fixture
def reports(tmp_path):
    return _reports(tmp_path / "reports" / "default", A, B)


def _check(reports, golden, rules=RULES):
    return g.compare(g.load_golden(golden), g.collect(reports), rules).set_index(["notebook", "key"])["status"]


def test_unchanged_reports_match_their_golden_file(reports, tmp_path):
    golden = g.write_golden(reports, tmp_path / "default.yaml", "default")
    assert golden.read_text().startswith("# Golden results of `make reports` with params/default.yaml")
    assert yaml.safe_load(golden.read_text())["09-a"] == A
    status = _check(reports, golden)
    assert status.to_dict() == {("09-a", k): "ok" for k in A} | {("09-b", "fitted.slope"): "ok",
                                                                 ("09-b", "ratio"): "ok", ("09-b", "wall_s"): "skipped"}


def test_a_moved_missing_or_new_figure_is_named(reports, tmp_path):
    golden = g.write_golden(reports, tmp_path / "default.yaml", "default")
    edited = _reports(tmp_path / "edited",
                      {**{k: v for k, v in A.items() if k != "share"}, "jobs": 5911, "extra": 1},
                      {**B, "fitted.slope": -0.031 + 0.4, "wall_s": 99.0, "ratio": 2.4823852798659565 * (1 + 1e-12)})
    status = _check(edited, golden)
    assert status[("09-a", "jobs")] == "moved"          # a count is exact
    assert status[("09-a", "share")] == "missing"
    assert status[("09-a", "extra")] == "new"
    assert status[("09-b", "fitted.slope")] == "ok"     # within the rule's abs 0.5
    assert status[("09-b", "ratio")] == "ok"            # 1e-12 relative: the order of a sum, not a result
    assert status[("09-b", "wall_s")] == "skipped"
    assert (status == "moved").sum() == 1


@pytest.mark.parametrize("old, new, same", [
    (float("nan"), float("nan"), True), (float("nan"), 1.0, False), (True, 1, False), (1, 1.0, True),
    ("a", "a", True), ("a", "b", False), (None, 0.0, False), (None, None, True), (0.5, 0.5 + 0.6, False)])
def test_values_are_compared_by_kind(old, new, same):
    assert g._matches(old, new, RULES[0]) is same


def test_nan_and_inf_survive_the_golden_file(tmp_path):
    reports = _reports(tmp_path / "r", {"nan": float("nan"), "inf": float("inf")})
    golden = g.write_golden(reports, tmp_path / "default.yaml", "default")
    back = g.load_golden(golden)["09-a"]
    assert math.isnan(back["nan"]) and back["inf"] == float("inf")


def test_check_results_command_fails_naming_the_figure(reports, tmp_path, capsys):
    golden = tmp_path / "default.yaml"
    assert main(["golden", str(reports), "--golden", str(golden)]) == 0
    assert main(["check-results", str(reports), "--golden", str(golden)]) == 0
    assert "0 moved, 0 missing, 0 new" in capsys.readouterr().out
    copy = tmp_path / "copy"
    shutil.copytree(reports, copy)
    doc = json.loads((copy / "09-b" / "results.json").read_text())
    doc["results"]["ratio"] = 2.6
    (copy / "09-b" / "results.json").write_text(json.dumps(doc))
    assert main(["check-results", str(copy), "--golden", str(golden)]) == 1
    out = capsys.readouterr().out
    assert "1 moved" in out and "09-b:ratio" in out and "2.4823852798659565" in out and "2.6" in out
    assert "+0.118" in out and "make golden" in out
    assert "09-a:jobs" not in out   # only what failed, unless --all


def test_a_missing_golden_file_says_how_to_make_one(reports, tmp_path, capsys):
    assert main(["check-results", str(reports), "--golden", str(tmp_path / "none.yaml")]) == 2
    assert "make golden" in capsys.readouterr().err


def test_tolerance_rules_are_checked(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("- {match: 'a:*', abs: 1}\n- {match: '*', why: x}\n")
    with pytest.raises(ValueError, match="rule 1 needs 'match' and 'why'"):
        g.load_tolerances(path)
    path.write_text("- {match: 'a:*', abs: 1, why: y}\n")
    with pytest.raises(ValueError, match="the last rule must be the default"):
        g.load_tolerances(path)
    path.write_text("- {match: '*', tol: 1, why: y}\n")
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['tol'\]"):
        g.load_tolerances(path)


def test_the_repository_rules_each_match_a_golden_figure():
    """A rule whose pattern matches nothing (a typo, a renamed key) would silently leave figures at the default."""
    rules = g.load_tolerances()
    golden = g.load_golden(g.golden_dir() / "default.yaml")
    names = [f"{nb}:{key}" for nb, figures in golden.items() for key in figures]
    for rule in rules[:-1]:
        assert any(g.tolerance_for(n, rules) is rule for n in names), f"{rule.pattern} decides no golden figure"


# ------------------------------------------------------------------ the reproduction scorecard

SIDES = {"ours_side": {"definition": "mean GPU utilization", "selection": "every minute of every job"},
         "paper_side": {"definition": "mean GPU utilization", "selection": "every minute of every job"},
         "data": "real trace", "n": "02-u:jobs"}


def test_numeric_verdicts():
    figures = rp._Figures({"02-u": {"t4": 43.2, "t1": None, "jobs": 500}})
    assert rp.verdict({"ours": "02-u:t4", "within": 2.5, **SIDES}, 45.18, figures)[:2] == \
        ("reproduced", "Within 2.5 (ours - published = -1.98 (-4.4%)).")
    assert rp.verdict({"ours": "02-u:t4", "within": 1, **SIDES}, 45.18, figures)[:2] == \
        ("differs", "By -1.98 (-4.4%), beyond the tolerance of 1.")
    assert rp.verdict({"ours": "02-u:t1", "within": 1, "when_missing": "no 1-GPU job", **SIDES}, 52.4, figures)[:2] \
        == ("not comparable", "No 1-GPU job.")
    assert rp.verdict({"ours": "02-u:other", "within": 1, **SIDES}, 52.4, figures)[:2] == \
        ("not comparable", "02-u:other is not in the reports.")
    # each verdict carries its n and its like-for-like statement
    _, _, _, n, statement = rp.verdict({"ours": "02-u:t4", "within": 2.5, **SIDES}, 45.18, figures)
    assert n == 500 and statement.startswith("like for like: the same definition (mean GPU utilization)")


def test_finding_verdicts_name_the_check_that_fails():
    figures = rp._Figures({"05-v": {"gt8": 0.7, "small": 0.2, "fair": 0.3}, "02-u": {"jobs": 500}})
    entry = {"checks": [["05-v:gt8", ">", "05-v:fair"], ["05-v:gt8", ">", "05-v:small"]], "tests": "dominates",
             **SIDES}
    assert rp.verdict(entry, "text", figures)[:2] == ("reproduced", "Tested: dominates.")
    entry["checks"].append(["05-v:fair", ">", 0.5])
    assert rp.verdict(entry, "text", figures)[:2] == ("differs", "Tested: dominates; fails: fair = 0.3 is not > 0.5.")
    entry["checks"].append(["05-v:absent", "<", 1])
    assert rp.verdict(entry, "text", figures)[0] == "not comparable"


def _golden_reports(root):
    """A reports folder whose notebooks' results are the figures of golden/default.yaml, and that file."""
    golden = g.load_golden(g.golden_dir() / "default.yaml")
    for stem, figures in golden.items():
        if stem != g.SCORECARD_SECTION:
            rep = Report(root / stem, stem)
            for key, value in figures.items():
                rep.add(key, value)
            rep.write()
    return root, golden


def test_every_published_value_gets_a_verdict_and_names_real_figures():
    """The spec covers data/reference/atc19.yaml exactly, and every figure it names is one the reports publish."""
    spec = rp.load_spec()
    card = rp.scorecard(repo_root() / "no-such-reports", spec)
    assert len(card) == len(spec) and list(card["key"]) == list(rp.load_reference()["key"])
    assert (card["verdict"] == "not comparable").all()   # no figure, no verdict either way
    golden = g.load_golden(g.golden_dir() / "default.yaml")
    named = [e["ours"] for e in spec.values() if "ours" in e]
    named += [x for e in spec.values() for c in e.get("checks", []) for x in (c[0], c[2])
              if isinstance(x, str) and ":" in x]
    named += [x for e in spec.values() for d in e.get("directions", []) for x in d[1:3]]
    named += [x for e in spec.values() for x in (e["n"] if isinstance(e.get("n"), list) else [e.get("n")]) if x]
    named += [e["significance"][0] for e in spec.values() if "significance" in e]
    unknown = [ref for ref in named if ref.partition(":")[2] not in golden.get(ref.partition(":")[0], {})]
    assert not unknown, f"reproduction.yaml names figures no report publishes: {unknown}"


def test_the_golden_figures_give_the_golden_verdicts(tmp_path):
    """The scorecard recomputed from the golden figures is the golden file's scorecard, written by `make golden`
    from the scorecard.json of the same reports: a verdict rule or a figure that changed one fails here."""
    reports, golden = _golden_reports(tmp_path / "golden-figures")
    card = rp.scorecard(reports)
    assert dict(zip(card["key"], card["kind"], strict=True)) == golden[g.SCORECARD_SECTION]
    # "reproduced" / "differs": test_numeric_verdicts; the public data give the other labels
    assert {"holds on", "not shown on", "on another selection", "cannot be tested"} <= set(card["kind"])


def test_spec_errors_are_clear(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("a.b: {ours: 'x:y', within: 1, not_comparable: why}\n")
    with pytest.raises(ValueError, match="exactly one of"):
        rp.load_spec(str(path))
    path.write_text("a.b: {checks: [['x:y', '=>', 1]]}\n")
    with pytest.raises(ValueError, match="a check is"):
        rp.load_spec(str(path))


def test_scorecard_json_and_the_golden_verdicts(tmp_path):
    reports, _ = _golden_reports(tmp_path / "r")
    rp.write_scorecard(reports)
    before = g.write_golden(reports, tmp_path / "before.yaml", "default")
    # repeat failures rest on the interval of the difference, on DRE's records: an interval that includes zero
    # makes the finding "not shown on" them (its strict verdict stays not comparable), not "does not hold"; the
    # scorecard, its counts and the golden comparison all say so
    key, figure = "failures.finding.repeat_same_user", "failures.users.difference_ci_low_pct"
    expected = g.load_golden(before)[g.SCORECARD_SECTION]
    assert expected[key] == "holds on"
    doc = json.loads((reports / "04-failures-rtf" / "results.json").read_text())
    doc["results"][figure] = -2.0
    (reports / "04-failures-rtf" / "results.json").write_text(json.dumps(doc))
    card, path = rp.write_scorecard(reports)
    doc = json.loads(path.read_text())
    expected = {**expected, key: "not shown on"}
    assert doc["labels"] == {v: list(expected.values()).count(v) for v in rp.vd.KINDS}
    row = next(r for r in doc["rows"] if r["key"] == key)
    assert row["verdict"] == "not comparable" and row["label"] == "not shown on " + row["where"]
    assert "interval [-2, " in row["detail"] and "includes zero, so neither direction is shown" in row["detail"]
    assert row["n"] >= 100 and doc["min_jobs"] == 100
    # what `make golden` keeps and `make check-results` compares: the label of every published value
    assert g.collect(reports)[g.SCORECARD_SECTION] == expected
    moved = _check(reports, before, g.load_tolerances())
    assert moved[moved == "moved"].to_dict() == {(g.SCORECARD_SECTION, key): "moved",
                                                 ("04-failures-rtf", figure): "moved"}
    assert set(moved) == {"ok", "moved", "skipped"}   # skipped: the figures tolerances.yaml skips (wall times, texts)


def test_a_skipped_figure_is_written_as_null_and_never_fails(reports, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text("- {match: '09-b:wall_s', skip: true, why: a wall time}\n- {match: '*', rel: 1.0e-9, why: d}\n")
    golden = g.write_golden(reports, tmp_path / "default.yaml", "default", rules)
    assert yaml.safe_load(golden.read_text())["09-b"]["wall_s"] is None   # rewriting it never changes this line
    gone = _reports(tmp_path / "gone", A, {k: v for k, v in B.items() if k != "wall_s"})
    assert _check(gone, golden, g.load_tolerances(rules))[("09-b", "wall_s")] == "skipped"
