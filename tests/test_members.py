"""The ensemble's members (experiments.members): which replays the data allow, and what each changes."""

from types import SimpleNamespace

import pandas as pd
import pytest

from dlcluster import experiments as E
from dlcluster.experiments import members as M
from dlcluster.validation.calibrate import ReplayParams


def _calibration():
    params = ReplayParams(placement="best_fit", gpu_pools=False, relax_after_s=230.0)
    # violations 0.0026 and 0.04 step to 0.05 (one step: allowed), 0.17 to 0.2 (not); the calibrated placement's own
    # trial (best fit, one pool) never counts as a variant
    trials = pd.DataFrame({"trial": [0, 1, 2, 3, 4],
                           "placement": ["best_fit", "most_free", "best_fit", "packed", "best_fit"],
                           "gpu_pools": [True, True, True, True, False],
                           "relax_after_s": [100.0, 200.0, 300.0, 400.0, 500.0],
                           "violation": [0.0026, 0.04, 0.01, 0.17, 0.0],
                           "objective": [26.4, 45.9, 20.0, 10.0, 5.0]})
    return SimpleNamespace(params=params, trials=trials, replay="the replay")


def test_placement_variants_are_the_best_allowed_trial_of_each_other_placement():
    got = M.placement_variants(_calibration(), limit=5)
    # best fit + pools: trial 2 (objective 20 beats trial 0's 26.4); spreading + pools: trial 1; packed is too far
    assert list(got) == ["placement: best fit + GPU-type pools", "placement: spreading (most free) + GPU-type pools"]
    assert got["placement: best fit + GPU-type pools"]["relax_after_s"] == 300.0
    assert list(M.placement_variants(_calibration(), limit=1)) == ["placement: best fit + GPU-type pools"]


def test_apply_member_changes_only_what_the_member_names():
    cal = _calibration()
    assert M.apply_member("calibrated", "public", cal, None, None) == ("the replay", cal.params, 0, None)
    replay, params, seed, model = M.apply_member("slowdown 0.47", "public", cal, None, None)
    assert (replay, params, seed) == ("the replay", cal.params, 0)
    assert model.cross_server == model.cross_rack == 0.47 and model.colocated_one_server == 1.0
    _, params, _, model = M.apply_member("placement: best fit + GPU-type pools", "public", cal, None, None)
    assert model is None and params.gpu_pools is True and params.relax_after_s == 300.0
    assert params.placement == "best_fit"
    with pytest.raises(ValueError, match="unknown ensemble member 'slowdown'"):
        M.apply_member("slowdown", "public", cal, None, None)
    with pytest.raises(ValueError, match="no such placement variant"):
        M.apply_member("placement: Philly's packing + GPU-type pools", "public", cal, None, None)


def test_the_slowdown_ends_are_the_extremes_of_the_six_measured_models():
    from dlcluster.sim.slowdown import spread_factor_from_placements

    median, per_model = spread_factor_from_placements()
    low, high = M.slowdown_ends()
    assert len(per_model) == 6
    assert low == round(min(per_model.values()), 2) and high == round(max(per_model.values()), 2)
    assert low < median < high


def test_member_names_and_choices():
    names = M.member_names(_calibration(), draws=(1, 2), placements=1)
    low, high = M.slowdown_ends()
    assert names == ["calibrated", f"slowdown {low:.2f}", f"slowdown {high:.2f}", "VC and latency draw 1",
                     "VC and latency draw 2", "placement: best fit + GPU-type pools"]
    from dlcluster.experiments.ensemble import member_choice
    assert [member_choice(n) for n in names] == ["calibrated", "slowdown", "slowdown", "VC and latency draw",
                                                 "VC and latency draw", "placement"]


def test_ensemble_cells_run_only_the_arms_the_implications_compare_on_each_other_member():
    spec = E.grid_spec("small")
    cells = E.ensemble_cells(spec, "public", "fp", [0], 230.0, None, {"none": (1.0, 1.0), "paper": (0.66, 0.76)},
                             ["calibrated", "slowdown 0.47"])
    arms = sorted(tuple(sorted((k, str(v)) for k, v in c.items() if k in ("experiment", "locality", "long_jobs",
                                                                           "placement", "migration", "tolerance",
                                                                           "policy", "interference", "relax_after_s")))
                  for c in cells)
    assert len(cells) == 10 and {c["replay"]["member"] for c in cells} == {"slowdown 0.47"}
    experiments = pd.Series([c["experiment"] for c in cells]).value_counts().to_dict()
    # locality: strict, any, relax after the calibrated timeout, long jobs migrated (oracle); interference under
    # 'paper' only: spread, pack, isolate gangs + migration; early stop: off + one tolerance; Philly (shared)
    assert experiments == {"locality": 4, "interference": 3, "early_stop": 2, "policy": 1}, arms
    assert {c["interference"] for c in cells if c["experiment"] == "interference"} == {"paper"}
    same_as = E.shared_simulations(cells)
    assert len({str(sorted(same_as(c).items())) for c in cells}) == 9   # early stop's arm without it is Philly's run


def test_member_of_reads_the_cells_replay_parameter():
    table = pd.DataFrame({"replay": ['{"block_days": 7.0, "member": "slowdown 0.93"}', '{"block_days": 7.0}', None]})
    assert M.member_of(table).tolist() == ["slowdown 0.93", "calibrated", "calibrated"]


def test_a_pooled_member_runs_no_migrating_arm_and_is_not_asked_about_one():
    spec = E.grid_spec("small")
    pooled = "placement: best fit + GPU-type pools"
    cells = E.ensemble_cells(spec, "public", "fp", [0], 230.0, None, {"paper": (0.66, 0.76)}, ["calibrated", pooled])
    # the 10 cells of a member less the oracle migration and the isolated gangs (which migrate to defragment)
    assert len(cells) == 8 and not any(E.grid._migrates(c) for c in cells)
    from dlcluster.experiments.ensemble import ensemble_answers
    from dlcluster.experiments.implications import Answer, NOT_IN_GRID
    from dlcluster.experiments.intervals import Interval
    down = Interval(-0.1, -0.2, -0.05, 7, "test")
    got = ensemble_answers({"calibrated": [Answer("migrate long jobs", "supported", "", down, "mechanism", "")],
                            pooled: [Answer("migrate long jobs", NOT_IN_GRID, "", None, "mechanism", "")]})
    assert got[0].answer == "supported" and [m.name for m in got[0].members] == ["calibrated"]


def test_draw_runs_are_the_steady_draw_members():
    from dlcluster.experiments.ensemble import draw_runs

    def philly(member, waits_h):
        return pd.DataFrame([{"replay": '{"member": "%s"}' % member, "experiment": "policy", "arm": "Philly",
                              "bucket": "all", "population": "all jobs", "load_label": "L", "seed": b,
                              "block": b, "block_days": 7.0, "jobs": 100, "rejected": 0,
                              "wait_total_mean_s": w * 3600.0, "jct_mean_s": (100 + w) * 3600.0}
                             for b, w in enumerate(waits_h)])

    steady, growing = [1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.9], [1, 5, 10, 20, 30, 45, 60]
    table = pd.concat([philly("VC and latency draw 1", steady), philly("VC and latency draw 2", growing),
                       philly("slowdown 0.47", steady)], ignore_index=True)
    members = ["calibrated", "slowdown 0.47", "VC and latency draw 1", "VC and latency draw 2"]
    runs = draw_runs(table, members, "L")
    # only draw 1: draw 2's replay as calibrated has no steady state, and a slowdown member is no other draw
    assert len(runs) == 1 and set(M.member_of(runs[0])) == {"VC and latency draw 1"}
    assert draw_runs(None, members, "L") == [] and draw_runs(table, ["calibrated"], "L") == []
    assert M.is_draw("VC and latency draw 3") and not M.is_draw("slowdown 0.93")
