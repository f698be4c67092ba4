"""Intervals that can be true: a share's stays in [0, 1], a duration's above 0, a reduction's above -100%; and a
direction is named only when the interval excludes no change."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlcluster.experiments.intervals import (
    Interval,
    changed,
    direction,
    mean_interval,
    not_significant,
    ratio_interval,
)

T_975_2 = 4.302652729911275   # Student t, 97.5th percentile, 2 degrees of freedom


def test_the_student_t_interval_of_three_seeds_would_leave_the_bounds():
    # the samples behind the impossible bounds: a plain t interval reaches below 0 and past 1
    shares = np.array([0.02, 0.05, 0.4])
    half = T_975_2 * shares.std(ddof=1) / math.sqrt(3)
    assert shares.mean() - half < 0
    ci = mean_interval(shares, "share")
    assert 0 < ci.low < ci.mean < ci.high < 1 and ci.method == "Student t on the logit scale"


@pytest.mark.parametrize("values", [[0.02, 0.05, 0.4], [0.9, 0.99, 0.999], [0.0, 0.5, 1.0], [0.0, 0.0, 0.3],
                                    [1.0, 1.0, 0.2], [0.5, 0.5, 0.5]])
def test_a_share_interval_stays_in_0_1(values):
    ci = mean_interval(values, "share")
    assert 0 <= ci.low <= ci.mean <= ci.high <= 1


@pytest.mark.parametrize("values", [[5.0, 600.0, 86400.0], [0.5, 1.0, 1e6], [0.0, 10.0, 3600.0], [1.0, 1.0, 1.0]])
def test_a_duration_interval_stays_above_0(values):
    ci = mean_interval(values, "duration")
    assert 0 <= ci.low <= ci.mean <= ci.high
    if min(values) > 0:
        assert ci.low > 0


def test_a_duration_interval_is_student_t_on_the_log_scale():
    v = np.array([60.0, 600.0, 6000.0])   # logs evenly spaced
    logs = np.log(v)
    half = T_975_2 * logs.std(ddof=1) / math.sqrt(3)
    ci = mean_interval(v, "duration")
    assert ci.low == pytest.approx(math.exp(logs.mean() - half))
    assert ci.high == pytest.approx(math.exp(logs.mean() + half))
    assert ci.mean == pytest.approx(v.mean())


@pytest.mark.parametrize("after, before", [([10.0, 50.0, 84.0], [100.0, 100.0, 100.0]),   # "−52% [−105%, ±0%]"
                                           ([1.0, 1.0, 200.0], [100.0, 100.0, 100.0]),
                                           ([0.0, 30.0, 90.0], [100.0, 100.0, 100.0]),
                                           ([0.0, 0.0, 0.0], [5.0, 6.0, 7.0])])
def test_a_reduction_stays_above_minus_100_percent(after, before):
    ci = ratio_interval(after, before)
    assert -1 <= ci.low <= ci.mean <= ci.high
    if min(after) > 0:
        assert ci.low > -1


def test_ratio_interval_is_paired_by_seed_on_the_log_scale():
    before, after = np.array([100.0, 1000.0, 10.0]), np.array([50.0, 400.0, 6.0])   # each seed cut, by 40-60%
    logs = np.log(after / before)
    half = T_975_2 * logs.std(ddof=1) / math.sqrt(3)
    ci = ratio_interval(after, before)
    assert ci.mean == pytest.approx(math.exp(logs.mean()) - 1)
    assert (ci.low, ci.high) == (pytest.approx(math.exp(logs.mean() - half) - 1),
                                 pytest.approx(math.exp(logs.mean() + half) - 1))
    assert ci.high < 0   # unpaired, the three windows' levels (10 to 1000) would swamp the cut
    # a seed without a baseline has no ratio
    assert ratio_interval([1.0, 2.0], [0.0, 1.0]).n == 1


@given(st.lists(st.floats(0, 1), min_size=2, max_size=8))
def test_share_bounds_hold_for_any_sample(values):
    ci = mean_interval(values, "share")
    assert 0 <= ci.low <= ci.high <= 1


@given(st.lists(st.floats(0.001, 1e6), min_size=2, max_size=8), st.lists(st.floats(0, 1e6), min_size=2, max_size=8))
def test_reduction_bounds_hold_for_any_sample(before, after):
    n = min(len(before), len(after))
    ci = ratio_interval(after[:n], before[:n])
    assert ci.low >= -1


def test_a_direction_is_named_only_outside_the_interval():
    assert direction(Interval(-0.09, -0.28, 0.11, 3, "")) == "no significant difference at 3 seeds"
    assert direction(Interval(-0.32, -0.71, 0.08, 3, "")) == not_significant(3)
    assert direction(Interval(-0.2, -0.3, -0.1, 3, "")) == "cut"
    assert direction(Interval(0.2, 0.1, 0.3, 3, ""), up="raised") == "raised"
    assert direction(Interval(0.0, 0.0, 0.0, 3, "")) == not_significant(3)   # no change at all
    assert direction(Interval(0.2, float("nan"), float("nan"), 1, "")).startswith("changed (no interval")
    assert changed(Interval(-0.09, -0.28, 0.11, 3, ""), "their mean JCT") == \
        "made no significant difference at 3 seeds to their mean JCT"
    assert changed(Interval(-0.2, -0.3, -0.1, 3, ""), "their mean JCT") == "cut their mean JCT"


def test_unknown_quantity_and_unpaired_lengths_are_errors():
    with pytest.raises(ValueError, match="quantity must be one of"):
        mean_interval([1, 2], "percent")
    with pytest.raises(ValueError, match="paired by seed"):
        ratio_interval([1, 2], [1, 2, 3])


# ----------------------------------------------------------------------------- the block design

def test_circular_block_samples_draw_runs_of_neighbouring_blocks():
    from dlcluster.experiments.intervals import block_length, circular_block_samples

    assert block_length(8) == 2 and block_length(12) == 2 and block_length(1) == 1 and block_length(27) == 3
    draws = circular_block_samples(8, resamples=500, seed=3)
    assert draws.shape == (500, 8) and draws.min() >= 0 and draws.max() <= 7
    # every draw is 4 runs of 2 consecutive blocks, wrapping from block 7 to block 0
    np.testing.assert_array_equal(draws[:, 1::2], (draws[:, 0::2] + 1) % 8)
    np.testing.assert_array_equal(draws, circular_block_samples(8, resamples=500, seed=3))   # seeded


def test_pooled_ratio_is_a_ratio_of_sums_with_a_block_bootstrap():
    from dlcluster.experiments.intervals import pooled_interval, pooled_ratio_interval

    jobs = np.array([100, 300, 200, 100, 400, 100, 200, 100], float)
    before = np.array([10, 20, 30, 40, 10, 20, 30, 40], float)
    # every block 10% faster: exactly -10%, whatever the resample
    same = pooled_ratio_interval(0.9 * before, jobs, before, jobs)
    assert same.mean == pytest.approx(-0.1) and same.low == pytest.approx(-0.1) and same.high == pytest.approx(-0.1)
    assert "block" in same.method and same.n == 8
    # a ratio of sums: jobs weigh the same whatever their block (not a mean of the blocks' ratios)
    after = before.copy()
    after[1] = 40.0   # the block with 300 jobs doubles
    ci = pooled_ratio_interval(after, jobs, before, jobs)
    assert ci.mean == pytest.approx((after * jobs).sum() / (before * jobs).sum() - 1)
    assert ci.low >= -1 and ci.low <= ci.mean <= ci.high and ci.detectable > 0
    # a share stays in [0, 1], a pooled value is the job-weighted mean
    shares = np.array([0.0, 0.01, 0.99, 1.0, 0.5, 0.2, 0.0, 1.0])
    level = pooled_interval(shares, jobs)
    assert level.mean == pytest.approx((shares * jobs).sum() / jobs.sum())
    assert 0.0 <= level.low <= level.mean <= level.high <= 1.0
    # a block without a value weighs nothing
    gap = pooled_interval([1.0, np.nan, 3.0], [1.0, 5.0, 1.0])
    assert gap.mean == pytest.approx(2.0) and gap.n == 2


# ----------------------------------------------------------------------------- several whole runs

Z95 = 1.959963984540054


def _log_interval(theta, se, n=7, n_eff=float("nan")):
    """A change whose 95% interval is normal on the log scale: log ratio ``theta`` with standard error ``se``."""
    from dlcluster.experiments.intervals import Interval

    return Interval(math.expm1(theta), math.expm1(theta - Z95 * se), math.expm1(theta + Z95 * se), n, "m",
                    effective_n=n_eff)


def test_two_agreeing_runs_combine_by_inverse_variance():
    from dlcluster.experiments.intervals import combine_runs

    one = _log_interval(-0.2, 0.1, n_eff=3.5)
    both = combine_runs([one, one])
    # the same log ratio, its standard error over sqrt(2); runs x effective blocks: 3.5 + 3.5
    assert both.mean == pytest.approx(math.expm1(-0.2))
    assert both.low == pytest.approx(math.expm1(-0.2 - Z95 * 0.1 / math.sqrt(2)))
    assert both.high == pytest.approx(math.expm1(-0.2 + Z95 * 0.1 / math.sqrt(2)))
    assert both.effective_n == pytest.approx(7.0) and both.n == 14 and "fixed effect" in both.method
    # unequal precision: weights 1/0.1^2 = 100 and 1/0.2^2 = 25, and no between-run variance (Q = 0.8 < 1)
    mixed = combine_runs([_log_interval(-0.2, 0.1), _log_interval(-0.1, 0.2)])
    assert mixed.mean == pytest.approx(math.expm1((100 * -0.2 + 25 * -0.1) / 125))
    assert mixed.high == pytest.approx(math.expm1(-0.18 + Z95 / math.sqrt(125)))
    assert mixed.effective_n == pytest.approx(14.0)   # no effective n given: each run's n


def test_runs_that_disagree_add_the_between_run_variance():
    from dlcluster.experiments.intervals import combine_runs

    # log ratios -0.2 and +0.2, standard errors 0.05: w = 400 each, Q = 400 (0.04 + 0.04) = 32 on 1 df,
    # tau^2 = (32 - 1) / (800 - 400) = 0.0775, w* = 1 / 0.08 = 12.5 each: the standard error is 1 / sqrt(25) = 0.2;
    # Hartung-Knapp's scale 12.5 (0.04 + 0.04) / 1 = 1, and t(0.975, 1 df) = 12.706: two runs that disagree say little
    ci = combine_runs([_log_interval(-0.2, 0.05), _log_interval(0.2, 0.05)])
    assert ci.mean == pytest.approx(0.0, abs=1e-12)
    t1 = 12.706204736174698
    assert (ci.low, ci.high) == (pytest.approx(math.expm1(-t1 * 0.2)), pytest.approx(math.expm1(t1 * 0.2)))
    assert "DerSimonian-Laird" in ci.method and "0.0775" in ci.method and "Hartung-Knapp" in ci.method
    # three runs, two agreeing: the scale (weighted spread) above 1 widens the interval further
    three = combine_runs([_log_interval(-0.2, 0.05), _log_interval(-0.2, 0.05), _log_interval(0.2, 0.05)])
    assert -1 < three.low < three.mean < 0 < three.high


def test_runs_of_blocks_keep_each_runs_blocks_together():
    from dlcluster.experiments.intervals import (
        circular_block_samples, combine_runs, effective_n, pooled_ratio_interval)

    jobs = np.array([100, 300, 200, 100, 400, 100, 200], float)
    before = np.array([10, 20, 30, 40, 10, 20, 30], float)
    # every block 20% faster in both runs: exactly -20%, with no width
    same = combine_runs([(0.8 * before, jobs, before, jobs), (1.6 * before, jobs, 2 * before, jobs)])
    assert (same.mean, same.low, same.high) == (pytest.approx(-0.2), pytest.approx(-0.2), pytest.approx(-0.2))
    assert same.n == 14 and "same ratio" in same.method
    # one noisy run: its log pooled ratio, with the variance of its circular block bootstrap's log ratios
    after = before * np.array([0.7, 0.9, 0.8, 1.0, 0.75, 0.85, 0.95])
    single = combine_runs([(after, jobs, before, jobs)])
    pooled = pooled_ratio_interval(after, jobs, before, jobs)
    assert single.mean == pytest.approx(pooled.mean)
    index = circular_block_samples(7)
    logs = np.log((after * jobs)[index].sum(1) / (before * jobs)[index].sum(1))
    theta = math.log1p(pooled.mean)
    assert single.low == pytest.approx(math.expm1(theta - Z95 * logs.std(ddof=1)))
    assert single.effective_n == pytest.approx(effective_n(np.log(after / before)))
    assert pooled.effective_n == single.effective_n
    # two such runs: the same point, a narrower interval, twice the effective replicates
    two = combine_runs([(after, jobs, before, jobs)] * 2)
    assert two.mean == pytest.approx(single.mean) and two.high - two.low < single.high - single.low
    assert two.effective_n == pytest.approx(2 * single.effective_n)
    with pytest.raises(ValueError, match="paired by block"):
        combine_runs([(after, jobs, before[:5], jobs[:5])])


def test_exact_runs_that_disagree_fall_back_on_the_runs_alone():
    from dlcluster.experiments.intervals import combine_runs

    jobs, before = np.ones(4), np.array([1.0, 2.0, 3.0, 4.0])
    ci = combine_runs([(0.8 * before, jobs, before, jobs), (0.9 * before, jobs, before, jobs)])
    logs = np.log([0.8, 0.9])
    half = 12.706204736174698 * logs.std(ddof=1) / math.sqrt(2)   # t(0.975, 1 df)
    assert ci.mean == pytest.approx(math.expm1(logs.mean()))
    assert (ci.low, ci.high) == (pytest.approx(math.expm1(logs.mean() - half)),
                                 pytest.approx(math.expm1(logs.mean() + half)))
    assert "Student t of the runs" in ci.method
