"""The embedded default: real public data derived from the Philly trace.

``build_public`` converts the verbatim copies in ``data/external/`` into tidy
Parquet tables in ``data/public/`` (run by ``dlcluster build-public``; the
output is committed). ``load_public`` reads them back. Sources (see
data/README.md for provenance and licences):

* ``pollux``: 82,247 real jobs (submit, duration, GPUs, VC) from the Pollux
  artifact; no id, user, status, start time or placement.
* ``dre``: 5,910 complete job records in near-raw form (DRE project), with a
  placement, and real per-minute GPU/CPU/memory samples from 10 minutes before
  to 3 minutes after each job's start.
* ``rfold``: 111,549 real jobs (arrival offset, GPUs, duration) from the RFold
  artifact, in their own table ``rfold_jobs``: no calendar time, VC, user or
  status, so they are not rows of ``jobs`` (see
  :mod:`dlcluster.validation.jobsets` for what they hold and how they are
  aligned to calendar time).
* machine lists, VC sizes, cluster occupancy and the cluster-wide GPU
  utilization CDF.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from .. import paths
from ..atomic import atomic_write_text
from .joblog import parse_job_records
from .machines import combine_machine_lists, read_official_machine_list, read_reconstructed_machine_list
from .quality import QualityReport, TraceFormatError
from .times import parse_naive_local

TABLES = ("jobs", "attempts", "placements", "machines", "gpu_util", "host_util", "vc_quotas",
          "occupancy", "rfold_jobs", "cluster_gpu_util_cdf", "quality_summary", "quality_reasons")

EXTERNAL_FILES = {
    "pollux": "philly/pollux_jobs.csv.gz",
    "dre_jobs": "philly/dre_sampled_jobs.json.gz",
    "dre_util": "philly/dre_util_windows.csv.gz",
    "official_machines": "philly/cluster_machine_list.gz",
    "revised_machines": "philly/revised_machine_list.csv.gz",
    "vc_nodes": "philly/vc_nodes.csv",
    "node_sequence": "philly/node_sequence.csv.gz",
    "gpu_util_cdf": "philly/gpu_util_cdf.csv",
    "rfold": "philly/rfold_philly_jobs.csv.gz",
}
GPUS_PER_NODE = 8  # the Helios VC sizes count 8-GPU nodes
_GPU_SERIES = re.compile(r"^(m\d+)_gpu(\d+)$")
_SERVER = re.compile(r"^m\d+$")
_DRE_KINDS = {("gpu", "utilization"): "gpu", ("cpu", "utilization"): "cpu", ("cpu", "memory"): "mem"}
_MINUTES = [str(m) for m in range(-10, 4)]


def _quarantine_rows(raw: pd.DataFrame, checks: list, file: str, quality: QualityReport) -> pd.Series:
    """Apply ``(bad mask, reason)`` checks in order: a row fails at most once, counted (the first 5 with their line)."""
    keep = pd.Series(True, index=raw.index)
    for bad, reason in checks:
        bad = bad & keep
        for i in raw.index[bad][:5]:
            quality.quarantine(file, reason, n=0, where=f"line {i + 2}")
        if bad.any():
            quality.quarantine(file, reason, n=int(bad.sum()))
        keep &= ~bad
    quality.loaded(file, int(keep.sum()))
    return keep


def read_pollux_jobs(path: Path, quality: QualityReport) -> pd.DataFrame:
    file = path.name
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    expected = ["timestamp", "duration", "num_gpus", "gpu_time", "cluster"]
    if list(raw.columns) != expected:
        raise TraceFormatError(f"{file}: line 1: header {list(raw.columns)} is not the expected {expected}")
    quality.read(file, len(raw), unit="jobs")
    submitted, bad_time, ambiguous = parse_naive_local(raw["timestamp"])
    duration = pd.to_numeric(raw["duration"], errors="coerce")
    gpus = pd.to_numeric(raw["num_gpus"], errors="coerce")
    gpu_time = pd.to_numeric(raw["gpu_time"], errors="coerce")
    checks = [
        (submitted.isna(), "timestamp missing or unparseable"),
        (duration.isna() | (duration < 0), "duration not a non-negative number"),
        (gpus.isna() | (gpus < 1) | (gpus % 1 != 0), "num_gpus not a positive integer"),
        (raw["cluster"].str.strip() == "", "empty cluster (VC)"),
    ]
    keep = _quarantine_rows(raw, checks, file, quality)
    quality.flag(file, "timestamp in the repeated DST hour (read as PDT)", int((ambiguous & keep).sum()))
    inconsistent = keep & ((gpu_time - duration * gpus).abs() > 1e-6 * (1 + duration * gpus))
    quality.flag(file, "gpu_time != duration x num_gpus (kept as given)", int(inconsistent.sum()))
    rows = raw.index[keep]
    return pd.DataFrame({
        "jobid": [f"pollux-{i:05d}" for i in rows],
        "vc": raw.loc[keep, "cluster"].to_numpy(),
        "user": pd.array([pd.NA] * len(rows), dtype="string"),
        "status": pd.array([pd.NA] * len(rows), dtype="string"),
        "submitted": submitted[keep].array,
        "first_start": pd.array([pd.NaT] * len(rows), dtype="datetime64[ns, UTC]"),
        "last_end": pd.array([pd.NaT] * len(rows), dtype="datetime64[ns, UTC]"),
        "num_gpus": pd.array(gpus[keep].astype("int64"), dtype="Int64"),
        "num_servers": pd.array([pd.NA] * len(rows), dtype="Int64"),
        "num_attempts": pd.array([pd.NA] * len(rows), dtype="Int64"),
        "queueing_delay_s": np.full(len(rows), np.nan),
        "run_time_s": duration[keep].to_numpy(dtype="float64"),
        "gpu_time_s": gpu_time[keep].to_numpy(dtype="float64"),
        "source": "pollux",
    })


RFOLD_HEADER = ["#job id", "arrival time (sec)", "topology", "shape", "size", "duration (sec)"]


def read_rfold_jobs(path: Path, quality: QualityReport) -> pd.DataFrame:
    """RFold's Philly jobs: arrival offsets (s from its first arrival), GPUs and duration; nothing else."""
    file = path.name
    raw = pd.read_csv(path, dtype=str, keep_default_na=False)
    if list(raw.columns) != RFOLD_HEADER:
        raise TraceFormatError(f"{file}: line 1: header {list(raw.columns)} is not the expected {RFOLD_HEADER}")
    quality.read(file, len(raw), unit="jobs")
    job = pd.to_numeric(raw["#job id"], errors="coerce")
    arrival = pd.to_numeric(raw["arrival time (sec)"], errors="coerce")
    gpus = pd.to_numeric(raw["size"], errors="coerce")
    duration = pd.to_numeric(raw["duration (sec)"], errors="coerce")
    checks = [
        (job.isna() | (job % 1 != 0) | job.duplicated(keep="first"), "job id not a unique integer"),
        (arrival.isna() | (arrival < 0), "arrival time not a non-negative number"),
        (gpus.isna() | (gpus < 1) | (gpus % 1 != 0), "size not a positive integer"),
        (duration.isna() | (duration < 0), "duration not a non-negative number"),
    ]
    keep = _quarantine_rows(raw, checks, file, quality)
    quality.flag(file, "duration 0 s (kept: a job that ended at once)", int((keep & (duration == 0)).sum()))
    return pd.DataFrame({
        "rfold_id": job[keep].astype("int64").to_numpy(),
        "arrival_offset_s": arrival[keep].to_numpy(dtype="float64"),
        "topology": raw.loc[keep, "topology"].to_numpy(dtype=object),
        "shape": raw.loc[keep, "shape"].to_numpy(dtype=object),
        "num_gpus": gpus[keep].astype("int64").to_numpy(),
        "duration_s": duration[keep].to_numpy(dtype="float64"),
    })


def read_dre_jobs(path: Path, quality: QualityReport):
    """DRE records carry one (the last) attempt at top level; rewrite them as raw jobs."""
    with gzip.open(path, "rt") as fh:
        try:
            records = json.load(fh)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{path.name}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    raw_jobs, runtime_min = [], {}
    for rec in records:
        if isinstance(rec, dict):
            rec = dict(rec)
            rec["attempts"] = [{"start_time": rec.pop("start_time", None), "end_time": rec.pop("end_time", None),
                                "detail": rec.pop("detail", None)}]
            runtime_min[str(rec.get("jobid"))] = rec.pop("runtime_min", None)
        raw_jobs.append(rec)
    jobs, attempts, placements = parse_job_records(raw_jobs, path.name, quality, source="dre")
    given = pd.to_numeric(jobs["jobid"].map(runtime_min), errors="coerce") * 60
    off = (given - jobs["run_time_s"]).abs() > 60
    quality.flag(path.name, "runtime_min disagrees with end - start by > 1 min (end - start used)", int(off.sum()))
    return jobs, attempts, placements


def _iter_csv_records(path: Path):
    """Yield (first line number, record) from a CSV whose quoted cells may span lines."""
    with gzip.open(path, "rt", newline="") as fh:
        reader = csv.reader(fh)
        line = 1
        for record in reader:
            yield line, record
            line = reader.line_num + 1


def read_dre_util_windows(path: Path, jobs: pd.DataFrame, quality: QualityReport):
    """Wide per-job windows -> long GPU and host tables (minute relative to job start).

    A row is quarantined if it cannot be attributed (unknown job, unknown series
    name or kind, wrong field count). Within loaded rows, empty cells and cells
    holding a pasted pandas Series (the duplicated minutes of the 2017-11-05 DST
    change: two values for one minute, so neither can be trusted as *the* value)
    become NaN and are flagged per cell, as do negative values (-1 marks a minute
    without a sample in these files).
    """
    file = path.name
    records = _iter_csv_records(path)
    _, header = next(records)
    expected = ["jobid", "name", "machine_type", "trace"] + _MINUTES
    if header != expected:
        raise TraceFormatError(f"{file}: line 1: header {header} is not the expected {expected}")
    known = set(jobs["jobid"])
    gpu_rows, host_rows = [], []
    empty_cells = series_cells = sentinel_cells = 0
    for line, rec in records:
        quality.read(file, 1)
        where = f"line {line}"
        if len(rec) != len(expected):
            quality.quarantine(file, f"wrong number of fields (expected {len(expected)})", where=where)
            continue
        jobid, name, machine_type, trace = rec[:4]
        kind = _DRE_KINDS.get((machine_type, trace))
        if kind is None:
            quality.quarantine(file, "unknown machine_type/trace pair", where=where)
            continue
        if jobid not in known:
            quality.quarantine(file, "jobid not among the DRE job records", where=where)
            continue
        values = []
        for cell in rec[4:]:
            text = cell.strip()
            if text == "":
                empty_cells += 1
                values.append(np.nan)
                continue
            try:
                value = float(text)
            except ValueError:
                if "dtype:" in text or "\n" in text:
                    series_cells += 1
                    values.append(np.nan)
                else:
                    values = None
                    break
                continue
            if value < 0:
                sentinel_cells += 1
                value = np.nan
            values.append(value)
        if values is None:
            quality.quarantine(file, "non-numeric utilization cell", where=where)
            continue
        if kind == "gpu":
            m = _GPU_SERIES.match(name)
            if not m:
                quality.quarantine(file, "GPU series name not like 'm127_gpu0'", where=where)
                continue
            gpu_rows.append((jobid, m.group(1), int(m.group(2)), values))
        else:
            if not _SERVER.match(name):
                quality.quarantine(file, "server name not like 'm127'", where=where)
                continue
            host_rows.append((jobid, name, kind, values))
        quality.loaded(file, 1)
    quality.flag(file, "empty cell (NaN; cells, not rows)", empty_cells)
    quality.flag(file, "cell holds a pasted pandas Series: duplicated DST minute, value ambiguous (NaN; cells)",
                 series_cells)
    quality.flag(file, "negative value (the sources' -1 'no sample' sentinel; NaN; cells)", sentinel_cells)
    minutes = np.arange(-10, 4, dtype="int64")

    def longify(rows, id_cols):
        if not rows:
            return pd.DataFrame(columns=id_cols + ["minute", "value"])
        n = len(minutes)
        out = {c: np.repeat(np.array([r[i] for r in rows], dtype=object), n) for i, c in enumerate(id_cols)}
        out["minute"] = np.tile(minutes, len(rows))
        out["value"] = np.array([r[-1] for r in rows], dtype="float64").reshape(-1)
        return pd.DataFrame(out)

    gpu = longify(gpu_rows, ["jobid", "machine", "gpu"]).rename(columns={"value": "util"})
    gpu["gpu"] = gpu["gpu"].astype("int64")
    gpu = gpu[gpu["util"].notna()].assign(time=pd.Series(pd.NaT, index=gpu.index, dtype="datetime64[ns, UTC]"))
    host = longify(host_rows, ["jobid", "machine", "kind"])
    host = host.pivot_table(index=["jobid", "machine", "minute"], columns="kind", values="value",
                            aggfunc="first", dropna=False).reset_index()
    host = host.rename(columns={"cpu": "cpu_util", "mem": "mem_util"})
    for col in ("cpu_util", "mem_util"):
        if col not in host:
            host[col] = np.nan
    host = host[host[["cpu_util", "mem_util"]].notna().any(axis=1)]
    host = host.assign(time=pd.Series(pd.NaT, index=host.index, dtype="datetime64[ns, UTC]"))
    gpu = gpu[["jobid", "machine", "gpu", "time", "minute", "util"]].astype({"minute": "Int64"})
    host = host[["jobid", "machine", "time", "minute", "cpu_util", "mem_util"]].astype({"minute": "Int64"})
    return gpu.reset_index(drop=True), host.reset_index(drop=True)


def read_vc_quotas(path: Path, quality: QualityReport) -> pd.DataFrame:
    raw = pd.read_csv(path, dtype=str)
    if list(raw.columns) != ["vc", "node num"]:
        raise TraceFormatError(f"{path.name}: line 1: expected header ['vc', 'node num'], got {list(raw.columns)}")
    quality.read(path.name, len(raw))
    nodes = pd.to_numeric(raw["node num"], errors="coerce")
    bad = nodes.isna() | (nodes < 0)
    for i in raw.index[bad]:
        quality.quarantine(path.name, "node num not a non-negative number", where=f"line {i + 2}")
    quality.loaded(path.name, int((~bad).sum()))
    nodes = nodes[~bad].astype("int64")
    return pd.DataFrame({"vc": raw.loc[~bad, "vc"].to_numpy(), "nodes": nodes.to_numpy(),
                         "gpus": (nodes * GPUS_PER_NODE).to_numpy()})


def read_occupancy(path: Path, quality: QualityReport) -> pd.DataFrame:
    raw = pd.read_csv(path, dtype=str)
    if list(raw.columns) != ["time", "active", "total"]:
        raise TraceFormatError(f"{path.name}: line 1: expected header ['time', 'active', 'total'], "
                               f"got {list(raw.columns)}")
    quality.read(path.name, len(raw))
    time, bad_time, ambiguous = parse_naive_local(raw["time"])
    active = pd.to_numeric(raw["active"], errors="coerce")
    total = pd.to_numeric(raw["total"], errors="coerce")
    bad = time.isna() | active.isna() | total.isna() | (active > total) | (active < 0)
    for i in raw.index[bad][:5]:
        quality.quarantine(path.name, "bad time or counts (need 0 <= active <= total)", n=0, where=f"line {i + 2}")
    if bad.any():
        quality.quarantine(path.name, "bad time or counts (need 0 <= active <= total)", n=int(bad.sum()))
    quality.loaded(path.name, int((~bad).sum()))
    quality.flag(path.name, "time in the repeated DST hour (read as PDT)", int((ambiguous & ~bad).sum()))
    return pd.DataFrame({"time": time[~bad].array, "active": active[~bad].astype("int64").to_numpy(),
                         "total": total[~bad].astype("int64").to_numpy()})


def read_gpu_util_cdf(path: Path, quality: QualityReport) -> pd.DataFrame:
    raw = pd.read_csv(path)
    if list(raw.columns) != ["gpu_util_percent", "cdf_percent"]:
        raise TraceFormatError(f"{path.name}: line 1: expected header ['gpu_util_percent', 'cdf_percent']")
    quality.read(path.name, len(raw))
    ok = raw.notna().all(axis=1) & raw["gpu_util_percent"].between(0, 100) & raw["cdf_percent"].between(0, 100)
    for i in raw.index[~ok]:
        quality.quarantine(path.name, "value outside 0..100 or missing", where=f"line {i + 2}")
    quality.loaded(path.name, int(ok.sum()))
    return raw[ok].reset_index(drop=True).astype("float64")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_external(external: Path) -> dict:
    """Parse every external file into the normalized tables (in memory)."""
    paths = {k: external / v for k, v in EXTERNAL_FILES.items()}
    for key, p in paths.items():
        if not p.exists():
            raise FileNotFoundError(f"{p}: missing input '{key}' (see data/README.md)")
    quality = QualityReport()
    pollux = read_pollux_jobs(paths["pollux"], quality)
    dre_jobs, attempts, placements = read_dre_jobs(paths["dre_jobs"], quality)
    gpu_util, host_util = read_dre_util_windows(paths["dre_util"], dre_jobs, quality)
    official = read_official_machine_list(paths["official_machines"], quality)
    revised = read_reconstructed_machine_list(paths["revised_machines"], quality)
    machines = combine_machine_lists(official, revised, placements, quality, "machines (combined)")
    jobs = pd.concat([dre_jobs.astype(pollux.dtypes.to_dict()), pollux], ignore_index=True)
    tables = {
        "jobs": jobs, "attempts": attempts, "placements": placements, "machines": machines,
        "gpu_util": gpu_util, "host_util": host_util,
        "vc_quotas": read_vc_quotas(paths["vc_nodes"], quality),
        "occupancy": read_occupancy(paths["node_sequence"], quality),
        "rfold_jobs": read_rfold_jobs(paths["rfold"], quality),
        "cluster_gpu_util_cdf": read_gpu_util_cdf(paths["gpu_util_cdf"], quality),
    }
    quality.check()
    tables["quality_summary"], tables["quality_reasons"] = quality.to_tables()
    tables["_inputs"] = {k: {"path": EXTERNAL_FILES[k], "sha256": _sha256(p)} for k, p in paths.items()}
    return tables


def build_public(external: Path, out: Path) -> Path:
    """Convert ``external/`` into Parquet tables in ``out/`` (atomically, via a temp dir)."""
    import shutil
    import tempfile

    import pyarrow as pa

    tables = read_external(Path(external))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        for name in TABLES:
            tables[name].to_parquet(tmp / f"{name}.parquet", index=False, compression="zstd")
        manifest = {"inputs": tables["_inputs"], "tables": {n: len(tables[n]) for n in TABLES},
                    "pandas": pd.__version__, "pyarrow": pa.__version__}
        atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_public(directory: Path) -> dict:
    if not (directory / "manifest.json").exists():
        raise FileNotFoundError(f"{directory}: no converted public data; run `dlcluster build-public`")
    tables = {name: pd.read_parquet(directory / f"{name}.parquet") for name in TABLES}
    tables["quality"] = QualityReport.from_tables(tables.pop("quality_summary"), tables.pop("quality_reasons"))
    return tables


def default_vc_quotas() -> pd.DataFrame:
    """The VC sizes of the public data (Helios), used as quotas for any source that lacks them."""
    return read_vc_quotas(paths.external_dir() / "philly" / "vc_nodes.csv", QualityReport())


def dre_detail_entries(path: Path | None = None) -> pd.Series:
    """Per DRE jobid, the number of entries of its record's ``detail`` (the official notebook's count of a job's
    servers, ``len(detail)``), which for 147 records exceeds their distinct servers (an ip listed twice);
    ``num_servers`` of the loaded tables counts distinct servers."""
    path = path or paths.external_dir() / EXTERNAL_FILES["dre_jobs"]
    with gzip.open(path, "rt") as fh:
        records = json.load(fh)
    return pd.Series({str(r["jobid"]): len(r.get("detail") or []) for r in records if isinstance(r, dict)},
                     name="detail_entries", dtype="int64")
