"""The normalized tables that every trace source is loaded into.

All timestamps are timezone-aware UTC (``datetime64[ns, UTC]``). The raw Philly
job log carries naive US/Pacific wall-clock times; they are localized to
America/Los_Angeles (the duplicated 01:00-02:00 hour of 2017-11-05 is read as
PDT, the first occurrence, and counted in the data-quality report) and
converted to UTC, so durations across the DST change are exact. Utilization rows
carry an explicit ``PDT``/``PST`` suffix and are converted exactly.

Definitions follow the official trace notebook (msr-fiddle/philly-traces):
    queueing_delay_s = first attempt start - submitted
    run_time_s       = last attempt end - first attempt start
    requeue_delay_s  = attempt start - previous attempt end (per attempt > 0);
                       for attempt 0 it equals the job's queueing delay
    gpu_time_s       = sum over attempts of (attempt end - attempt start) x GPUs
Jobs whose times are unknown have NaN for the derived columns (never dropped).

Source ``dre``: each record keeps only its job's LAST attempt, loaded as the job's one attempt, so for these rows
``first_start``, ``num_servers`` and ``queueing_delay_s`` are the last attempt's (the recorded wait, which holds
any earlier attempts) and ``run_time_s`` is the last attempt's run; the first-attempt wait is reconstructed by
:func:`dlcluster.validation.workload.dre_first_waits`. ``num_servers`` counts distinct servers; the official
notebook counts a placement's entries (:func:`dlcluster.trace.public.dre_detail_entries`).
"""

from __future__ import annotations

# Column -> meaning. These dicts are the documentation *and* the contract tests use.
JOBS_COLUMNS = {
    "jobid": "job id (string); public jobs without an id get 'pollux-<row>'",
    "vc": "virtual cluster (hashed id)",
    "user": "user (hashed id); <NA> where the source has none",
    "status": "final status: Pass, Killed, Failed, Running; <NA> where unknown",
    "submitted": "submit time (UTC)",
    "first_start": "start of the first attempt (UTC); NaT if never started or unknown",
    "last_end": "end of the last attempt (UTC); NaT if still running or unknown",
    "num_gpus": "GPUs requested (gang size), from the first attempt's placement or the source",
    "num_servers": "servers of the first attempt's placement; <NA> if unknown",
    "num_attempts": "attempts recorded; <NA> if the source has no attempts",
    "queueing_delay_s": "first_start - submitted, seconds",
    "run_time_s": "last_end - first_start, seconds",
    "gpu_time_s": "GPU-seconds over all attempts",
    "source": "which input the row came from: philly, dre, pollux, or a file name",
}

ATTEMPTS_COLUMNS = {
    "jobid": "job id",
    "attempt": "0-based attempt index within the job",
    "start": "attempt start (UTC); NaT if missing",
    "end": "attempt end (UTC); NaT if missing or still running",
    "running": "True if this is the last attempt and its end is None (still running)",
    "num_gpus": "GPUs in this attempt's placement",
    "num_servers": "servers in this attempt's placement",
    "requeue_delay_s": "start - previous attempt end (attempt 0: start - submitted), seconds",
    "duration_s": "end - start, seconds",
}

PLACEMENTS_COLUMNS = {
    "jobid": "job id",
    "attempt": "attempt index",
    "machine": "server id, e.g. m412",
    "gpu": "GPU index on that server (int, from 'gpu3')",
}

MACHINES_COLUMNS = {
    "machine": "server id",
    "num_gpus": "GPUs on the server, from the reconstructed list (philly-traces issue #8)",
    "num_gpus_listed": "GPUs in the official cluster_machine_list; <NA> if absent there",
    "gpu_mem": "per-GPU memory from the official list, e.g. '12GB'; <NA> if absent",
    "gpu_count_disagrees": "True where the official list and the reconstruction differ",
    "in_job_log_only": "True for machines that appear in placements but in no machine list",
}

# Per-minute utilization, long format. The full trace has absolute times; the
# public DRE windows have minutes relative to the job start instead.
GPU_UTIL_COLUMNS = {
    "jobid": "job id (public windows only; <NA> for the full trace)",
    "machine": "server id",
    "gpu": "GPU index",
    "time": "minute (UTC) (full trace); NaT for the public windows",
    "minute": "minutes relative to the job's start (public windows); <NA> for the full trace",
    "util": "GPU utilization percent; NaN for 'NA' (GPU offline)",
}
HOST_UTIL_COLUMNS = {
    "jobid": "job id (public windows only)",
    "machine": "server id",
    "time": "minute (UTC) (full trace)",
    "minute": "minutes relative to job start (public windows)",
    "cpu_util": "host CPU utilization percent (cpu table)",
    "mem_util": "host memory used, percent: 100 * (total - free) / total (mem table)",
}

# RFold's Philly job set (public data only): no calendar time, VC, user or status.
RFOLD_JOBS_COLUMNS = {
    "rfold_id": "RFold's job number (0-based, in arrival order)",
    "arrival_offset_s": "arrival, seconds after RFold's first arrival (no calendar time in the source)",
    "topology": "RFold's network model of the job (always 'CLOS' here)",
    "shape": "RFold's requested shape: GPUs per server joined by '+' (e.g. '8+8'), a single number for one server",
    "num_gpus": "GPUs requested",
    "duration_s": "duration in seconds as RFold gives it (its derivation is not documented)",
}

SIZE_BUCKETS = ("1", "2-4", "5-8", ">8")
#: results.json-safe spelling of each size bucket (``>`` does not belong in a key).
BUCKET_KEYS = {"1": "1", "2-4": "2-4", "5-8": "5-8", ">8": "gt8"}


def size_bucket(num_gpus):
    """The paper's job-size buckets (1, 2-4, 5-8, >8 GPUs) for a scalar or Series."""
    import numpy as np
    import pandas as pd

    bins = [0, 1, 4, 8, np.inf]
    out = pd.cut(pd.Series(num_gpus) if np.ndim(num_gpus) == 0 else num_gpus,
                 bins=bins, labels=list(SIZE_BUCKETS))
    return out.iloc[0] if np.ndim(num_gpus) == 0 else out
