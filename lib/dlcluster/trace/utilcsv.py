"""Read the per-minute utilization CSVs of the raw Philly trace, block by block.

Formats (official README): ``cluster_gpu_util`` is
``time,machineId,gpu0_util,...,gpu7_util`` with a trailing comma on every data
row; ``cluster_cpu_util`` is ``time,machine_id,cpu_util``;
``cluster_mem_util`` is ``time,machine_id,mem_total,mem_free``. Times carry a
``PDT``/``PST`` suffix; ``NA`` marks an offline or absent GPU.

A file is cut into blocks of whole lines (each block knows its byte offset and
first line number, so an ingest can resume at any block). A block is parsed by
pyarrow with typed columns; only when that fails (a row with the wrong number
of fields, a non-numeric cell, an empty line) is it re-read line by line in
vectorized form to find the culprits. Every line is counted in the quality
report as loaded or quarantined, with its reason and line numbers as examples:

* wrong number of fields, or an empty line;
* a carriage return inside a line (a CSV reader would split the line there);
* a value after the trailing comma;
* a time not like ``YYYY-MM-DD HH:MM:SS PDT|PST``;
* an empty machine id;
* a non-numeric value (``NA``, ``None``, ``nan`` and empty cells are missing,
  not bad; a number is what Arrow's float parser accepts after trimming);
* (memory) ``mem_total`` not positive.

Loaded values that cannot be physical are kept but flagged, with line numbers:
a utilization outside 0-100 % (for memory: ``mem_free`` negative or above
``mem_total``), and a time outside the trace's plausible period
(:data:`.times.TRACE_PERIOD`). A UTF-8 byte-order mark before the header is
skipped; bytes that are not UTF-8 stop the read with a :class:`TraceFormatError`
naming the line and byte offset.

The in-memory loader and the Parquet ingest share this code, so they agree row
for row.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from .quality import UTF8_BOM, QualityReport, TraceFormatError, not_utf8
from .times import EARLIEST_PLAUSIBLE_TIME, LATEST_PLAUSIBLE_TIME, TRACE_PERIOD

EXPECTED_HEADERS = {
    "gpu": ["time", "machineId"] + [f"gpu{i}_util" for i in range(8)],
    "cpu": ["time", "machine_id", "cpu_util"],
    "mem": ["time", "machine_id", "mem_total", "mem_free"],
}
# Columns of a validated (wide) block, after the time and machine columns.
WIDE_VALUES = {"gpu": [f"gpu{i}" for i in range(8)], "cpu": ["cpu_util"], "mem": ["mem_util"]}
MISSING_STRINGS = ("NA", "", "None", "nan")
ZONE_OFFSET_S = {"PDT": 7 * 3600, "PST": 8 * 3600}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
BLOCK_BYTES = 32 << 20
TIME_TYPE = pa.timestamp("ns", tz="UTC")
MACHINE_TYPE = pa.dictionary(pa.int32(), pa.string())
# What Arrow's float parser accepts (it trims whitespace itself in CSV cells).
_NUMBER = r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf|infinity|nan))$"

BAD_FIELDS = "wrong number of fields"
STRAY_CR = "carriage return inside a line"
EMPTY_LINE = "empty line"
TRAILING_VALUE = "unexpected value after the trailing comma"
BAD_TIME = "time not like 'YYYY-MM-DD HH:MM:SS PDT|PST'"
EMPTY_MACHINE = "empty machine id"
BAD_VALUE = "non-numeric utilization value"
BAD_MEM_TOTAL = "mem_total not positive"
NA_CELLS = "GPU cells 'NA' (offline or absent GPU; cells, not rows)"
OUT_OF_RANGE = {"gpu": "GPU utilization outside 0-100 % (kept; cells, not rows)",
                "cpu": "CPU utilization outside 0-100 % (kept)",
                "mem": "memory use outside 0-100 % (mem_free negative or above mem_total; kept)"}
OUTSIDE_PERIOD = f"time outside the trace period {TRACE_PERIOD} (kept)"


@dataclass(frozen=True)
class UtilLayout:
    """Columns of one utilization file and where its data starts."""

    kind: str
    names: tuple[str, ...]     # CSV columns, '_trailing' last if data rows end with a comma
    data_offset: int           # byte offset of line 2

    @property
    def value_names(self) -> list[str]:
        return EXPECTED_HEADERS[self.kind][2:]

    @property
    def trailing(self) -> bool:
        return self.names[-1] == "_trailing"


@dataclass(frozen=True)
class RawBlock:
    """Whole lines of a file: ``data`` starts at byte ``offset`` with line number ``first_line``."""

    data: bytes
    offset: int
    first_line: int
    num_lines: int

    @property
    def end_offset(self) -> int:
        return self.offset + len(self.data)

    @property
    def next_line(self) -> int:
        return self.first_line + self.num_lines


def read_layout(path: str | Path, kind: str) -> UtilLayout:
    """Check the header and detect the trailing comma of the data rows."""
    path = Path(path)
    with open(path, "rb") as fh:
        header_bytes = fh.readline()
        first = fh.readline().decode("utf-8", "replace").rstrip("\r\n")
    bom = len(UTF8_BOM) if header_bytes.startswith(UTF8_BOM) else 0
    try:
        header = header_bytes[bom:].decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise not_utf8(path.name, header_bytes[bom:], exc, offset=bom) from None
    names = [h.strip() for h in header.split(",")]
    if names and names[-1] == "":
        names = names[:-1]
    expected = EXPECTED_HEADERS[kind]
    if names != expected:
        raise TraceFormatError(f"{path.name}: line 1: header {names} is not the expected {expected}")
    trailing = bool(first) and first.count(",") == len(names)
    return UtilLayout(kind, tuple(names + (["_trailing"] if trailing else [])), len(header_bytes))


def iter_raw_blocks(path: str | Path, offset: int, first_line: int,
                    block_bytes: int = BLOCK_BYTES) -> Iterator[RawBlock]:
    """Blocks of whole lines from byte ``offset`` (which must start a line) to the end of the file.

    A block is the ``block_bytes`` from its offset cut after the last newline
    (longer if one line is longer), so where the blocks fall does not depend on
    where reading began: a resumed ingest makes the same parts.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        line = first_line
        while offset < size:
            fh.seek(offset)
            data = fh.read(block_bytes)
            cut = data.rfind(b"\n") + 1
            while cut == 0 and offset + len(data) < size:      # a line longer than a block
                data += fh.read(block_bytes)
                cut = data.rfind(b"\n") + 1
            if offset + len(data) >= size:                      # the rest of the file (last newline optional)
                cut = len(data)
            body = data[:cut]
            block = RawBlock(body, offset, line, body.count(b"\n") + (0 if body.endswith(b"\n") else 1))
            offset, line = block.end_offset, block.next_line
            yield block


def _convert_options(layout: UtilLayout, typed: bool) -> pacsv.ConvertOptions:
    types = {"time": MACHINE_TYPE, layout.names[1]: MACHINE_TYPE}
    types |= {n: (pa.float64() if typed else pa.string()) for n in layout.value_names}
    if layout.trailing:
        types["_trailing"] = pa.string()
    return pacsv.ConvertOptions(column_types=types, null_values=list(MISSING_STRINGS) if typed else [],
                                strings_can_be_null=False, quoted_strings_can_be_null=False)


def _read(data: bytes, layout: UtilLayout, typed: bool, on_invalid) -> pa.Table:
    return pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=list(layout.names), block_size=4 << 20),
        parse_options=pacsv.ParseOptions(quote_char=False, invalid_row_handler=on_invalid),
        convert_options=_convert_options(layout, typed))


def _parse(data: bytes, layout: UtilLayout, typed: bool) -> tuple[pa.Table | None, int]:
    """Parse whole lines; returns (table or None on a non-numeric cell when ``typed``, malformed rows skipped)."""
    skipped = []

    def on_invalid(row) -> str:
        skipped.append(row.actual_columns)
        return "skip"

    try:
        return _read(data, layout, typed, on_invalid), len(skipped)
    except pa.ArrowInvalid:
        if typed:
            return None, 0
        raise


def _parse_lines(block: RawBlock, layout: UtilLayout, file: str, quality: QualityReport
                 ) -> tuple[pa.Table, np.ndarray | None]:
    """Rows of the block that have the right number of fields, and their line numbers (None: all lines).

    Typed parse first; a non-numeric cell makes it fall back to strings (checked
    later, cell by cell). Only a block with a malformed or empty line, or a
    carriage return that does not end a line, is split into lines here, to
    quarantine those with their line numbers.
    """
    typed = True
    table, skipped = _parse(block.data, layout, typed=True)
    if table is None:
        typed = False
        table, skipped = _parse(block.data, layout, typed=False)
    # Arrow also ends a row at a lone carriage return, so the counts alone could balance a split line
    # against an empty one: trust them only without such a CR.
    if skipped == 0 and table.num_rows == block.num_lines and block.data.count(b"\r") == block.data.count(b"\r\n"):
        return table, None
    fields, empty, stray_cr, wrong, keep_bytes = _line_check(block, layout)
    lines = block.first_line + np.arange(len(fields))
    _quarantine(quality, file, EMPTY_LINE, lines[empty])
    _quarantine(quality, file, STRAY_CR, lines[stray_cr])
    expected = len(layout.names)
    for line, got in zip(lines[wrong][:5], fields[wrong][:5], strict=True):
        quality.quarantine(file, BAD_FIELDS, n=0, where=f"line {line}: expected {expected} fields, got {got}")
    quality.quarantine(file, BAD_FIELDS, n=int(wrong.sum()))
    good = ~empty & ~stray_cr & ~wrong
    if not good.any():
        return _empty_raw(layout), lines[good]
    table, skipped = _parse(np.frombuffer(block.data, np.uint8)[keep_bytes].tobytes(), layout, typed)
    if skipped or table.num_rows != int(good.sum()):
        raise TraceFormatError(f"{file}: lines {block.first_line}-{lines[-1]}: parsed {table.num_rows} rows "
                               f"from {int(good.sum())} well-formed lines (a stray carriage return?)")
    return table, lines[good]


def _line_check(block: RawBlock, layout: UtilLayout
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per line of the block: fields, empty, stray carriage return, wrong field count; and the byte mask of the
    good lines. A CR is stray unless a newline, or more CRs and a newline, follow it (Arrow skips the empty line).
    """
    raw = np.frombuffer(block.data, np.uint8)
    ends = np.flatnonzero(raw == 10)
    if len(raw) and raw[-1] != 10:
        ends = np.append(ends, len(raw))
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    commas = np.flatnonzero(raw == 44)
    fields = np.diff(np.searchsorted(commas, ends), prepend=0) + 1
    length = ends - starts
    has_cr = np.zeros(len(ends), dtype=bool)
    nonzero = length > 0
    has_cr[nonzero] = raw[ends[nonzero] - 1] == 13
    empty = (length - has_cr) == 0
    cr = np.flatnonzero(raw == 13)
    cr = cr[cr + 1 < len(raw)]
    stray = np.zeros(len(ends), dtype=bool)
    stray[np.searchsorted(ends, cr[(raw[cr + 1] != 10) & (raw[cr + 1] != 13)])] = True
    stray &= ~empty
    wrong = ~empty & ~stray & (fields != len(layout.names))
    spans = np.minimum(ends + 1, len(raw)) - starts     # each line with its newline
    return fields, empty, stray, wrong, np.repeat(~empty & ~stray & ~wrong, spans)


def _quarantine(quality: QualityReport, file: str, reason: str, lines: np.ndarray) -> None:
    if len(lines) == 0:
        return
    for line in lines[:5]:
        quality.quarantine(file, reason, n=0, where=f"line {line}")
    quality.quarantine(file, reason, n=len(lines))


def _empty_raw(layout: UtilLayout) -> pa.Table:
    types = _convert_options(layout, typed=False).column_types
    return pa.table({name: pa.array([], types[name]) for name in layout.names})


def _by_dictionary(column: pa.ChunkedArray, fn: Callable[[pa.Array], pa.Array], out_type: pa.DataType
                   ) -> pa.ChunkedArray:
    """Apply ``fn`` to the distinct values of a dictionary column only (times repeat per machine)."""
    return pa.chunked_array([pc.take(fn(chunk.dictionary), chunk.indices) for chunk in column.chunks],
                            type=out_type)


def _trim_machines(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Machine ids without surrounding blanks, still dictionary-encoded."""
    chunks = []
    for chunk in column.chunks:
        trimmed = pc.utf8_trim_whitespace(chunk.dictionary)
        if trimmed.equals(chunk.dictionary):
            chunks.append(chunk)
        else:
            chunks.append(pc.dictionary_encode(pc.take(trimmed, chunk.indices)))
    return pa.chunked_array(chunks, type=MACHINE_TYPE)


def _parse_times(text: pa.Array) -> pa.Array:
    text = pc.utf8_trim_whitespace(text)
    naive = pc.strptime(pc.utf8_slice_codeunits(text, 0, -4), format=TIME_FORMAT, unit="s", error_is_null=True)
    zone = pc.utf8_slice_codeunits(text, -3, 1 << 30)
    offset = pc.if_else(pc.equal(zone, "PDT"), ZONE_OFFSET_S["PDT"],
                        pc.if_else(pc.equal(zone, "PST"), ZONE_OFFSET_S["PST"], None))
    seconds = pc.add(naive.cast(pa.int64()), offset)
    return pc.multiply(seconds, 1_000_000_000).cast(TIME_TYPE)


def _numbers(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, np.ndarray]:
    """Values (null where missing) and a mask of non-numeric cells."""
    if pa.types.is_floating(column.type):
        return _nan_to_null(column), np.zeros(len(column), dtype=bool)
    text = pc.utf8_trim_whitespace(column)
    missing = pc.is_in(text, value_set=pa.array(MISSING_STRINGS))
    candidate = pc.if_else(missing, None, text)
    numeric = pc.match_substring_regex(candidate, _NUMBER)
    bad = pc.fill_null(pc.invert(numeric), False)
    values = pc.if_else(numeric, candidate, None).cast(pa.float64())
    return _nan_to_null(values), bad.to_numpy(zero_copy_only=False)


def _nan_to_null(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """A parsed 'NaN' is a missing value, like 'NA'."""
    nan = pc.is_nan(values)
    return pc.if_else(nan, None, values) if pc.any(nan).as_py() else values


def parse_block(block: RawBlock, layout: UtilLayout, file: str, quality: QualityReport) -> pa.Table:
    """Validate one block; returns the loaded rows as a wide Arrow table.

    Columns: ``machine`` (dictionary string), ``time`` (UTC, ns), then the
    values: ``gpu0``..``gpu7`` (GPU), ``cpu_util`` or ``mem_util`` (percent
    used), float64 with null for missing.
    """
    if not block.data.isascii():
        try:
            block.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise not_utf8(file, block.data, exc, block.offset, block.first_line) from None
    quality.read(file, block.num_lines)
    table, lines = _parse_lines(block, layout, file, quality)
    n = table.num_rows

    def line_numbers(mask: np.ndarray) -> np.ndarray:
        return (block.first_line + np.flatnonzero(mask)) if lines is None else lines[mask]

    keep = np.ones(n, dtype=bool)

    def reject(mask: np.ndarray, reason: str) -> None:
        mask = mask & keep
        if mask.any():
            _quarantine(quality, file, reason, line_numbers(mask))
            keep[mask] = False

    if layout.trailing:
        trailing = table.column("_trailing")
        reject(pc.not_equal(pc.utf8_trim_whitespace(trailing), "").to_numpy(zero_copy_only=False), TRAILING_VALUE)
    time = _by_dictionary(table.column("time"), _parse_times, TIME_TYPE)
    reject(time.is_null().to_numpy(zero_copy_only=False), BAD_TIME)
    machine = _trim_machines(table.column(layout.names[1]))
    empty_machine = _by_dictionary(machine, lambda names: pc.equal(names, ""), pa.bool_())
    reject(empty_machine.to_numpy(zero_copy_only=False), EMPTY_MACHINE)
    values = {}
    for name in layout.value_names:
        values[name], bad = _numbers(table.column(name))
        reject(bad, BAD_VALUE)
    if layout.kind == "mem":
        total, free = values["mem_total"], values["mem_free"]
        not_positive = pc.fill_null(pc.less_equal(total, 0.0), False).to_numpy(zero_copy_only=False)
        reject(not_positive, BAD_MEM_TOTAL)
        values = {"mem_util": pc.divide(pc.multiply(pc.subtract(total, free), 100.0), total)}
    elif layout.kind == "gpu":
        values = {f"gpu{i}": values[f"gpu{i}_util"] for i in range(8)}

    quality.loaded(file, int(keep.sum()))
    mask = pa.array(keep)
    out = pa.table({"machine": machine, "time": time, **values}).filter(mask).unify_dictionaries()
    if layout.kind == "gpu":
        quality.flag(file, NA_CELLS, sum(out.column(c).null_count for c in WIDE_VALUES["gpu"]))
    _flag_implausible(out, layout.kind, line_numbers(keep), file, quality)
    return out


def _flag_implausible(out: pa.Table, kind: str, lines: np.ndarray, file: str, quality: QualityReport) -> None:
    """Flag loaded values outside 0-100 % (per cell) and rows outside the trace period, with their lines."""
    cells = np.zeros(out.num_rows, dtype=np.int64)
    for column in WIDE_VALUES[kind]:
        value = out.column(column)
        outside = pc.or_(pc.less(value, 0.0), pc.greater(value, 100.0))
        cells += pc.fill_null(outside, False).to_numpy(zero_copy_only=False)
    quality.flag_many(file, OUT_OF_RANGE[kind], int(cells.sum()),
                      (f"line {line}" for line, n in zip(lines, cells, strict=True) for _ in range(n)))
    time = out.column("time")
    early = pc.less(time, pa.scalar(EARLIEST_PLAUSIBLE_TIME, TIME_TYPE))
    late = pc.greater_equal(time, pa.scalar(LATEST_PLAUSIBLE_TIME, TIME_TYPE))
    outside = pc.fill_null(pc.or_(early, late), False).to_numpy(zero_copy_only=False)
    quality.flag_many(file, OUTSIDE_PERIOD, int(outside.sum()), (f"line {line}" for line in lines[outside]))


def wide_to_long(table: pa.Table, kind: str) -> pd.DataFrame:
    """A validated block in the long form of the normalized tables (GPU: one row per GPU cell, NA included)."""
    machine = pc.cast(table.column("machine"), pa.string()).to_numpy(zero_copy_only=False).astype(object)
    time = table.column("time").to_numpy()          # datetime64[ns], UTC
    if kind != "gpu":
        value = WIDE_VALUES[kind][0]
        return pd.DataFrame({"machine": pd.array(machine, dtype="str"),
                             "time": pd.DatetimeIndex(time).tz_localize("UTC"),
                             value: table.column(value).to_numpy(zero_copy_only=False).astype("float64")})
    wide = np.column_stack([table.column(c).to_numpy(zero_copy_only=False).astype("float64")
                            for c in WIDE_VALUES["gpu"]]) if table.num_rows else np.empty((0, 8))
    n_rows, n_gpu = wide.shape
    return pd.DataFrame({
        "machine": pd.array(np.repeat(machine, n_gpu), dtype="str"),
        "gpu": np.tile(np.arange(n_gpu, dtype="int64"), n_rows),
        "time": pd.DatetimeIndex(np.repeat(time, n_gpu)).tz_localize("UTC"),
        "util": wide.reshape(-1),
    })


def iter_util_blocks(path: str | Path, kind: str, quality: QualityReport,
                     block_bytes: int = BLOCK_BYTES) -> Iterator[pd.DataFrame]:
    """Yield validated long-format blocks of a utilization file.

    ``kind`` is ``gpu`` (columns machine, gpu, time, util), ``cpu`` (machine,
    time, cpu_util) or ``mem`` (machine, time, mem_util). Every line is
    counted in ``quality`` as loaded or quarantined.
    """
    path = Path(path)
    layout = read_layout(path, kind)
    quality.read(path.name, 0)                  # a file with a header only is in the report too
    for block in iter_raw_blocks(path, layout.data_offset, 2, block_bytes):
        yield wide_to_long(parse_block(block, layout, path.name, quality), kind)


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
        return wide_to_long(empty_wide(kind), kind)
    return pd.concat(blocks, ignore_index=True)


def empty_wide(kind: str) -> pa.Table:
    """A validated block with no rows."""
    return pa.table({"machine": pa.array([], MACHINE_TYPE), "time": pa.array([], TIME_TYPE),
                     **{c: pa.array([], pa.float64()) for c in WIDE_VALUES[kind]}})
