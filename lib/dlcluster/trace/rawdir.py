"""Load a directory in the raw Philly trace format into memory.

Expected files (the official release names; only ``cluster_job_log`` is
required): ``cluster_job_log``, ``cluster_gpu_util``, ``cluster_cpu_util``,
``cluster_mem_util``, ``cluster_machine_list``, and optionally
``revised_machine_list.csv`` (the reconstructed list). Without the
reconstruction, GPU counts are reconstructed from ``cluster_gpu_util``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from .joblog import parse_job_records
from .machines import (combine_machine_lists, read_official_machine_list,
                       read_reconstructed_machine_list, reconstruct_from_gpu_util)
from .quality import UTF8_BOM, QualityReport, TraceFormatError, not_utf8
from .utilcsv import read_util

JOB_LOG = "cluster_job_log"
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def read_job_log(path: Path, quality: QualityReport, source: str):
    return parse_job_records(decode_job_log(Path(path).read_bytes(), path), path.name, quality, source)


def decode_job_log(data: bytes, path: Path):
    """The JSON value of a job log (UTF-8, a leading BOM skipped); unreadable bytes are a TraceFormatError."""
    skipped = len(UTF8_BOM) if data.startswith(UTF8_BOM) else 0
    body = data[skipped:]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(str(path), body, exc, offset=skipped, context=_job_holding(body, exc.start)) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}: line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:            # e.g. an integer with more digits than Python converts
        raise TraceFormatError(f"{path}: not valid JSON ({exc})") from None


def _job_holding(body: bytes, offset: int) -> str:
    """' in job #i (jobid)' for the top-level record holding byte ``offset``; '' where the log cannot tell."""
    text = body.decode("utf-8", "replace").replace("\ufffd", " ")    # a blank keeps a string or the layout valid
    position = len(body[:offset].decode("utf-8"))      # the first bad byte: all before it is valid
    decoder = json.JSONDecoder()
    at = _JSON_SPACE.match(text, 0).end()
    if text[at:at + 1] != "[":
        return ""
    at, index = at + 1, 0
    while at < position:
        at = _JSON_SPACE.match(text, at).end()
        try:
            record, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return ""
        if at <= position < end:
            jobid = record.get("jobid") if isinstance(record, dict) else None
            return f" in job #{index}" + (f" ({jobid})" if jobid not in (None, "") else "")
        at = _JSON_SPACE.match(text, end).end()
        if text[at:at + 1] != ",":
            return ""
        at, index = at + 1, index + 1
    return ""


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
