"""Load a directory in the raw Philly trace format into memory.

Expected files (the official release names; only ``cluster_job_log`` is
required): ``cluster_job_log``, ``cluster_gpu_util``, ``cluster_cpu_util``,
``cluster_mem_util``, ``cluster_machine_list``, and optionally
``revised_machine_list.csv`` (the reconstructed list). Without the
reconstruction, GPU counts are reconstructed from ``cluster_gpu_util``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from .joblog import parse_job_records
from .machines import (combine_machine_lists, read_official_machine_list,
                       read_reconstructed_machine_list, reconstruct_from_gpu_util)
from .quality import QualityReport, TraceFormatError
from .utilcsv import read_util

JOB_LOG = "cluster_job_log"


def read_job_log(path: Path, quality: QualityReport, source: str):
    try:
        with open(path) as fh:
            records = json.load(fh)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    return parse_job_records(records, path.name, quality, source)


def merge_host_util(cpu: pd.DataFrame | None, mem: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame | None:
    if cpu is None and mem is None:
        return None
    if cpu is None:
        return mem.assign(cpu_util=float("nan"))[keys + ["cpu_util", "mem_util"]]
    if mem is None:
        return cpu.assign(mem_util=float("nan"))[keys + ["cpu_util", "mem_util"]]
    return cpu.merge(mem, on=keys, how="outer")[keys + ["cpu_util", "mem_util"]]


def flag_repeated_minutes(frame: pd.DataFrame, keys: list[str], file: str, quality: QualityReport) -> None:
    """Repeated (machine, minute) samples are kept but counted, so analyses can decide."""
    quality.flag(file, f"repeated {'/'.join(keys)} sample (kept)", int(frame.duplicated(keys).sum()))


def load_raw_dir(directory: str | Path, source: str = "philly", with_util: bool = True) -> dict:
    """Read every present raw file; returns the tables and a QualityReport."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: not a directory in the raw Philly format")
    job_log = directory / JOB_LOG
    if not job_log.exists():
        raise FileNotFoundError(f"{directory}: no '{JOB_LOG}' file (expected the raw Philly trace layout)")
    quality = QualityReport()
    jobs, attempts, placements = read_job_log(job_log, quality, source)

    gpu = cpu = mem = None
    if with_util:
        if (directory / "cluster_gpu_util").exists():
            gpu = read_util(directory / "cluster_gpu_util", "gpu", quality)
            flag_repeated_minutes(gpu, ["machine", "gpu", "time"], "cluster_gpu_util", quality)
        if (directory / "cluster_cpu_util").exists():
            cpu = read_util(directory / "cluster_cpu_util", "cpu", quality)
            flag_repeated_minutes(cpu, ["machine", "time"], "cluster_cpu_util", quality)
        if (directory / "cluster_mem_util").exists():
            mem = read_util(directory / "cluster_mem_util", "mem", quality)
            flag_repeated_minutes(mem, ["machine", "time"], "cluster_mem_util", quality)

    official = None
    if (directory / "cluster_machine_list").exists():
        official = read_official_machine_list(directory / "cluster_machine_list", quality)
    if (directory / "revised_machine_list.csv").exists():
        reconstructed = read_reconstructed_machine_list(directory / "revised_machine_list.csv", quality)
    elif gpu is not None:
        reconstructed = reconstruct_from_gpu_util(gpu)
    else:
        reconstructed = None
    machines = combine_machine_lists(official, reconstructed, placements, quality, "machines (combined)")

    gpu_util = None
    if gpu is not None:
        gpu = gpu[gpu["util"].notna()].reset_index(drop=True)
        gpu_util = gpu.assign(jobid=pd.NA, minute=pd.NA)[["jobid", "machine", "gpu", "time", "minute", "util"]]
    host = merge_host_util(cpu, mem, ["machine", "time"])
    if host is not None:
        host = host.assign(jobid=pd.NA, minute=pd.NA)[["jobid", "machine", "time", "minute", "cpu_util", "mem_util"]]
    quality.check()
    return {"jobs": jobs, "attempts": attempts, "placements": placements, "machines": machines,
            "gpu_util": gpu_util, "host_util": host, "quality": quality}
