"""The figure defects issue 49 names, fixed and held: notebook 06's policy changes on a readable ratio axis with one
legend beside the panels, and notebook 01's Figure 3 grid without empty panels and with one legend outside."""

import matplotlib

matplotlib.use("Agg", force=False)

import numpy as np
import pandas as pd
import pytest

from dlcluster.experiments.plots import plot_paired_changes, ratio_ticks
from dlcluster.report.plotting import figure_problems


@pytest.mark.parametrize("lo, hi, labels", [
    (0.85, 1.2, ["-10%", "0", "+10%"]),
    (0.45, 2.2, ["-50%", "-30%", "0", "+50%", "+100%"]),
    (0.09, 1.2, ["÷10", "÷5", "÷2", "same"]),
    (0.0008, 120.0, ["÷1,000", "÷100", "÷10", "same", "×10", "×100"]),
])
def test_ratio_ticks_read_as_changes_or_factors(lo, hi, labels):
    ticks, shown = ratio_ticks(lo, hi)
    assert shown == labels and all(lo <= t <= hi for t in ticks)


def test_a_wide_range_has_at_most_about_seven_ticks():
    ticks, shown = ratio_ticks(1e-8, 1e8)
    assert shown == ["÷1,000,000", "÷1,000", "same", "×1,000", "×1,000,000"]


def test_policy_changes_figure_legend_outside_and_no_percent_of_thousands():
    import matplotlib.pyplot as plt

    arms, buckets = ["FIFO", "SRTF (oracle bound)", "Tiresias 2D-LAS"], ["all", "1", "2-4"]
    rows = []
    for panel, scale in (("mean JCT", 1.0), ("every wait", 50.0)):
        for a, arm in enumerate(arms):
            for b, bucket in enumerate(buckets):
                mean = (0.01 if arm.startswith("SRTF") else 1.0 + 0.1 * b) * (scale if a == 2 else 1.0)
                rows.append({"panel": panel, "arm": arm, "bucket": bucket, "mean": mean - 1,
                             "ci_low": mean * 0.8 - 1, "ci_high": mean * 1.25 - 1})
    fig = plot_paired_changes(pd.DataFrame(rows), ["mean JCT", "every wait"], "panel", arms, buckets,
                              {"all": "k", "1": "b", "2-4": "g"}, "Policies", "Philly", "change against Philly")
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    labels = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
    assert "÷100" in labels and not any(t.endswith("00%") for t in labels)
    assert figure_problems(fig) == []
    plt.close(fig)


def test_a_grid_hides_the_slots_past_its_panels_and_has_one_legend_beside_it():
    import matplotlib.pyplot as plt

    from dlcluster.validation.plots import grid_of, size_style_legend

    fig, axes = grid_of(11, 4, sharey=True)
    assert len(axes) == 11 and len(fig.axes) == 12 and sum(ax.get_visible() for ax in fig.axes) == 11
    rng = np.random.default_rng(0)
    for k, ax in enumerate(axes):
        x = np.sort(rng.lognormal(size=200), kind="stable")
        ax.plot(x, np.linspace(0, 100, 200), color="b", lw=3, alpha=0.35)
        ax.step(x * 1.1, np.linspace(0, 100, 200), color="b", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("queueing delay (min, log scale)")
        ax.set_title(f"VC {k}")
    for ax in axes[::4]:   # each row's first panel names the shared y axis
        ax.set_ylabel("CDF of waits (%)")
    legend = size_style_legend(fig, {"2-4": "g", "5-8": "r"}, "full trace", "ours", {"lw": 3, "alpha": 0.35}, {"lw": 1})
    assert [t.get_text() for t in legend.get_texts()] == ["2-4 GPU", "5-8 GPU", "full trace", "ours"]
    assert all(ax.get_legend() is None for ax in fig.axes)
    assert figure_problems(fig) == []
    plt.close(fig)


def test_a_range_of_a_few_decades_gets_ticks_at_2_and_5_too():
    assert ratio_ticks(0.045, 3.0)[1] == ["÷20", "÷10", "÷5", "÷2", "same", "×2"]
