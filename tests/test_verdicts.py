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
        "like for like: the same definition (queueing delay, every attempt); the same selection (every job)",
        "reproduced", "reproduced")
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


# ------------------------------------------------------------------ the labels (issue 49): most informative first

DRE = vd.Side("the failed share of a user's next jobs, after a failure minus after any other", "DRE's records",
              "real DRE records")
PAPER = vd.Side("whether failures repeat for a user", "the paper's 75 days")
UP = vd.direction(55.0, 65.0, "+", "difference, points")


def test_label_1_like_for_like_is_reproduced_or_differs():
    for outcome, word in ((HOLDS, "reproduced"), (FAILS, "differs")):
        judged = vd.judge(outcome, SAME, REFERENCE, 500, where="the full trace", value="x")
        assert (judged.verdict, judged.label, judged.kind) == (word, word, word)


def test_label_2_a_direction_on_a_named_public_selection():
    held = vd.judge(UP, DRE, PAPER, 5751, where="DRE's records")
    assert (held.verdict, held.label, held.kind) == ("not comparable", "holds on DRE's records", vd.HOLDS_ON)
    assert held.reason.startswith("Difference, points: interval [+55, +65], above zero as claimed (n = 5,751); "
                                  "not the paper's selection: another definition: ")
    down = vd.judge(vd.direction(-9.0, -1.0, "+", "d"), DRE, PAPER, 5751, where="DRE's records")
    assert (down.label, down.kind) == ("does not hold on DRE's records", vd.NOT_HOLDS_ON)
    # an interval that includes zero gives no direction: not shown, never holds
    unclear = vd.judge(vd.direction(-0.7, 4.6, "+", "d"), DRE, PAPER, 5910, where="DRE's records")
    assert (unclear.label, unclear.kind) == ("not shown on DRE's records", vd.NOT_SHOWN_ON)
    assert "includes zero, so neither direction is shown" in unclear.reason
    # like for like but undecided: not shown on that data either
    assert vd.judge(vd.direction(-0.7, 4.6, "+", "d"), SAME, REFERENCE, 500).label == "not shown on this data"


def test_label_3_the_quantity_on_another_public_selection():
    minutes = vd.Side("mean GPU utilization", "minutes 0-3 after start of DRE's records", "real DRE records")
    table3 = vd.Side("mean GPU utilization", "every minute of every job")
    judged = vd.judge(vd.within(43.2, 45.18, 2.5), minutes, table3, 1000, where="DRE's records, minutes 0-3",
                      value="43.2%")
    assert (judged.verdict, judged.label, judged.kind) == (
        "not comparable", "on DRE's records, minutes 0-3, ours is 43.2%", vd.OURS_ON)
    assert judged.reason == ("Another selection: ours is minutes 0-3 after start of DRE's records, the reference's is "
                             "every minute of every job (n = 1,000).")
    # a reason known beforehand (reproduction.yaml's not_comparable) is the reason, the sides unstated
    stated = vd.judge(vd.Outcome(vd.MISSING, ""), vd.Side("", "", "real RFold jobs"), vd.Side("", ""), None,
                      min_n=0, where="RFold's jobs", value="111,549 jobs", why_not="the paper's 75 days are not public")
    assert (stated.label, stated.reason, stated.like_for_like) == (
        "on RFold's jobs, ours is 111,549 jobs", "The paper's 75 days are not public.",
        "not like for like: the paper's 75 days are not public")


def test_label_4_cannot_be_tested_without_a_public_measurement():
    # no public selection named, no value, or a simulated input: cannot be tested, with why
    assert vd.judge(UP, DRE, PAPER, 5751).kind == vd.CANNOT
    assert vd.judge(vd.Outcome(vd.MISSING, "x"), DRE, PAPER, 5751, where="DRE's records").kind == vd.CANNOT
    replay = vd.Side(DRE.definition, DRE.selection, "SIMULATED calibrated replay")
    judged = vd.judge(UP, replay, PAPER, 5751, where="the replay", value="60 points")
    assert (judged.verdict, judged.label) == ("not comparable", "cannot be tested")
    assert "not a measurement of the real cluster" in judged.reason


def test_labels_keep_the_100_jobs_rule():
    # like for like on 99 jobs: neither reproduced nor a direction; the value on that selection, with its n
    few = vd.judge(HOLDS, SAME, REFERENCE, 99, where="DRE's records", value="KS 3.0")
    assert (few.verdict, few.kind, few.label) == ("not comparable", vd.OURS_ON, "on DRE's records, ours is KS 3.0")
    assert few.reason == "Too few jobs (99; at least 100 needed) (n = 99)."
    # a direction on 99 jobs is no direction either
    assert vd.judge(UP, DRE, PAPER, 99, where="DRE's records").kind == vd.CANNOT
    assert vd.judge(UP, DRE, PAPER, 100, where="DRE's records").kind == vd.HOLDS_ON


def test_a_share_interval_stays_in_its_range():
    assert vd.direction(0.0, 0.2, "+", "share", bounds=(0, 1)).result == vd.UNDECIDED
    assert vd.direction(-100.0, -40.0, "-", "difference, points", bounds=(-100, 100)).result == vd.HOLDS
    with pytest.raises(ValueError, match="leaves the quantity's range"):
        vd.direction(-0.03, 0.2, "+", "share", bounds=(0, 1))   # a normal interval of a small share leaks below 0
    with pytest.raises(ValueError, match="leaves the quantity's range"):
        vd.direction(0.5, 1.04, "+", "share", bounds=(0, 1))


def test_every_label_kind_is_listed_in_order():
    assert vd.KINDS == ("reproduced", "differs", "holds on", "does not hold on", "not shown on",
                        "on another selection", "cannot be tested")
