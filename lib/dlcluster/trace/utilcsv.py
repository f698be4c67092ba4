"""Stream the per-minute utilization CSVs of the raw Philly trace.

Formats (official README): ``cluster_gpu_util`` is
``time,machineId,gpu0_util,...,gpu7_util`` with a trailing comma on every data
row; ``cluster_cpu_util`` is ``time,machine_id,cpu_util``;
``cluster_mem_util`` is ``time,machine_id,mem_total,mem_free``. Times carry a
``PDT``/``PST`` suffix; ``NA`` marks an offline or absent GPU.

Files are read in blocks with pyarrow (bounded memory); each block is validated
and turned into a long table. Rows with the wrong number of fields, a time
without a zone, or a non-numeric value are quarantined with their line number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from .quality import QualityReport, TraceFormatError
from .times import parse_zoned

EXPECTED_HEADERS = {
    "gpu": ["time", "machineId"] + [f"gpu{i}_util" for i in range(8)],
    "cpu": ["time", "machine_id", "cpu_util"],
    "mem": ["time", "machine_id", "mem_total", "mem_free"],
}
BLOCK_BYTES = 32 << 20


def _layout(path: Path, kind: str) -> tuple[list[str], bool]:
    """Check the header and detect the trailing comma of the data rows."""
    with open(path, newline="") as fh:
        header = fh.readline().rstrip("\r\n")
        first = fh.readline().rstrip("\r\n")
    names = [h.strip() for h in header.split(",")]
    trailing_in_header = names and names[-1] == ""
    if trailing_in_header:
        names = names[:-1]
    expected = EXPECTED_HEADERS[kind]
    if names != expected:
        raise TraceFormatError(f"{path}: line 1: header {names} is not the expected {expected}")
    trailing = bool(first) and first.count(",") == len(names)
    return names + (["_trailing"] if trailing else []), trailing


def iter_util_blocks(path: str | Path, kind: str, quality: QualityReport,
                     block_bytes: int = BLOCK_BYTES) -> Iterator[pd.DataFrame]:
    """Yield validated long-format blocks of a utilization file.

    ``kind`` is ``gpu`` (columns machine, gpu, time, util), ``cpu`` (machine,
    time, cpu_util) or ``mem`` (machine, time, mem_util). Every data row is
    counted in ``quality`` as loaded or quarantined.
    """
    path = Path(path)
    file = path.name
    names, _ = _layout(path, kind)
    bad_rows: list[str] = []

    def on_invalid(row) -> str:
        line = f"line {row.number}" if row.number is not None else f"row {row.text[:60]!r}"
        bad_rows.append(f"{line}: expected {row.expected_columns} fields, got {row.actual_columns}")
        return "skip"

    reader = pacsv.open_csv(
        path,
        read_options=pacsv.ReadOptions(column_names=names, skip_rows=1, block_size=block_bytes),
        parse_options=pacsv.ParseOptions(invalid_row_handler=on_invalid),
        convert_options=pacsv.ConvertOptions(column_types={n: pa.string() for n in names},
                                             strings_can_be_null=False, quoted_strings_can_be_null=False),
    )
    line_offset = 2  # first data row is line 2
    for batch in reader:
        frame = batch.to_pandas()
        for msg in bad_rows:
            quality.read(file, 1)
            quality.quarantine(file, "wrong number of fields", where=msg)
        bad_rows.clear()
        quality.read(file, len(frame))
        lines = np.arange(line_offset, line_offset + len(frame))
        line_offset += len(frame)
        yield _validate(frame, kind, file, lines, quality)
    for msg in bad_rows:  # invalid rows after the last block
        quality.read(file, 1)
        quality.quarantine(file, "wrong number of fields", where=msg)


def _numeric(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, pd.Series]:
    """Parse value columns; 'NA' and empty are missing, anything else non-numeric is bad."""
    values, bad = {}, pd.Series(False, index=frame.index)
    for col in columns:
        text = frame[col].str.strip()
        missing = text.isin(["NA", "", "None", "nan"])
        num = pd.to_numeric(text.where(~missing), errors="coerce")
        bad |= num.isna() & ~missing
        values[col] = num.astype("float64")
    return pd.DataFrame(values, index=frame.index), bad


def _validate(frame: pd.DataFrame, kind: str, file: str, lines: np.ndarray,
              quality: QualityReport) -> pd.DataFrame:
    def reject(mask: pd.Series, reason: str) -> pd.Series:
        if not mask.any():
            return ~mask
        for line in lines[mask.to_numpy()][:5]:
            quality.quarantine(file, reason, n=0, where=f"line {line}")
        quality.quarantine(file, reason, n=int(mask.sum()))
        return ~mask

    keep = pd.Series(True, index=frame.index)
    if "_trailing" in frame:
        keep &= reject(frame["_trailing"].str.strip() != "", "unexpected value after the trailing comma")
    time, bad_time = parse_zoned(frame["time"])
    keep &= reject(bad_time & keep, "time not like 'YYYY-MM-DD HH:MM:SS PDT|PST'")
    machine = frame[EXPECTED_HEADERS[kind][1]].str.strip()
    keep &= reject((machine == "") & keep, "empty machine id")
    value_cols = EXPECTED_HEADERS[kind][2:]
    values, bad_value = _numeric(frame, value_cols)
    keep &= reject(bad_value & keep, "non-numeric utilization value")
    if kind == "mem":
        keep &= reject(~(values["mem_total"] > 0) & values["mem_total"].notna() & keep, "mem_total not positive")

    machine, values = machine[keep], values[keep]
    time = time[keep].dt.tz_convert(None).to_numpy()  # naive UTC for numpy; re-localized below
    quality.loaded(file, int(keep.sum()))
    if kind == "gpu":
        wide = values.to_numpy()
        n_rows, n_gpu = wide.shape
        long = pd.DataFrame({
            "machine": np.repeat(machine.to_numpy(), n_gpu),
            "gpu": np.tile(np.arange(n_gpu, dtype="int64"), n_rows),
            "time": pd.DatetimeIndex(np.repeat(time, n_gpu)).tz_localize("UTC"),
            "util": wide.reshape(-1),
        })
        quality.flag(file, "GPU cells 'NA' (offline or absent GPU; cells, not rows)", int(long["util"].isna().sum()))
        return long
    if kind == "cpu":
        return pd.DataFrame({"machine": machine.to_numpy(), "time": pd.DatetimeIndex(time).tz_localize("UTC"),
                             "cpu_util": values["cpu_util"].to_numpy()})
    used = 100.0 * (values["mem_total"] - values["mem_free"]) / values["mem_total"]
    return pd.DataFrame({"machine": machine.to_numpy(), "time": pd.DatetimeIndex(time).tz_localize("UTC"),
                         "mem_util": used.to_numpy()})


def read_util(path: str | Path, kind: str, quality: QualityReport,
              on_block: Callable[[pd.DataFrame], None] | None = None) -> pd.DataFrame | None:
    """Read a whole utilization file into memory, or hand each block to ``on_block``."""
    blocks = []
    for block in iter_util_blocks(path, kind, quality):
        if on_block is not None:
            on_block(block)
        else:
            blocks.append(block)
    if on_block is not None:
        return None
    if not blocks:
        cols = {"gpu": ["machine", "gpu", "time", "util"], "cpu": ["machine", "time", "cpu_util"],
                "mem": ["machine", "time", "mem_util"]}[kind]
        return pd.DataFrame(columns=cols)
    return pd.concat(blocks, ignore_index=True)
