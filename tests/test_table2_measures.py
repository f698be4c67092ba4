"""Table 2's two measures, defined and kept apart: each cause's share of the waiting SECONDS, and how often it is the
largest part of a wait (a FREQUENCY over the jobs that waited); and a finding that names a direction only when the
shares differ by a point or more and their intervals do not overlap."""

import math

import numpy as np
import pandas as pd
import pytest

from dlcluster.analysis.table2 import (MATERIAL_SHARE, causes_by_bucket, fragmentation_endings,
                                      fragmentation_endings_finding, table2_finding, table2_frequency_finding)

COLUMNS = {"fair_share": "fs", "fragmentation": "frag"}


def _jobs(gpus, fs, frag):
    return pd.DataFrame({"num_gpus": gpus, "fs": np.asarray(fs, float), "frag": np.asarray(frag, float)})


def test_a_cause_can_dominate_by_count_and_not_by_seconds():
    # 5-8 GPUs: nine jobs wait a minute for a local placement, one waits two days for a quota; three never wait
    jobs = _jobs([8] * 13, [0] * 9 + [172800] + [0] * 3, [60] * 9 + [0] * 4)
    row = causes_by_bucket(jobs, COLUMNS).loc["5-8"]
    assert (row["waits"], row["waited"]) == (13, 10)
    assert row["fragmentation_frequency"] == pytest.approx(0.9) and row["fair_share_frequency"] == pytest.approx(0.1)
    assert row["fragmentation_share"] == pytest.approx(540 / (540 + 172800))
    assert row["fragmentation_median_wait_s"] == 60 and row["fair_share_median_wait_s"] == 172800
    text = table2_frequency_finding(causes_by_bucket(jobs, COLUMNS))
    assert text == ("By count, the largest cause of each wait: 5-8 GPUs: of 10 that waited, fair-share 10% (median "
                    "wait 2.0 d), fragmentation 90% (median wait 1.0 min).")


def test_share_intervals_stay_in_0_1_and_hold_the_share():
    rng = np.random.default_rng(0)
    jobs = _jobs([16] * 200, rng.exponential(3600, 200) * (rng.random(200) < 0.3), rng.exponential(60, 200))
    row = causes_by_bucket(jobs, COLUMNS).loc[">8"]
    for cause in COLUMNS:
        assert 0 <= row[f"{cause}_share_low"] <= row[f"{cause}_share"] <= row[f"{cause}_share_high"] <= 1


def test_a_share_of_a_hundredth_of_a_percent_is_no_direction():
    # the issue's case: 0.016% of the largest jobs' waiting against 0% of the smallest's
    table = pd.DataFrame({"fragmentation_share": [0.0, 0.0, 0.0, 0.00016], "fair_share_share": [1.0, 1.0, 1.0, 0.99984],
                          "other_share": [0.0] * 4}, index=pd.Index(["1", "2-4", "5-8", ">8"], name="bucket"))
    text = table2_finding(table)
    assert "0.016% (>8 GPUs)" in text and "larger for the largest" not in text and "it grows" not in text
    assert f"not larger than the smallest's by {MATERIAL_SHARE:.0%}" in text


def test_overlapping_intervals_are_no_direction():
    table = pd.DataFrame({"fragmentation_share": [0.10, 0.30], "fragmentation_share_low": [0.0, 0.05],
                          "fragmentation_share_high": [0.4, 0.6], "fair_share_share": [0.9, 0.7]},
                         index=pd.Index(["2-4", ">8"], name="bucket"))
    assert "no significant difference between the smallest and the largest jobs" in table2_finding(table)
    table["fragmentation_share_low"] = [0.05, 0.25]
    table["fragmentation_share_high"] = [0.15, 0.35]
    assert "it grows with job size" in table2_finding(table)


def test_a_bucket_that_never_waited_has_no_measure():
    row = causes_by_bucket(_jobs([2, 2], [0, 0], [0, 0]), COLUMNS).loc["2-4"]
    assert row["waited"] == 0 and math.isnan(row["fragmentation_share"]) and math.isnan(row["fragmentation_frequency"])


# --------------------------------------------------------------------------- how fragmentation ended

ENDS = {"relaxed": "to", "placed": "pl", "contended": "co"}


def _endings(gpus, timeout, placed, contended):
    return pd.DataFrame({"num_gpus": gpus, "to": np.asarray(timeout, float), "pl": np.asarray(placed, float),
                         "co": np.asarray(contended, float)})


def test_fragmentation_endings_split_the_seconds_by_how_each_stretch_ended():
    # 2-4 GPUs: three jobs wait out a 180-s timeout, one gets a server after 60 s, one never waits for locality;
    # >8 GPUs: one job's locality wait ends when its GPUs are taken, after 30 s
    table = _endings([4, 4, 4, 4, 4, 16], [180, 180, 180, 0, 0, 0], [0, 0, 0, 60, 0, 0], [0, 0, 0, 0, 0, 30])
    out = fragmentation_endings(table, ENDS)
    row = out.loc["2-4"]
    assert (row["rows"], row["fragmented"]) == (5, 4)
    assert row["fragmentation_h"] == pytest.approx(600 / 3600)
    assert row["relaxed_share"] == pytest.approx(540 / 600) and row["placed_share"] == pytest.approx(60 / 600)
    assert row["contended_share"] == 0 and math.isnan(row["contended_median_s"])
    assert (row["median_fragmentation_s"], row["relaxed_median_s"], row["placed_median_s"]) == (180, 180, 60)
    assert out.loc[">8", "contended_share"] == 1.0
    text = fragmentation_endings_finding(out, relax_after_s=180)
    # 540 of 630 s ended at the timeout: the timer's, not a finding
    assert ("overall 86% of it ended at the relax timeout (3.0 min): this fragmentation is mostly the relax "
            "timer") in text
    assert "2-4 GPUs: 10.0 min over 4 jobs, 90% at the relax timeout, 10% by a placement freeing up" in text


def test_fragmentation_that_ends_with_placements_is_the_mechanisms():
    out = fragmentation_endings(_endings([8, 8, 8], [180, 0, 0], [0, 400, 300], [0, 0, 0]), ENDS)
    text = fragmentation_endings_finding(out)
    assert "overall 20% of it ended at the relax timeout; the rest ended with the cluster's state" in text
    assert fragmentation_endings_finding(fragmentation_endings(_endings([8], [0], [0], [0]), ENDS)).startswith(
        "No fragmentation delay")


def test_the_simulators_table2_counts_a_back_off_timer_alone_as_other():
    from dlcluster.analysis.table2 import SIM_CAUSE_COLUMNS
    # one 4-GPU job: 100 s fair-share, 50 s back-off of which 20 s held by the timer alone and 30 s without a local
    # placement (ended at the timeout)
    jobs = pd.DataFrame({"num_gpus": [4], "delay_fair_share_s": [100.0], "delay_backoff_s": [50.0],
                         "delay_fragmentation_s": [0.0], "held_by_timer_s": [20.0], "locality_relaxed_s": [30.0],
                         "locality_placed_s": [0.0], "locality_contended_s": [0.0]})
    row = causes_by_bucket(jobs, SIM_CAUSE_COLUMNS).loc["2-4"]
    assert row[["fair_share_share", "fragmentation_share", "other_share"]].tolist() == pytest.approx([2 / 3, 0.2,
                                                                                                      2 / 15])
