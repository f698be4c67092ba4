"""An implication's answer says what its replicates are worth as independent ones, and a comparison can be combined
over several whole runs (experiments.implications)."""

import math

import numpy as np
import pandas as pd
import pytest

from dlcluster.experiments.implications import Answer, answers_table, combined_change, implication_answers, run_blocks
from dlcluster.experiments.intervals import Interval, effective_n

H = 3600.0
PHILLY = "relax after 3.8 min"


def run(philly_factors, waits_h=(1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.9), jct_h=(100, 120, 90, 110, 100, 130, 90)):
    """One run's locality arms over 7 weekly blocks (steady queues): Philly's JCT is the baseline's times the
    block's factor; strict and migrated arms the baseline's."""
    rows = []
    for arm, factors in (("no locality (any GPUs)", [1.0] * 7), (PHILLY, philly_factors),
                         ("strict locality", [1.0] * 7),
                         (f"{PHILLY}, long jobs migrated (remaining time known: oracle)", [1.0] * 7)):
        for b, (w, j, f) in enumerate(zip(waits_h, jct_h, factors, strict=True)):
            rows.append({"experiment": "locality", "arm": arm, "load_label": "L", "population": "all jobs",
                         "bucket": "all", "block": b, "seed": b, "block_days": 7.0, "jobs": 500, "rejected": 0,
                         "wait_total_mean_s": w * H, "jct_mean_s": f * j * H, "interference": np.nan})
    return pd.DataFrame(rows)


FACTORS = [0.90, 0.92, 0.88, 0.95, 0.85, 0.91, 0.89]


def test_an_answer_carries_its_effective_replicates():
    answers = {a.implication: a for a in implication_answers(run(FACTORS), "L", PHILLY, "7 weekly blocks", 1.0, 1.0)}
    locality = answers["prioritize locality"]
    assert locality.effective_n == pytest.approx(effective_n(np.log(FACTORS)))
    assert locality.change.effective_n == locality.effective_n
    row = locality.row()
    assert row["effective replicates"] == f"{locality.effective_n:.1f} of 7 blocks"
    # no interval, no effective replicates
    assert answers["class-aware retries"].row()["effective replicates"] == ""
    assert "effective replicates" in answers_table(list(answers.values())).columns


def test_effective_replicates_of_a_trending_ratio_are_fewer_than_its_blocks():
    # the ratio drifts from block to block: r1 of 0.8..0.92 in steps of 0.02 is 4/7, 7 blocks are worth 21/11
    drift = [0.80, 0.82, 0.84, 0.86, 0.88, 0.90, 0.92]
    locality = implication_answers(run(drift), "L", PHILLY, "7 weekly blocks", 1.0, 1.0)[0]
    assert 1.0 <= locality.effective_n < 2.5
    assert locality.effective_n == pytest.approx(effective_n(np.log(drift)))
    assert Answer("migrate long jobs", "supported", "m", Interval(-0.1, -0.2, -0.05, 3, "paired by seed"),
                  "mechanism", "3 seeds", effective_n=3.0).row()["effective replicates"] == "3.0 of 3 seeds"


def test_a_comparison_over_several_runs():
    one, other = run(FACTORS), run([f * 0.98 for f in FACTORS])
    after, wa, before, wb = run_blocks(one, "no locality (any GPUs)", PHILLY)
    np.testing.assert_allclose(after / before, FACTORS)
    assert (wa == 500).all() and (wb == 500).all()
    both = combined_change([one, other], "no locality (any GPUs)", PHILLY)
    alone = combined_change([one], "no locality (any GPUs)", PHILLY)
    # the second run is 2% lower on every block: the combination lies between the two runs' pooled ratios
    pooled = [sum(f * j for f, j in zip(fs, (100, 120, 90, 110, 100, 130, 90), strict=True)) / 740
              for fs in (FACTORS, [f * 0.98 for f in FACTORS])]
    assert alone.mean == pytest.approx(pooled[0] - 1)
    assert pooled[1] - 1 < both.mean < pooled[0] - 1
    assert both.effective_n == pytest.approx(2 * alone.effective_n) and both.n == 14
    # a 2% shift on every block is more than the runs' block noise: a between-run variance, and with two runs
    # Hartung-Knapp's t on 1 degree of freedom leaves the sign open, wider than either run alone
    assert "DerSimonian-Laird" in both.method and both.low < alone.low and both.high > alone.high
    assert math.isfinite(both.low) and both.low > -1
    # the same run twice: no between-run variance, the same point, a narrower interval
    twice = combined_change([one, one], "no locality (any GPUs)", PHILLY)
    assert twice.mean == pytest.approx(alone.mean) and twice.high - twice.low < alone.high - alone.low < 0.1
    assert twice.high < 0 and "fixed effect" in twice.method


def test_the_answers_combine_the_other_draws_runs():
    # implication_answers(runs=...): the main table's run and another draw's, each run's blocks kept together
    one, other = run(FACTORS), run([f * 0.98 for f in FACTORS])
    alone = implication_answers(one, "L", PHILLY, "7 weekly blocks", 1.0, 1.0)[0]
    both = implication_answers(one, "L", PHILLY, "7 weekly blocks", 1.0, 1.0, runs=[other])[0]
    expected = combined_change([one, other], "no locality (any GPUs)", PHILLY)
    assert (both.change.mean, both.change.low, both.change.high) == pytest.approx(
        (expected.mean, expected.low, expected.high))
    assert both.effective_n == pytest.approx(2 * alone.effective_n)
    assert both.replicates == "2 whole runs (VC and latency draws), each run's blocks kept together"
    assert alone.replicates == "7 weekly blocks"
    # a run that lacks the arms adds nothing: the main run's own interval
    lacking = implication_answers(one, "L", PHILLY, "7 weekly blocks", 1.0, 1.0, runs=[other.iloc[:0]])[0]
    assert lacking.change == alone.change and lacking.replicates == "7 weekly blocks"


def test_an_arm_without_a_steady_state_in_another_draw_leaves_no_interval():
    one = run(FACTORS)
    growing = run(FACTORS)
    strict = growing["arm"] == "strict locality"
    growing.loc[strict, "wait_total_mean_s"] = [h * H for h in (1, 5, 10, 20, 30, 45, 60)]
    relax = implication_answers(one, "L", PHILLY, "7 weekly blocks", 1.0, 1.0, runs=[growing])[1]
    assert relax.implication == "relax it after a bounded wait"
    assert relax.answer.startswith("unstable: strict locality (run 2) queue grows") and relax.change is None
    # the main run alone is steady: an interval
    assert implication_answers(one, "L", PHILLY, "7 weekly blocks", 1.0, 1.0)[1].change is not None
