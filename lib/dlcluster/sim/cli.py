"""Command line: ``dlcluster simulate ...`` (also ``python -m dlcluster simulate ...``).

The main CLI adds this command with ``add_parser(subparsers, calibrated)``:
``calibrated(trace, echo)`` gives the calibrated replay (:class:`CalibratedInputs`),
which lives in a later stage of the library (``dlcluster.validation``), so the
simulator does not import it. The parser's ``func`` default is :func:`run`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable

from ..trace.jobtable import FIELDS as JOB_TABLE_FIELDS
from ..trace.jobtable import NO_VC_FLAG, SINGLE_VC
from .policies import POLICIES


#: What each ``--workload`` replays (``--help`` shows it).
WORKLOADS = {
    "calibrated": "the default: every one of RFold's 111,549 real Philly jobs (every status) on the calendar, "
                  "with the parameters notebook 05 calibrated on the fit span (VC sharing, reclaim, locality, "
                  "scheduler overhead) and their held-out validation figures; computed once, then cached",
    "pollux": "the 82,247 Pollux jobs: passed jobs only, about a third of Philly's demand (the cluster is "
              "under-loaded: no queues form); the simulator's defaults",
}


@dataclass(frozen=True)
class CalibratedInputs:
    """The calibrated replay, as the simulator runs it (built by ``dlcluster.validation``)."""

    workload: object       # Workload, scheduler overhead added to the arrivals
    topology: object
    quotas: dict
    options: dict          # sharing (lending, caps, reclaim), placement, slowdown None (the real durations hold it)
    locality: str
    relax_after_s: float
    description: dict      # what the summary says: workload, parameters, validation figures
    backoff: str = "gangs"  # the calibrated back-off scope of Philly's policy (sim/backoff.py)
    relax_clock: str = "first_pass"   # when its relax timer runs (sim/policies/base.py RELAX_CLOCKS)


def add_parser(subparsers, calibrated: Callable | None = None) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "simulate", help="simulate a Philly-like GPU cluster (replay the real jobs or run an experiment)",
        description="Replay a workload on a simulated Philly cluster under a scheduling policy. By default the "
                    "calibrated replay of every real RFold job; writes jobs/attempts/timeseries Parquet tables and "
                    "summary.json to --out; --raw-trace also writes the run in the raw Philly trace format.")
    _add_arguments(parser, calibrated is not None)
    parser.set_defaults(func=partial(run, calibrated=calibrated))
    return parser


def _add_arguments(p: argparse.ArgumentParser, with_calibrated: bool = False) -> None:
    choices = [w for w in WORKLOADS if with_calibrated or w != "calibrated"]
    p.add_argument("--workload", choices=choices, default=choices[0],
                   help="which of the trace's job sets to replay: " + "; ".join(f"{w}: {WORKLOADS[w]}" for w in choices)
                        + " (ignored with --jobs or --generate)")
    p.add_argument("--policy", choices=sorted(POLICIES), help="scheduling policy (default philly; fifo with --preset)")
    p.add_argument("--preset", choices=["peer"],
                   help="peer: the Helios/Lucid-compatible option set (each VC on its own 8-GPU servers, FIFO or SJF "
                        "without backfill, whole-server placement, no slowdown; docs/peer-compatibility.md); "
                        "only --policy fifo|sjf, --trace, --out apply")
    p.add_argument("--trace", default="public",
                   help="trace source for jobs, machines and quotas: public (default), philly, or a raw directory")
    p.add_argument("--generate", type=int, metavar="N", help="use N synthetic jobs instead of the trace's jobs")
    jobs = p.add_argument_group(
        "another cluster's job table",
        "Replay the jobs of a CSV, CSV.gz or Parquet file instead of the trace's jobs. Required fields: submit time "
        "(seconds from --origin, or a timestamp), GPU count and duration (or start and end); optional: VC, user, "
        "status, job id. Columns are mapped by --map and the --*-col flags (flags win); unmapped fields are looked "
        "up under common names (submit_time, gpu_num, num_gpu, duration, vc, user, state, job_id, ...).")
    jobs.add_argument("--jobs", type=Path, metavar="FILE", help="the job table to replay")
    jobs.add_argument("--map", type=Path, metavar="YAML",
                      help="column mapping, e.g. {submit: submit_time, gpus: gpu_num, duration: duration, vc: vc}; "
                           "may also set origin and timezone")
    for field in JOB_TABLE_FIELDS:
        jobs.add_argument(f"--{field}-col", dest=f"{field}_col", metavar="COLUMN",
                          help=f"column of the {field} field: {JOB_TABLE_FIELDS[field]}")
    jobs.add_argument("--origin", help="what numeric times count seconds from (default: the Unix epoch)")
    jobs.add_argument("--timezone", help="zone of timestamps written without one (default UTC)")
    p.add_argument("--tile", type=int, default=1, metavar="K", help="repeat the workload K times back to back")
    p.add_argument("--topology", default="trace",
                   help="'trace' (reconstructed machines, default) or RACKSxSERVERSxGPUS, e.g. 4x16x8")
    p.add_argument("--rack-size", type=int, default=16,
                   help="servers per rack for the trace's machines (default 16; the calibrated replay: its own)")
    p.add_argument("--no-quotas", action="store_true", help="ignore VC quotas (one shared pool)")
    p.add_argument("--no-lending", action="store_true", help="VCs may not borrow idle GPUs beyond their quota")
    p.add_argument("--locality", choices=["strict", "relax", "any"], help="override the policy's locality mode")
    p.add_argument("--relax-after", type=float, default=None, metavar="S",
                   help="seconds of waiting before each locality relaxation (default 180; the calibrated replay: "
                        "its calibrated value)")
    p.add_argument("--las-thresholds", default="3600,36000", metavar="GPU_S,...",
                   help="Tiresias queue thresholds in GPU-seconds (default 3600,36000)")
    p.add_argument("--slowdown", choices=["default", "none"], default="default",
                   help="placement/colocation speed model (default: from real measurements)")
    p.add_argument("--migration", action="store_true", help="enable Gandiva-style defragmentation and consolidation")
    p.add_argument("--migration-cost", type=float, default=60.0, metavar="S", help="pause per migration (default 60)")
    p.add_argument("--failures", default="none", metavar="none|default|FILE.yaml",
                   help="failure model: none (default), default (illustrative classes) or a YAML file")
    p.add_argument("--retry", default="philly", choices=["philly", "adaptive", "prerun"], help="retry policy")
    p.add_argument("--early-stop", action="store_true",
                   help="stop jobs at convergence (points drawn from the real learning curves)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="directory for the result tables (omit to print the summary only)")
    p.add_argument("--raw-trace", action="store_true", help="also write the run in raw Philly format to OUT/raw")
    p.add_argument("--util-hours", type=float, default=24.0,
                   help="hours of synthetic per-minute GPU utilization in the raw trace (default 24)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_inputs(args):
    """Workload, topology, quotas and the job table's quality report (or None) from the arguments."""
    from . import (assign_convergence, generate_workload, parse_spec, quotas_from_table, topology_from_machines,
                   workload_from_job_table, workload_from_trace)

    if args.generate is not None and args.jobs is not None:
        raise ValueError("--generate and --jobs: give one workload, not both")
    own_jobs = args.generate is not None or args.jobs is not None
    trace = quality = None
    if not own_jobs or args.topology == "trace":
        from ..trace import load_trace
        trace = load_trace(args.trace, with_util=False)
    if args.generate is not None:
        workload = generate_workload(args.generate, seed=args.seed)
    elif args.jobs is not None:
        workload, quality = workload_from_job_table(args.jobs, job_table_columns(args), origin=args.origin,
                                           timezone=args.timezone)
    else:
        workload = workload_from_trace(trace, source="pollux" if args.trace == "public" else None)
    if args.tile > 1:
        workload = workload.tile(args.tile)
    if args.early_stop:
        workload = assign_convergence(workload, seed=args.seed)
    topology = topology_from_machines(trace.machines, args.rack_size) if args.topology == "trace" \
        else parse_spec(args.topology)
    quotas = None
    if not args.no_quotas and not own_jobs:
        if trace.vc_quotas is None:
            raise ValueError(f"trace {args.trace!r} has no VC quotas: pass --no-quotas")
        quotas = quotas_from_table(trace.vc_quotas)
    return workload, topology, quotas, quality


def job_table_columns(args) -> dict:
    """The column mapping from --map and the --*-col flags (a flag overrides the file)."""
    from ..trace.jobtable import read_column_map

    mapping = read_column_map(args.map) if args.map is not None else {}
    for field in JOB_TABLE_FIELDS:
        if getattr(args, f"{field}_col") is not None:
            mapping[field] = getattr(args, f"{field}_col")
    return mapping


def job_table_summary(quality, path: Path) -> dict:
    """What the job table gave: rows read and loaded, and counts per quarantine and flag reason."""
    counts = quality.counts(path.name)
    return {"file": str(path), "rows_read": counts["read"], "rows_loaded": counts["loaded"],
            "quarantined": counts["quarantined"], "flagged": counts["flags"]}


def print_job_table_quality(quality, workload, path: Path) -> None:
    """The job table's data-quality report, and how VCs were assigned, on stderr."""
    import pandas as pd

    with pd.option_context("display.width", 160, "display.max_colwidth", 60):
        print("job table data quality:", file=sys.stderr)
        print(quality.summary().to_string(index=False), file=sys.stderr)
        reasons = quality.to_frame()
        if len(reasons):
            print(reasons.drop(columns="file").to_string(index=False), file=sys.stderr)
    if NO_VC_FLAG in quality.counts(path.name)["flags"]:
        print(f"no VC column: all {len(workload):,} jobs go to one VC, {SINGLE_VC!r}", file=sys.stderr)
    else:
        vcs = len(set(workload.vc))
        print(f"{vcs} VC{'s' if vcs != 1 else ''} in the table; no VC quotas for a job table: the VCs share the "
              f"cluster", file=sys.stderr)


def make_options(args) -> dict:
    from . import FailureModel, Migration, default_failure_model, make_policy

    policy_options = {"relax_after_s": 180.0 if args.relax_after is None else args.relax_after}
    if args.locality:
        policy_options["locality"] = args.locality
    if getattr(args, "backoff", None):
        policy_options["backoff"] = args.backoff
    if getattr(args, "relax_clock", None):
        policy_options["relax_clock"] = args.relax_clock
    if args.policy in ("las", "gittins"):
        try:
            policy_options["thresholds_gpu_s"] = tuple(float(t) for t in args.las_thresholds.split(","))
        except ValueError:
            raise ValueError("--las-thresholds: expected numbers separated by commas, "
                             f"got {args.las_thresholds!r}") from None
    if args.failures == "none":
        failures = None
    elif args.failures == "default":
        failures = default_failure_model()
    else:
        failures = FailureModel.from_yaml(args.failures)
    return {"policy": make_policy(args.policy, **policy_options), "lending": not args.no_lending,
            "slowdown": None if args.slowdown == "none" else "default",
            "migration": Migration(cost_s=args.migration_cost) if args.migration else None,
            "failures": failures, "retry": args.retry, "early_stop": args.early_stop, "seed": args.seed,
            "progress": not args.no_progress}


def run(args, calibrated: Callable | None = None) -> int:
    from . import simulate, write_raw_trace

    if args.preset == "peer":
        return run_peer(args)
    args.policy = args.policy or "philly"
    own_jobs = args.generate is not None or args.jobs is not None
    if getattr(args, "workload", "pollux") == "calibrated" and not own_jobs:
        if calibrated is None:
            raise ValueError("--workload calibrated needs the main command line (dlcluster simulate)")
        inputs = calibrated(args.trace, lambda line: print(line, file=sys.stderr, flush=True))
        workload, topology, quotas, quality = inputs.workload, inputs.topology, inputs.quotas, None
        options = calibrated_options(args, inputs)
        description = inputs.description
    else:
        workload, topology, quotas, quality = build_inputs(args)
        options = make_options(args)
        description = {"workload": f"{workload.source}, {len(workload):,} jobs"
                                   + (f" ({WORKLOADS[args.workload]})" if not own_jobs else "")}
    policy = options.pop("policy")
    if quality is not None:
        print_job_table_quality(quality, workload, args.jobs)
    print(f"workload: {workload.source}, {len(workload):,} jobs; cluster: {topology.describe()}", file=sys.stderr)
    result = simulate(workload, topology, policy, quotas=quotas, **options)
    summary = {**result.summary, **description}
    if quality is not None:
        summary["jobs_input"] = job_table_summary(quality, args.jobs)
    summary = json.dumps(summary, indent=2, default=str)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result.jobs.to_parquet(args.out / "jobs.parquet", index=False)
        result.attempts.to_parquet(args.out / "attempts.parquet", index=False)
        result.timeseries.to_parquet(args.out / "timeseries.parquet", index=False)
        (args.out / "summary.json").write_text(summary + "\n")
        if args.raw_trace:
            write_raw_trace(result, args.out / "raw", util_hours=args.util_hours, seed=args.seed,
                            slowdown=options["slowdown"])
        print(f"wrote {args.out}", file=sys.stderr)
    print(summary)
    return 0


def calibrated_options(args, inputs: CalibratedInputs) -> dict:
    """The simulator options of the calibrated replay, with what the command line changes on top.

    The calibration's sharing (lending, caps, reclaim), placement and slowdown (each job's speed relative to its
    real placement, whose slowdown its real duration already holds; none where the calibration has none) stay;
    Philly's policy takes the calibrated locality, relax timeout, relax clock and back-off scope, which
    ``--locality`` and ``--relax-after`` override; ``--no-lending`` drops the sharing; a ``--failures`` model
    replaces the calibrated attempt split.
    """
    args = argparse.Namespace(**vars(args))
    if args.relax_after is None:
        args.relax_after = inputs.relax_after_s
    if args.policy == "philly":
        args.backoff, args.relax_clock = inputs.backoff, inputs.relax_clock
        if not args.locality:
            args.locality = inputs.locality
    options = make_options(args)
    calibrated = dict(inputs.options)
    if args.failures != "none":
        calibrated = {k: v for k, v in calibrated.items() if k not in ("failures", "retry")}
    if args.no_lending:
        calibrated = {"lending": False, "placement": calibrated.get("placement"),
                      "slowdown": calibrated.get("slowdown")}
    return {**options, **calibrated}


def run_peer(args) -> int:
    """``--preset peer``: the peer-compatible replay (:mod:`dlcluster.sim.peer`)."""
    from ..trace import load_trace
    from .peer import peer_compatible, simulate_peer_compatible

    ignored = [flag for flag, used in (("--generate", args.generate is not None), ("--tile", args.tile > 1),
                                       ("--raw-trace", args.raw_trace), ("--early-stop", args.early_stop),
                                       ("--migration", args.migration), ("--failures", args.failures != "none"),
                                       ("--jobs", args.jobs is not None))
               if used]
    if ignored:
        raise ValueError(f"--preset peer replays the trace's jobs as the peers do; it does not take {ignored}")
    inputs = peer_compatible(load_trace(args.trace, with_util=False))
    print(f"workload: {inputs.workload.source}, {len(inputs.workload):,} jobs; peer-compatible: "
          f"{len(inputs.vc_nodes)} VCs on their own servers", file=sys.stderr)
    result = simulate_peer_compatible(inputs, args.policy or "fifo")
    summary = json.dumps(result.summary, indent=2, default=str)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        result.jobs.to_parquet(args.out / "jobs.parquet", index=False)
        (args.out / "summary.json").write_text(summary + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
    print(summary)
    return 0
