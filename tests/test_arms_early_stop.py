"""Early termination's saved share with an interval over the real curves (not over weeks of jobs)."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.experiments import early_stop
from dlcluster.experiments.intervals import Interval

# three hand-made curves: within the tolerance after 20%, 50% and 80% of their time
THREE = pd.DataFrame({"job": ["a", "b", "c"], "time_fraction": [0.2, 0.5, 0.8], "quality_lost": [0.0, 0.0, 0.0]})


def test_the_saved_share_is_gpu_time_weighted_and_its_interval_resamples_the_curves():
    # four jobs of equal GPU time stop at curves a, b, c, c: 1 - (0.2 + 0.5 + 0.8 + 0.8) / 4 = 0.425
    saved = early_stop.curve_bootstrap_saving(THREE, [0, 1, 2, 2], [1.0, 1.0, 1.0, 1.0])
    assert saved.mean == pytest.approx(0.425) and saved.n == 3
    assert saved.method == "percentile bootstrap over the 3 curves (10,000 resamples)"
    # a resample redraws the three curves: 27 equally likely outcomes; every curve 0.8 (saved 1 - 0.8 = 0.2) and
    # every curve 0.2 (saved 0.8) each have probability 1/27 = 3.7% > 2.5%: they are the 95% interval's ends
    assert (saved.low, saved.high) == pytest.approx((0.2, 0.8))
    # weights: a job twice as long counts twice: 2 x 0.2 + 0.5 over 3 -> 1 - 0.9 / 3 = 0.7
    assert early_stop.curve_bootstrap_saving(THREE, [0, 1], [2.0, 1.0]).mean == pytest.approx(0.7)


def test_more_jobs_do_not_narrow_an_interval_that_rests_on_the_curves():
    few = early_stop.curve_bootstrap_saving(THREE, [0, 1, 2], [1.0, 1.0, 1.0])
    many = early_stop.curve_bootstrap_saving(THREE, np.repeat([0, 1, 2], 1000), np.ones(3000))
    assert (many.mean, many.low, many.high) == pytest.approx((few.mean, few.low, few.high))
    # curves that agree leave nothing to resample: the interval is the point
    same = THREE.assign(time_fraction=0.5)
    flat = early_stop.curve_bootstrap_saving(same, [0, 1, 2], [1.0, 5.0, 2.0])
    assert (flat.mean, flat.low, flat.high) == pytest.approx((0.5, 0.5, 0.5))
    with pytest.raises(ValueError, match="2 picks for 3 jobs"):
        early_stop.curve_bootstrap_saving(THREE, [0, 1], [1.0, 1.0, 1.0])


def test_the_picks_are_the_early_stop_arms_draw():
    from dlcluster.sim.workload import Workload
    n = 50
    w = Workload(jobid=np.array([f"j{i}" for i in range(n)], dtype=object), vc=np.array(["vc"] * n, dtype=object),
                 user=np.array(["u"] * n, dtype=object), arrival_s=np.arange(n, dtype=float),
                 num_gpus=np.ones(n, dtype=np.int64), service_s=np.full(n, 100.0),
                 epoch=pd.Timestamp("2017-10-03", tz="UTC"))
    _, _, stopped, _ = early_stop.options({"tolerance": 0.01, "curve_source": "pollux", "seed": 3}, w, {}, None)
    points = early_stop.early_stop_points("pollux", 0.01)
    pick = early_stop.curve_picks(n, len(points), 3)
    np.testing.assert_array_equal(stopped.converge_frac, early_stop.stop_fractions(points)[pick])


def test_the_saving_is_printed_beside_the_papers_62_percent_as_another_quantity():
    text = early_stop.saving_beside_paper(Interval(0.168, 0.12, 0.2, 40, "percentile bootstrap over the 40 curves"),
                                          0.001)
    assert text.startswith("16.8% [95% CI 12.0%, 20.0%] of GPU time saved at a tolerance of 0.1%: the share of the "
                           "replay's GPU time")
    assert ("The paper's 62% is another quantity: the share of GPU time spent on the last 0.1% loss improvement, "
            "passed jobs (mean) (section 4.1, provenance: summary)") in text
