"""Convert a raw Philly-format directory into Parquet tables, out of core and resumably.

``ingest(raw_dir, out_dir)`` (``dlcluster ingest``, ``make data``) writes::

    out_dir/jobs.parquet, attempts.parquet, placements.parquet   the job log (parsed in memory: 38 MB)
    out_dir/gpu_util/part-NNNNN.parquet   machine, time (UTC), gpu0..gpu7 (percent; null = NA)
    out_dir/cpu_util/part-NNNNN.parquet   machine, time, cpu_util
    out_dir/mem_util/part-NNNNN.parquet   machine, time, mem_util (percent used)
    out_dir/machines.parquet, quality_summary.parquet, quality_reasons.parquet
    out_dir/manifest.json                 written last: a directory without it is incomplete

GPU utilization stays wide (one row per server and minute, as in the raw
file): 8x fewer rows to write and scan than one row per GPU; the per-job join
(:mod:`dlcluster.analysis.job_util`) picks each GPU's column.

The utilization files (GBs) are streamed block by block (``utilcsv``) with
bounded memory. Work in progress lives in ``out_dir/.staging/``: each block
becomes a part file (written under a temporary name, then renamed), followed
by a small journal (JSON, replaced atomically) with the byte offset and line
reached, the quality counts so far and the GPUs seen per server. A rerun after
an interruption drops parts newer than its journal, seeks to the recorded
offset and goes on, so nothing is counted twice. A finished table is moved
into ``out_dir`` by one rename; ``manifest.json`` comes last, and
``load_trace`` accepts nothing without it. A rerun on an unchanged, complete
ingest does nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from .. import paths
from ..atomic import atomic_write_text
from .machines import combine_machine_lists, read_official_machine_list, read_reconstructed_machine_list
from .public import default_vc_quotas
from .quality import QualityReport
from .rawdir import JOB_LOG, merge_host_util, read_job_log
from .utilcsv import WIDE_VALUES, empty_wide, iter_raw_blocks, parse_block, read_layout, wide_to_long

FORMAT = 2
UTIL_FILES = {"gpu": "cluster_gpu_util", "cpu": "cluster_cpu_util", "mem": "cluster_mem_util"}
UTIL_TABLES = {"gpu": "gpu_util", "cpu": "cpu_util", "mem": "mem_util"}
JOB_TABLES = ("jobs", "attempts", "placements")
OTHER_RAW = ("cluster_machine_list", "revised_machine_list.csv")
STAGING = ".staging"
INGEST_BLOCK_BYTES = 8 << 20     # measured: smaller blocks use less memory and were no slower
# Above this many GPU samples, load_ingested leaves utilization on disk (query it with DuckDB).
MAX_UTIL_ROWS_IN_MEMORY = 20_000_000
_MACHINE_SLOTS = 1 << 20
REPEATED = {"gpu": ("repeated machine/gpu/time sample (kept)", 8), "cpu": ("repeated machine/time sample (kept)", 1),
            "mem": ("repeated machine/time sample (kept)", 1)}


class IncompleteIngestError(FileNotFoundError):
    """An ingested directory without its manifest (interrupted, or still running)."""


def ingest(raw_dir: str | Path, out_dir: str | Path, *, block_bytes: int = INGEST_BLOCK_BYTES,
           progress: bool = True, force: bool = False) -> Path:
    """Ingest ``raw_dir`` into ``out_dir`` (see the module docstring); resumes an interrupted run.

    ``force`` redoes everything. Returns ``out_dir``.
    """
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    if not (raw_dir / JOB_LOG).exists():
        raise FileNotFoundError(f"{raw_dir}: no '{JOB_LOG}' (expected the raw Philly trace layout)")
    synthetic = (raw_dir / "SYNTHETIC.md").exists()
    if synthetic and out_dir.resolve() == paths.ingested_philly_dir().resolve():
        raise ValueError(f"{raw_dir} is a SYNTHETIC trace (it has SYNTHETIC.md): it must not be ingested into "
                         f"{out_dir}, where load_trace('philly') would present it as the real trace")
    fingerprints = _fingerprints(raw_dir)
    manifest_path = out_dir / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if not force and manifest.get("format") == FORMAT and manifest.get("raw_files") == fingerprints:
            shutil.rmtree(out_dir / STAGING, ignore_errors=True)     # stopped between manifest and cleanup
            return out_dir
        manifest_path.unlink()           # from here on the directory does not look complete
    staging = out_dir / STAGING
    if force and staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True, exist_ok=True)

    job_quality = _stage_job_log(raw_dir, out_dir, staging, fingerprints[JOB_LOG])
    journals = {}
    for kind, name in UTIL_FILES.items():
        if name in fingerprints:
            journals[kind] = _stage_util(raw_dir / name, kind, out_dir, staging, fingerprints[name],
                                         block_bytes, progress)
        else:                            # a table from an earlier ingest of a file that is gone
            shutil.rmtree(out_dir / UTIL_TABLES[kind], ignore_errors=True)

    quality = QualityReport()
    quality.merge(job_quality)
    for journal in journals.values():
        quality.merge(_report(journal["quality"]))
    official = reconstructed = None
    if (raw_dir / "cluster_machine_list").exists():
        official = read_official_machine_list(raw_dir / "cluster_machine_list", quality)
    if (raw_dir / "revised_machine_list.csv").exists():
        reconstructed = read_reconstructed_machine_list(raw_dir / "revised_machine_list.csv", quality)
    elif "gpu" in journals:
        masks = journals["gpu"]["gpu_masks"]
        reconstructed = pd.DataFrame({"machine": pd.array(list(masks), dtype="str"),
                                      "num_gpus": np.array([bin(m).count("1") for m in masks.values()],
                                                           dtype="int64")})
    placements = pd.read_parquet(out_dir / "placements.parquet")
    machines = combine_machine_lists(official, reconstructed, placements, quality, "machines (combined)")
    quality.check()
    summary, reasons = quality.to_tables()
    for name, table in (("machines", machines), ("quality_summary", summary), ("quality_reasons", reasons)):
        _write_parquet(table, out_dir / f"{name}.parquet")

    tables = {name: pq.read_metadata(out_dir / f"{name}.parquet").num_rows for name in JOB_TABLES + ("machines",)}
    util = {UTIL_TABLES[kind]: {"rows": j["rows"], "samples": j["samples"], "parts": j["parts"],
                                "columns": ["machine", "time", *WIDE_VALUES[kind]]}
            for kind, j in journals.items()}
    manifest = {"format": FORMAT, "raw_dir": str(raw_dir.resolve()), "raw_files": fingerprints,
                "synthetic": synthetic, "tables": tables, "util": util}
    atomic_write_text(manifest_path, json.dumps(manifest, indent=2) + "\n")
    shutil.rmtree(staging, ignore_errors=True)
    return out_dir


def _fingerprints(raw_dir: Path) -> dict:
    """Size and modification time of each raw file: a changed file is ingested again."""
    out = {}
    for name in (JOB_LOG, *UTIL_FILES.values(), *OTHER_RAW):
        path = raw_dir / name
        if path.exists():
            stat = path.stat()
            out[name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return out


def _read_journal(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def _write_journal(path: Path, journal: dict) -> None:
    atomic_write_text(path, json.dumps(journal))


def _snapshot(quality: QualityReport) -> dict:
    summary, reasons = quality.to_tables()
    return {"summary": summary.to_dict("records"), "reasons": reasons.to_dict("records")}


def _report(snapshot: dict) -> QualityReport:
    summary = pd.DataFrame(snapshot["summary"], columns=["file", "unit", "rows_read", "rows_loaded",
                                                         "rows_quarantined", "rows_flagged"])
    reasons = pd.DataFrame(snapshot["reasons"], columns=["file", "kind", "reason", "count", "examples"])
    return QualityReport.from_tables(summary, reasons)


def _write_parquet(table, path: Path) -> None:
    """Write under a temporary name, then rename: a file that exists is complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    if isinstance(table, pd.DataFrame):
        table.to_parquet(tmp, index=False)
    else:
        pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def _stage_job_log(raw_dir: Path, out_dir: Path, staging: Path, fingerprint: dict) -> QualityReport:
    journal_path = staging / "job_log.json"
    journal = _read_journal(journal_path)
    if (journal is not None and journal["raw"] == fingerprint
            and all((out_dir / f"{name}.parquet").exists() for name in JOB_TABLES)):
        return _report(journal["quality"])
    quality = QualityReport()
    tables = read_job_log(raw_dir / JOB_LOG, quality, source=raw_dir.name)   # as load_trace(raw_dir) does
    for name, table in zip(JOB_TABLES, tables, strict=True):
        _write_parquet(table, out_dir / f"{name}.parquet")
    _write_journal(journal_path, {"raw": fingerprint, "quality": _snapshot(quality)})
    return quality


def _part_path(part_dir: Path, index: int) -> Path:
    return part_dir / f"part-{index:05d}.parquet"


def _stage_util(path: Path, kind: str, out_dir: Path, staging: Path, fingerprint: dict, block_bytes: int,
                progress: bool) -> dict:
    """Stream one utilization file into ``.staging/<table>/`` and publish it; returns its final journal."""
    table = UTIL_TABLES[kind]
    journal_path, part_dir, published = staging / f"{table}.json", staging / table, out_dir / table
    layout = read_layout(path, kind)
    journal = _read_journal(journal_path)
    if journal is not None and journal["raw"] == fingerprint and journal["published"] and published.is_dir():
        return journal
    if journal is None or journal["raw"] != fingerprint or list(journal["columns"]) != list(layout.names) \
            or (journal["published"] and not published.is_dir()):
        shutil.rmtree(part_dir, ignore_errors=True)
        journal = {"raw": fingerprint, "columns": list(layout.names), "next_offset": layout.data_offset,
                   "next_line": 2, "parts": 0, "rows": 0, "samples": 0, "gpu_masks": {},
                   "quality": _snapshot(QualityReport()), "done": False, "published": False}
    if journal["done"] and not part_dir.exists() and published.is_dir():   # stopped just after the rename
        journal["published"] = True
        _write_journal(journal_path, journal)
        return journal

    if not journal["done"]:
        part_dir.mkdir(parents=True, exist_ok=True)
        for leftover in part_dir.iterdir():     # parts written after the journal was last saved
            if not leftover.name.startswith("part-") or int(leftover.stem[5:]) >= journal["parts"]:
                leftover.unlink()
        quality = _report(journal["quality"])
        quality.read(path.name, 0)              # a file with a header only is in the report too
        masks = journal["gpu_masks"]
        with tqdm(total=path.stat().st_size, initial=journal["next_offset"], unit="B", unit_scale=True,
                  desc=f"ingesting {path.name}", disable=not progress) as bar:
            for block in iter_raw_blocks(path, journal["next_offset"], journal["next_line"], block_bytes):
                wide = parse_block(block, layout, path.name, quality)
                if kind == "gpu":
                    _update_gpu_masks(masks, wide)
                _write_parquet(wide, _part_path(part_dir, journal["parts"]))
                journal.update(next_offset=block.end_offset, next_line=block.next_line, parts=journal["parts"] + 1,
                               rows=journal["rows"] + wide.num_rows,
                               samples=journal["samples"] + _samples(wide, kind),
                               quality=_snapshot(quality), gpu_masks=masks)
                _write_journal(journal_path, journal)
                bar.update(len(block.data))
        if journal["parts"] == 0:               # a file with a header only: one empty part keeps the glob valid
            _write_parquet(empty_wide(kind), _part_path(part_dir, 0))
            journal["parts"] = 1
        reason, cells_per_row = REPEATED[kind]
        quality.flag(path.name, reason, cells_per_row * _count_repeated_rows(part_dir, journal["rows"]))
        journal.update(done=True, quality=_snapshot(quality))
        _write_journal(journal_path, journal)

    if published.exists():
        shutil.rmtree(published)
    os.replace(part_dir, published)
    journal["published"] = True
    _write_journal(journal_path, journal)
    return journal


def _samples(wide: pa.Table, kind: str) -> int:
    """Non-missing values in a block (GPU: cells, so samples of single GPUs)."""
    return sum(wide.num_rows - wide.column(c).null_count for c in WIDE_VALUES[kind])


def _update_gpu_masks(masks: dict, wide: pa.Table) -> None:
    """Per server, a bit per GPU column that reported a value (the reconstructed machine list)."""
    if wide.num_rows == 0:
        return
    machine = wide.column("machine").combine_chunks()
    codes = machine.indices.to_numpy(zero_copy_only=False)
    names = machine.dictionary.to_pylist()
    present, first = np.unique(codes, return_index=True)
    bits = np.zeros(len(names), dtype=np.int64)
    for k, column in enumerate(WIDE_VALUES["gpu"]):
        valid = wide.column(column).is_valid().to_numpy(zero_copy_only=False)
        seen = np.bincount(codes[valid], minlength=len(names)) > 0
        bits |= seen.astype(np.int64) << k
    for code in present[np.argsort(first, kind="stable")]:      # first appearance order, as the in-memory loader
        name = names[code]
        masks[name] = masks.get(name, 0) | int(bits[code])


def _count_repeated_rows(part_dir: Path, rows: int) -> int:
    """Rows whose (machine, time) occurred before in the file (kept, counted).

    One int64 key per row (time in seconds, machine code), sorted in place:
    8 bytes a row, about 360 MB for the real GPU file.
    """
    codes: dict[str, int] = {}
    keys = np.empty(rows, dtype=np.int64)
    filled = 0
    for part in sorted(part_dir.glob("part-*.parquet")):
        table = pq.read_table(part, columns=["machine", "time"])
        if table.num_rows == 0:
            continue
        machine = table.column("machine").combine_chunks()
        local = np.array([codes.setdefault(name, len(codes)) for name in machine.dictionary.to_pylist()],
                         dtype=np.int64)
        seconds = table.column("time").cast(pa.int64()).to_numpy() // 1_000_000_000
        keys[filled:filled + table.num_rows] = (seconds * _MACHINE_SLOTS
                                                + local[machine.indices.to_numpy(zero_copy_only=False)])
        filled += table.num_rows
    if len(codes) > _MACHINE_SLOTS or filled != rows:
        raise AssertionError(f"{part_dir}: {filled} rows in the parts, {rows} in the journal; "
                             f"{len(codes)} machines (at most {_MACHINE_SLOTS})")
    keys.sort()
    return int(np.count_nonzero(keys[1:] == keys[:-1]))


def read_manifest(directory: str | Path) -> dict:
    """The manifest of a complete ingest; a clear error for an incomplete or outdated one."""
    directory = Path(directory)
    path = directory / "manifest.json"
    if not path.exists():
        state = "an interrupted ingest (rerun it to finish)" if (directory / STAGING).exists() else "no ingest"
        raise IncompleteIngestError(f"{directory}: no manifest.json: {state}; run `dlcluster ingest RAW_DIR "
                                    f"--out {directory}`")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise IncompleteIngestError(f"{directory}: ingested with an older layout (format "
                                    f"{manifest.get('format')}, expected {FORMAT}); run the ingest again")
    return manifest


def util_parts(directory: str | Path, kind: str) -> str:
    """Glob of the Parquet parts of a utilization table (``gpu``, ``cpu``, ``mem``), for DuckDB or pyarrow."""
    return str(Path(directory) / UTIL_TABLES[kind] / "*.parquet")


def read_util_long(directory: str | Path, kind: str) -> pd.DataFrame:
    """A whole utilization table in the long in-memory form (GPU: one row per GPU sample, NA cells dropped)."""
    frames = []
    for part in sorted((Path(directory) / UTIL_TABLES[kind]).glob("part-*.parquet")):
        frames.append(wide_to_long(pq.read_table(part), kind))
    frame = pd.concat(frames, ignore_index=True)
    if kind == "gpu":
        frame = frame[frame["util"].notna()].reset_index(drop=True)
    return frame


def load_ingested(directory: str | Path, with_util: bool = True,
                  max_util_rows: int = MAX_UTIL_ROWS_IN_MEMORY) -> dict:
    """The tables of an ingested directory (what ``load_trace('philly')`` returns).

    ``gpu_util`` and ``host_util`` are loaded into memory (the long form of
    :mod:`dlcluster.trace.schema`) only when ``with_util`` and the GPU table
    has at most ``max_util_rows`` samples; otherwise they are None, with a
    warning: the full trace has ~260 million GPU samples, which are analysed on
    disk by :mod:`dlcluster.analysis.job_util` (DuckDB) via
    :func:`util_parts` / ``Trace.location``.
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest.get("synthetic") and directory.resolve() == paths.ingested_philly_dir().resolve():
        raise ValueError(f"{directory} holds an ingest of a SYNTHETIC trace; it cannot stand for the real "
                         "Philly trace: delete it and run `make data`")
    tables = {name: pd.read_parquet(directory / f"{name}.parquet") for name in (*JOB_TABLES, "machines")}
    tables["quality"] = QualityReport.from_tables(pd.read_parquet(directory / "quality_summary.parquet"),
                                                  pd.read_parquet(directory / "quality_reasons.parquet"))
    tables["gpu_util"] = tables["host_util"] = None
    util = manifest["util"]
    samples = util.get("gpu_util", {}).get("samples", 0)
    if with_util and samples > max_util_rows:
        warnings.warn(f"{directory}: gpu_util has {samples:,} samples (> {max_util_rows:,}): gpu_util and "
                      "host_util are left on disk (None); use dlcluster.analysis.job_util or "
                      "dlcluster.trace.ingest.util_parts", stacklevel=2)
    elif with_util:
        if "gpu_util" in util:
            gpu = read_util_long(directory, "gpu")
            tables["gpu_util"] = gpu.assign(jobid=pd.NA, minute=pd.NA)[
                ["jobid", "machine", "gpu", "time", "minute", "util"]]
        cpu = read_util_long(directory, "cpu") if "cpu_util" in util else None
        mem = read_util_long(directory, "mem") if "mem_util" in util else None
        host = merge_host_util(cpu, mem, ["machine", "time"])
        if host is not None:
            tables["host_util"] = host.assign(jobid=pd.NA, minute=pd.NA)[
                ["jobid", "machine", "time", "minute", "cpu_util", "mem_util"]]
    tables["vc_quotas"] = default_vc_quotas()
    return tables
