"""Issue 29's validation pieces on hand-made inputs with known answers: the targets in the record's units, the
Figure 3 comparison on a hand-made table, the attempt split and burst users, the replay's Parquet exports."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.sim import simulate, topology_from_spec
from dlcluster.sim.attempts import PLANNED_RETRY, PlannedRetries
from dlcluster.sim.workload import Workload
from dlcluster.validation import calibrate as vc, measures
from dlcluster.validation import export, fig3, ingredients
from dlcluster.validation.replay import Replay

EPOCH = pd.Timestamp("2017-10-01", tz="UTC")


def _workload(rows, vcs=None):
    names = [r[0] for r in rows]
    return Workload(jobid=np.array(names, dtype=object), vc=np.array(vcs or ["v"] * len(rows), dtype=object),
                    user=np.array([None] * len(rows), dtype=object), arrival_s=np.array([float(r[1]) for r in rows]),
                    num_gpus=np.array([r[2] for r in rows]), service_s=np.array([float(r[3]) for r in rows]),
                    epoch=EPOCH)


def _replay(rows, latency_s=None, **options):
    """A replay record of a tiny simulation on two 4-GPU servers (FIFO, best fit)."""
    w = _workload(rows)
    topology = topology_from_spec(1, 2, 4)
    result = simulate(w, topology, "fifo", slowdown=None, sample_interval_s=60.0, **options)
    return Replay(result, topology, None, True, params=vc.ReplayParams(), replay=None,
                  latency_s=np.zeros(len(rows)) if latency_s is None else np.asarray(latency_s, float))


# ----------------------------------------------------------------------------- targets in the record's units

def test_busy_servers_are_compared_as_counts_in_points_of_the_records_total():
    # the replay's 2 servers: one busy for the first hour, both for the second
    rep = _replay([("a", 0, 4, 7200), ("b", 3600, 4, 3600)])
    t = pd.date_range(EPOCH, periods=120, freq="min")
    # the record: 1 of 420 active, then 4 of 420, with a monitoring gap (active 0) left out
    occ = pd.DataFrame({"time": t, "active": [1] * 60 + [4] * 59 + [0], "total": 420})
    table = measures.busy_servers(rep.result, occ)
    assert table["simulated"].tolist() == [1.0, 2.0] and table["real"].tolist() == [1.0, 4.0]
    # |1 - 1| and |2 - 4| servers, in points of the record's 420
    span = (EPOCH, EPOCH + pd.Timedelta(hours=2))
    assert measures.busy_servers_mae_pp(rep.result, occ, span) == pytest.approx(100 * (0 + 2 / 420) / 2)
    weekly = measures.busy_by_period(rep.result, occ, span)
    assert weekly["mae_pp"].iloc[0] == pytest.approx(100 / 420) and weekly["record_total"].iloc[0] == 420


def test_gpu_allocation_is_held_against_a_lower_bound_of_the_reporting_gpus():
    cdf = pd.DataFrame({"gpu_util_percent": [0.0, 0.0, 50.0, 100.0], "cdf_percent": [0.0, 30.0, 60.0, 100.0]})
    # 30% of the reporting GPU-minutes at 0%: at least 70% of the reporting GPUs were allocated
    assert measures.real_allocated_lower_bound(cdf) == pytest.approx(0.7)
    rep = _replay([("a", 0, 4, 7200)])                       # 4 of its 8 GPUs for the whole time
    alloc = measures.gpu_allocation(rep.result, cdf, (EPOCH, EPOCH + pd.Timedelta(hours=1)))
    assert alloc["simulated_allocated_share"] == 0.5 and alloc["gpus_in_service"] == 8
    assert alloc["shortfall_pp"] == pytest.approx(20.0)      # 50% allocated, 20 points below the bound


# ----------------------------------------------------------------------------- Figure 3 on a hand-made table

HAND_MADE = pd.DataFrame({"vc": "v", "bucket": "1", "minutes": [0.1, 1.0, 3.0, 10.0, 100.0, 1000.0],
                          "cdf_percent": [10.0, 30.0, 60.0, 80.0, 100.0, 100.0],
                          "flag": ["observed"] * 5 + ["hidden"]})


def test_figure3_cell_by_hand():
    waits = pd.DataFrame({"vc": "v", "bucket": "1", "wait_s": 60.0 * np.array([0.5, 2, 4, 20, 50, 0])})
    cells = fig3.cell_table(waits, HAND_MADE, min_waits=5)
    cell = cells.loc[("v", "1")]
    # the zero is dropped (5 waits). Gaps at 0.1, 1, 3, 10, 100 min: 0.1, 0.1, 0.2, 0.2, 0 -> KS 0.2 at 3 min
    assert cell["waits"] == 5 and cell["points"] == 5 and bool(cell["scored"])
    assert cell["ks"] == pytest.approx(0.2) and cell["ks_at_min"] == 3.0
    # the curve reaches 50% at 3 min and 90% at 100 min; the replay's median is 4, its p90 20 + 0.6 x 30 = 38
    assert cell["median_ratio"] == pytest.approx(4 / 3) and cell["p90_ratio"] == pytest.approx(0.38)
    # at or under 3 minutes: the curve 60%, the replay 2 of 5
    assert cell["official_share_3min"] == pytest.approx(0.6) and cell["share_3min_diff_pp"] == pytest.approx(-20.0)
    assert fig3.summary(cells) == {"cells": 1, "median_ks": pytest.approx(0.2), "max_ks": pytest.approx(0.2),
                                   "share_3min_cells": 1, "share_3min_within": 0.0}
    # the rule: fewer than min_waits non-zero delays leave the cell unscored
    assert not fig3.cell_table(waits, HAND_MADE, min_waits=6).loc[("v", "1"), "scored"]


def test_figure3_gap_is_zero_where_the_replay_lies_within_the_lines_span():
    banded = HAND_MADE.assign(cdf_low=[10.0, 30.0, 40.0, 80.0, 100.0, 100.0],
                              cdf_high=[10.0, 30.0, 60.0, 80.0, 100.0, 100.0])
    waits = pd.DataFrame({"vc": "v", "bucket": "1", "wait_s": 60.0 * np.array([0.5, 2, 4, 20, 50])})
    cell = fig3.cell_table(waits, banded, min_waits=5).loc[("v", "1")]
    # at 3 min the line spans 40-60% and the replay is at 40%: no gap there; the largest is at 10 min
    assert cell["ks"] == pytest.approx(0.2) and cell["ks_at_min"] == 10.0


def test_figure3_gap_allows_for_the_pixel_column_of_a_digitized_point():
    # the curve steps from 30% to 60% at 3 min; the replay's step is at 2.8 min, a column to the left
    table = pd.DataFrame({"vc": "v", "bucket": "1", "minutes": [1.0, 3.0, 10.0], "cdf_percent": [30.0, 60.0, 100.0],
                          "flag": "observed"})
    waits = pd.DataFrame({"vc": "v", "bucket": "1",
                          "wait_s": 60.0 * np.array([0.5, 0.6, 0.7, 2.8, 2.8, 2.8, 5, 6, 7, 8])})
    # as points: at 3 min the replay is at 60% (no gap), at 1 min at 30%: KS 0; the step moved to 3.3 min: 0.3
    assert fig3.cell_table(waits, table, min_waits=1).loc[("v", "1"), "ks"] == pytest.approx(0.0)
    later = waits.assign(wait_s=waits["wait_s"].where(waits["wait_s"] != 168.0, 198.0))
    assert fig3.cell_table(later, table, min_waits=1).loc[("v", "1"), "ks"] == pytest.approx(0.3)
    # with the point's pixel column 2.9-3.1 min (widened by a column either side: 2.71-3.31), a step at 3.2 min meets
    # the line there (no gap); taken as a point, it is 0.3 off
    columns = table.assign(x_left=[0.97, 2.9, 9.7], x_right=[1.03, 3.1, 10.3])
    near = waits.assign(wait_s=waits["wait_s"].where(waits["wait_s"] != 168.0, 192.0))
    assert fig3.cell_table(near, columns, min_waits=1).loc[("v", "1"), "ks"] == pytest.approx(0.0)
    assert fig3.cell_table(near, table, min_waits=1).loc[("v", "1"), "ks"] == pytest.approx(0.3)


def test_figure3_table_errors_name_the_row_and_what_was_expected():
    with pytest.raises(ValueError, match="missing column"):
        fig3.check_table(HAND_MADE.drop(columns=["flag"]))
    with pytest.raises(ValueError, match=r"row 2: flag 'seen' is not one of"):
        fig3.check_table(HAND_MADE.assign(flag=["observed", "observed", "seen", "observed", "observed", "hidden"]))
    with pytest.raises(ValueError, match=r"row 0: cdf_percent '120.0' is not a number in \[0, 100\]"):
        fig3.check_table(HAND_MADE.assign(cdf_percent=[120.0, 30, 60, 80, 100, 100]))


def test_attempt_waits_count_every_attempt_as_the_official_code_does():
    # A's first attempt ends after 30 s (split) and A queues again: first in FIFO order (submitted at 0), it takes
    # its server back at once, before C (waiting since 10), which starts when B ends at 100
    rows = [("A", 0, 4, 100), ("B", 0, 4, 100), ("C", 10, 4, 50)]
    split = PlannedRetries([30.0, np.nan, np.nan])
    rep = _replay(rows, latency_s=[5.0, 5.0, 5.0], failures=split, retry=PLANNED_RETRY)
    waits = fig3.attempt_waits(rep).set_index(["jobid", "attempt"])["wait_s"]
    # first waits: overhead + queueing (C: 5 + 90); A's second attempt: its re-queue gap, 0 (kept here, dropped in
    # the comparison as the official code drops it)
    assert waits.to_dict() == {("A", 0): 5.0, ("A", 1): 0.0, ("B", 0): 5.0, ("C", 0): 95.0}
    with_overhead = fig3.attempt_waits(rep, retry_overhead_s=[7.0]).set_index(["jobid", "attempt"])["wait_s"]
    assert with_overhead[("A", 1)] == 7.0 and with_overhead[("C", 0)] == 95.0
    table = pd.DataFrame({"vc": "v", "bucket": "2-4", "minutes": [0.05, 2.0], "cdf_percent": [50.0, 100.0],
                          "flag": "observed"})
    assert fig3.cell_table(fig3.attempt_waits(rep), table, min_waits=1).loc[("v", "2-4"), "waits"] == 3


# ----------------------------------------------------------------------------- the attempt split, burst users

def test_attempt_split_is_read_off_the_records_and_drawn_per_job():
    waits = pd.DataFrame({"recorded_wait_s": [100.0, 1000.0, 50.0, 3000.0], "first_wait_s": [100.0, 100.0, 50.0, 0.0],
                          "run_time_s": [500.0, 900.0, 10.0, 1000.0]})
    split = ingredients.fit_attempt_split(waits)
    # two of four records started their last attempt > 60 s after their first: 900 of 1800 s, 3000 of 4000 s
    assert split[0] == 0.5 and split[1] == 0.5 and split[-1] == 0.75 and len(split) == 1 + ingredients.SPLIT_POINTS
    first = ingredients.planned_first_attempts(np.full(20000, 1000.0), split, seed=3)
    planned = np.isfinite(first)
    assert planned.mean() == pytest.approx(0.5, abs=0.02)
    assert first[planned].min() >= 500.0 and first[planned].max() <= 750.0
    again = ingredients.planned_first_attempts(np.full(20000, 1000.0), split, seed=3)
    np.testing.assert_array_equal(first, again)
    assert np.isnan(ingredients.planned_first_attempts([1000.0], (0.0,))).all()


def test_burst_users_group_one_sizes_submissions_to_one_vc():
    w = _workload([("a", 0, 1, 1), ("b", 30, 1, 1), ("c", 100, 1, 1), ("d", 30, 2, 1), ("e", 40, 1, 1)],
                  vcs=["v", "v", "v", "v", "w"])
    users = ingredients.burst_users(w, gap_s=60.0)
    # a and b: one burst (30 s apart); c starts another (70 s later); d (another size) and e (another VC) their own;
    # bursts numbered by their first submission: a 0 s, d 30 s, e 40 s, c 100 s
    assert users.tolist() == ["burst-0", "burst-0", "burst-3", "burst-1", "burst-2"]


# ----------------------------------------------------------------------------- exports

def test_replay_exports_give_every_attempt_and_every_minute():
    rows = [("A", 0, 4, 100), ("B", 0, 4, 100), ("C", 10, 4, 50)]
    rep = _replay(rows, latency_s=[5.0, 5.0, 5.0], failures=PlannedRetries([30.0, np.nan, np.nan]), retry=PLANNED_RETRY)
    attempts, minutes = export.replay_tables(rep)
    assert list(attempts.columns) == list(export.ATTEMPT_COLUMNS)
    a = attempts[attempts["jobid"] == "A"]
    # A's real submit is its arrival less the 5 s overhead; two attempts, on the same server
    assert (a["submitted"] == EPOCH - pd.Timedelta(seconds=5)).all()
    assert a["attempt"].tolist() == [0, 1] and a["outcome"].tolist() == ["failed", "finished"]
    assert a["start"].tolist() == [EPOCH, EPOCH + pd.Timedelta(seconds=30)] and a["servers"].tolist() == ["m0", "m0"]
    assert a["end"].iloc[1] == EPOCH + pd.Timedelta(seconds=100)   # 30 s done, 70 s left
    assert list(minutes.columns) == list(export.MINUTE_COLUMNS)
    first = minutes.iloc[0]
    assert (first["allocated_gpus"], first["busy_servers"], first["gpus_in_service"]) == (8, 2, 8)
    assert minutes.loc[minutes["time"] == EPOCH + pd.Timedelta(minutes=1), "pending_jobs_2-4"].item() == 1   # C waits
    assert minutes.loc[minutes["time"] == EPOCH + pd.Timedelta(minutes=1), "pending_gpus_2-4"].item() == 4
