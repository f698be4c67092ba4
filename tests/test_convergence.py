"""Known-answer tests of the epoch-effectiveness measures (values worked out by hand)."""

import math

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis.convergence import (
    early_stopping_outcome,
    early_stopping_table,
    early_termination_fractions,
    effectiveness_stats,
    measure_curve,
    patience_stop_epoch,
    summarize_curves,
    within_tolerance,
)


def test_lower_is_better_curve_with_equal_epochs():
    # best 3.998 at the last epoch; band 3.998*1.001 = 4.001998, first reached by 4.0 at epoch 3
    m = measure_curve([10, 5, 4.0, 4.002, 3.999, 3.998], direction="lower", tolerance=0.001)
    assert (m.n_epochs, m.best_value, m.best_epoch, m.needs_all_epochs) == (6, 3.998, 6, True)
    assert m.within_tol_epoch == 3
    assert m.epochs_to_within_tol_frac == pytest.approx(0.5)
    assert m.time_to_within_tol_frac == pytest.approx(0.5)
    assert m.last_band_time_share == pytest.approx(0.5)
    assert m.time_basis == "equal per epoch"


def test_seconds_weigh_the_epochs():
    m = measure_curve([10, 5, 4.0, 4.002, 3.999, 3.998], seconds=[1, 1, 1, 1, 1, 5], direction="lower")
    assert m.time_basis == "seconds"
    assert m.time_total == 10
    assert m.time_to_within_tol_frac == pytest.approx(0.3)
    assert m.last_band_time_share == pytest.approx(0.7)
    assert m.time_to_best_frac == pytest.approx(1.0)


def test_unknown_seconds_fall_back_to_equal_epochs():
    m = measure_curve([3, 2, 1], seconds=[1.0, np.nan, 1.0], direction="lower")
    assert m.time_basis == "equal per epoch"
    assert m.time_total == 3


def test_higher_is_better_curve():
    # best 0.951 at epoch 4 of 5; band 0.951 - 0.000951 = 0.950049: 0.95 (epoch 3) is just outside
    m = measure_curve([0.5, 0.9, 0.95, 0.951, 0.9505], direction="higher", tolerance=0.001)
    assert (m.best_epoch, m.needs_all_epochs, m.within_tol_epoch) == (4, False, 4)
    assert m.epochs_to_within_tol_frac == pytest.approx(0.8)
    assert m.last_band_time_share == pytest.approx(0.2)


def test_negative_values_band_lies_on_the_worse_side():
    # lower: best -2.001, band 0.002001 -> threshold -1.998999; -2 (epoch 2) is within
    m = measure_curve([-1, -2, -2.001, -1.5], direction="lower")
    assert (m.best_epoch, m.within_tol_epoch) == (3, 2)
    # higher: best -2.999, threshold -3.001999; -3 (epoch 2) is within
    m = measure_curve([-5, -3, -2.999], direction="higher")
    assert (m.best_epoch, m.within_tol_epoch, m.needs_all_epochs) == (3, 2, True)


def test_zero_best_has_a_zero_width_band():
    m = measure_curve([3, 0.0001, 0.0, 0.0001], direction="lower")
    assert (m.best_value, m.best_epoch, m.within_tol_epoch) == (0.0, 3, 3)


def test_non_finite_values_count_as_epochs_but_never_as_best():
    m = measure_curve([5, 3, np.nan, 2, np.inf], direction="lower")
    assert (m.n_epochs, m.n_finite, m.best_value, m.best_epoch) == (5, 3, 2.0, 4)
    assert m.needs_all_epochs is False  # the last epoch diverged
    assert m.last_band_time_share == pytest.approx(0.2)
    m = measure_curve([np.nan, np.nan], direction="lower")
    assert m.best_epoch is None and m.needs_all_epochs is None and math.isnan(m.last_band_time_share)


def test_ties_reach_the_best_at_the_first_occurrence():
    m = measure_curve([3, 2, 2], direction="lower")
    assert (m.best_epoch, m.needs_all_epochs) == (2, False)


def test_single_epoch_and_zero_tolerance():
    m = measure_curve([1.0], direction="lower")
    assert (m.needs_all_epochs, m.within_tol_epoch, m.last_band_time_share) == (True, 1, 0.0)
    m = measure_curve([3, 1.0005, 1.0], direction="lower", tolerance=0.0)
    assert m.within_tol_epoch == 3
    m = measure_curve([3, 1.0005, 1.0], direction="lower", tolerance=0.001)
    assert m.within_tol_epoch == 2


def test_within_tolerance_mask_and_argument_errors():
    assert within_tolerance([1.0, 1.001, 1.0011, np.nan], 1.0, "lower", 0.001).tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="direction"):
        within_tolerance([1.0], 1.0, "up", 0.001)
    with pytest.raises(ValueError, match="tolerance"):
        within_tolerance([1.0], 1.0, "lower", -0.1)
    with pytest.raises(ValueError, match="seconds has 2 entries for 3 epochs"):
        measure_curve([1, 2, 3], seconds=[1, 1], direction="lower")


def test_patience_rule():
    # 5 best, 4 improves, then 4, 4 do not: two in a row -> stop after epoch 4
    assert patience_stop_epoch([5, 4, 4, 4, 3], "lower", patience=2) == 4
    # relative min_delta 1%: 9.95 and 9.9 do not beat 10 - 0.1 = 9.9 strictly
    assert patience_stop_epoch([10, 9.95, 9.9, 9.85], "lower", patience=2, min_delta=0.01) == 3
    assert patience_stop_epoch([0.1, 0.2, 0.2, 0.19, 0.3], "higher", patience=2) == 4
    assert patience_stop_epoch([5, 4, 3, 2], "lower", patience=1) == 4  # never fires
    with pytest.raises(ValueError, match="patience"):
        patience_stop_epoch([1, 2], "lower", patience=0)


def test_early_stopping_outcome():
    out = early_stopping_outcome([5, 4, 4, 4, 3], direction="lower", patience=2)
    assert (out["stop_epoch"], out["stopped"], out["best_at_stop"], out["best_value"]) == (4, True, 4.0, 3.0)
    assert out["time_saved_frac"] == pytest.approx(0.2)
    assert out["regret"] == pytest.approx(1 / 3)
    out = early_stopping_outcome([0.1, 0.2, 0.2, 0.19, 0.3], seconds=[1, 1, 1, 1, 6], direction="higher", patience=2)
    assert out["time_saved_frac"] == pytest.approx(0.6)
    assert out["regret"] == pytest.approx(0.1 / 0.3)
    # non-finite epochs never improve: stop after epoch 3 of 4, having kept 1.0 instead of 0.5
    out = early_stopping_outcome([1, np.nan, np.nan, 0.5], direction="lower", patience=2)
    assert (out["stop_epoch"], out["best_at_stop"], out["regret"]) == (3, 1.0, 1.0)
    assert out["time_saved_frac"] == pytest.approx(0.25)
    out = early_stopping_outcome([5, 4, 3], direction="lower", patience=2)
    assert (out["stopped"], out["time_saved_frac"], out["regret"]) == (False, 0.0, 0.0)


def _curves(rows):
    df = pd.DataFrame(rows, columns=["source", "job", "metric", "direction", "value", "seconds", "outcome"])
    df["epoch"] = df.groupby(["source", "job", "metric"]).cumcount() + 1
    df["progress"] = df["epoch"].astype(float)
    df["seconds_kind"] = np.where(df["seconds"].notna(), "gpu", "none")
    return df


def _two_curves():
    return _curves(
        [("s", "a", "loss", "lower", v, 1.0, "passed") for v in (4.0, 2.0, 1.0)]
        + [("s", "b", "acc", "higher", v, t, "killed") for v, t in ((0.5, 1.0), (0.8, 3.0), (0.8, 1.0), (0.7, 5.0))]
    )


def test_summarize_and_early_termination_fractions():
    summary = summarize_curves(_two_curves()).set_index("job")
    assert summary.loc["a", "best_epoch"] == 3 and bool(summary.loc["a", "needs_all_epochs"])
    assert summary.loc["b", "best_epoch"] == 2 and summary.loc["b", "outcome"] == "killed"
    # b: time 1+3 of 10 to reach 0.8 at epoch 2
    assert summary.loc["b", "time_to_within_tol_frac"] == pytest.approx(0.4)
    fractions = early_termination_fractions(_two_curves()).set_index("job")
    assert list(fractions.columns) == ["source", "metric", "outcome", "n_epochs", "epoch_fraction",
                                       "time_fraction", "time_basis"]
    assert fractions.loc["a", "epoch_fraction"] == pytest.approx(1.0)
    assert fractions.loc["b", "epoch_fraction"] == pytest.approx(0.5)
    assert fractions.loc["b", "time_fraction"] == pytest.approx(0.4)


def test_effectiveness_stats_per_group():
    rows = []
    # three passed curves: two need all epochs (best last), one reaches its best at epoch 1 of 4
    for job, values in (("p1", [3, 2, 1]), ("p2", [2, 1]), ("p3", [1, 2, 3, 4])):
        rows += [("s", job, "loss", "lower", v, np.nan, "passed") for v in values]
    rows += [("s", "k1", "loss", "lower", v, np.nan, "killed") for v in (np.nan, np.nan)]
    stats = effectiveness_stats(summarize_curves(_curves(rows)), "outcome").set_index("outcome")
    assert stats.loc["passed", "curves"] == 3
    assert stats.loc["passed", "need_all_epochs_pct"] == pytest.approx(200 / 3)
    # last-band shares: 0, 0, 3/4 -> mean 25%; epochs-to-within fractions 1, 1, 1/4 -> median 100%
    assert stats.loc["passed", "mean_last_band_time_pct"] == pytest.approx(25.0)
    assert stats.loc["passed", "median_epochs_to_within_tol_pct"] == pytest.approx(100.0)
    assert stats.loc["passed", "within_tol_by_frac_pct"] == pytest.approx(100 / 3)
    assert (stats.loc["killed", "curves"], stats.loc["killed", "no_finite_value"]) == (0, 1)


def test_early_stopping_table_rows_per_patience():
    table = early_stopping_table(_two_curves(), patience_values=[1, 2])
    assert len(table) == 4
    b1 = table[(table["job"] == "b") & (table["patience"] == 1)].iloc[0]
    # b: 0.5, 0.8 improve; 0.8 does not -> patience 1 stops after epoch 3, saving 5 of 10 seconds
    assert (b1["stop_epoch"], b1["time_saved_frac"], b1["regret"]) == (3, 0.5, 0.0)
