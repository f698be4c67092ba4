"""Clock handling for the Philly trace.

The job log holds naive US/Pacific wall-clock times ("2017-10-07 01:11:39");
utilization files append the zone ("2017-10-03 00:08:00 PDT"). Everything is
converted to UTC so that durations across the 2017-11-05 PDT->PST change are
exact. A naive time inside the repeated 01:00-02:00 hour of that night is
ambiguous; it is read as PDT (the first occurrence) and flagged by the caller.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TRACE_TZ = "America/Los_Angeles"
ZONE_OFFSETS = {"PDT": pd.Timedelta(hours=7), "PST": pd.Timedelta(hours=8)}


def parse_naive_local(values: pd.Series) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Parse naive local time strings to UTC.

    Returns ``(utc, unparseable, ambiguous)``: ``utc`` is NaT where the value is
    missing or unparseable; ``unparseable`` marks present-but-bad strings;
    ``ambiguous`` marks times in the repeated DST hour (read as PDT).
    """
    values = pd.Series(values, dtype="object")
    present = values.notna() & (values.astype(str).str.strip().str.lower().isin(["", "none", "nan", "null"]) == False)  # noqa: E712
    naive = pd.to_datetime(values.where(present), errors="coerce", format="%Y-%m-%d %H:%M:%S")
    unparseable = present & naive.isna()
    probe = naive.dt.tz_localize(TRACE_TZ, ambiguous="NaT", nonexistent="NaT")
    ambiguous = naive.notna() & probe.isna()
    return localize_naive(naive), unparseable, ambiguous


def localize_naive(naive: pd.Series) -> pd.Series:
    """Naive US/Pacific wall-clock datetimes -> UTC (the repeated DST hour read as PDT)."""
    naive = pd.Series(naive)
    return naive.dt.tz_localize(TRACE_TZ, ambiguous=np.ones(len(naive), dtype=bool),
                                nonexistent="shift_forward").dt.tz_convert("UTC").astype("datetime64[ns, UTC]")


def to_local_naive(utc: pd.Series) -> pd.Series:
    """UTC -> naive US/Pacific wall-clock datetimes (the clock the job log was written in)."""
    return pd.Series(utc).dt.tz_convert(TRACE_TZ).dt.tz_localize(None)


def parse_zoned(values: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Parse ``'YYYY-MM-DD HH:MM:SS PDT|PST'`` to UTC; returns ``(utc, bad)``."""
    text = pd.Series(values, dtype="object").astype(str).str.strip()
    zone = text.str[-3:]
    offset = zone.map(ZONE_OFFSETS)
    naive = pd.to_datetime(text.str[:-4], errors="coerce", format="%Y-%m-%d %H:%M:%S")
    utc = (naive + offset.astype("timedelta64[ns]")).dt.tz_localize("UTC").astype("datetime64[ns, UTC]")
    bad = utc.isna()
    return utc, bad


def to_local_string(utc: pd.Series) -> pd.Series:
    """UTC -> naive US/Pacific wall-clock string, as the job log writes it ('' for NaT)."""
    local = pd.Series(utc).dt.tz_convert(TRACE_TZ)
    return local.dt.strftime("%Y-%m-%d %H:%M:%S").fillna("")
