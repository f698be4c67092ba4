"""Issue 47: the calibration holds placement to the data as a constraint, not a weight (validation/search.py,
measures.py), and the servers seen in use stay in service (sim/service.py). Hand-made tables, hand-computed answers."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dlcluster.sim.service import in_service
from dlcluster.sim.topology import Topology
from dlcluster.validation import calibrate as vc
from dlcluster.validation import measures
from dlcluster.validation import search as sr


def spanned_table(ks, real_share, sim_share) -> pd.DataFrame:
    return pd.DataFrame({"ks": ks, "real_one_server_share": real_share, "simulated_one_server_share": sim_share},
                        index=pd.Index(["2-4", "5-8", ">8"][:len(ks)], name="bucket"))


def test_the_violation_is_zero_inside_the_limits_and_the_excess_in_share_units_outside():
    # KS 0.20 and a 10-point gap are on the limits: feasible
    assert measures.constraint_violation(spanned_table([0.1, 0.2], [0.9, 0.8], [0.95, 0.7])) == \
        pytest.approx((0.2, 10.0, 0.0))
    # KS 0.25 (0.05 over) and a gap of 18 points (8 over = 0.08): 0.13
    ks_max, gap, violation = measures.constraint_violation(spanned_table([0.1, 0.25], [0.9, 0.8], [0.85, 0.62]))
    assert (ks_max, gap, violation) == pytest.approx((0.25, 18.0, 0.13))
    # nothing to judge the placement by: as far as a KS can be
    assert measures.constraint_violation(spanned_table([], [], []))[2] == 1.0


def test_the_objective_weighs_the_p90_twice_the_median_and_counts_no_error_below_a_minute():
    delays = pd.DataFrame({"real_median_s": [15.0, 100.0], "simulated_median_s": [38.0, 100.0 * math.e],
                           "real_p90_s": [3600.0, 7200.0], "simulated_p90_s": [3600.0 * math.e, 7200.0],
                           "ks_statistic": [0.2, 0.4]}, index=["2-4", "5-8"])
    ev = measures.evaluation_from_parts(4.0, -3.0, delays, spanned_table([0.1, 0.1], [0.9, 0.8], [0.9, 0.8]))
    # median: 15 s vs 38 s both floored at 60 s (0), 100 s vs 100e s (1): mean 0.5; p90: (1 + 0) / 2 = 0.5
    assert (ev.log_median_error, ev.log_p90_error, ev.mean_ks) == pytest.approx((0.5, 0.5, 0.3))
    # 4 busy + 0 shortfall (within the bound) + 5 x 0.5 + 10 x 0.5 + 2.5 x 0.3; the placement is no term
    assert ev.objective == pytest.approx(4.0 + 2.5 + 5.0 + 0.75)
    assert (ev.spanned_ks, ev.spanned_ks_max, ev.one_server_gap_pp, ev.violation) == pytest.approx((0.1, 0.1, 0, 0))


def trials_table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["trial", "objective", "violation", "spanned_ks_max", "one_server_gap_pp"])


def test_the_best_objective_set_that_violates_the_constraint_is_not_kept():
    trials = trials_table([(0, 10.0, 0.30, 0.50, 5.0),     # the best objective, placement off the data
                           (1, 20.0, 0.0, 0.18, 4.0),
                           (2, 15.0, 0.0, 0.12, 9.0),      # kept: feasible, the lowest objective among those
                           (3, 15.0, 0.0, 0.19, 2.0)])     # as good, a later trial
    assert sr.best_trial(trials)["trial"] == 2
    summary = sr.constraint_summary(trials)
    assert summary["feasible"] and summary["violation"] == 0 and summary["feasible_trials"] == 3
    assert (summary["spanned_ks_max"], summary["one_server_gap_pp"]) == (0.12, 9.0)


def test_with_none_feasible_the_closest_is_kept_and_how_close_is_recorded():
    trials = trials_table([(0, 10.0, 0.30, 0.50, 5.0),
                           (1, 30.0, 0.05, 0.25, 8.0),
                           (2, 20.0, 0.05, 0.21, 14.0),    # kept: closest (tie), then the lower objective
                           (3, 12.0, 0.06, 0.20, 16.0)])
    assert sr.best_trial(trials)["trial"] == 2
    summary = sr.constraint_summary(trials)
    assert not summary["feasible"] and summary["feasible_trials"] == 0 and summary["trials"] == 4
    assert (summary["violation"], summary["spanned_ks_max"], summary["one_server_gap_pp"]) == (0.05, 0.21, 14.0)
    assert (summary["spanned_ks_limit"], summary["one_server_gap_limit_pp"]) == (0.2, 10.0)


def test_violations_within_one_step_are_ties_the_objective_decides():
    # 0.020 and 0.031 are both one step (0.05) from feasible: the lower objective is kept; 0.051 is two steps
    assert [sr.stepped_violation(v) for v in (0.0, 0.02, 0.031, 0.05, 0.051)] == [0.0, 0.05, 0.05, 0.05, 0.1]
    trials = trials_table([(0, 62.2, 0.020, 0.12, 12.0),
                           (1, 31.2, 0.031, 0.13, 13.1),     # kept: as close, to the step, and a lower objective
                           (2, 20.0, 0.051, 0.13, 15.1)])
    assert sr.best_trial(trials)["trial"] == 1
    assert sr.constraint_summary(trials)["violation"] == 0.031    # how close, unrounded
    # TPE is told the same order: the objective plus 10,000 per unit of stepped violation
    told = [sr.told_value(measures.Evaluation(0, 0, 0, 0, 0, 0, obj, 0, 0, v)) for _, obj, v, _, _ in
            trials.itertuples(index=False)]
    assert told == pytest.approx([562.2, 531.2, 1020.0]) and sr.told_value(measures.Evaluation(*[0] * 6, 7.5)) == 7.5


def test_the_search_keeps_the_best_feasible_trial_not_the_best_objective(tmp_path):
    """A toy objective lowest at relax 300 s, whose placement is feasible only from 600 s: the search keeps the
    feasible trial with the lowest objective, and TPE is told the violation as its constraint."""
    def objective(params):
        value = abs(math.log(params.relax_after_s / 300.0))
        violation = max(0.0, (600.0 - params.relax_after_s) / 1000.0)
        return measures.Evaluation(value, 0.0, 0.0, 0.0, 0.0, 0.0, value, 0.0, 0.0, violation)

    space = {"relax_after_s": {"low": 30.0, "high": 1800.0, "log": True}}
    best, trials = sr.search(objective, vc.ReplayParams(), space, 12, tmp_path / "c.db", "c", seed=1, workers=1)
    feasible = trials[trials["violation"] == 0]
    assert len(feasible) and trials["objective"].idxmin() not in feasible.index   # the best objective is infeasible
    assert best.relax_after_s == feasible.loc[feasible["objective"].idxmin(), "relax_after_s"] >= 600.0


def test_the_polish_takes_a_feasible_move_over_a_lower_objective():
    """From an infeasible best, a move to a feasible set with a higher objective improves; among feasible moves the
    lower objective wins."""
    def objective(params):
        relax = params.relax_after_s
        return measures.Evaluation(0, 0, 0, 0, 0, 0, 1000.0 / relax, 0, 0, 0.0 if relax >= 200.0 else 0.1)

    space = {"relax_after_s": {"low": 30.0, "high": 1800.0, "log": True}}
    start = vc.ReplayParams(relax_after_s=180.0)
    best, table = sr.polish(objective, start, space, rounds=1, workers=1)
    # moves: 180 x 1.25 = 225 (feasible, objective 4.44) and 180 / 1.25 = 144 (infeasible, 6.94)
    assert best.relax_after_s == 225.0
    moves = table.set_index("moved")
    assert moves.loc["225", "improves"] and not moves.loc["144", "improves"]
    assert (moves.loc["best", "violation"], moves.loc["225", "violation"]) == (0.1, 0.0)


#: six servers: s0, s1 4-GPU; s2..s5 8-GPU
SIX = Topology(server_names=("s0", "s1", "s2", "s3", "s4", "s5"), server_gpus=(4, 4, 8, 8, 8, 8),
               server_rack=(0, 0, 0, 1, 1, 1), gpu_mem=("12GB", "12GB", "12GB", "12GB", "24GB", "24GB"))


def test_servers_seen_in_use_are_kept_in_service_first():
    # the plain rule keeps the mix: 3 of 6 -> one 4-GPU (s1: floor(0.5 x 2 / 1) = 1) and two 8-GPU (of s2..s5:
    # floor((i + 1/2) x 4 / 2) = 1, 3 -> s3, s5)
    assert in_service(SIX, 3, 16).server_names == ("s1", "s3", "s5")
    # seen s2, s4: kept; the third by the rule among the others s0, s1, s3, s5: 0.5 server of each size, the tie to
    # the lower GPU count -> a 4-GPU one, s1
    assert in_service(SIX, 3, 16, seen=("s2", "s4")).server_names == ("s1", "s2", "s4")
    # more seen than in service: the rule among the seen ones only (two of s2..s5: floor((i + 1/2) x 4 / 2) = 1, 3)
    kept = in_service(SIX, 2, 16, seen=("s2", "s3", "s4", "s5"))
    assert kept.server_names == ("s3", "s5") and kept.gpu_mem == ("12GB", "24GB")
    assert kept.excluded["servers out of service (assumed)"] == 4


def test_the_ablation_shows_the_service_rule_before_the_servers_seen_were_kept_first():
    from dlcluster.validation import heldout

    best = vc.ReplayParams(servers_in_service=360, servers_seen=("s2", "s4"))
    rows = heldout.ingredient_variants(best)
    assert rows[heldout.SPREAD_SERVICE_ROW] == vc.ReplayParams(servers_in_service=360)
    # nothing to switch where every listed server is in service, or none was seen
    assert heldout.SPREAD_SERVICE_ROW not in heldout.ingredient_variants(vc.ReplayParams(servers_seen=("s2",)))
    assert heldout.SPREAD_SERVICE_ROW not in heldout.ingredient_variants(vc.ReplayParams(servers_in_service=360))
    # the seen servers cannot act without a count in service: the same replay
    assert vc.ReplayParams(servers_seen=("s2",)).effective() == vc.ReplayParams()
