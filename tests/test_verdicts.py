"""The one function every verdict goes through (dlcluster.report.verdicts.judge), on hand-made known answers."""

import math

import pytest

from dlcluster.report import verdicts as vd

SAME = vd.Side("queueing delay, every attempt", "every job", "real trace")
REFERENCE = vd.Side("queueing delay, every attempt", "every job", "full trace figure")
HOLDS = vd.Outcome(vd.HOLDS, "KS 3.0 <= 14.0 points")
FAILS = vd.Outcome(vd.FAILS, "KS 30.0 points, 16.0 beyond the 14.0 allowed")


def test_the_same_quantity_on_enough_jobs_compares():
    assert vd.judge(HOLDS, SAME, REFERENCE, 100) == vd.Verdict(
        "reproduced", "KS 3.0 <= 14.0 points.", 100.0,
        "like for like: the same definition (queueing delay, every attempt); the same selection (every job)")
    assert vd.judge(FAILS, SAME, REFERENCE, 5000).verdict == "differs"


def test_too_few_jobs_is_not_comparable_whatever_the_distance():
    # the example: a KS on n=2 passes any allowance (96 points), so it says nothing
    for outcome in (HOLDS, FAILS):
        judged = vd.judge(outcome, SAME, REFERENCE, 2)
        assert (judged.verdict, judged.reason, judged.n) == (
            "not comparable", "Too few jobs (2; at least 100 needed).", 2)
    assert vd.judge(HOLDS, SAME, REFERENCE, 99).verdict == "not comparable"
    assert vd.judge(HOLDS, SAME, REFERENCE, None).reason == "The number of jobs behind our side is not stated."
    assert vd.judge(HOLDS, SAME, REFERENCE, math.nan).verdict == "not comparable"


def test_another_definition_or_selection_is_not_comparable_unless_argued():
    first_waits = vd.Side("queueing delay, first attempt only", "every job", "real DRE records")
    judged = vd.judge(FAILS, first_waits, REFERENCE, 5000)
    assert judged.verdict == "not comparable"
    assert judged.reason == ("Another definition: ours is queueing delay, first attempt only, the reference's is "
                             "queueing delay, every attempt.")
    both = vd.judge(HOLDS, vd.Side("a", "some jobs", "real"), REFERENCE, 3)
    assert both.reason.startswith("Another definition: ") and "; another selection: ours is some jobs" in both.reason
    assert both.reason.endswith("; too few jobs (3; at least 100 needed).")
    argued = vd.judge(FAILS, vd.Side(SAME.definition, "DRE's records", "real"), REFERENCE, 5000,
                      same_selection="a contrast within one selection")
    assert argued.verdict == "differs"
    assert argued.like_for_like.endswith("selections that differ without changing the quantity (a contrast within "
                                         "one selection)")


def test_a_side_that_does_not_state_its_definition_and_selection_is_not_comparable():
    judged = vd.judge(HOLDS, vd.Side("", "every job", "real"), REFERENCE, 500)
    assert judged.reason == "Our side does not state its definition."
    judged = vd.judge(HOLDS, SAME, vd.Side("x", " ", ""), 500)
    assert judged.reason == "The reference's side does not state its selection."


def test_simulated_data_is_not_a_reproduction_but_may_meet_a_target():
    replay = vd.Side(SAME.definition, SAME.selection, "SIMULATED calibrated replay")
    judged = vd.judge(HOLDS, replay, REFERENCE, 500)
    assert judged.verdict == "not comparable" and "not a measurement of the real cluster" in judged.reason
    assert vd.judge(HOLDS, replay, REFERENCE, 500, target=True).verdict == "met"
    assert vd.judge(FAILS, replay, REFERENCE, 500, target=True).verdict == "not met"
    missing = vd.judge(vd.threshold(math.nan, 0.15, False, "median KS"), replay, REFERENCE, None, min_n=0, target=True)
    assert (missing.verdict, missing.reason) == ("not met", "Median KS could not be measured.")


@pytest.mark.parametrize("low, high, sign, result", [
    (-0.03, -0.01, "-", vd.HOLDS), (0.01, 0.05, "-", vd.FAILS), (-0.02, 0.07, "-", vd.UNDECIDED),
    (0.5, 4.0, "+", vd.HOLDS), (-4.0, -0.5, "+", vd.FAILS), (-0.8, 4.5, "+", vd.UNDECIDED),
    (0.0, 4.5, "+", vd.UNDECIDED), (None, 1.0, "+", vd.MISSING),
])
def test_a_direction_holds_only_where_its_interval_excludes_zero(low, high, sign, result):
    assert vd.direction(low, high, sign, "effect").result == result


def test_a_direction_that_the_data_cannot_tell_is_not_shown():
    undecided = vd.direction(-0.025, 0.069, "-", "5-8-GPU slope")
    judged = vd.judge(undecided, SAME, REFERENCE, 1411)
    assert judged.verdict == "not comparable"
    assert judged.reason == ("Not shown on this data: 5-8-GPU slope: interval [-0.025, +0.069] includes zero, so "
                             "neither direction is shown.")
    combined = vd.combine([vd.direction(-0.03, -0.01, "-", "a"), undecided])
    assert combined.result == vd.UNDECIDED
    assert vd.combine([vd.direction(0.01, 0.02, "-", "a"), undecided]).result == vd.FAILS


def test_within_and_thresholds():
    assert vd.within(43.2, 45.18, 2.5).result == vd.HOLDS
    assert vd.within(43.2, 45.18, 1).text == "by -1.98 (-4.4%), beyond the tolerance of 1"
    assert vd.within(None, 45.18, 1).result == vd.MISSING
    assert vd.threshold(0.6, 0.5, True, "share").result == vd.HOLDS
    assert vd.threshold(0.5, 0.5, True, "share").result == vd.FAILS     # "more than"
    assert vd.threshold(0.15, 0.15, False, "KS").result == vd.HOLDS     # "at most"


def test_a_side_statement_reads_back():
    assert vd.Side.parse(SAME.statement()) == SAME
    assert vd.Side.parse("no statement") is None
    with pytest.raises(ValueError, match="may not contain"):
        vd.Side("a | b", "c").statement()


def test_recorded_violations_find_what_breaks_the_standard():
    like = "like for like: the same definition (x); the same selection (y)"
    assert vd.recorded_violations("reproduced", 500, like, SAME.statement(), REFERENCE.statement()) == []
    assert vd.recorded_violations("not comparable", 2, "", "", "") == []
    few = vd.recorded_violations("reproduced", 2, like)
    assert few == ["says reproduced on 2 jobs (at least 100 needed)"]
    assert vd.recorded_violations("differs", 500, "not like for like: another selection")
    unstated = vd.recorded_violations("differs", 500, like, vd.Side("x", "", "real").statement(), REFERENCE.statement())
    assert unstated == ["says differs, but our side does not state its definition and selection"]
    simulated = vd.Side("x", "y", "SIMULATED replay").statement()
    assert "names ['simulated']" in vd.recorded_violations("reproduced", 500, like, simulated, REFERENCE.statement())[0]


def test_reasons_fold_into_sentences():
    assert vd.reason_group("Another definition: ours is a, the reference's is b.") == \
        "Ours is another quantity: another definition."
    assert vd.reason_group("Too few jobs (2; at least 100 needed).") == "Too few jobs behind ours."
    assert vd.reason_group("No job of ours in this VC and size (DRE holds no 1-GPU job).") == "No data of ours for it."
    assert vd.reason_group("something else entirely") == vd.OTHER_REASONS
    assert all(group.endswith(".") for _, group in vd.REASON_GROUPS)
