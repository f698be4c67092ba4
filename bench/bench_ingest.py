"""Ingest and per-job GPU utilization join on the full-size SYNTHETIC trace: time, memory, scaling.

For each scale (fraction of the real trace's size: 117,325 jobs, 552 machines,
81,573 minutes of GPU/CPU/memory rows), a SYNTHETIC raw trace is generated
(dlcluster.sim.synthetic; speed and memory only, never results), ingested
to Parquet, and joined per job (dlcluster.analysis.job_util, per="job" and
per="value_counts"). Each step runs in a fresh subprocess that reports its
wall time, CPU time (all threads) and peak resident memory. Targets on the
2-core, 24 GB development machine: ingest of the full size under 10 minutes
and 4 GB, the join under 2 minutes; time should grow linearly with size.

The machine is shared: CPU seconds are the steadier measure.
Writes bench/results/ingest.json.

    python bench/bench_ingest.py                     # scales 1/8, 1/4, 1/2, 1 (~20-30 min, ~7 GB disk at a time)
    python bench/bench_ingest.py --scales 0.125      # a quick look
    python bench/bench_ingest.py --keep              # keep the generated files (data/interim/synthetic/)
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "ingest.json"
DATA = REPO / "data" / "interim" / "synthetic"
TARGETS = {"ingest_wall_s": 600, "ingest_peak_rss_mb": 4096, "join_wall_s": 120}


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the parent across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def child(task: str, args: list[str]) -> None:
    """Run one measured step in this (fresh) process; print its measurements as JSON."""
    wall, cpu = time.perf_counter(), time.process_time()
    info = {}
    if task == "generate":
        from dlcluster.sim.synthetic import generate_raw_trace
        out = generate_raw_trace(args[0], scale=float(args[1]), seed=0, progress=False, overwrite=True)
        meta = json.loads((out / "metadata.json").read_text())
        info = {"file_bytes": meta["file_bytes"], "rows_per_util_file": meta["rows_per_util_file"],
                "jobs": meta["jobs"], "attempts": meta["attempts"]}
    elif task == "ingest":
        from dlcluster.trace.ingest import ingest
        out = ingest(args[0], args[1], progress=False, force=True)
        manifest = json.loads((out / "manifest.json").read_text())
        info = {"util": manifest["util"], "tables": manifest["tables"],
                "parquet_bytes": sum(p.stat().st_size for p in out.rglob("*.parquet"))}
    elif task == "join":
        from dlcluster.analysis.job_util import job_gpu_util
        result = job_gpu_util(args[0], per=args[1])
        dropped = dict(zip(result.dropped["reason"], result.dropped["rows"], strict=True))
        info = {"rows": len(result.frame), "dropped": dropped}
    else:
        raise SystemExit(f"unknown task {task!r}")
    info.update(wall_s=round(time.perf_counter() - wall, 2), cpu_s=round(time.process_time() - cpu, 2),
                peak_rss_mb=peak_rss_mb())
    print("RESULT " + json.dumps(info))


def measure(task: str, *args) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", task, *map(str, args)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{task} {args} failed:\n{proc.stderr[-3000:]}")
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def run_scale(scale: float, keep: bool) -> dict:
    raw, ingested = DATA / f"scale-{scale:g}", DATA / f"scale-{scale:g}-ingested"
    print(f"== scale {scale:g}: generating {raw}", flush=True)
    row = {"scale": scale, "generate": measure("generate", raw, scale)}
    row["raw_gb"] = round(sum(row["generate"]["file_bytes"].values()) / 1e9, 3)
    print(f"   {row['raw_gb']} GB raw; ingesting", flush=True)
    row["ingest"] = measure("ingest", raw, ingested)
    print(f"   ingest {row['ingest']['wall_s']} s wall, {row['ingest']['cpu_s']} s CPU, "
          f"{row['ingest']['peak_rss_mb']} MB peak; joining", flush=True)
    row["join_job"] = measure("join", ingested, "job")
    row["join_value_counts"] = measure("join", ingested, "value_counts")
    print(f"   join per job {row['join_job']['wall_s']} s, value counts {row['join_value_counts']['wall_s']} s",
          flush=True)
    if not keep:
        shutil.rmtree(raw, ignore_errors=True)
        shutil.rmtree(ingested, ignore_errors=True)
    return row


def linearity(rows: list[dict], step: str) -> dict:
    """Least-squares line through (raw GB, CPU s) and its largest relative deviation."""
    if len(rows) < 2:
        return {}
    x = np.array([r["raw_gb"] for r in rows])
    y = np.array([r[step]["cpu_s"] for r in rows])
    slope, intercept = np.polyfit(x, y, 1)
    fit = slope * x + intercept
    return {"cpu_s_per_raw_gb": round(float(slope), 2), "intercept_cpu_s": round(float(intercept), 2),
            "max_relative_deviation_from_line": round(float(np.max(np.abs(y - fit) / y)), 3),
            "cpu_s_per_gb_each_scale": [round(float(v), 2) for v in y / x]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0])
    parser.add_argument("--keep", action="store_true", help="keep the generated and ingested files")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1:])
        return
    free_gb = shutil.disk_usage(REPO).free / 1e9
    need_gb = 8.0 * max(args.scales)
    if free_gb < need_gb:
        raise SystemExit(f"bench_ingest: needs ~{need_gb:.0f} GB free disk, {free_gb:.0f} GB available")
    DATA.mkdir(parents=True, exist_ok=True)
    rows = [run_scale(s, args.keep) for s in sorted(args.scales)]
    full = rows[-1]
    report = {
        "data": "SYNTHETIC raw trace (dlcluster.sim.synthetic): speed and memory only, never results",
        "machine": {"cpus": len(__import__("os").sched_getaffinity(0)), "platform": platform.platform(),
                    "python": platform.python_version()},
        "targets": TARGETS,
        "largest_scale": {"scale": full["scale"], "raw_gb": full["raw_gb"],
                          "ingest_wall_s": full["ingest"]["wall_s"], "ingest_cpu_s": full["ingest"]["cpu_s"],
                          "ingest_peak_rss_mb": full["ingest"]["peak_rss_mb"],
                          "join_job_wall_s": full["join_job"]["wall_s"],
                          "join_value_counts_wall_s": full["join_value_counts"]["wall_s"],
                          "join_peak_rss_mb": max(full["join_job"]["peak_rss_mb"],
                                                  full["join_value_counts"]["peak_rss_mb"])},
        "scaling": {"ingest": linearity(rows, "ingest"), "join_job": linearity(rows, "join_job")},
        "runs": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{'scale':>6} {'raw GB':>7} {'ingest s':>9} {'CPU s':>7} {'peak MB':>8} {'join s':>7} {'counts s':>8}")
    for r in rows:
        print(f"{r['scale']:>6g} {r['raw_gb']:>7.2f} {r['ingest']['wall_s']:>9.1f} {r['ingest']['cpu_s']:>7.1f} "
              f"{r['ingest']['peak_rss_mb']:>8.0f} {r['join_job']['wall_s']:>7.1f} "
              f"{r['join_value_counts']['wall_s']:>8.1f}")
    print(f"scaling: {report['scaling']}\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
