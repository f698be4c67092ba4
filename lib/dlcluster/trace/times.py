"""Clock handling for the Philly trace.

The job log holds naive US/Pacific wall-clock times ("2017-10-07 01:11:39");
utilization files append the zone ("2017-10-03 00:08:00 PDT"). Everything is
converted to UTC so that durations across the 2017-11-05 PDT->PST change are
exact. A naive time inside the repeated 01:00-02:00 hour of that night is
ambiguous; it is read as PDT (the first occurrence) and flagged by the caller.

A time outside the plausible period of the trace (the released trace's submits
span 2017-08-07..2017-12-22, US/Pacific, widened by a month on each side for
jobs queued or running around them) is kept but flagged by the readers: it
predates the cluster or follows the end of the trace, so it is a typo, a
default date (1970) or clock trouble.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TRACE_TZ = "America/Los_Angeles"
FIRST_SUBMIT_DAY = pd.Timestamp("2017-08-07", tz=TRACE_TZ)     # the released trace's first submit day
LAST_SUBMIT_DAY = pd.Timestamp("2017-12-22", tz=TRACE_TZ)      # ... and its last
PLAUSIBLE_MARGIN = pd.Timedelta(days=31)
EARLIEST_PLAUSIBLE_TIME = (FIRST_SUBMIT_DAY - PLAUSIBLE_MARGIN).tz_convert("UTC")
LATEST_PLAUSIBLE_TIME = (LAST_SUBMIT_DAY + pd.Timedelta(days=1) + PLAUSIBLE_MARGIN).tz_convert("UTC")
TRACE_PERIOD = (f"{EARLIEST_PLAUSIBLE_TIME.tz_convert(TRACE_TZ):%Y-%m-%d}.."       # whole days, inclusive
                f"{(LATEST_PLAUSIBLE_TIME - pd.Timedelta(1)).tz_convert(TRACE_TZ):%Y-%m-%d} US/Pacific")


def parse_naive_local(values: pd.Series) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Parse naive local time strings to UTC.

    Returns ``(utc, unparseable, ambiguous)``: ``utc`` is NaT where the value is
    missing or unparseable; ``unparseable`` marks present-but-bad strings;
    ``ambiguous`` marks times in the repeated DST hour (read as PDT).
    """
    values = pd.Series(values, dtype="object")
    present = values.notna() & (values.astype(str).str.strip().str.lower().isin(["", "none", "nan", "null"]) == False)  # noqa: E712
    text = values.map(lambda v: isinstance(v, str))          # a number is not a time (pandas would read an epoch)
    naive = pd.to_datetime(values.where(present & text), errors="coerce", format="%Y-%m-%d %H:%M:%S")
    unparseable = present & naive.isna()
    utc, ambiguous = localize_naive(naive, TRACE_TZ)
    return utc, unparseable, ambiguous


def localize_pacific(naive: pd.Series) -> pd.Series:
    """Naive US/Pacific wall-clock datetimes -> UTC (the repeated DST hour read as PDT)."""
    return localize_naive(pd.Series(naive), TRACE_TZ)[0]


def to_local_naive(utc: pd.Series) -> pd.Series:
    """UTC -> naive US/Pacific wall-clock datetimes (the clock the job log was written in)."""
    return pd.Series(utc).dt.tz_convert(TRACE_TZ).dt.tz_localize(None)


def localize_naive(naive: pd.Series, tz: str) -> tuple[pd.Series, pd.Series]:
    """Naive wall-clock times in zone ``tz`` -> UTC; returns ``(utc, ambiguous)``.

    A time in a repeated hour (end of daylight-saving time) is read as its first
    occurrence and marked in ``ambiguous`` for the caller to count; a time in a
    skipped hour is shifted forward.
    """
    probe = naive.dt.tz_localize(tz, ambiguous="NaT", nonexistent="NaT")
    ambiguous = naive.notna() & probe.isna()
    utc = naive.dt.tz_localize(tz, ambiguous=np.ones(len(naive), dtype=bool),
                               nonexistent="shift_forward").dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    return utc, ambiguous


def outside_trace_period(utc: pd.Series) -> np.ndarray:
    """Times (UTC) before the cluster existed or after the trace ended; NaT is not outside."""
    utc = pd.Series(utc)
    return ((utc < EARLIEST_PLAUSIBLE_TIME) | (utc >= LATEST_PLAUSIBLE_TIME)).to_numpy(dtype=bool)
