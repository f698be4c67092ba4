"""TensorBoard event files, read by a small self-contained TFRecord/protobuf reader (no TensorFlow needed)."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pandas as pd

from .tidy import (
    LoadedCurves,
    direction_for,
    drop_table,
    empty_curves,
    finite_or_nan,
    typed_curves,
    validate_curves,
)

_CRC32C_TABLE: list[int] = []


def _crc32c_table() -> list[int]:
    if not _CRC32C_TABLE:
        poly = 0x82F63B78  # Castagnoli, reflected
        for byte in range(256):
            crc = byte
            for _ in range(8):
                crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
            _CRC32C_TABLE.append(crc)
    return _CRC32C_TABLE


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecord files use."""
    table = _crc32c_table()
    crc = 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC: rotate right by 15 and add a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_tfrecords(path: str | Path, verify: bool = True):
    """Yield (offset, payload) of each record of a TFRecord file.

    Record layout: uint64 length, uint32 masked CRC of the length, payload,
    uint32 masked CRC of the payload (all little-endian). A truncated last
    record (a writer still running or killed) ends the file and is reported
    by :func:`load_tensorboard_curves` as dropped; a bad checksum is an error.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    offset = 0
    while offset < len(data):
        if offset + 12 > len(data):
            raise _TruncatedRecord(offset)
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        if verify and masked_crc32c(header) != length_crc:
            raise ValueError(f"{path}: record at byte {offset}: length checksum mismatch (corrupt file)")
        end = offset + 12 + length + 4
        if end > len(data):
            raise _TruncatedRecord(offset)
        payload = data[offset + 12:offset + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[end - 4:end])
        if verify and masked_crc32c(payload) != payload_crc:
            raise ValueError(f"{path}: record at byte {offset}: payload checksum mismatch (corrupt file)")
        yield offset, payload
        offset = end


class _TruncatedRecord(Exception):
    def __init__(self, offset: int):
        super().__init__(f"truncated record at byte {offset}")
        self.offset = offset


def _protobuf_fields(buf: bytes):
    """Yield (field number, wire type, value) of a serialized protobuf message.

    Varints come back as int, fixed64/fixed32 as raw 8/4 bytes, length-delimited
    fields as bytes. Enough of the wire format to read TensorBoard events.
    """
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} (field {number})")
        if pos > end:
            raise ValueError("protobuf message ends inside a field")
        yield number, wire, value


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("protobuf varint runs past the end of the message")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


# Event.proto / summary.proto / tensor.proto field numbers used below.
_EVENT_WALL_TIME, _EVENT_STEP, _EVENT_SUMMARY = 1, 2, 5
_SUMMARY_VALUE = 1
_VALUE_TAG, _VALUE_SIMPLE, _VALUE_TENSOR = 1, 2, 8
_TENSOR_DTYPE, _TENSOR_SHAPE, _TENSOR_CONTENT, _TENSOR_FLOAT, _TENSOR_DOUBLE = 1, 2, 4, 5, 6
_TENSOR_INT, _TENSOR_INT64 = 7, 10
_SHAPE_DIM = 2
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a scalar (rank-0 or one-element) numeric TensorProto, else None."""
    dtype, dims, numbers, content = None, 0, [], b""
    for number, wire, value in _protobuf_fields(buf):
        if number == _TENSOR_DTYPE:
            dtype = value
        elif number == _TENSOR_SHAPE:
            dims = sum(1 for n, _, v in _protobuf_fields(value) if n == _SHAPE_DIM
                       and any(dn == 1 and dv != 1 for dn, _, dv in _protobuf_fields(v)))
        elif number == _TENSOR_CONTENT:
            content = value
        elif number == _TENSOR_FLOAT:
            numbers += list(struct.unpack(f"<{len(value) // 4}f", value)) if wire == 2 else \
                list(struct.unpack("<f", value))
        elif number == _TENSOR_DOUBLE:
            numbers += list(struct.unpack(f"<{len(value) // 8}d", value)) if wire == 2 else \
                list(struct.unpack("<d", value))
        elif number in (_TENSOR_INT, _TENSOR_INT64):
            numbers += _packed_varints(value) if wire == 2 else [value]
    if dims:
        return None
    if content:
        fmt = {_DT_FLOAT: "<f", _DT_DOUBLE: "<d", _DT_INT32: "<i", _DT_INT64: "<q"}.get(dtype)
        if fmt is None or len(content) != struct.calcsize(fmt):
            return None
        return float(struct.unpack(fmt, content)[0])
    if dtype not in (_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64) or len(numbers) != 1:
        return None
    value = numbers[0]
    if dtype in (_DT_INT32, _DT_INT64) and value >= 1 << 63:
        value -= 1 << 64
    return float(value)


def _packed_varints(buf: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(buf):
        value, pos = _varint(buf, pos)
        out.append(value)
    return out


def read_tensorboard_scalars(path: str | Path, verify: bool = True) -> tuple[pd.DataFrame, dict[str, int], float]:
    """Scalars of one event file: (table of tag, step, wall_time, value; drop counts; first wall time).

    Reads both old-style ``simple_value`` scalars (torch.utils.tensorboard,
    tf.compat.v1) and TF2 scalar tensors. Summary values that are not scalars
    (images, histograms, text, non-scalar tensors) are counted, not read.
    ``verify=False`` skips the checksums (pure Python, about 4 MB/s).
    """
    rows = []
    drops = {"non-scalar summary value": 0, "truncated last record": 0}
    start_time = math.nan
    try:
        for offset, payload in read_tfrecords(path, verify):
            wall_time, step, summary = math.nan, 0, None
            try:
                for number, _, value in _protobuf_fields(payload):
                    if number == _EVENT_WALL_TIME:
                        (wall_time,) = struct.unpack("<d", value)
                    elif number == _EVENT_STEP:
                        step = value - (1 << 64) if value >= 1 << 63 else value
                    elif number == _EVENT_SUMMARY:
                        summary = value
                if math.isnan(start_time):
                    start_time = wall_time
                if summary is None:
                    continue
                for number, _, value_msg in _protobuf_fields(summary):
                    if number != _SUMMARY_VALUE:
                        continue
                    tag, scalar = None, None
                    for vnum, _, v in _protobuf_fields(value_msg):
                        if vnum == _VALUE_TAG:
                            tag = v.decode("utf-8")
                        elif vnum == _VALUE_SIMPLE:
                            (scalar,) = struct.unpack("<f", v)
                        elif vnum == _VALUE_TENSOR:
                            scalar = _tensor_scalar(v)
                    if tag is None or scalar is None:
                        drops["non-scalar summary value"] += 1
                        continue
                    rows.append((tag, step, wall_time, scalar))
            except ValueError as exc:
                raise ValueError(f"{path}: record at byte {offset}: malformed event ({exc})") from None
    except _TruncatedRecord:
        drops["truncated last record"] += 1
    return pd.DataFrame(rows, columns=["tag", "step", "wall_time", "value"]), drops, start_time


def load_tensorboard_curves(
    logdir: str | Path,
    *,
    tags: list[str] | None = None,
    directions: dict[str, str] | None = None,
    outcome: str = "unknown",
    source: str | None = None,
    verify: bool = True,
) -> LoadedCurves:
    """Curves from TensorBoard event files under ``logdir`` (one job per run directory).

    As in TensorBoard, a run is the directory holding ``events.out.tfevents.*``
    files (named relative to ``logdir``); its files are read in name order.
    Each scalar tag is a metric; its points in step order are the epochs
    (``progress`` = step). A step written twice (a restarted run) keeps the
    last value written; the overwritten ones are counted as dropped.
    ``seconds`` is wall-clock time between consecutive points (the first from
    the run's first event), so it includes any pause; ratios of it equal
    ratios of GPU time when a job holds the same GPUs throughout.
    """
    logdir = Path(logdir)
    source = source or str(logdir)
    files = sorted(p for p in logdir.rglob("events.out.tfevents.*") if p.is_file())
    if not files:
        raise FileNotFoundError(f"{logdir}: no events.out.tfevents.* files")
    by_run: dict[Path, list[Path]] = {}
    for path in files:
        by_run.setdefault(path.parent, []).append(path)
    frames = []
    drops: dict[str, int] = {}
    for run_dir, run_files in sorted(by_run.items()):
        job = run_dir.relative_to(logdir).as_posix() if run_dir != logdir else logdir.name
        parts, start = [], math.inf
        for order, path in enumerate(run_files):
            table, file_drops, file_start = read_tensorboard_scalars(path, verify)
            for reason, n in file_drops.items():
                drops[reason] = drops.get(reason, 0) + n
            table["order"] = order
            parts.append(table)
            if not math.isnan(file_start):
                start = min(start, file_start)
        scalars = pd.concat(parts, ignore_index=True)
        scalars["written"] = np.arange(len(scalars))
        if tags is not None:
            drops["tag not requested"] = drops.get("tag not requested", 0) + int((~scalars["tag"].isin(tags)).sum())
            scalars = scalars[scalars["tag"].isin(tags)]
        duplicated = scalars.duplicated(["tag", "step"], keep="last")
        drops["step written again later (kept the last)"] = (
            drops.get("step written again later (kept the last)", 0) + int(duplicated.sum()))
        scalars = scalars[~duplicated].sort_values(["tag", "step"], kind="stable")
        for tag, points in scalars.groupby("tag", sort=True):
            wall = points["wall_time"].to_numpy()
            previous = np.concatenate([[start if math.isfinite(start) else wall[0]], wall[:-1]])
            seconds = np.clip(wall - previous, 0.0, None)
            frames.append(pd.DataFrame({
                "source": source, "job": job, "metric": tag,
                "direction": direction_for(tag, directions, f"{logdir} (run {job!r})"),
                "epoch": np.arange(1, len(points) + 1), "progress": points["step"].to_numpy(dtype="float64"),
                "value": finite_or_nan(points["value"]), "seconds": seconds, "seconds_kind": "wall",
                "outcome": outcome,
            }))
    curves = typed_curves(pd.concat(frames, ignore_index=True)) if frames else empty_curves()
    validate_curves(curves, str(logdir))
    return LoadedCurves(curves, drop_table(source, drops))
