"""An arm whose queue grows week after week has no steady state (experiments.intervals.stability); blocks of one run
are worth fewer independent replicates than their count (effective_n)."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.experiments.intervals import (
    GROWTH_FACTOR, MIN_GROWTH_S, effective_n, lag1_autocorrelation, stability, trend)

H = 3600.0


def arm(waits_h, jcts_h=None, block_days=7.0, **extra) -> pd.DataFrame:
    """One arm's per-block rows as the sweep table holds them (the 'all' bucket of all jobs)."""
    n = len(waits_h)
    jcts_h = [w + 100.0 for w in waits_h] if jcts_h is None else jcts_h
    return pd.DataFrame({"block": range(n), "seed": range(n), "block_days": block_days,
                         "block_start": pd.date_range("2017-10-03", periods=n, freq=f"{block_days:g}D"),
                         "bucket": "all", "population": "all jobs", "jobs": 1000,
                         "queue_mean_s": [w * H for w in waits_h], "wait_total_mean_s": [w * H for w in waits_h],
                         "jct_mean_s": [j * H for j in jcts_h], **extra})


def test_effective_n_of_a_trend_and_of_an_alternating_series():
    # 1..7: deviations -3..3, lag-1 products sum to 16, squares to 28: r1 = 4/7, n_eff = 7 (3/7) / (11/7) = 21/11
    assert lag1_autocorrelation(range(1, 8)) == pytest.approx(4 / 7)
    assert effective_n(range(1, 8)) == pytest.approx(21 / 11)
    # alternating: r1 = -1.25 / 1.5 < 0 would claim more than n: clipped to n
    assert lag1_autocorrelation([1, 0, 1, 0, 1, 0]) == pytest.approx(-1.25 / 1.5)
    assert effective_n([1, 0, 1, 0, 1, 0]) == 6
    # too short or constant: no correlation to estimate, n itself
    assert effective_n([3.0, 5.0]) == 2 and effective_n([2.0] * 5) == 5
    # never below 1 (a near-perfect carry-over)
    assert 1.0 <= effective_n([1, 1, 1, 1, 1, 1, 1000, 1000, 1000, 1000, 1000, 1000]) < 2


def test_trend_is_least_squares_with_an_ar1_adjusted_lower_bound():
    x = np.arange(7.0)
    y = np.array([1.0, 3.0, 2.0, 5.0, 4.0, 7.0, 6.0])
    slope, lower, t, n_e, intercept = trend(x, y)
    assert slope == pytest.approx(np.polyfit(x, y, 1)[0]) and intercept == pytest.approx(np.polyfit(x, y, 1)[1])
    # residuals alternate in sign: r1 < 0, so the effective n stays 7 and the bound is the plain one (t, 5 dof)
    residuals = y - (intercept + slope * x)
    assert lag1_autocorrelation(residuals) < 0 and n_e == 7
    se = np.sqrt((residuals ** 2).sum() / 5 / ((x - 3) ** 2).sum())
    assert lower == pytest.approx(slope - 2.015048373 * se, rel=1e-6) and t == pytest.approx(slope / se)


def test_a_growing_arm_is_unstable():
    # the strict arm: mean wait 18.7 h to 50.1 h over 7 weekly blocks, dedicated JCT 370 h to 948 h
    waits = [18.7, 23.0, 27.9, 31.2, 37.5, 44.6, 50.1]
    jcts = [370.0, 455.0, 540.0, 640.0, 750.0, 850.0, 948.0]
    s = stability(arm(waits, jcts))
    assert not s.stable and s.reason.startswith("unstable: the mean wait grows")
    slope = np.polyfit(np.arange(7.0), np.array(waits) * H, 1)[0]   # per weekly block = per week
    assert s.growth_per_week_s == pytest.approx(slope) and 5.1 * H < s.growth_per_week_s < 5.4 * H
    assert s.growth_lower_s > 0 and s.n == 7
    assert s.jct_growth_per_week_s == pytest.approx(np.polyfit(np.arange(7.0), np.array(jcts) * H, 1)[0])
    assert s.jct_growth_lower_s > 0
    assert s.factor >= GROWTH_FACTOR and s.end_s - s.start_s >= MIN_GROWTH_S
    assert s.growth_text == f"{s.growth_per_week_s / H:.1f} h per week"
    # the same growth over 3.5-day blocks is twice as fast per week
    half = stability(arm(waits, jcts, block_days=3.5))
    assert half.growth_per_week_s == pytest.approx(2 * s.growth_per_week_s)


def test_a_flat_noisy_arm_is_stable():
    s = stability(arm([10.0, 12.0, 9.0, 11.0, 10.0, 13.0, 9.0]))
    assert s.stable and s.growth_lower_s < 0 and s.reason.startswith("stable: no growth")


def test_a_single_spike_is_stable():
    # one busy week in the middle: a slope of 52/28 h per week, but the residuals swamp it
    s = stability(arm([10.0, 11.0, 9.0, 10.0, 60.0, 10.0, 11.0]))
    assert s.growth_per_week_s == pytest.approx(52 / 28 * H)
    assert s.stable and s.growth_lower_s < 0


def test_growth_too_small_against_its_level_or_in_hours_is_stable():
    # a steady climb from 100 h to 130 h: certain, but not x2 over the run
    s = stability(arm([100.0, 105.0, 110.0, 115.0, 120.0, 125.0, 130.0]))
    assert s.growth_lower_s > 0 and s.stable and "less than ×2" in s.reason
    # from 10 s to 70 s: x7, certain, but less than an hour
    s = stability(arm([v / H for v in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0)]))
    assert s.growth_lower_s > 0 and s.factor > GROWTH_FACTOR and s.stable and "less than 1.0 h" in s.reason


def test_stability_reads_one_arm_of_the_sweep_table():
    rows = arm([18.7, 23.0, 27.9, 31.2, 37.5, 44.6, 50.1])
    other_bucket = rows.assign(bucket="5-8", wait_total_mean_s=1.0)
    shuffled = pd.concat([rows, other_bucket]).sample(frac=1.0, random_state=1)
    assert stability(shuffled) == stability(rows)    # the 'all' bucket, in block order
    with pytest.raises(ValueError, match="one arm"):
        stability(pd.concat([rows.assign(arm="a"), rows.assign(arm="b")]))
    # a block twice (another cell seed of the same replay): its first row, as paired comparisons take it
    again = rows.assign(wait_total_mean_s=1.0, cell_seed=1)
    assert stability(pd.concat([rows.assign(cell_seed=0), again])) == stability(rows)
    # a block without jobs has no value and is left out; fewer than 3 left: no test
    gap = rows.assign(wait_total_mean_s=[np.nan] * 5 + [1.0, 2.0])
    assert stability(gap).stable and stability(gap).n == 2 and "no trend can be tested" in stability(gap).reason
    # independent seeds (no blocks): not a block design, nothing to test
    seeds = rows.drop(columns=["block_days"])
    assert stability(seeds).stable and "not a block design" in stability(seeds).reason


@pytest.mark.parametrize("name, waits_s, stable", [
    # notebook 06's default sweep (reports/default, the policy experiment): mean total wait per weekly block
    ("FIFO at load x1.25", [26360, 47601, 19937, 37098, 80550, 92372, 86561], False),
    ("Philly at load x1.25", [29059, 63331, 37170, 53741, 125329, 99603, 87952], False),
    ("FIFO at the real load", [848, 2177, 873, 44, 282, 3190, 1], True),
    ("Philly at the real load", [1100, 5358, 1686, 251, 1150, 5087, 330], True),
])
def test_the_default_sweeps_policy_arms(name, waits_s, stable):
    s = stability(arm([w / H for w in waits_s]))
    assert s.stable is stable, (name, s.reason)
    if not stable:   # about 3.3 h more wait every week
        assert 3.0 * H < s.growth_per_week_s < 3.6 * H
