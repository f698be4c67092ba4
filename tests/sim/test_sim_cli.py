"""Command line (``dlcluster simulate``) and the full public replay."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pandas as pd
from sim_helpers import check_invariants

from dlcluster.cli import build_parser
from dlcluster.cli import main as dlcluster_main
from dlcluster.sim import PhillyPolicy, public_inputs, simulate
from dlcluster.sim.cli import WORKLOADS, add_parser


def main(argv):
    return dlcluster_main(["simulate", *argv])


def test_cli_writes_tables_summary_and_raw_trace(tmp_path, capsys):
    code = main(["--generate", "300", "--topology", "1x4x8", "--policy", "las", "--migration", "--failures",
                 "default", "--retry", "prerun", "--early-stop", "--no-progress", "--out", str(tmp_path),
                 "--raw-trace", "--util-hours", "1"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["jobs"] == 300 and summary["policy"].startswith("LasPolicy")
    jobs = pd.read_parquet(tmp_path / "jobs.parquet")
    assert len(jobs) == 300 and set(jobs["status"]) <= {"Pass", "Failed", "Rejected"}
    assert len(pd.read_parquet(tmp_path / "attempts.parquet")) >= 300 - (jobs["status"] == "Rejected").sum()
    assert "allocated_gpus" in pd.read_parquet(tmp_path / "timeseries.parquet")
    assert json.loads((tmp_path / "summary.json").read_text())["jobs"] == 300
    assert {p.name for p in (tmp_path / "raw").iterdir()} == {
        "cluster_job_log", "cluster_gpu_util", "cluster_machine_list", "metadata.json", "README.md"}


def test_cli_errors_are_clear(capsys):
    assert main(["--generate", "10", "--topology", "2x3", "--no-progress"]) == 2
    assert "RACKSxSERVERSxGPUS" in capsys.readouterr().err
    assert main(["--generate", "10", "--topology", "1x1x8", "--policy", "las", "--las-thresholds", "1,x",
                 "--no-progress"]) == 2
    assert "--las-thresholds" in capsys.readouterr().err


def test_add_parser_plugs_into_a_main_cli():
    parser = argparse.ArgumentParser(prog="dlcluster")
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["simulate", "--policy", "srtf", "--no-lending"])
    assert args.command == "simulate" and args.policy == "srtf" and args.no_lending and callable(args.func)


def test_default_workload_is_the_calibrated_replay_of_every_rfold_job(tmp_path, capsys, monkeypatch):
    """With no option, every RFold job with the cached calibration's parameters; the summary names them all."""
    from dlcluster.validation import calibration as vcache

    real = vcache.calibrated_params
    small = {"fit_days": 2, "replay_days": 3, "warmup_days": 1, "n_trials": 2, "cache_dir": tmp_path / "cache"}
    monkeypatch.setattr(vcache, "calibrated_params", lambda trace, cache_dir=None: real(trace, **small))
    assert main(["--out", str(tmp_path / "run"), "--no-progress"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    calibration = real("public", **small)
    assert summary["jobs"] == 111549 and summary["workload"].startswith("calibrated replay: 111,549 real RFold jobs")
    assert summary["calibrated_parameters"] == calibration.params.label()
    assert summary["validation_held_out"]["summary"] == calibration.summary()
    # the calibrated sharing and Philly's calibrated locality and relax clock (issue 47) are what ran
    params = calibration.params
    assert summary["policy"] == repr(PhillyPolicy(locality=params.locality, backoff=params.backoff,
                                                  relax_clock=params.relax_clock))
    assert summary["lending"] is True and summary["placement"] == f"LocalityPlacement({calibration.params.placement!r})"
    assert "calibrated replay" in captured.err
    assert len(pd.read_parquet(tmp_path / "run" / "jobs.parquet")) == 111549


def test_workloads_are_explained_by_help(capsys):
    parser = build_parser()
    args = parser.parse_args(["simulate"])
    assert args.workload == "calibrated"
    assert parser.parse_args(["simulate", "--workload", "pollux"]).workload == "pollux"
    simulate = parser._subparsers._group_actions[0].choices["simulate"]
    text = next(a for a in simulate._actions if a.dest == "workload").help
    assert "111,549" in text and "82,247" in text and "passed jobs only" in text
    assert set(WORKLOADS) == {"calibrated", "pollux"}


def test_full_replay_of_the_public_jobs_on_the_public_cluster():
    inputs = public_inputs()
    result = simulate(inputs.workload, inputs.topology, "philly", quotas=inputs.quotas)
    assert (result.jobs["status"] == "Pass").all() and len(result.jobs) == 82247
    check_invariants(result, inputs.workload, inputs.topology)
    # the public jobs are a light load for the reconstructed 3,205 GPUs: almost no waiting
    assert result.summary["queueing_delay_s"]["median"] == 0
    assert result.timeseries["allocated_gpus"].max() <= 3205


def test_calibrated_options_take_the_calibration_and_the_flags_on_top():
    from dlcluster.sim.cli import CalibratedInputs, calibrated_options
    from dlcluster.sim.sharing import Reclaim

    inputs = CalibratedInputs(None, None, {"a": 8}, {"lending": True, "max_capacity": {"a": 12}, "reclaim": Reclaim(),
                                                      "placement": "most_free", "slowdown": None},
                              "any", 95.0, {})
    args = build_parser().parse_args(["simulate"])
    args.policy = "philly"
    options = calibrated_options(args, inputs)
    assert repr(options["policy"]) == "PhillyPolicy(locality='any')" and options["policy"].relax_after_s == 95.0
    assert options["max_capacity"] == {"a": 12} and options["slowdown"] is None and options["placement"] == "most_free"
    # the flags win: another relax timeout and locality, and no lending drops the caps and the reclaim
    args = build_parser().parse_args(["simulate", "--relax-after", "30", "--locality", "strict", "--no-lending"])
    args.policy = "philly"
    options = calibrated_options(args, inputs)
    assert options["policy"].relax_after_s == 30.0 and options["policy"].locality == "strict"
    assert options["lending"] is False and "max_capacity" not in options and "reclaim" not in options
    # the calibrated relax clock (issue 47) reaches Philly's policy
    options = calibrated_options(args, replace(inputs, relax_clock="headroom"))
    assert options["policy"].relax_clock == "headroom"
