"""Per-job GPU utilization the official notebook's way against ours, on the same SYNTHETIC files.

"Official" re-implements, from the GPU-utilization section of the official
analysis notebook (msr-fiddle/philly-traces, ``analysis/Philly Trace
Analysis.ipynb``), its approach, in plain Python as there:

* the job log is ``json.load``-ed and every job becomes a ``Job`` object
  (times parsed with ``datetime.strptime``; GPUs requested = GPUs of the first
  attempt);
* ``cluster_gpu_util`` is read with ``csv.reader`` into nested dicts,
  machine -> time string (zone suffix cut off) -> list of the 8 cell strings;
* for Figure 5, every job of 1, 4, 8 or 16 GPUs, every attempt with a start
  and an end, every minute from the start rounded down to the minute while
  before the end, every server and GPU of the attempt: if the minute is in the
  dict and the cell is not 'NA', ``float(cell)`` is appended to a list keyed by
  status and job size.

"Ours": ``dlcluster ingest`` of the same files to Parquet (done once) and
``job_gpu_util(per="value_counts")`` (done by every analysis).

The files: a SYNTHETIC trace (dlcluster.sim.synthetic; speed and memory
only, never results) at ``--scale`` of the real size (default 1/4: 11.3
million GPU rows, 29,331 jobs; the notebook's way needs ~5 GB there, and
would need ~20 GB for the full trace), with only the job log, the GPU file and
the machine list, and without malformed lines (the notebook's code stops at
the first one). Each side runs in a fresh subprocess that reports wall time,
CPU time and peak resident memory; the times compared exclude interpreter
start and imports. "Each analysis" compares the notebook's load-and-loop with
our join on the ingested Parquet (what every later session pays); "first run"
adds our one-time ingest. The two sides do not count exactly the same
samples: the notebook also takes the minute in which an attempt starts
(before its start unless it starts on the minute) and skips attempts still
running; both counts are reported.

    python bench/bench_official.py [--scale 0.25] [--keep]

Writes bench/results/official.json.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "official.json"
DATA = REPO / "data" / "interim" / "synthetic"
SIZES = (1, 4, 8, 16)
TARGETS = {"speedup": 20, "memory_ratio": 10}


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the parent across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# ---- the official notebook's approach (re-implemented) ------------------------------------------------------

def _parse_time(text):
    if text is None or text == "" or text == "None":
        return None
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")


class OfficialJob:
    """A job as the notebook holds it: raw fields plus parsed attempt times and the GPUs requested."""

    def __init__(self, status, vc, jobid, attempts, submitted_time, user):
        self.status, self.vc, self.jobid, self.user = status, vc, jobid, user
        for attempt in attempts:
            attempt["start_time"] = _parse_time(attempt["start_time"])
            attempt["end_time"] = _parse_time(attempt["end_time"])
        self.attempts = attempts
        self.submitted_time = _parse_time(submitted_time)
        self.num_gpus = sum(len(d["gpus"]) for d in attempts[0]["detail"]) if attempts else None


def official_load_jobs(path: Path) -> list:
    with open(path) as fh:
        return [OfficialJob(**record) for record in json.load(fh)]


def official_load_gpu_util(path: Path) -> dict:
    gpu_util = {}
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        next(reader)
        for row in reader:
            stamp = row[0][:-4]                     # zone suffix cut off
            gpu_util.setdefault(row[1], {})[stamp] = row[2:-1]   # trailing empty field dropped
    return gpu_util


def official_per_job_utilization(jobs: list, gpu_util: dict) -> dict:
    data = {}
    for job in jobs:
        if not job.attempts or job.num_gpus not in SIZES:
            continue
        values = data.setdefault(job.status, {}).setdefault(job.num_gpus, [])
        for attempt in job.attempts:
            if attempt["start_time"] is None or attempt["end_time"] is None:
                continue
            minute = attempt["start_time"].replace(second=0, microsecond=0)
            while minute < attempt["end_time"]:
                key = str(minute)
                for detail in attempt["detail"]:
                    rows = gpu_util.get(detail["ip"], {})
                    if key in rows:
                        for gpu in detail["gpus"]:
                            cell = rows[key][int(gpu[3:])]
                            if cell != "NA":
                                values.append(float(cell))
                minute += datetime.timedelta(minutes=1)
    return data


# ---- measured steps, each in a fresh process ------------------------------------------------------------------

def child(task: str, args: list[str]) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    steps, summary = {}, {}
    raw = Path(args[0])
    if task == "official":
        t = time.perf_counter()
        jobs = official_load_jobs(raw / "cluster_job_log")
        steps["load_job_log_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        gpu_util = official_load_gpu_util(raw / "cluster_gpu_util")
        steps["load_gpu_util_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        data = official_per_job_utilization(jobs, gpu_util)
        steps["per_job_s"] = round(time.perf_counter() - t, 2)
        steps["compute_s"] = round(steps["load_job_log_s"] + steps["load_gpu_util_s"] + steps["per_job_s"], 2)
        summary = {f"{status}/{size}": {"samples": len(v), "sum": round(sum(v), 2)}
                   for status, by_size in sorted(data.items()) for size, v in sorted(by_size.items())}
    elif task == "ours-ingest":
        t = time.perf_counter()
        from dlcluster.trace.ingest import ingest
        steps["import_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        ingest(raw, args[1], progress=False, force=True)
        steps["ingest_s"] = round(time.perf_counter() - t, 2)
    elif task == "ours-join":
        t = time.perf_counter()
        from dlcluster.analysis.job_util import job_gpu_util
        steps["import_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        counts = job_gpu_util(raw, per="value_counts").frame
        steps["join_s"] = round(time.perf_counter() - t, 2)
        counts = counts[counts["num_gpus"].isin(SIZES)]
        counts = counts.assign(total=counts["util"] * counts["samples"])
        grouped = counts.groupby(["status", "num_gpus"])[["samples", "total"]].sum()
        summary = {f"{status}/{size}": {"samples": int(row.samples), "sum": round(float(row.total), 2)}
                   for (status, size), row in grouped.iterrows()}
    else:
        raise SystemExit(f"unknown task {task!r}")
    print("RESULT " + json.dumps({
        "wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
        "peak_rss_mb": peak_rss_mb(),
        "steps": steps, "summary": summary}))


def measure(task: str, *args) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--child", task, *map(str, args)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{task} failed:\n{proc.stderr[-3000:]}")
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.25, help="size of the slice, as a fraction of the real trace")
    parser.add_argument("--keep", action="store_true", help="keep the generated and ingested files")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1:])
        return
    from dlcluster.sim.synthetic import generate_raw_trace

    raw, ingested = DATA / f"official-{args.scale:g}", DATA / f"official-{args.scale:g}-ingested"
    print(f"generating a SYNTHETIC trace at scale {args.scale:g} in {raw}", flush=True)
    # no malformed lines: the notebook's code stops at the first one (float('n/a%') raises)
    generate_raw_trace(raw, scale=args.scale, seed=0, malformed_lines=False, progress=False, overwrite=True)
    for name in ("cluster_cpu_util", "cluster_mem_util"):      # the GPU section reads only these files
        (raw / name).unlink()
    meta = json.loads((raw / "metadata.json").read_text())
    print("official approach ...", flush=True)
    official = measure("official", raw)
    print(f"  {official['wall_s']} s, {official['peak_rss_mb']} MB; ours: ingest ...", flush=True)
    ingest = measure("ours-ingest", raw, ingested)
    print(f"  {ingest['wall_s']} s, {ingest['peak_rss_mb']} MB; ours: join ...", flush=True)
    join = measure("ours-join", ingested)
    print(f"  {join['wall_s']} s, {join['peak_rss_mb']} MB", flush=True)
    compute_s = official["steps"]["compute_s"]
    first_run_s = ingest["steps"]["ingest_s"] + join["steps"]["join_s"]
    first_run_mb = max(ingest["peak_rss_mb"], join["peak_rss_mb"])
    report = {
        "data": "SYNTHETIC raw trace (dlcluster.sim.synthetic): speed and memory only, never results",
        "slice": {"scale": args.scale, "gpu_util_rows": meta["rows_per_util_file"], "jobs": meta["jobs"],
                  "gpu_util_bytes": (raw / "cluster_gpu_util").stat().st_size},
        "cpus": len(os.sched_getaffinity(0)),
        "targets": TARGETS,
        "official": official, "ours_ingest": ingest, "ours_join": join,
        "how": "times exclude interpreter start and imports (in steps); peak memory is the whole process's",
        "each_analysis": {"official_s": compute_s, "ours_s": join["steps"]["join_s"],
                          "speedup": round(compute_s / join["steps"]["join_s"], 1),
                          "official_peak_mb": official["peak_rss_mb"], "ours_peak_mb": join["peak_rss_mb"],
                          "memory_ratio": round(official["peak_rss_mb"] / join["peak_rss_mb"], 1)},
        "first_run_with_ingest": {"official_s": compute_s, "ours_s": round(first_run_s, 2),
                                  "speedup": round(compute_s / first_run_s, 1),
                                  "official_peak_mb": official["peak_rss_mb"], "ours_peak_mb": first_run_mb,
                                  "memory_ratio": round(official["peak_rss_mb"] / first_run_mb, 1)},
        "samples": {"official": sum(v["samples"] for v in official["summary"].values()),
                    "ours": sum(v["samples"] for v in join["summary"].values())},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(raw, ignore_errors=True)
        shutil.rmtree(ingested, ignore_errors=True)
    print(json.dumps({k: report[k] for k in ("slice", "each_analysis", "first_run_with_ingest", "samples")},
                     indent=2))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
