"""The ``dlcluster`` command line: the library's jobs, one subcommand each.

    dlcluster reports [--params params/default.yaml] [--only 00] [--force] [--jobs 2] [-v]   execute notebooks
    dlcluster summary [SOURCE]                                     tables and data quality
    dlcluster build-public                                         data/external -> data/public
    dlcluster data [--url URL]                                     download, verify, extract, ingest
    dlcluster ingest [RAW_DIR] [--force]                           raw Philly files -> Parquet (resumable)
    dlcluster synth-trace OUT [--scale 0.125]                      SYNTHETIC raw trace for benchmarks
    dlcluster check-results [REPORTS_DIR] [--all]                  compare reports with the golden results
    dlcluster golden [REPORTS_DIR]                                 rewrite the golden results from reports
    dlcluster findings [REPORTS_DIR | --golden] [--readme]         each claim's label; the README's block
    dlcluster classify-logs [DIR] [--no-fallback]                  failure reason of each log
    dlcluster bench-colocation --device cpu --model tiny ...       ResNet-50 colocation benchmark
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import paths
from .ordering import counts_desc


def _reports(args) -> int:
    from .report.runner import NotebookFailed, ReportsInterrupted, run_reports
    if args.verbose:
        import logging
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")  # papermill streams cell output
    try:
        run_reports(args.params, args.out, args.only, html=not args.no_html, notebooks_dir=args.notebooks,
                    force=args.force, verbose=args.verbose, jobs=args.jobs)
    except NotebookFailed as exc:
        print(f"dlcluster reports: FAILED: {exc}", file=sys.stderr)
        return 1
    except ReportsInterrupted as exc:
        print(f"dlcluster reports: {exc}", file=sys.stderr)
        return 130  # the shell's code for a command ended by SIGINT
    except KeyboardInterrupt:  # between notebooks (no kernel running): every finished notebook is complete
        print("dlcluster reports: interrupted between notebooks; the index page was not updated", file=sys.stderr)
        return 130
    return 0


def _golden_path(args) -> tuple[Path, Path, str]:
    from .report.golden import golden_dir
    reports = Path(args.reports_dir)
    config = reports.name
    return reports, Path(args.golden) if args.golden else golden_dir() / f"{config}.yaml", config


def _check_results(args) -> int:
    from .report.golden import check
    reports, golden, _ = _golden_path(args)
    passed, text = check(reports, golden, show_all=args.all)
    print(text)
    return 0 if passed else 1


def _golden(args) -> int:
    from .report.golden import write_golden
    reports, golden, config = _golden_path(args)
    path = write_golden(reports, golden, config)
    shown = path.relative_to(paths.repo_root()) if path.is_relative_to(paths.repo_root()) else path
    print(f"wrote {path}: review its diff (git diff {shown}) and commit it with the change that moved the figures")
    return 0


def _findings(args) -> int:
    from .atomic import atomic_write_text
    from .report import findings as fd
    from .report.reproduction import scorecard
    table = fd.golden_findings() if args.golden else fd.findings(scorecard(args.reports_dir))
    block = fd.readme_block(table)
    if not args.readme:
        print(block)
        return 0
    readme = paths.repo_root() / "README.md"
    text = readme.read_text()
    updated = fd.replace_readme_block(text, block)
    if updated != text:
        atomic_write_text(readme, updated)
    print(f"{'wrote' if updated != text else 'unchanged:'} {readme} ({fd.tally(table)})")
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
    from .sources.official import SUBDIR, build_official
    from .trace.public import build_public
    out = build_public(Path(args.external), Path(args.out))
    print(f"wrote {out}")
    official = build_official(Path(args.external) / "official_notebook", Path(args.out) / SUBDIR)
    print(f"wrote {official} (the official notebook's figures, digitized)")
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
    ingest(Path(args.raw_dir), Path(args.out), force=args.force)
    return 0


def _synth_trace(args) -> int:
    from .sim.synthetic import generate_raw_trace
    out = generate_raw_trace(Path(args.out), scale=args.scale, seed=args.seed,
                             malformed_lines=not args.no_malformed, overwrite=args.overwrite)
    print(f"wrote a SYNTHETIC raw-format trace to {out} (for speed and memory tests only, never for results)")
    return 0


def _classify_logs(args) -> int:
    import pandas as pd

    from .analysis.classify import classify_dir
    from .analysis.fallback import FALLBACK_RULE_ID
    table = classify_dir(args.logs_dir, pattern=args.pattern, fallback=not args.no_fallback)
    # a learned guess (rule_id fallback:learned) shows its probability and the labelled message it most resembles,
    # and, where it refined a generic rule, that rule and the line it matched
    table["evidence"] = [row.matched_line if row.rule_id != FALLBACK_RULE_ID else
                         f"like labelled message {row.fallback_neighbour} (probability {row.fallback_confidence:.2f})"
                         + (f"; refines rule {row.refined_rule}: {row.matched_line}" if row.refined_rule else "")
                         for row in table.itertuples()]
    with pd.option_context("display.width", 200, "display.max_colwidth", 70):
        print(table[["log_file", "reason", "category", "rule_id", "evidence"]].to_string(index=False))
        print()
        print(counts_desc(table["reason"]).to_string())
    return 0


def _bench_colocation(argv: list[str]) -> int:
    from .sources.colocation.benchmark import main as bench_main
    return bench_main(argv)


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
    p.add_argument("--notebooks", default=None, help="folder of NN-topic.ipynb notebooks (default: notebooks/)")
    p.add_argument("--force", action="store_true", help="execute every notebook, even one unchanged since its last run")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show everything: each cell's output as it runs and papermill's log")
    p.add_argument("--jobs", type=int, default=2,
                   help="notebooks run side by side (default 2: one's single-core cells use the core the other "
                        "leaves idle); 1 runs them one after another")
    p.set_defaults(func=_reports)

    default_reports = str(paths.repo_root() / "reports" / "default")
    for name, func, text in (
            ("check-results", _check_results,
             ("compare a reports folder with the golden results (golden/<config>.yaml); "
              "exit 1 naming each figure that moved, went missing or is new")),
            ("golden", _golden, "rewrite golden/<config>.yaml from a reports folder (on purpose: review the diff)")):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("reports_dir", nargs="?", default=default_reports,
                       help="a folder written by `dlcluster reports` (default reports/default)")
        p.add_argument("--golden", default=None, help="the golden file (default golden/<reports folder name>.yaml)")
        if name == "check-results":
            p.add_argument("--all", action="store_true", help="print every figure, not only those that fail")
        p.set_defaults(func=func)

    p = sub.add_parser("findings", help="each claim of the paper with its label (judge's), as the README's block")
    p.add_argument("reports_dir", nargs="?", default=default_reports,
                   help="a folder written by `dlcluster reports` (default reports/default)")
    p.add_argument("--golden", action="store_true",
                   help="from golden/default.yaml's figures instead (what the README's block is generated from)")
    p.add_argument("--readme", action="store_true", help="rewrite the block between README.md's findings markers")
    p.set_defaults(func=_findings)

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
    p.add_argument("--force", action="store_true", help="ingest again even if a complete ingest exists")
    p.set_defaults(func=_ingest)

    p = sub.add_parser("synth-trace", help="generate a SYNTHETIC full-size raw-format trace (benchmarks only)")
    p.add_argument("out")
    p.add_argument("--scale", type=float, default=1.0, help="1.0 = the real trace's size (~6 GB)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-malformed", action="store_true", help="do not plant malformed lines")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=_synth_trace)

    # Listed for --help; main() hands its arguments straight to the benchmark's own parser.
    sub.add_parser("bench-colocation", add_help=False,
                   help="ResNet-50 locality/colocation benchmark (needs the [torch] extra); --help for options")

    p = sub.add_parser("classify-logs",
                       help="classify job failure logs: the rules, then a learned fallback where none fires")
    p.add_argument("logs_dir", nargs="?", default=str(paths.data_dir() / "failure_logs"))
    p.add_argument("--pattern", default="*.log")
    p.add_argument("--no-fallback", action="store_true",
                   help="rules only: leave a log that no rule matches as no signature, without a learned guess")
    p.set_defaults(func=_classify_logs)

    _register_simulator(sub)
    return parser


def _calibrated_replay(trace: str, echo):
    """``dlcluster simulate``'s default workload: the calibrated replay, the calibration's progress on ``echo``."""
    import os
    import tempfile

    from .report.progress import PROGRESS_ENV, ProgressTail
    from .validation.calibration import calibrated_replay_inputs

    echo("calibrated replay: reading the cached calibration, or calibrating once (a few minutes; then cached)")
    fd, progress_file = tempfile.mkstemp(prefix="dlcluster-calibration-", suffix=".jsonl")
    os.close(fd)
    previous = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = progress_file
    try:
        with ProgressTail(Path(progress_file), lambda line: echo(f"calibration: {line}")):
            return calibrated_replay_inputs(trace)
    finally:
        if previous is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = previous
        Path(progress_file).unlink(missing_ok=True)


def _register_simulator(sub) -> None:
    """The simulator's subcommand lives with the simulator; its default workload, the calibrated replay, here."""
    from .sim import cli as sim_cli
    sim_cli.add_parser(sub, _calibrated_replay)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench-colocation"]:
        return _bench_colocation(argv[1:])
    args = build_parser().parse_args(argv)
    if getattr(args, "raw_trace", False) and getattr(args, "out", None) is None:
        print("dlcluster simulate: --raw-trace needs --out", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as exc:
        print(f"dlcluster {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
