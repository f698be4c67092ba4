"""An implication is supported or contradicted only when every replay the data allow agrees; otherwise it depends on
the choice that flips it, named (experiments.ensemble)."""

import pandas as pd
import pytest

from dlcluster.experiments.ensemble import (
    ACROSS, DOWN, UNSTABLE, UP, ensemble_answer, forest_plot, member_choice)
from dlcluster.experiments.implications import Answer
from dlcluster.experiments.intervals import Interval


def ci(mean, low, high):
    return Interval(mean, low, high, 7, "paired by block")


BELOW = ci(-0.024, -0.031, -0.019)
ALSO_BELOW = ci(-0.05, -0.09, -0.01)
ACROSS_ZERO = ci(-0.01, -0.04, 0.02)
ABOVE = ci(0.70, 0.38, 1.01)


def test_a_members_choice_is_the_part_before_its_value():
    assert member_choice("slowdown 0.47") == "slowdown" and member_choice("slowdown 0.93") == "slowdown"
    assert member_choice("placement: best fit + pools") == "placement"
    assert member_choice("VC draw 1") == "VC draw" and member_choice("latency draw 12") == "latency draw"
    assert member_choice("calibrated") == "calibrated"


def test_every_member_below_zero_is_supported():
    got = ensemble_answer("migrate long jobs", {"calibrated": BELOW, "slowdown 0.47": ALSO_BELOW,
                                                "slowdown 0.93": BELOW, "VC draw 1": ALSO_BELOW})
    assert got.answer == "supported" and got.verdict == "supported" and got.choices == ()
    assert [m.outcome for m in got.members] == [DOWN] * 4
    assert got.row()["members that agree"] == "4 of 4: calibrated, slowdown 0.47, slowdown 0.93, VC draw 1"
    assert got.values() == ("calibrated: −2.4% [−3.1%, −1.9%]; slowdown 0.47: −5% [−9%, −1%]; "
                            "slowdown 0.93: −2.4% [−3.1%, −1.9%]; VC draw 1: −5% [−9%, −1%]")
    # predicted 'up', the same intervals contradict it; every member above zero supports it
    assert ensemble_answer("x", {"calibrated": BELOW, "VC draw 1": BELOW}, predicted="up").answer == "contradicted"
    assert ensemble_answer("x", {"calibrated": ABOVE, "VC draw 1": ABOVE}, predicted="up").answer == "supported"


def test_one_member_across_zero_depends_on_its_choice():
    got = ensemble_answer("prioritize locality", {"calibrated": BELOW, "slowdown 0.47": ALSO_BELOW,
                                                  "slowdown 0.93": ACROSS_ZERO, "VC draw 1": BELOW})
    assert got.answer == "depends on slowdown" and got.choices == ("slowdown",) and got.verdict is None
    assert got.members[2].outcome == ACROSS
    assert got.agreeing == ("calibrated", "slowdown 0.47", "VC draw 1")
    assert "slowdown 0.93: −1% [−4%, +2%]" in got.values()


def test_opposite_signs_depend_on_every_choice_that_flips_it():
    # the relax-after-a-bounded-wait: −38% under spreading, +70% under best fit
    got = ensemble_answer("relax it after a bounded wait", {
        "calibrated": ci(-0.38, -0.45, -0.31), "placement: best fit + pools": ABOVE,
        "slowdown 0.47": ci(-0.30, -0.40, -0.20), "VC draw 1": ci(0.10, 0.02, 0.2)})
    assert got.answer == "depends on placement, VC draw"
    assert [m.outcome for m in got.members] == [DOWN, UP, DOWN, UP]
    # no calibrated member: read against the most common outcome
    assert ensemble_answer("x", {"slowdown 0.47": BELOW, "slowdown 0.93": BELOW, "placement: spread": ABOVE}
                           ).answer == "depends on placement"
    # every member across zero: no effect larger than the largest end
    assert ensemble_answer("x", {"calibrated": ACROSS_ZERO, "VC draw 1": ci(0.0, -0.06, 0.03)}).answer == \
        "no effect larger than 6%"


def test_unstable_members_are_listed_and_make_it_depend():
    members = {"calibrated": BELOW, "slowdown 0.93": BELOW, "VC draw 1": BELOW}
    got = ensemble_answer("isolate or pack against interference", members,
                          unstable={"VC draw 1": "dedicated servers queue grows 122.4 h per week"})
    assert got.answer == "depends on VC draw" and got.members[2].outcome == UNSTABLE
    assert "VC draw 1: unstable (dedicated servers queue grows 122.4 h per week)" in got.values()
    # every member unstable: no answer, no member agrees
    every = ensemble_answer("x", members, unstable=list(members))
    assert every.answer == "unstable on every member" and every.verdict is None and every.agreeing == ()
    assert every.row()["members that agree"] == "0 of 3"
    # an implications.Answer that is unstable counts as such; one with an interval brings its change
    unstable = Answer("migrate long jobs", "unstable: strict locality queue grows 5.2 h per week", "m", None,
                      "mechanism", "7 blocks")
    answered = Answer("migrate long jobs", "supported", "m", BELOW, "mechanism", "7 blocks")
    got = ensemble_answer("migrate long jobs", {"calibrated": answered, "slowdown 0.47": unstable})
    assert got.answer == "depends on slowdown"
    assert got.members[1].note == "strict locality queue grows 5.2 h per week"
    with pytest.raises(ValueError, match="not members"):
        ensemble_answer("x", members, unstable=["VC draw 9"])
    with pytest.raises(ValueError, match="predicted"):
        ensemble_answer("x", members, predicted="sideways")


def test_forest_plot_has_one_panel_per_implication():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dlcluster.report.plotting import figure_problems

    answers = [
        ensemble_answer("prioritize locality", {"calibrated": BELOW, "slowdown 0.93": ACROSS_ZERO}),
        ensemble_answer("relax it after a bounded wait", {"calibrated": ci(-0.38, -0.45, -0.31),
                                                          "placement: best fit + pools": ABOVE}),
        ensemble_answer("isolate or pack against interference", {"calibrated": ci(9.1, 7.4, 11.0), "VC draw 1": None},
                        unstable=["VC draw 1"]),
    ]
    fig = forest_plot(answers)
    try:
        axes = fig.axes
        assert len(axes) == 3
        assert [ax.get_title(loc="left") for ax in axes] == [
            "prioritize locality: depends on slowdown", "relax it after a bounded wait: depends on placement",
            "isolate or pack against interference: depends on VC draw"]
        assert [t.get_text() for t in axes[1].get_yticklabels()] == ["calibrated", "placement: best fit + pools"]
        # no change is marked on every panel, and each member with an interval is drawn
        for ax in axes:
            assert any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.get_lines())
        assert "unstable" in " ".join(t.get_text() for t in axes[2].texts)
        assert figure_problems(fig) == []
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="no answer"):
        forest_plot([])


def test_a_member_is_an_interval_an_answer_or_none():
    with pytest.raises(TypeError, match="an Interval"):
        ensemble_answer("x", {"calibrated": pd.Series([1.0])})
    got = ensemble_answer("x", {"calibrated": BELOW, "VC draw 1": None})
    assert got.answer == "depends on VC draw" and "VC draw 1: no value" in got.values()
    assert ensemble_answer("x", {"calibrated": None}).answer.startswith("not computable")


def test_ensemble_answers_from_each_members_implication_answers():
    from dlcluster.experiments.ensemble import ensemble_answers
    from dlcluster.experiments.implications import UNTESTABLE

    def answers(locality, relax):
        return [Answer("prioritize locality", "x", "m", locality, "mechanism", "7 blocks"),
                Answer("relax it after a bounded wait", "x", "m", relax, "mechanism", "7 blocks"),
                Answer("class-aware retries", UNTESTABLE, "m", None, "by construction", "7 blocks")]

    got = ensemble_answers({"calibrated": answers(BELOW, ci(-0.38, -0.45, -0.31)),
                            "placement: best fit + pools": answers(ALSO_BELOW, ABOVE)})
    assert [(a.implication, a.answer) for a in got] == [
        ("prioritize locality", "supported"), ("relax it after a bounded wait", "depends on placement"),
        ("class-aware retries", UNTESTABLE)]
    assert got[2].verdict is None and got[2].agreeing == ()
    assert ensemble_answers({"calibrated": answers(ABOVE, ABOVE)},
                            predicted={"prioritize locality": "up"})[0].answer == "supported"
