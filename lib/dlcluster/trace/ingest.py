"""Convert a raw Philly-format directory into Parquet tables (``dlcluster ingest``).

The job log and machine lists are small and parsed in memory; the per-minute
utilization files (GBs for the real trace) are streamed block by block into
``gpu_util/part-NNNNN.parquet`` etc., so memory stays bounded. Everything is
written to a temporary folder that replaces the output only when complete.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from ..report import atomic_write_text
from .machines import combine_machine_lists, read_official_machine_list
from .quality import QualityReport
from .rawdir import JOB_LOG, read_job_log
from .utilcsv import BLOCK_BYTES, iter_util_blocks

UTIL_FILES = {"gpu": "cluster_gpu_util", "cpu": "cluster_cpu_util", "mem": "cluster_mem_util"}
TABLES = ("jobs", "attempts", "placements", "machines", "quality_summary", "quality_reasons")


def _stream_util(path: Path, kind: str, out: Path, quality: QualityReport, seen_gpus: dict) -> int:
    out.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    rows = 0
    with tqdm(total=size, unit="B", unit_scale=True, desc=f"ingesting {path.name}") as bar:
        for i, block in enumerate(iter_util_blocks(path, kind, quality)):
            if kind == "gpu":
                for machine in block["machine"].unique():
                    seen_gpus.setdefault(machine, set())
                for machine, gpus in block[block["util"].notna()].groupby("machine")["gpu"].unique().items():
                    seen_gpus[machine].update(int(g) for g in gpus)
                block = block[block["util"].notna()]
            block.to_parquet(out / f"part-{i:05d}.parquet", index=False, compression="zstd")
            rows += len(block)
            bar.update(min(BLOCK_BYTES, size - bar.n))  # blocks are ~BLOCK_BYTES of input
    return rows


def ingest(raw_dir: Path, out_dir: Path) -> Path:
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    if not (raw_dir / JOB_LOG).exists():
        raise FileNotFoundError(f"{raw_dir}: no '{JOB_LOG}' (expected the raw Philly trace layout)")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
    try:
        quality = QualityReport()
        jobs, attempts, placements = read_job_log(raw_dir / JOB_LOG, quality, source="philly")
        seen_gpus: dict[str, set] = {}
        counts = {}
        for kind, name in UTIL_FILES.items():
            if (raw_dir / name).exists():
                counts[f"{kind}_util"] = _stream_util(raw_dir / name, kind, tmp / f"{kind}_util", quality, seen_gpus)
        official = None
        if (raw_dir / "cluster_machine_list").exists():
            official = read_official_machine_list(raw_dir / "cluster_machine_list", quality)
        reconstructed = (pd.DataFrame({"machine": list(seen_gpus), "num_gpus": [len(g) for g in seen_gpus.values()]})
                         if seen_gpus else None)
        machines = combine_machine_lists(official, reconstructed, placements, quality, "machines (combined)")
        quality.check()
        summary, reasons = quality.to_tables()
        for name, table in zip(TABLES, (jobs, attempts, placements, machines, summary, reasons)):
            table.to_parquet(tmp / f"{name}.parquet", index=False)
        manifest = {"raw_dir": str(raw_dir), "tables": {n: len(t) for n, t in
                                                          zip(TABLES, (jobs, attempts, placements, machines))},
                    "util_rows": counts}
        atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def load_ingested(directory: Path, with_util: bool = True) -> dict:
    tables = {name: pd.read_parquet(directory / f"{name}.parquet") for name in TABLES}
    tables["quality"] = QualityReport.from_tables(tables.pop("quality_summary"), tables.pop("quality_reasons"))
    if with_util:
        for kind in UTIL_FILES:
            part_dir = directory / f"{kind}_util"
            tables[f"{kind}_util"] = pq.read_table(part_dir).to_pandas() if part_dir.exists() else None
    gpu, cpu, mem = (tables.pop(f"{k}_util", None) for k in UTIL_FILES)
    if gpu is not None:
        tables["gpu_util"] = gpu.assign(jobid=pd.NA, minute=pd.NA)[["jobid", "machine", "gpu", "time", "minute", "util"]]
    from .rawdir import merge_host_util
    host = merge_host_util(cpu, mem, ["machine", "time"])
    if host is not None:
        tables["host_util"] = host.assign(jobid=pd.NA, minute=pd.NA)[
            ["jobid", "machine", "time", "minute", "cpu_util", "mem_util"]]
    from . import default_vc_quotas
    tables["vc_quotas"] = default_vc_quotas()
    return tables
