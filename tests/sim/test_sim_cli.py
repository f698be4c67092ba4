"""Command line (``python -m dlcluster.sim`` / ``dlcluster simulate``) and the full public replay."""

from __future__ import annotations

import argparse
import json

import pandas as pd
from sim_helpers import check_invariants

from dlcluster.sim import public_inputs, simulate
from dlcluster.sim.cli import add_parser, main


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


def test_full_replay_of_the_public_jobs_on_the_public_cluster():
    inputs = public_inputs()
    result = simulate(inputs.workload, inputs.topology, "philly", quotas=inputs.quotas)
    assert (result.jobs["status"] == "Pass").all() and len(result.jobs) == 82247
    check_invariants(result, inputs.workload, inputs.topology)
    # the public jobs are a light load for the reconstructed 3,205 GPUs: almost no waiting
    assert result.summary["queueing_delay_s"]["median"] == 0
    assert result.timeseries["allocated_gpus"].max() <= 3205
