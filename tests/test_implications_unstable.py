"""An implication answered on an arm without a steady state says 'unstable: <arm> queue grows X per week', carries
no interval and is scored neither supported nor contradicted (experiments.implications)."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.experiments.implications import (
    Answer, answers_table, implication_answers, scorecard_words, unstable_words)
from dlcluster.experiments.intervals import Interval, stability

H = 3600.0
PHILLY = "relax after 3.8 min"
FLAT = [10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 9.0]            # hours of mean wait per weekly block
GROWING = [18.7, 23.0, 27.9, 31.2, 37.5, 44.6, 50.1]       # the strict arm: 18.7 h to 50.1 h


def blocks(experiment, arm, waits_h, jct_factor=1.0, **extra):
    """One arm's 7 weekly blocks in the sweep table's columns, 'all' bucket of all jobs: JCT = 100 h + the wait,
    times ``jct_factor``."""
    return [{"experiment": experiment, "arm": arm, "load_label": "the real load (x1)", "population": "all jobs",
             "bucket": "all", "block": b, "seed": b, "block_days": 7.0, "jobs": 1000, "rejected": 0,
             "wait_total_mean_s": w * H, "queue_mean_s": w * H, "jct_mean_s": jct_factor * (100.0 + w) * H,
             "gpu_hours": 1000.0, **extra} for b, w in enumerate(waits_h)]


def sweep(strict_waits):
    rows = [*blocks("locality", "no locality (any GPUs)", FLAT),
            *blocks("locality", PHILLY, FLAT, jct_factor=0.9),
            *blocks("locality", f"{PHILLY}, long jobs migrated (remaining time known: oracle)", FLAT, jct_factor=0.85),
            *blocks("locality", "strict locality", strict_waits)]
    return pd.DataFrame(rows).assign(interference=np.nan)


def answers(strict_waits):
    return {a.implication: a for a in implication_answers(sweep(strict_waits), "the real load (x1)", PHILLY,
                                                         "7 weekly blocks", 1800.0, 300.0)}


def test_an_answer_on_a_growing_arm_is_unstable_with_no_interval():
    got = answers(GROWING)
    relax = got["relax it after a bounded wait"]
    growth = stability(pd.DataFrame(blocks("locality", "strict locality", GROWING))).growth_text
    assert relax.answer == f"unstable: strict locality queue grows {growth}"
    assert relax.answer.startswith("unstable: strict locality queue grows 5.") and relax.answer.endswith("h per week")
    assert relax.change is None and relax.unstable and relax.verdict is None
    assert "no steady state" in relax.why and "'strict locality': unstable" in relax.why
    row = relax.row()
    assert row["change"] == "" and row["±10-point target"] == "" and row["smallest detectable change"] == ""
    # the arms with a steady state are still answered: 0.9 x JCT every block is −10% exactly
    locality = got["prioritize locality"]
    assert locality.answer == "supported" and locality.verdict == "supported" and not locality.unstable
    assert locality.change.mean == pytest.approx(-0.1) and locality.change.low == pytest.approx(-0.1)
    assert got["migrate long jobs"].verdict == "supported"


def test_the_same_comparison_on_a_steady_arm_is_scored():
    relax = answers([v * 1.2 for v in FLAT])["relax it after a bounded wait"]
    # Philly's JCT 0.9 x (100 h + wait) against strict's 100 h + 1.2 x wait: a reduction on every block
    assert relax.verdict == "supported" and relax.change is not None and relax.change.high < 0


def test_an_unstable_answer_is_neither_supported_nor_contradicted_anywhere():
    got = list(answers(GROWING).values())
    words = scorecard_words(got, ("prioritize locality", "relax it after a bounded wait", "migrate long jobs"))
    relax = words.split("; relax it after a bounded wait: ")[1]
    assert relax.startswith("unstable: strict locality queue grows") and "supported" not in relax.split(";")[0]
    assert relax.split(";")[0].endswith("per week (mechanism)")
    table = answers_table(got)
    assert table.loc["relax it after a bounded wait", "answer"].startswith("unstable:")
    # what notebook 06 counts as a finding (a mechanism answer with a known interval) leaves it out
    findings = [a for a in got if a.kind == "mechanism" and a.change is not None and a.change.known]
    assert [a.implication for a in findings] == ["prioritize locality", "migrate long jobs"]
    assert sum(a.verdict is not None for a in got) == 2


def test_unstable_words_name_every_unstable_arm():
    steady = stability(pd.DataFrame(blocks("x", "a", FLAT)))
    grows = stability(pd.DataFrame(blocks("x", "b", GROWING)))
    assert unstable_words({"a": steady}) == ""
    assert unstable_words({"a": steady, "b": grows}) == f"unstable: b queue grows {grows.growth_text}"
    both = unstable_words({"b": grows, "c": grows})
    assert both == f"unstable: b queue grows {grows.growth_text}; c queue grows {grows.growth_text}"
    # and an answer built by hand reads the same way
    answer = Answer("migrate long jobs", both, "m", None, "mechanism", "7 blocks")
    assert answer.unstable and answer.verdict is None
    assert Answer("migrate long jobs", "contradicted", "m", Interval(0.1, 0.05, 0.2, 7, "m"), "mechanism",
                  "7 blocks").verdict == "contradicted"


def test_arm_stability_lists_every_arm():
    from dlcluster.experiments.implications import arm_stability

    table = arm_stability(sweep(GROWING))
    assert list(table["arm"]) == ["no locality (any GPUs)", PHILLY,
                                  f"{PHILLY}, long jobs migrated (remaining time known: oracle)",
                                  "strict locality"]
    assert list(table["stable"]) == [True, True, True, False]
    strict = table.set_index("arm").loc["strict locality"]
    expected = np.polyfit(np.arange(7.0), GROWING, 1)[0]   # hours per weekly block
    assert strict["wait growth per week (h)"] == pytest.approx(expected)
    assert strict["JCT growth per week (h)"] == pytest.approx(expected)   # JCT = 100 h + the wait
    assert strict["its one-sided 95% lower bound (h)"] > 0 and strict["blocks"] == 7
    assert strict["why"] == "grows block after block"
    assert table.set_index("arm").loc[PHILLY, "why"] == "no growth beyond the blocks' noise"
