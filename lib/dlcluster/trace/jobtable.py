"""Another cluster's job table (CSV, CSV.gz or Parquet) as a jobs table the simulator replays.

Job tables such as those Helios, Alibaba PAI or Tiresias ship hold one row per
job under their own column names. ``load_job_table`` maps those columns onto
the fields below and returns the rows as a jobs table with the columns of
:data:`dlcluster.trace.schema.JOBS_COLUMNS` (the input of
:func:`dlcluster.sim.workload_from_jobs`), plus a :class:`QualityReport` in
which every row is either loaded or quarantined with its reason.

Column mapping: ``columns`` is a dict ``{field: column}`` or the path of a YAML
file holding the same mapping (it may also set ``origin`` and ``timezone``).
Fields not mapped are looked up among :data:`COMMON_NAMES` (the first name
present wins); map a field to ``null``/None to say the table has no such
column, and pass ``autodetect=False`` to use the mapping only. The columns
used are in ``jobs.attrs["columns"]``.

Times: a number is seconds from ``origin`` (default: the Unix epoch, so Unix
timestamps work as they are); any other value must be an ISO 8601 timestamp
(``2020-06-09 18:41:01``). Timestamps without a zone are wall-clock times in
``timezone`` (default UTC).

The run time of a job is its ``duration`` column or, without one, ``end -
start``. Without a VC column every job goes to the single VC ``"all"``, and the
report flags it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .quality import QualityReport, TraceFormatError
from .times import localize_naive

FIELDS = {
    "submit": "submit time: seconds from origin, or a timestamp (required)",
    "gpus": "GPUs the job requested, all at once (required)",
    "duration": "seconds the job ran (required unless start and end are given)",
    "start": "start time, like submit (used with end when there is no duration)",
    "end": "end time, like submit (used with start when there is no duration)",
    "vc": "virtual cluster (optional; without it every job goes to one VC)",
    "user": "user (optional)",
    "status": "final status, kept as given (optional)",
    "jobid": "job id (optional; without it '<file stem>-<row>')",
}

# Names that common public job tables use for each field, tried in this order
# when a field is not mapped (Helios: submit_time, gpu_num, duration, vc, user,
# state, job_id; Tiresias: submit_time, num_gpu, duration, job_id).
COMMON_NAMES = {
    "submit": ("submit_time", "submitted_time", "submitted", "submission_time"),
    "gpus": ("gpu_num", "num_gpu", "num_gpus", "gpus", "gpu_count"),
    "duration": ("duration", "run_time", "runtime", "duration_s", "run_time_s"),
    "start": ("start_time",),
    "end": ("end_time",),
    "vc": ("vc", "virtual_cluster"),
    "user": ("user", "user_id", "user_name"),
    "status": ("status", "state"),
    "jobid": ("job_id", "jobid"),
}
MAP_FILE_OPTIONS = ("origin", "timezone")
SINGLE_VC = "all"
NO_VC_FLAG = f"no VC column: job in the single VC {SINGLE_VC!r}"
UNIX_EPOCH = "1970-01-01T00:00:00Z"
_MAX_ABS_SECONDS = 9.2e9  # pandas' nanosecond timestamps end in 2262
_ZONE_SUFFIX = r"(?:Z|[+-]\d\d:?\d\d)$"  # ISO 8601 zone designator at the end of a timestamp
_MISSING_TEXT = ("", "nan", "none", "null", "nat", "na", "<na>")


def read_column_map(path: str | Path) -> dict:
    """The mapping in a YAML file: ``{field: column or None}`` plus optional ``origin``/``timezone``."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TraceFormatError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise TraceFormatError(f"{path}: expected a mapping like 'submit: submit_time', got {type(data).__name__}")
    _check_mapping(data, str(path), allowed=tuple(FIELDS) + MAP_FILE_OPTIONS)
    return data


def _check_mapping(mapping: dict, where: str, allowed: tuple) -> None:
    unknown = [k for k in mapping if k not in allowed]
    if unknown:
        raise TraceFormatError(f"{where}: unknown key(s) {unknown}; expected some of {list(allowed)}")
    for key, value in mapping.items():
        if key in FIELDS and value is not None and not isinstance(value, str):
            raise TraceFormatError(f"{where}: field {key!r} must name a column (a string) or be null, got {value!r}")


def resolve_columns(found: list[str], mapping: dict, file: str, autodetect: bool = True) -> dict:
    """``{field: column}`` for the fields this table has; errors name the file, column and what was found."""
    resolved = {}
    for field in FIELDS:
        if field in mapping:
            column = mapping[field]
            if column is None:
                continue
            if column not in found:
                raise TraceFormatError(f"{file}: column {column!r} (mapped to {field!r}) not found; "
                                       f"the file has columns {found}")
            resolved[field] = column
        elif autodetect:
            for name in COMMON_NAMES[field]:
                if name in found:
                    resolved[field] = name
                    break
    need = ["submit", "gpus"]
    if "duration" not in resolved:
        need += ["start", "end"] if ("start" in resolved or "end" in resolved) else ["duration"]
    missing = [f for f in need if f not in resolved]
    if missing:
        hints = "; ".join(f"{f!r} ({FIELDS[f]}; tried {list(COMMON_NAMES[f]) if autodetect else 'no names'})"
                          for f in missing)
        raise TraceFormatError(f"{file}: no column for required field(s) {hints}; the file has columns {found}. "
                               f"Map them, e.g. --{missing[0]}-col NAME or '{missing[0]}: NAME' in a --map YAML")
    if "duration" in resolved:  # start/end are only a fallback for the run time
        resolved.pop("start", None)
        resolved.pop("end", None)
    return resolved


def _read_table(path: Path) -> tuple[pd.DataFrame, str]:
    """The raw table and how to name a row in messages ('line' for CSV, 'row' for Parquet)."""
    name = path.name.lower()
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such job table")
    if name.endswith((".parquet", ".pq")):
        try:
            return pd.read_parquet(path), "row"
        except Exception as exc:  # pyarrow raises several types for a broken file
            raise TraceFormatError(f"{path}: not a readable Parquet file ({exc})") from None
    if name.endswith((".csv", ".csv.gz")):
        try:
            return pd.read_csv(path, dtype=str, keep_default_na=False), "line"
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError) as exc:
            raise TraceFormatError(f"{path}: not a readable CSV file ({exc})") from None
    raise TraceFormatError(f"{path}: expected a .csv, .csv.gz or .parquet file")


def _where(kind: str, i: int) -> str:
    return f"line {i + 2}" if kind == "line" else f"row {i}"


def _missing(values: pd.Series) -> pd.Series:
    if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
        return values.isna()
    return values.isna() | values.astype("string").str.strip().str.lower().isin(_MISSING_TEXT).fillna(True)


def _times(values: pd.Series, origin: pd.Timestamp, timezone: str, file: str, column: str):
    """Parse a time column to UTC; returns ``(utc, missing_or_bad, ambiguous)``."""
    absent = _missing(values)
    if pd.api.types.is_datetime64_any_dtype(values):
        if values.dt.tz is None:
            utc, ambiguous = localize_naive(values, timezone)
        else:
            utc, ambiguous = values.dt.tz_convert("UTC"), pd.Series(False, index=values.index)
        return utc.astype("datetime64[ns, UTC]"), utc.isna(), ambiguous
    text = values.astype("string").str.strip().where(~absent)
    seconds = pd.to_numeric(text, errors="coerce").astype("float64")
    since_1970 = origin.value / 1e9 + seconds
    in_range = np.isfinite(since_1970) & (since_1970.abs() < _MAX_ABS_SECONDS)
    utc = (origin + pd.to_timedelta(seconds.where(in_range), unit="s")).astype("datetime64[ns, UTC]")
    ambiguous = pd.Series(False, index=values.index)
    stamps = ~absent & seconds.isna()
    if stamps.any():
        zoned = text[stamps].str.contains(_ZONE_SUFFIX, regex=True)
        if zoned.any() and not zoned.all():
            first_naive, first_zoned = text[stamps][~zoned].iloc[0], text[stamps][zoned].iloc[0]
            raise TraceFormatError(f"{file}: column {column!r}: some timestamps carry a zone ({first_zoned!r}) and "
                                   f"some do not ({first_naive!r}); expected one form")
        parsed = pd.to_datetime(text[stamps], format="ISO8601", errors="coerce", utc=bool(zoned.all()))
        if parsed.dt.tz is None:
            parsed, ambiguous[stamps] = localize_naive(parsed, timezone)
        utc[stamps] = parsed.astype("datetime64[ns, UTC]")
    return utc, utc.isna(), ambiguous


def _optional_text(raw: pd.DataFrame, column: str | None, keep: pd.Series) -> pd.array:
    if column is None:
        return pd.array([pd.NA] * int(keep.sum()), dtype="string")
    values = raw.loc[keep, column]
    return pd.array(values.astype("string").str.strip().where(~_missing(values)), dtype="string")


def load_job_table(path: str | Path, columns: dict | str | Path | None = None, origin=None,
                   timezone: str | None = None, *, autodetect: bool = True,
                   quality: QualityReport | None = None) -> tuple[pd.DataFrame, QualityReport]:
    """Read a job table; returns ``(jobs, quality)``.

    ``columns``: ``{field: column}`` or a YAML file of it (see the module doc).
    ``origin``: what numeric times count seconds from (a timestamp; naive means
    UTC), default the map file's ``origin`` or the Unix epoch. ``timezone``:
    zone of timestamps without one, default the map file's or UTC. Rows that
    cannot be replayed are quarantined in ``quality`` with their reason.
    """
    path = Path(path)
    file = path.name
    mapping = {}
    if isinstance(columns, (str, Path)):
        mapping = read_column_map(columns)
    elif columns is not None:
        _check_mapping(columns, "columns", allowed=tuple(FIELDS) + MAP_FILE_OPTIONS)
        mapping = dict(columns)
    origin = origin if origin is not None else mapping.pop("origin", None)
    timezone = timezone if timezone is not None else mapping.pop("timezone", None)
    mapping = {k: v for k, v in mapping.items() if k in FIELDS}
    try:
        origin = pd.Timestamp(origin if origin is not None else UNIX_EPOCH)
    except ValueError:
        raise ValueError(f"origin {origin!r}: expected a timestamp like 2020-04-01 "
                         "or 2020-04-01T08:00:00+08:00") from None
    origin = origin.tz_localize("UTC") if origin.tzinfo is None else origin.tz_convert("UTC")
    timezone = timezone or "UTC"
    try:
        pd.Timestamp("2000-01-01").tz_localize(timezone)
    except (KeyError, ValueError, TypeError):  # zoneinfo's ZoneInfoNotFoundError is a KeyError
        raise ValueError(f"timezone {timezone!r}: not a known time zone; expected e.g. UTC or Asia/Shanghai") from None

    raw, kind = _read_table(path)
    raw = raw.reset_index(drop=True)
    cols = resolve_columns([str(c) for c in raw.columns], mapping, str(path), autodetect=autodetect)
    quality = quality if quality is not None else QualityReport()
    quality.read(file, len(raw), unit="jobs")

    submitted, bad_submit, amb_submit = _times(raw[cols["submit"]], origin, timezone, file, cols["submit"])
    gpus_text = raw[cols["gpus"]]
    gpus = pd.to_numeric(gpus_text.where(~_missing(gpus_text)), errors="coerce").astype("float64")
    gpus = gpus.where(np.isfinite(gpus))
    checks = [
        (bad_submit, "submit time missing or unparseable"),
        (gpus.isna(), "GPU count missing or not a number"),
        (gpus % 1 != 0, "GPU count not an integer"),
        (gpus < 1, "GPU count zero or negative"),
    ]
    start = end = None
    ambiguous = amb_submit
    if "duration" in cols:
        values = raw[cols["duration"]]
        duration = pd.to_numeric(values.where(~_missing(values)), errors="coerce").astype("float64")
        duration = duration.where(np.isfinite(duration))
        checks += [(duration.isna(), "duration missing or not a number"),
                   (duration < 0, "duration negative")]
    else:
        start, bad_start, amb_start = _times(raw[cols["start"]], origin, timezone, file, cols["start"])
        end, bad_end, amb_end = _times(raw[cols["end"]], origin, timezone, file, cols["end"])
        duration = (end - start).dt.total_seconds()
        checks += [(bad_start, "start time missing or unparseable"),
                   (bad_end, "end time missing or unparseable"),
                   (duration < 0, "end before start")]
        ambiguous = ambiguous | amb_start | amb_end
    if "vc" in cols:
        checks.append((_missing(raw[cols["vc"]]), "VC empty"))
    if "jobid" in cols:
        ids = raw[cols["jobid"]].astype("string").str.strip()
        checks.append((_missing(raw[cols["jobid"]]), "job id empty"))

    keep = pd.Series(True, index=raw.index)
    for bad, reason in checks:
        _quarantine(quality, file, bad.fillna(False).astype(bool) & keep, reason, kind)
        keep &= ~bad.fillna(False).astype(bool)
    if "jobid" in cols:
        duplicated = keep & ids.where(keep).duplicated(keep="first") & ids.notna()
        _quarantine(quality, file, duplicated, "duplicate job id (first kept)", kind)
        keep &= ~duplicated
    loaded = int(keep.sum())
    quality.loaded(file, loaded)
    quality.flag(file, f"time in a repeated daylight-saving hour in {timezone} (read as the first)",
                 int((ambiguous & keep).sum()))
    if "vc" not in cols:
        quality.flag(file, NO_VC_FLAG, loaded)
    quality.check()

    rows = raw.index[keep]
    stem = file.split(".")[0]
    jobid = (ids[keep].to_numpy(dtype=object) if "jobid" in cols
             else np.array([f"{stem}-{i}" for i in rows], dtype=object))
    vc = _optional_text(raw, cols.get("vc"), keep) if "vc" in cols else pd.array([SINGLE_VC] * loaded, dtype="string")
    run_time = duration[keep].to_numpy(dtype="float64")
    num_gpus = gpus[keep].astype("int64")
    nat = pd.array([pd.NaT] * loaded, dtype="datetime64[ns, UTC]")
    first_start = start[keep].array if start is not None else nat
    last_end = end[keep].array if end is not None else nat
    queueing = ((start[keep] - submitted[keep]).dt.total_seconds().to_numpy(dtype="float64")
                if start is not None else np.full(loaded, np.nan))
    jobs = pd.DataFrame({
        "jobid": jobid,
        "vc": vc,
        "user": _optional_text(raw, cols.get("user"), keep),
        "status": _optional_text(raw, cols.get("status"), keep),
        "submitted": submitted[keep].array,
        "first_start": first_start,
        "last_end": last_end,
        "num_gpus": pd.array(num_gpus, dtype="Int64"),
        "num_servers": pd.array([pd.NA] * loaded, dtype="Int64"),
        "num_attempts": pd.array([pd.NA] * loaded, dtype="Int64"),
        "queueing_delay_s": queueing,
        "run_time_s": run_time,
        "gpu_time_s": run_time * num_gpus.to_numpy(dtype="float64"),
        "source": file,
    })
    jobs.attrs["columns"] = dict(cols)
    return jobs, quality


def _quarantine(quality: QualityReport, file: str, bad: pd.Series, reason: str, kind: str) -> None:
    for i in bad.index[bad][:5]:
        quality.quarantine(file, reason, n=0, where=_where(kind, int(i)))
    if bad.any():
        quality.quarantine(file, reason, n=int(bad.sum()))
