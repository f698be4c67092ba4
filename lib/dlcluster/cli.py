"""The ``dlcluster`` command line: the library's jobs, one subcommand each.

    dlcluster reports [--params params/default.yaml] [--only 00]   execute notebooks
    dlcluster summary [SOURCE]                                     tables and data quality
    dlcluster build-public                                         data/external -> data/public
    dlcluster data [--url URL]                                     download, verify, extract, ingest
    dlcluster ingest [RAW_DIR]                                     raw Philly files -> Parquet
    dlcluster classify-logs [DIR]                                  failure reason of each log
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import paths


def _reports(args) -> int:
    from .runner import NotebookFailed, run_reports
    try:
        run_reports(args.params, args.out, args.only, html=not args.no_html)
    except NotebookFailed as exc:
        print(f"dlcluster reports: FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def _summary(args) -> int:
    import pandas as pd

    from .trace import load_trace
    tr = load_trace(args.source, with_util=not args.no_util)
    with pd.option_context("display.width", 160, "display.max_colwidth", 80):
        print(tr)
        print(tr.jobs.groupby("source").agg(jobs=("jobid", "size"), gpus_mean=("num_gpus", "mean")))
        print("\nData quality:")
        print(tr.quality.summary().to_string(index=False))
        print(tr.quality.to_frame().drop(columns="examples").to_string(index=False))
    return 0


def _build_public(args) -> int:
    from .trace.public import build_public
    out = build_public(Path(args.external), Path(args.out))
    print(f"wrote {out}")
    return 0


def _data(args) -> int:
    from .trace.download import DownloadError, fetch_trace
    from .trace.ingest import ingest
    try:
        raw = fetch_trace(args.url, paths.data_dir() / "raw", expected_sha256=args.sha256)
    except DownloadError as exc:
        print(f"dlcluster data: {exc}", file=sys.stderr)
        return 2
    ingest(raw, paths.ingested_philly_dir())
    return 0


def _ingest(args) -> int:
    from .trace.ingest import ingest
    ingest(Path(args.raw_dir), Path(args.out))
    return 0


def _classify_logs(args) -> int:
    import pandas as pd

    from .classify import classify_dir
    table = classify_dir(args.logs_dir, pattern=args.pattern)
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        print(table[["log_file", "reason", "category", "rule_id", "matched_line"]].to_string(index=False))
        print()
        print(table["reason"].value_counts().to_string())
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .trace.download import TRACE_SHA256, TRACE_URL

    parser = argparse.ArgumentParser(prog="dlcluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("reports", help="execute every notebook with papermill and render HTML")
    p.add_argument("--params", default=str(paths.repo_root() / "params" / "default.yaml"))
    p.add_argument("--out", default=None, help="output folder (default reports/<params name>)")
    p.add_argument("--only", nargs="*", help="run only notebooks whose name starts with these")
    p.add_argument("--no-html", action="store_true")
    p.set_defaults(func=_reports)

    p = sub.add_parser("summary", help="print a trace's tables and data-quality report")
    p.add_argument("source", nargs="?", default="public", help="'public', 'philly' or a raw-format directory")
    p.add_argument("--no-util", action="store_true", help="skip per-minute utilization files")
    p.set_defaults(func=_summary)

    p = sub.add_parser("build-public", help="convert data/external into the Parquet tables of data/public")
    p.add_argument("--external", default=str(paths.external_dir()))
    p.add_argument("--out", default=str(paths.public_dir()))
    p.set_defaults(func=_build_public)

    p = sub.add_parser("data", help="download the full Philly trace, verify its sha256, extract and ingest it")
    p.add_argument("--url", default=TRACE_URL)
    p.add_argument("--sha256", default=TRACE_SHA256)
    p.set_defaults(func=_data)

    p = sub.add_parser("ingest", help="convert a raw Philly-format directory into Parquet tables")
    p.add_argument("raw_dir", nargs="?", default=str(paths.raw_philly_dir()))
    p.add_argument("--out", default=str(paths.ingested_philly_dir()))
    p.set_defaults(func=_ingest)

    p = sub.add_parser("classify-logs", help="classify job failure logs with the rule-based classifier")
    p.add_argument("logs_dir", nargs="?", default=str(paths.data_dir() / "failure_logs"))
    p.add_argument("--pattern", default="*.log")
    p.set_defaults(func=_classify_logs)

    _register_optional(sub)
    return parser


def _register_optional(sub) -> None:
    """Subcommands that live in their own modules (simulator, benchmarks)."""
    import importlib.util
    if importlib.util.find_spec("dlcluster.sim.cli") is not None:  # TODO(lead): unconditional once sim lands
        from .sim import cli as sim_cli
        sim_cli.add_parser(sub)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"dlcluster {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
