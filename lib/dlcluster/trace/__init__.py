"""Load the Philly trace into normalized tables: ``load_trace(source)``.

``source`` is one of

* ``"public"``: the embedded default, real public data derived from the trace
  (``data/public/``, converted from ``data/external/``);
* ``"philly"``: the full official trace after ``make data`` (ingested Parquet
  in ``data/philly/``). Its ~260M per-minute GPU samples are not loaded into
  memory: ``gpu_util``/``host_util`` are None and analyses use the out-of-core
  joins of :mod:`dlcluster.analysis.job_util` over the Parquet parts;
* a path to a directory in the raw Philly format (e.g. a simulated run written
  by the simulator, or a slice of the real trace).

Column meanings, time zones and the definitions of queueing delay, run time
and re-queue delay are documented in :mod:`dlcluster.trace.schema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .. import paths
from .quality import QualityReport, TraceFormatError
from .schema import BUCKET_KEYS, SIZE_BUCKETS, size_bucket

__all__ = ["Trace", "load_trace", "trace_fingerprint", "QualityReport", "TraceFormatError", "SIZE_BUCKETS",
           "BUCKET_KEYS", "size_bucket", "SOURCES"]

# What each source is and which questions it can answer; notebooks print this.
SOURCES = {
    "pollux": {
        "description": ("82,247 real Philly jobs: submit time, duration, GPUs, VC "
                        "(Pollux artifact, petuum/adaptdl c793c708)"),
        "answers": "arrivals, job sizes, run times and GPU time per VC; the workload the simulator replays",
        "lacks": "job id, user, status, start time, attempts, placement",
        "label": "real (Pollux-derived Philly jobs)",
    },
    "dre": {
        "description": ("5,910 complete real job records with placement and per-minute GPU/CPU/memory samples "
                        "around the start (weifanjiang/DRE 8168f186)"),
        "answers": ("the last attempt's start, run time and placement, status (Pass/Failed), users, utilization "
                    "just after that start; the first-attempt wait with RFold's duration (first start = the "
                    "record's end - the same job's RFold duration)"),
        "lacks": ("killed jobs, single-GPU jobs (selected by its authors), every attempt but the last (each record "
                  "keeps only its job's last attempt), utilization beyond 3 minutes"),
        "label": "real (DRE complete job records)",
    },
    "rfold": {
        "description": ("111,549 real Philly jobs: arrival offset, GPUs, duration "
                        "(RFold artifact, shuoshuc/RFold WorkloadGen/data/philly_trace.csv); table rfold_jobs"),
        "answers": "arrivals, job sizes and durations of a larger job set (about 3.7x Pollux's GPU-seconds)",
        "lacks": "calendar time (offsets only), VC, user, status, attempts, placement; how duration was derived",
        "label": "real (RFold-derived Philly jobs)",
    },
    "philly": {
        "description": "the full official Philly trace (msr-fiddle/philly-traces, 117,325 jobs)",
        "answers": "everything in the paper's trace analyses",
        "lacks": "",
        "label": "real (full Philly trace)",
    },
}


@dataclass
class Trace:
    """Normalized tables of one trace source (see :mod:`dlcluster.trace.schema`)."""

    name: str
    jobs: pd.DataFrame
    attempts: pd.DataFrame
    placements: pd.DataFrame
    machines: pd.DataFrame
    quality: QualityReport
    gpu_util: pd.DataFrame | None = None
    host_util: pd.DataFrame | None = None
    vc_quotas: pd.DataFrame | None = None
    occupancy: pd.DataFrame | None = None
    cluster_gpu_util_cdf: pd.DataFrame | None = None
    rfold_jobs: pd.DataFrame | None = None
    location: Path | None = None
    extra: dict = field(default_factory=dict)

    def describe_source(self, source: str) -> dict:
        """Description of a value of the ``source`` column (label, what it answers, what it lacks)."""
        if source in SOURCES:
            return SOURCES[source]
        if self.extra.get("synthetic"):
            return {"description": f"a SYNTHETIC full-size trace for speed tests ({self.location})",
                    "answers": "nothing about Philly: speed and memory only", "lacks": "anything real",
                    "label": f"SYNTHETIC trace ({Path(str(self.location)).name})"}
        if self.extra.get("simulated"):
            return {"description": f"a SIMULATED run written in the raw Philly format ({self.location})",
                    "answers": "what the simulator modelled (its metadata.json says how)",
                    "lacks": "anything real", "label": f"SIMULATED run ({Path(str(self.location)).name})"}
        return {"description": f"raw Philly-format files in {self.location}", "answers": "as the files allow",
                "lacks": "", "label": f"raw-format directory {self.location}"}

    def jobs_of(self, source: str) -> pd.DataFrame:
        return self.jobs[self.jobs["source"] == source]

    def __repr__(self) -> str:
        counts = self.jobs["source"].value_counts(sort=False).to_dict()
        return f"Trace({self.name!r}, jobs={counts}, machines={len(self.machines)})"


def _from_tables(name: str, tables: dict, location: Path | None) -> Trace:
    return Trace(name=name, jobs=tables["jobs"], attempts=tables["attempts"], placements=tables["placements"],
                 machines=tables["machines"], quality=tables["quality"], gpu_util=tables.get("gpu_util"),
                 host_util=tables.get("host_util"), vc_quotas=tables.get("vc_quotas"),
                 occupancy=tables.get("occupancy"), cluster_gpu_util_cdf=tables.get("cluster_gpu_util_cdf"),
                 rfold_jobs=tables.get("rfold_jobs"), location=location)


def load_trace(source: str | Path = "public", with_util: bool = True) -> Trace:
    """Load a trace source into normalized tables (see the module docstring)."""
    if isinstance(source, str) and source == "public":
        from .public import load_public
        return _from_tables("public", load_public(paths.public_dir()), paths.public_dir())
    if isinstance(source, str) and source == "philly":
        from .ingest import load_ingested
        ingested = paths.ingested_philly_dir()
        if (ingested / "manifest.json").exists():
            return _from_tables("philly", load_ingested(ingested, with_util=with_util), ingested)
        raw = paths.raw_philly_dir()
        if (raw / "cluster_job_log").exists():
            raise FileNotFoundError(f"{raw} holds the raw trace but it is not ingested yet: run `make data` "
                                    "(or `dlcluster ingest`)")
        raise FileNotFoundError("the full Philly trace is not here: run `make data` to download, verify and "
                                "ingest it (needs internet), or pass a directory in the raw Philly format")
    directory = Path(source)
    if not directory.exists():
        raise FileNotFoundError(f"trace source {str(source)!r}: expected 'public', 'philly' or a directory "
                                "in the raw Philly format")
    from .public import default_vc_quotas
    from .rawdir import load_raw_dir
    tables = load_raw_dir(directory, source=directory.name, with_util=with_util)
    tables["vc_quotas"] = default_vc_quotas()
    trace = _from_tables(str(directory), tables, directory)
    trace.extra = _run_metadata(directory)
    return trace


def trace_fingerprint(source: str | Path = "public") -> str:
    """sha256 over the files :func:`load_trace` reads for ``source``, without loading them.

    ``"public"``: every file of ``data/public/`` by content (a few MB); ``"philly"``: the ingest's
    ``manifest.json`` (it holds the checksums of what it ingested); a directory: each file's name, size and
    modification time (a raw trace can be gigabytes).
    """
    import hashlib

    digest = hashlib.sha256(str(source).encode() + b"\0")
    if isinstance(source, str) and source in ("public", "philly"):
        folder = paths.public_dir() if source == "public" else paths.ingested_philly_dir()
        files = sorted(folder.rglob("*")) if source == "public" else [folder / "manifest.json"]
        for file in (f for f in files if f.is_file()):
            digest.update(file.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
        return digest.hexdigest()
    directory = Path(source)
    if not directory.is_dir():
        raise FileNotFoundError(f"trace source {str(source)!r}: expected 'public', 'philly' or a directory "
                                "in the raw Philly format")
    for file in sorted(f for f in directory.rglob("*") if f.is_file()):
        stat = file.stat()
        digest.update(f"{file.relative_to(directory).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _run_metadata(directory: Path) -> dict:
    """A simulated run labels itself with ``metadata.json`` (``"simulated": true``)."""
    import json
    meta = directory / "metadata.json"
    if not meta.exists():
        return {}
    try:
        doc = json.loads(meta.read_text())
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{meta}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    return doc if isinstance(doc, dict) else {}
