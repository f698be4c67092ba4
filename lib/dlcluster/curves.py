"""Per-epoch training curves in one tidy schema, and loaders that produce it.

The epoch-effectiveness analysis (section 4.1 of the paper) needs, per job, the
sequence of a metric over its epochs and, where known, the time each epoch
cost. Four sources are supported:

- the real measured validation curves of the Pollux artifact
  (``data/external/learning_curves/<model>/validation-<batch size>.csv``),
- the project's own corpus of real training runs (``data/corpus/``, made by
  ``scripts/make_training_corpus.py``),
- CSV logs (tidy, or wide like Keras' ``CSVLogger``: one column per metric),
- TensorBoard event files, read by a small self-contained TFRecord/protobuf
  reader (no TensorFlow or tensorboard package needed).

Every loader returns :class:`LoadedCurves`: the tidy table plus a table of
the rows it dropped and why (nothing is dropped silently).

Tidy schema (one row per curve point; a curve is one (source, job, metric)):
see :data:`CURVE_COLUMNS`.
"""

from __future__ import annotations

import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .paths import data_dir, external_dir

CURVE_COLUMNS: dict[str, str] = {
    "source": "which data the curve comes from: 'pollux', 'corpus', or the log file/dir it was read from",
    "job": "job (run) name, unique within its source",
    "metric": "what is measured, e.g. 'train_loss', 'val_loss', 'top1_accuracy'",
    "direction": "'lower' or 'higher': which way the metric is better",
    "epoch": "1-based position of this evaluation within its curve (loaders renumber)",
    "progress": "the x value as logged (epoch number, step, Pollux progress); NaN if none",
    "value": "metric value; NaN where the logged value was not finite (a diverged run)",
    "seconds": "time spent on this epoch, of the kind in seconds_kind; NaN if unknown",
    "seconds_kind": "'gpu' GPU-seconds, 'cpu' CPU-seconds, 'wall' wall-clock seconds, 'none' unknown",
    "outcome": "how the job ended: 'passed', 'killed', 'failed', 'diverged' or 'unknown'",
}
DIRECTIONS = ("lower", "higher")
SECONDS_KINDS = ("gpu", "cpu", "wall", "none")
OUTCOMES = ("passed", "killed", "failed", "diverged", "unknown")
CURVE_KEY = ["source", "job", "metric"]
DROPPED_COLUMNS = ["source", "reason", "rows", "curves"]  # curves: whole curves removed (0 for single cells)

# Metric name fragments that tell the direction when the caller gives none.
# Checked in order; the first match wins (so 'val_error' is lower-is-better).
_LOWER_HINTS = ("loss", "error", "err", "wer", "cer", "perplexity", "ppl", "mse", "mae", "rmse", "nll")
_HIGHER_HINTS = ("acc", "f1", "auc", "precision", "recall", "map", "hit", "bleu", "r2", "score", "iou")


@dataclass
class LoadedCurves:
    """A tidy curve table plus what was dropped on the way (source, reason, rows, curves)."""

    curves: pd.DataFrame
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DROPPED_COLUMNS))


def concat_curves(parts: list[LoadedCurves]) -> LoadedCurves:
    """Stack loaded curve sets; curves must not collide on (source, job, metric)."""
    seen: set = set()
    for part in parts:
        keys = set(part.curves[CURVE_KEY].drop_duplicates().itertuples(index=False, name=None))
        if keys & seen:
            raise ValueError(f"curve {sorted(keys & seen)[0]} is loaded twice (the same source given twice?)")
        seen |= keys
    curves = pd.concat([p.curves for p in parts], ignore_index=True) if parts else _empty_curves()
    dropped = [p.dropped for p in parts if len(p.dropped)]
    dropped = pd.concat(dropped, ignore_index=True) if dropped else pd.DataFrame(columns=DROPPED_COLUMNS)
    validate_curves(curves, "combined curve sources")
    return LoadedCurves(curves, dropped)


def _empty_curves() -> pd.DataFrame:
    return _typed(pd.DataFrame({c: [] for c in CURVE_COLUMNS}))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    df = df[list(CURVE_COLUMNS)].copy()
    for col in ("source", "job", "metric", "direction", "seconds_kind", "outcome"):
        df[col] = df[col].astype(str)
    df["epoch"] = df["epoch"].astype("int64")
    for col in ("progress", "value", "seconds"):
        df[col] = df[col].astype("float64")
    return df


def guess_direction(metric: str) -> str | None:
    """'lower'/'higher' from a metric's name (loss, error, wer... / accuracy, f1, ...), else None."""
    name = metric.lower()
    for hint in _LOWER_HINTS:
        if re.search(rf"(^|[^a-z]){hint}", name):
            return "lower"
    for hint in _HIGHER_HINTS:
        if re.search(rf"(^|[^a-z]){hint}", name):
            return "higher"
    return None


def _direction_for(metric: str, directions: dict[str, str] | None, where: str) -> str:
    if directions and metric in directions:
        direction = directions[metric]
    else:
        direction = guess_direction(metric)
        if direction is None:
            raise ValueError(
                f"{where}: cannot tell whether metric {metric!r} is better lower or higher; "
                f"pass directions={{{metric!r}: 'lower' or 'higher'}}"
            )
    if direction not in DIRECTIONS:
        raise ValueError(f"{where}: direction {direction!r} for metric {metric!r} is not one of {DIRECTIONS}")
    return direction


def validate_curves(df: pd.DataFrame, where: str) -> None:
    """Raise ValueError naming ``where`` and the curve if ``df`` breaks the tidy schema."""
    missing = [c for c in CURVE_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{where}: missing curve columns {missing}")
    for col, allowed in (("direction", DIRECTIONS), ("seconds_kind", SECONDS_KINDS), ("outcome", OUTCOMES)):
        bad = df.loc[~df[col].isin(allowed), col]
        if len(bad):
            raise ValueError(f"{where}: field {col!r} has value {bad.iloc[0]!r} (row {bad.index[0]}); "
                             f"allowed: {allowed}")
    negative = df.index[df["seconds"] < 0]
    if len(negative):
        raise ValueError(f"{where}: negative seconds at row {negative[0]} (job {df.at[negative[0], 'job']!r})")
    if df.empty:
        return
    grouped = df.groupby(CURVE_KEY, sort=False)
    for col in ("direction", "seconds_kind", "outcome"):
        n_values = grouped[col].nunique()
        if (n_values > 1).any():
            key = n_values.index[n_values > 1][0]
            raise ValueError(f"{where}: curve {key} mixes several values of field {col!r}")
    in_order = df["epoch"].to_numpy() == (grouped.cumcount() + 1).to_numpy()
    if not in_order.all():
        row = df.index[~in_order][0]
        raise ValueError(f"{where}: curve {tuple(df.loc[row, CURVE_KEY])} has epoch {df.at[row, 'epoch']} "
                         f"at row {row}; epochs must run 1, 2, ... in order")


def _drop_table(source: str, counts: dict[str, int]) -> pd.DataFrame:
    rows = [{"source": source, "reason": r, "rows": int(n), "curves": 0} for r, n in counts.items() if n]
    return pd.DataFrame(rows, columns=DROPPED_COLUMNS)


def _without_curves(loaded: LoadedCurves, remove: pd.Series, reason: str) -> LoadedCurves:
    """Remove the curves whose rows ``remove`` marks, counting rows and curves per source."""
    removed = loaded.curves[remove]
    rows = [{"source": src, "reason": reason, "rows": len(part), "curves": len(part.groupby(CURVE_KEY))}
            for src, part in removed.groupby("source", sort=True)]
    dropped = pd.concat([loaded.dropped, pd.DataFrame(rows, columns=DROPPED_COLUMNS)], ignore_index=True) \
        if rows else loaded.dropped
    return LoadedCurves(loaded.curves[~remove].reset_index(drop=True), dropped)


def keep_metric(loaded: LoadedCurves, source: str, metric: str) -> LoadedCurves:
    """Keep only ``metric`` among ``source``'s curves (other sources untouched); the rest is counted."""
    if source in set(loaded.curves["source"]) and metric not in set(
            loaded.curves.loc[loaded.curves["source"] == source, "metric"]):
        raise ValueError(f"source {source!r} has no metric {metric!r}")
    remove = (loaded.curves["source"] == source) & (loaded.curves["metric"] != metric)
    return _without_curves(loaded, remove, f"metric other than {metric!r} not analysed")


def drop_short_curves(loaded: LoadedCurves, min_epochs: int) -> LoadedCurves:
    """Remove curves with fewer than ``min_epochs`` epochs (their measures are trivial); counted."""
    length = loaded.curves.groupby(CURVE_KEY, sort=False)["epoch"].transform("size")
    return _without_curves(loaded, length < min_epochs, f"curve shorter than {min_epochs} epochs")


def sample_jobs(loaded: LoadedCurves, max_jobs: int | None, seed: int) -> LoadedCurves:
    """At most ``max_jobs`` jobs per source, drawn reproducibly with ``seed``; the rest counted."""
    if max_jobs is None:
        return loaded
    rng = np.random.default_rng(seed)
    keep = set()
    for source, jobs in loaded.curves.groupby("source", sort=True)["job"]:
        names = np.array(sorted(jobs.unique()))
        chosen = names if len(names) <= max_jobs else rng.choice(names, size=max_jobs, replace=False)
        keep |= {(source, job) for job in chosen}
    pairs = pd.Series(list(zip(loaded.curves["source"], loaded.curves["job"])), index=loaded.curves.index)
    return _without_curves(loaded, ~pairs.isin(keep), f"job not among the {max_jobs} sampled (max_runs)")


# --------------------------------------------------------------------------- Pollux

# The Pollux artifact stores each model's validation metric under the column
# 'metric' without naming it. Names and directions below are ours, checked
# against the values (see tests/test_curves.py) and against the Pollux
# simulator itself, which decides a metric "increases" when its first value is
# below its last (simulator/applications.py, get_best_metric):
#   cifar10, imagenet: top-1 accuracy as a fraction (0.44 -> 0.95; 0.07 -> 0.76): higher.
#   bert: SQuAD F1 in percent (86.7 -> 88.6 over its 2 epochs): higher.
#   ncf: hit rate as a fraction (0.63 -> 0.69): higher.
#   deepspeech2: word error rate in percent (100 -> ~24): lower.
#   yolov3: falls from ~22 to ~12 over 50 epochs; not a mAP (which would rise),
#     so a validation loss: lower. Pollux's first-vs-last rule agrees.
POLLUX_METRICS: dict[str, tuple[str, str]] = {
    "bert": ("squad_f1_pct", "higher"),
    "cifar10": ("top1_accuracy", "higher"),
    "deepspeech2": ("wer_pct", "lower"),
    "imagenet": ("top1_accuracy", "higher"),
    "ncf": ("hit_rate", "higher"),
    "yolov3": ("val_loss", "lower"),
}
POLLUX_COLUMNS = ["progress", "iteration", "metric", "grad_sqr", "grad_var"]


def pollux_curves_dir() -> Path:
    return external_dir() / "learning_curves"


def load_pollux_curves(root: str | Path | None = None) -> LoadedCurves:
    """Real measured validation curves from the Pollux artifact, one curve per (model, batch size).

    Each file is one complete training run at a fixed batch size, so the
    outcome is 'passed'. The artifact has no per-epoch GPU time; ``seconds`` is
    NaN ('none') and the analysis then weighs every epoch equally (each epoch
    is one pass over the data at a fixed batch size).
    """
    root = Path(root) if root is not None else pollux_curves_dir()
    files = sorted(root.glob("*/validation-*.csv"))
    if not files:
        raise FileNotFoundError(f"{root}: no <model>/validation-<batch size>.csv files")
    frames = []
    for path in files:
        model = path.parent.name
        if model not in POLLUX_METRICS:
            raise ValueError(f"{path}: unknown Pollux model {model!r}; known: {sorted(POLLUX_METRICS)}")
        match = re.fullmatch(r"validation-(\d+)\.csv", path.name)
        if not match:
            raise ValueError(f"{path}: file name is not validation-<batch size>.csv")
        text, raw = _read_csv(path, POLLUX_COLUMNS, POLLUX_COLUMNS)
        if list(text.columns) != POLLUX_COLUMNS:
            raise ValueError(f"{path}: columns {list(text.columns)}; expected {POLLUX_COLUMNS}")
        metric, direction = POLLUX_METRICS[model]
        frames.append(pd.DataFrame({
            "source": "pollux", "job": f"{model}/bsz{int(match.group(1))}", "metric": metric,
            "direction": direction, "epoch": np.arange(1, len(raw) + 1), "progress": raw["progress"],
            "value": _finite_or_nan(raw["metric"]), "seconds": np.nan, "seconds_kind": "none",
            "outcome": "passed",
        }))
    curves = _typed(pd.concat(frames, ignore_index=True))
    validate_curves(curves, str(root))
    return LoadedCurves(curves, _drop_table("pollux", {}))


def _finite_or_nan(values) -> np.ndarray:
    arr = np.asarray(values, dtype="float64")
    return np.where(np.isfinite(arr), arr, np.nan)


def _read_csv(path: Path, required: list[str], numeric) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a CSV as text, and parse its ``numeric`` columns (those present) as float.

    Returns (text cells, parsed numbers). A numeric cell that is not a number
    raises ValueError naming file, line and field; 'nan'/'inf' are numbers
    (a diverged value) and empty cells become NaN.
    """
    text = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in required:
        if col not in text.columns:
            raise ValueError(f"{path}: missing column {col!r} (columns: {list(text.columns)})")
    numbers = pd.DataFrame(index=text.index)
    for col in (c for c in numeric if c in text.columns):
        cells = text[col].str.strip()
        parsed = pd.to_numeric(cells.where(cells != "", "nan"), errors="coerce")
        bad = parsed.isna() & ~cells.str.lower().isin(["", "nan", "-nan", "inf", "-inf", "+inf", "infinity",
                                                         "-infinity"])
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise ValueError(f"{path}: line {row + 2}, field {col!r}: {text[col].iloc[row]!r} is not a number")
        numbers[col] = parsed.astype("float64")
    return text, numbers


# --------------------------------------------------------------------------- CSV logs

TIDY_REQUIRED = ["job", "metric", "epoch", "value"]
TIDY_NUMERIC = ("epoch", "progress", "value", "seconds")


def load_csv_curves(
    path: str | Path,
    *,
    job: str | None = None,
    epoch_column: str = "epoch",
    metrics: list[str] | None = None,
    directions: dict[str, str] | None = None,
    seconds_column: str | None = None,
    seconds_kind: str = "gpu",
    outcome: str = "unknown",
    source: str | None = None,
) -> LoadedCurves:
    """Curves from a CSV log, in either of two layouts.

    - tidy: columns ``job, metric, epoch, value`` (and optionally any other
      column of :data:`CURVE_COLUMNS`); several jobs per file.
    - wide (e.g. Keras ``CSVLogger``): one row per epoch, column
      ``epoch_column`` plus one column per metric (``metrics``, default: all
      other columns but ``seconds_column``); one job per file, named ``job``
      or after the file.

    Directions come from a ``direction`` column, else ``directions``, else the
    metric's name (loss/error: lower; accuracy/f1/...: higher); an unknown name
    is an error. Rows are sorted by the logged epoch and renumbered 1..n (the
    logged value is kept as ``progress``). Empty value cells (metric not
    measured that epoch) are dropped and counted; 'nan'/'inf' are kept as NaN
    (the run diverged).
    """
    path = Path(path)
    source = source or str(path)
    if seconds_kind not in SECONDS_KINDS:
        raise ValueError(f"seconds_kind {seconds_kind!r} is not one of {SECONDS_KINDS}")
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome {outcome!r} is not one of {OUTCOMES}")
    header = pd.read_csv(path, nrows=0).columns
    if all(c in header for c in TIDY_REQUIRED):
        return _load_tidy_csv(path, source, directions, seconds_kind, outcome)
    if epoch_column not in header:
        raise ValueError(f"{path}: neither a tidy curve file (columns {TIDY_REQUIRED}) nor a wide log "
                         f"with an {epoch_column!r} column; columns: {list(header)}")
    job = job or path.stem
    if metrics is None:
        metrics = [c for c in header if c not in (epoch_column, seconds_column)]
    wanted = [epoch_column, *metrics] + ([seconds_column] if seconds_column else [])
    raw_text, raw = _read_csv(path, wanted, wanted)
    if raw[epoch_column].isna().any():
        line = int(np.flatnonzero(raw[epoch_column].isna().to_numpy())[0]) + 2
        raise ValueError(f"{path}: line {line}, field {epoch_column!r} is empty")
    if raw[epoch_column].duplicated().any():
        line = int(np.flatnonzero(raw[epoch_column].duplicated().to_numpy())[0]) + 2
        raise ValueError(f"{path}: line {line}, field {epoch_column!r}: epoch logged twice")
    frames = []
    drops = {"empty value cell (metric not logged that epoch)": 0}
    for metric in metrics:
        logged = raw_text[metric].str.strip() != ""
        drops["empty value cell (metric not logged that epoch)"] += int((~logged).sum())
        part = raw.loc[logged].sort_values(epoch_column)
        frames.append(pd.DataFrame({
            "source": source, "job": job, "metric": metric,
            "direction": _direction_for(metric, directions, str(path)),
            "epoch": np.arange(1, len(part) + 1), "progress": part[epoch_column].to_numpy(),
            "value": _finite_or_nan(part[metric]),
            "seconds": part[seconds_column].to_numpy() if seconds_column else np.nan,
            "seconds_kind": seconds_kind if seconds_column else "none", "outcome": outcome,
        }))
    curves = _typed(pd.concat(frames, ignore_index=True)) if frames else _empty_curves()
    validate_curves(curves, str(path))
    return LoadedCurves(curves, _drop_table(source, drops))


def _load_tidy_csv(path: Path, source: str, directions, seconds_kind: str, outcome: str) -> LoadedCurves:
    text, numbers = _read_csv(path, TIDY_REQUIRED, TIDY_NUMERIC)
    raw = text.drop(columns=list(numbers.columns)).join(numbers)
    for col in ("job", "metric"):
        empty = text[col].str.strip() == ""
        if empty.any():
            raise ValueError(f"{path}: line {int(np.flatnonzero(empty.to_numpy())[0]) + 2}, field {col!r} is empty")
    if raw["epoch"].isna().any():
        raise ValueError(f"{path}: line {int(np.flatnonzero(raw['epoch'].isna().to_numpy())[0]) + 2}, "
                         f"field 'epoch' is empty")
    unmeasured = (text["value"].str.strip() == "").to_numpy()
    df = raw.loc[~unmeasured].copy()
    df["line"] = np.flatnonzero(~unmeasured) + 2
    if "direction" not in df.columns:
        df["direction"] = [_direction_for(m, directions, str(path)) for m in df["metric"]]
    if "seconds" not in df.columns:
        df["seconds"] = np.nan
    if "seconds_kind" not in df.columns:
        df["seconds_kind"] = seconds_kind if "seconds" in text.columns else "none"
    if "outcome" not in df.columns:
        df["outcome"] = outcome
    if "source" not in df.columns:
        df["source"] = source
    dup = df.duplicated(["source", "job", "metric", "epoch"])
    if dup.any():
        row = df.loc[dup].iloc[0]
        raise ValueError(f"{path}: line {row['line']}: job {row['job']!r} metric {row['metric']!r} "
                         f"has epoch {row['epoch']:g} twice")
    df = df.sort_values(["source", "job", "metric", "epoch"], kind="stable")
    if "progress" not in df.columns:
        df["progress"] = df["epoch"]
    df["epoch"] = df.groupby(CURVE_KEY, sort=False).cumcount() + 1
    df["value"] = _finite_or_nan(df["value"])
    curves = _typed(df.reset_index(drop=True))
    validate_curves(curves, str(path))
    return LoadedCurves(curves, _drop_table(source, {"empty value cell (not measured)": int(unmeasured.sum())}))


# --------------------------------------------------------------------------- project corpus

def corpus_path() -> Path:
    return data_dir() / "corpus" / "training_runs.csv.gz"


def corpus_runs_path() -> Path:
    return data_dir() / "corpus" / "training_runs_jobs.csv"


def load_corpus(path: str | Path | None = None) -> LoadedCurves:
    """The project's corpus of real CPU training runs (tidy CSV, see data/corpus/README.md)."""
    return load_csv_curves(Path(path) if path is not None else corpus_path())


def load_corpus_runs(path: str | Path | None = None) -> pd.DataFrame:
    """One row per corpus run: its configuration, planned vs run epochs and outcome."""
    return pd.read_csv(Path(path) if path is not None else corpus_runs_path())


# --------------------------------------------------------------------------- TensorBoard

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
                "direction": _direction_for(tag, directions, f"{logdir} (run {job!r})"),
                "epoch": np.arange(1, len(points) + 1), "progress": points["step"].to_numpy(dtype="float64"),
                "value": _finite_or_nan(points["value"]), "seconds": seconds, "seconds_kind": "wall",
                "outcome": outcome,
            }))
    curves = _typed(pd.concat(frames, ignore_index=True)) if frames else _empty_curves()
    validate_curves(curves, str(logdir))
    return LoadedCurves(curves, _drop_table(source, drops))


# --------------------------------------------------------------------------- source specs

def load_curve_source(spec: str, curves_dir: str | Path | None = None) -> LoadedCurves:
    """Load one source named by a short spec, as the notebook's ``curve_sources`` lists them.

    ``"pollux"`` (the real Pollux curves, from ``curves_dir`` if given),
    ``"corpus"`` (this project's training runs), ``"corpus:<path>"``,
    ``"csv:<path>"`` or ``"tensorboard:<logdir>"``. CSV and TensorBoard
    sources infer metric directions from metric names.
    """
    kind, _, arg = spec.partition(":")
    if kind == "pollux":
        return load_pollux_curves(arg or curves_dir)
    if kind == "corpus":
        return load_corpus(arg or None)
    if kind == "csv" and arg:
        return load_csv_curves(os.path.expanduser(arg))
    if kind == "tensorboard" and arg:
        return load_tensorboard_curves(os.path.expanduser(arg))
    raise ValueError(f"curve source {spec!r}: expected 'pollux', 'corpus[:path]', 'csv:<path>' "
                     f"or 'tensorboard:<logdir>'")
