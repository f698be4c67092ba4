"""A full-size SYNTHETIC stand-in for the raw Philly trace: for measuring speed and memory, never for results.

The real trace (6.6 GB) cannot be downloaded on the development machines, so
the ingest and the per-job utilization join are benchmarked on files of the
same format and about the same size:

* ``cluster_job_log`` and ``cluster_machine_list``: a simulated run
  (:mod:`dlcluster.sim`, Philly policy with failures and retries) of
  ``117,325 x scale`` generated jobs on the 539 GPU servers of the public
  machine list, written by the simulator's raw-trace writer;
* ``cluster_gpu_util``, ``cluster_cpu_util``, ``cluster_mem_util``: one row
  per machine (all 552, including the 13 without GPUs) and minute for
  ``81,573 x scale`` minutes (the real CPU file has 45,028,260 rows, i.e.
  81,573 minutes of 552 machines), times with the PDT/PST suffix (the repeated
  hour of 2017-11-05 appears twice). A GPU held by an attempt reads the job's
  base level (drawn from the real cluster GPU utilization CDF less its idle
  GPUs, as the simulator's writer: :func:`.rawtrace.draw_job_levels`) plus N(0, 5)
  noise per minute, clipped to [0, 100]; an idle GPU reads 0; an absent GPU
  ``NA``. Host CPU is 4% + 45% x the share of the server's GPUs in use, plus
  N(0, 3); memory used is 20% + 40% x that share, plus N(0, 2), of a fixed
  total per server;
* malformed lines in each utilization file (short rows, times without a
  zone, non-numeric values; 8 of each at full size, in proportion to the size,
  at least 1), at recorded line numbers, so that the ingest's slow path is
  part of what is measured.

Everything is seeded; ``SYNTHETIC.md`` and ``metadata.json`` in the output
say what the files are. Ingesting such a directory into ``data/philly`` (where
``load_trace('philly')`` looks) is refused.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from tqdm.auto import tqdm

from ..trace.rawwrite import GPU_SLOTS, UTIL_HEADERS, pacific_minute_stamps
from .rawtrace import draw_job_levels, run_allocated_share

FULL_JOBS = 117_325
FULL_MINUTES = 81_573
EPOCH = pd.Timestamp("2017-10-03 07:00:00", tz="UTC")     # 2017-10-03 00:00 PDT
GPU_NOISE_SD, CPU_NOISE_SD, MEM_NOISE_SD = 5.0, 3.0, 2.0
CHUNK_MINUTES = 1440
DEFECTS = {  # kind of malformed line -> how it is made from a good one
    "wrong number of fields": lambda line: b",".join(line.split(b",")[:2]),
    "time not like 'YYYY-MM-DD HH:MM:SS PDT|PST'": lambda line: line[:19] + line[23:],
    "non-numeric utilization value": lambda line: _replace_field(line, 2, b"n/a%"),
}
DEFECTS_PER_KIND_AT_FULL_SIZE = 8      # one per ~5.6 million rows and kind, at least one


def _replace_field(line: bytes, index: int, value: bytes) -> bytes:
    fields = line.split(b",")
    fields[index] = value
    return b",".join(fields)


def generate_raw_trace(out_dir: str | Path, scale: float = 1.0, seed: int = 0, *, malformed_lines: bool = True,
                       progress: bool = True, overwrite: bool = False) -> Path:
    """Write a SYNTHETIC raw-format trace of ``scale`` x the real trace's size into ``out_dir``.

    ``scale`` multiplies the number of jobs (117,325) and of utilization
    minutes (81,573); at 1.0 the files take about 6.1 GB. ``malformed_lines``
    plants the malformed lines described in the module docstring. The
    directory is built next to ``out_dir`` and renamed into place when
    complete.
    """
    if not 0 < scale <= 4:
        raise ValueError(f"scale must be in (0, 4], got {scale!r}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not overwrite:
        raise FileExistsError(f"{out_dir} exists (pass overwrite=True to replace it)")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f".{out_dir.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        meta = _generate(tmp, scale, seed, malformed_lines, progress)
        (tmp / "metadata.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        text = _synthetic_md(meta)
        (tmp / "SYNTHETIC.md").write_text(text)
        (tmp / "README.md").write_text(text)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _generate(directory: Path, scale: float, seed: int, malformed_lines: bool, progress: bool) -> dict:
    from . import (default_failure_model, generate_workload, quotas_from_table, simulate,
                       topology_from_machines, write_raw_trace)
    from ..trace import load_trace

    public = load_trace("public", with_util=False)
    machines = public.machines[["machine", "num_gpus"]].copy()
    machines["num_gpus"] = machines["num_gpus"].fillna(0).astype(int)
    topology = topology_from_machines(public.machines)
    quotas = quotas_from_table(public.vc_quotas)
    num_jobs = max(1, round(FULL_JOBS * scale))
    minutes = max(1, round(FULL_MINUTES * scale))
    workload = generate_workload(num_jobs, seed=seed, mean_interarrival_s=minutes * 60.0 / num_jobs,
                                 vcs=tuple(sorted(quotas)), epoch=str(EPOCH))
    result = simulate(workload, topology, "philly", quotas=quotas, failures=default_failure_model(), seed=seed)
    write_raw_trace(result, directory, util_hours=0, seed=seed)        # job log + machine list
    simulation = json.loads((directory / "metadata.json").read_text())

    rng = np.random.default_rng([seed, 0x5917])
    spans = _gpu_spans(result, machines, rng)
    per_kind = max(1, round(DEFECTS_PER_KIND_AT_FULL_SIZE * scale)) if malformed_lines else 0
    defects = _defect_positions(minutes * len(machines), per_kind, rng)
    writer = _UtilWriter(directory, machines, spans, minutes, rng, defects)
    with tqdm(total=minutes, unit="min", desc="synthetic utilization", disable=not progress) as bar:
        for first in range(0, minutes, CHUNK_MINUTES):
            count = min(CHUNK_MINUTES, minutes - first)
            writer.write_chunk(first, count)
            bar.update(count)
    writer.close()
    return {
        "synthetic": True,
        "simulated": True,       # how load_trace labels a directory it reads (job log: a simulated run)
        "purpose": "speed and memory benchmarks of the ingest and the per-job utilization join; NEVER results",
        "generator": "dlcluster.sim.synthetic.generate_raw_trace",
        "scale": scale, "seed": seed, "jobs": num_jobs, "attempts": len(result.attempts),
        "machines": len(machines), "minutes": minutes,
        "util_start_utc": str(EPOCH), "util_end_utc": str(EPOCH + pd.Timedelta(minutes=minutes)),
        "rows_per_util_file": minutes * len(machines),
        "file_bytes": {p.name: p.stat().st_size for p in sorted(directory.iterdir()) if p.name.startswith("cluster_")},
        "defects": writer.defects_written,
        "model": {"gpu": "held: job level drawn from the real cluster GPU utilization CDF less its idle GPUs + "
                         f"N(0, {GPU_NOISE_SD}) per minute, clipped to "
                         "[0, 100], 2 decimals; idle: 0; absent GPU: NA",
                  "cpu": f"4 + 45 x share of the server's GPUs in use + N(0, {CPU_NOISE_SD}), clipped, 2 decimals",
                  "mem": f"used 20% + 40% x share in use + N(0, {MEM_NOISE_SD}) of a fixed total (KB) per server"},
        "simulation": simulation,
    }


def _gpu_spans(result, machines: pd.DataFrame, rng) -> pd.DataFrame:
    """One row per GPU of each simulated attempt: machine index, GPU, first and end minute, utilization level."""
    index_of = {name: i for i, name in enumerate(machines["machine"])}
    server_index = np.array([index_of[name] for name in result.topology.server_names])
    base = draw_job_levels(len(result.jobs), rng, run_allocated_share(result))
    job_pos = pd.Index(result.jobs["jobid"]).get_indexer(result.attempts["jobid"])
    rows = []
    for a, alloc in enumerate(result.attempt_gpus):
        for server, mask in alloc:
            for gpu in range(mask.bit_length()):
                if mask >> gpu & 1:
                    rows.append((a, server_index[server], gpu))
    attempt, machine, gpu = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)) if rows else ([],) * 3
    # whole seconds, as the job log writes them: a GPU is held in minute m iff start <= m < end
    start = np.round(result.attempts["start_s"].to_numpy(dtype=float)[attempt])
    end = np.round(result.attempts["end_s"].to_numpy(dtype=float)[attempt])
    return pd.DataFrame({"machine": machine, "gpu": gpu,
                         "m0": np.ceil(start / 60.0).astype(np.int64), "m1": np.ceil(end / 60.0).astype(np.int64),
                         "level": base[job_pos[attempt]]})


def _defect_positions(rows: int, per_kind: int, rng) -> dict[str, dict[int, str]]:
    """Per file, the data rows (0-based) to spoil and how."""
    out = {}
    for file in UTIL_HEADERS:
        picks = np.sort(rng.choice(rows, size=min(rows, per_kind * len(DEFECTS)), replace=False), kind="stable")
        kinds = [k for k in DEFECTS for _ in range(per_kind)]
        # fewer rows than defects: the rows take the first kinds of the shuffle
        out[file] = {int(row): kind for row, kind in zip(picks, rng.permutation(kinds)[:len(picks)], strict=True)}
    return out


class _UtilWriter:
    """Writes the three utilization files a day of minutes at a time (vectorized, pyarrow CSV)."""

    def __init__(self, directory: Path, machines: pd.DataFrame, spans: pd.DataFrame, minutes: int, rng,
                 defects: dict):
        self.machines = machines
        self.names = pa.array(machines["machine"].astype(str).tolist(), pa.string())
        self.gpus = machines["num_gpus"].to_numpy()
        self.absent = np.arange(GPU_SLOTS)[None, :] >= self.gpus[:, None]
        self.mem_total = np.where(self.gpus >= 8, 264_000_000, 132_000_000) + rng.integers(0, 900_000, len(machines))
        self.spans, self.minutes, self.rng, self.defects = spans, minutes, rng, defects
        self.files = {}
        for name, header in UTIL_HEADERS.items():
            fh = open(directory / name, "wb")
            fh.write(header.encode() + b"\n")
            self.files[name] = fh
        self.rows_written = 0
        self.defects_written = {name: [] for name in UTIL_HEADERS}

    def write_chunk(self, first: int, count: int) -> None:
        n_machines = len(self.machines)
        level = np.zeros((count + 1, n_machines, GPU_SLOTS))
        busy = np.zeros((count + 1, n_machines, GPU_SLOTS), dtype=np.int32)
        s = self.spans[(self.spans["m0"] < first + count) & (self.spans["m1"] > first)]
        lo = np.clip(s["m0"].to_numpy() - first, 0, count)
        hi = np.clip(s["m1"].to_numpy() - first, 0, count)
        m, g, lv = s["machine"].to_numpy(), s["gpu"].to_numpy(), s["level"].to_numpy()
        np.add.at(level, (lo, m, g), lv)
        np.add.at(level, (hi, m, g), -lv)
        np.add.at(busy, (lo, m, g), 1)
        np.add.at(busy, (hi, m, g), -1)
        level = np.cumsum(level, axis=0)[:count]
        held = np.cumsum(busy, axis=0)[:count] > 0
        noise = self.rng.normal(0.0, GPU_NOISE_SD, held.shape)
        gpu = np.where(held, np.clip(level + noise, 0.0, 100.0), 0.0).round(2)
        gpu[:, self.absent] = np.nan
        share = held.sum(axis=2) / np.maximum(self.gpus, 1)[None, :]
        cpu = np.clip(4.0 + 45.0 * share + self.rng.normal(0.0, CPU_NOISE_SD, share.shape), 0.0, 100.0).round(2)
        used = np.clip(20.0 + 40.0 * share + self.rng.normal(0.0, MEM_NOISE_SD, share.shape), 1.0, 99.0)
        total = np.broadcast_to(self.mem_total, share.shape)
        free = np.round(total * (1.0 - used / 100.0)).astype(np.int64)

        stamps = pacific_minute_stamps(EPOCH, np.arange(first, first + count))
        stamps = pa.array(stamps, pa.string())
        time_col = pc.take(stamps, pa.array(np.repeat(np.arange(count), n_machines)))
        machine_col = pc.take(self.names, pa.array(np.tile(np.arange(n_machines), count)))
        rows = count * n_machines
        as_text = lambda values: pc.cast(pa.array(values.reshape(rows), from_pandas=True), pa.string())  # noqa: E731
        gpu_cols = {f"gpu{g}_util": as_text(gpu[:, :, g]) for g in range(GPU_SLOTS)}
        empty = pa.array([""] * rows, pa.string()) if rows else pa.array([], pa.string())
        self._write("cluster_gpu_util", pa.table({"time": time_col, "machine": machine_col, **gpu_cols, "": empty}))
        self._write("cluster_cpu_util", pa.table({"time": time_col, "machine": machine_col, "cpu": as_text(cpu)}))
        self._write("cluster_mem_util", pa.table({"time": time_col, "machine": machine_col,
                                                  "total": as_text(total.astype(np.int64)),
                                                  "free": as_text(free)}))
        self.rows_written += rows

    def _write(self, name: str, table: pa.Table) -> None:
        buffer = io.BytesIO()
        pacsv.write_csv(table, buffer, pacsv.WriteOptions(include_header=False, null_string="NA",
                                                           quoting_style="none"))
        data = buffer.getvalue()
        first, last = self.rows_written, self.rows_written + table.num_rows
        spoil = {row - first: kind for row, kind in self.defects[name].items() if first <= row < last}
        if spoil:
            lines = data.split(b"\n")
            for row, kind in spoil.items():
                lines[row] = DEFECTS[kind](lines[row])
                self.defects_written[name].append({"line": first + row + 2, "kind": kind})
            data = b"\n".join(lines)
        self.files[name].write(data)

    def close(self) -> None:
        for fh in self.files.values():
            fh.close()


def _synthetic_md(meta: dict) -> str:
    sizes = "\n".join(f"- `{name}`: {size / 1e9:.2f} GB" for name, size in meta["file_bytes"].items())
    defects = "\n".join(f"- `{name}` line {d['line']}: {d['kind']}" for name, items in meta["defects"].items()
                        for d in items)
    return (
        "# SYNTHETIC trace: not real Philly data\n\n"
        "Generated by `dlcluster.sim.synthetic.generate_raw_trace` "
        f"(scale {meta['scale']}, seed {meta['seed']}) in the raw Philly trace format, at about the size of the "
        "real trace, to measure the speed and memory of the ingest and of the per-job utilization join. "
        "It is **never** to be used for results, and it must not be ingested into `data/philly`.\n\n"
        f"- {meta['jobs']:,} jobs ({meta['attempts']:,} attempts) simulated by `dlcluster.sim` and written by its "
        "raw-trace writer (`cluster_job_log`, `cluster_machine_list`)\n"
        f"- utilization of {meta['machines']} machines for {meta['minutes']:,} minutes from "
        f"{meta['util_start_utc']} ({meta['rows_per_util_file']:,} rows per file)\n"
        f"- GPU model: {meta['model']['gpu']}\n- CPU model: {meta['model']['cpu']}\n"
        f"- memory model: {meta['model']['mem']}\n\n"
        f"Files:\n\n{sizes}\n\nMalformed lines put in on purpose (the ingest must quarantine exactly these):\n\n"
        f"{defects or '- none'}\n"
    )
