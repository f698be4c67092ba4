"""Parse Philly job records (the ``cluster_job_log`` JSON format) into tidy tables.

One raw job is ``{"status", "vc", "jobid", "user", "submitted_time",
"attempts": [{"start_time", "end_time", "detail": [{"ip", "gpus": ["gpu0", ...]}]}]}``.
What the real log contains and how it is read:

* a job without attempts: loaded, never started (NaT times), flagged;
* an attempt start or end that is missing or ``None``: NaT, flagged; an end of
  ``None`` on the *last* attempt means the attempt was still running;
* naive local times in the repeated DST hour: read as PDT, flagged;
* a time outside the trace's plausible period (:data:`.times.TRACE_PERIOD`) or an
  attempt that ends before it starts: kept, flagged with the job;
* a record that cannot be a job (no jobid, unknown status, bad submit time,
  malformed placement, duplicate jobid) is quarantined with its reason.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .quality import QualityReport
from .schema import JOBS_COLUMNS
from .times import TRACE_PERIOD, outside_trace_period, parse_naive_local

STATUSES = ("Pass", "Killed", "Failed")
_GPU_NAME = re.compile(r"^gpu(\d+)$")
_REQUIRED = ("jobid", "vc", "status", "submitted_time")


class _Quarantine(Exception):
    pass


def _placement(detail, where: str) -> list[tuple[str, int]]:
    if detail is None:
        return []
    if not isinstance(detail, list):
        raise _Quarantine(f"{where}: 'detail' is not a list")
    out = []
    for server in detail:
        if not isinstance(server, dict) or not isinstance(server.get("ip"), str) or not server["ip"]:
            raise _Quarantine(f"{where}: placement entry without a server 'ip'")
        gpus = server.get("gpus")
        if not isinstance(gpus, list):
            raise _Quarantine(f"{where}: placement 'gpus' is not a list")
        for name in gpus:
            m = _GPU_NAME.match(str(name))
            if not m:
                raise _Quarantine(f"{where}: GPU name {name!r} is not like 'gpu3'")
            out.append((server["ip"], int(m.group(1))))
    return out


def parse_job_records(records, file: str, quality: QualityReport, source: str):
    """Return ``(jobs, attempts, placements)`` DataFrames; accounts every record in ``quality``."""
    if not isinstance(records, list):
        from .quality import TraceFormatError
        raise TraceFormatError(f"{file}: expected a JSON list of jobs, got {type(records).__name__}")

    job_rows, att_rows, plc_rows = [], [], []
    seen: set[str] = set()
    quality.read(file, len(records), unit="jobs")
    for index, rec in enumerate(records):
        where = f"job #{index}"
        try:
            if not isinstance(rec, dict):
                raise _Quarantine("record is not a JSON object")
            for key in _REQUIRED:
                if rec.get(key) in (None, ""):
                    raise _Quarantine(f"missing field '{key}'")
            jobid = str(rec["jobid"])
            where = f"job #{index} ({jobid})"
            if rec["status"] not in STATUSES:
                raise _Quarantine(f"unknown status (expected one of {', '.join(STATUSES)})")
            if jobid in seen:
                raise _Quarantine("duplicate jobid")
            attempts = rec.get("attempts", [])
            if attempts is None:
                attempts = []
            if not isinstance(attempts, list):
                raise _Quarantine("'attempts' is not a list")
            parsed = []
            for k, att in enumerate(attempts):
                if not isinstance(att, dict):
                    raise _Quarantine(f"attempt {k} is not a JSON object")
                parsed.append((att.get("start_time"), att.get("end_time"),
                               _placement(att.get("detail"), f"attempt {k}")))
        except _Quarantine as exc:
            reason = str(exc)
            reason = reason.split(": ", 1)[1] if reason.startswith("attempt ") and ": " in reason else reason
            quality.quarantine(file, reason, where=where)
            continue
        seen.add(jobid)
        job_rows.append((jobid, rec["vc"], rec.get("user"), rec["status"], rec["submitted_time"], len(parsed)))
        for k, (start, end, placement) in enumerate(parsed):
            servers = {ip for ip, _ in placement}
            att_rows.append((jobid, k, start, end, k == len(parsed) - 1, len(placement), len(servers)))
            plc_rows.extend((jobid, k, ip, gpu) for ip, gpu in placement)

    jobs = pd.DataFrame(job_rows, columns=["jobid", "vc", "user", "status", "submitted_raw", "num_attempts"],
                        dtype=object).astype({"num_attempts": "int64"})
    attempts = pd.DataFrame(att_rows, columns=["jobid", "attempt", "start_raw", "end_raw", "is_last",
                                               "num_gpus", "num_servers"], dtype=object)
    attempts = attempts.astype({"attempt": "int64", "is_last": bool, "num_gpus": "int64", "num_servers": "int64"})
    placements = pd.DataFrame(plc_rows, columns=["jobid", "attempt", "machine", "gpu"])

    # Submit times: an unparseable one makes the job unusable -> quarantine it (and its attempts).
    submitted, bad_submit, amb_submit = parse_naive_local(jobs["submitted_raw"])
    if bad_submit.any():
        bad_ids = set(jobs.loc[bad_submit, "jobid"])
        for jid in jobs.loc[bad_submit, "jobid"]:
            quality.quarantine(file, "unparseable submitted_time", where=f"job {jid}")
        keep = ~bad_submit
        jobs, submitted, amb_submit = jobs[keep], submitted[keep], amb_submit[keep]
        attempts = attempts[~attempts["jobid"].isin(bad_ids)]
        placements = placements[~placements["jobid"].isin(bad_ids)]
    quality.loaded(file, len(jobs))
    quality.flag(file, "submitted_time in the repeated DST hour (read as PDT)", int(amb_submit.sum()))
    quality.flag(file, "job has no attempts (never started)", int((jobs["num_attempts"] == 0).sum()))
    outside = outside_trace_period(submitted)
    quality.flag_many(file, f"submitted_time outside the trace period {TRACE_PERIOD} (kept)", int(outside.sum()),
                      (f"job {jid}" for jid in jobs.loc[outside, "jobid"]))

    start, bad_start, amb_start = parse_naive_local(attempts["start_raw"])
    end, bad_end, amb_end = parse_naive_local(attempts["end_raw"])
    missing_start = start.isna() & ~bad_start
    missing_end = end.isna() & ~bad_end
    running = missing_end & attempts["is_last"].to_numpy()
    quality.flag(file, "attempt start_time missing or None", int(missing_start.sum()))
    quality.flag(file, "attempt start_time unparseable (set to NaT)", int(bad_start.sum()))
    quality.flag(file, "last attempt still running (end_time None)", int(running.sum()))
    quality.flag(file, "earlier attempt end_time missing or None", int((missing_end & ~running).sum()))
    quality.flag(file, "attempt end_time unparseable (set to NaT)", int(bad_end.sum()))
    quality.flag(file, "attempt time in the repeated DST hour (read as PDT)", int((amb_start | amb_end).sum()))

    attempts = attempts.assign(start=start.array, end=end.array, running=running.to_numpy())

    def flag_attempts(reason: str, mask: np.ndarray) -> None:
        where = zip(attempts.loc[mask, "jobid"], attempts.loc[mask, "attempt"], strict=True)
        quality.flag_many(file, reason, int(mask.sum()), (f"job {jid} attempt {k}" for jid, k in where))

    flag_attempts(f"attempt start_time or end_time outside the trace period {TRACE_PERIOD} (kept)",
                  outside_trace_period(attempts["start"]) | outside_trace_period(attempts["end"]))
    negative = (attempts["end"] < attempts["start"]).to_numpy()
    flag_attempts("attempt ends before it starts (duration set to NaN)", negative)
    duration = (attempts["end"] - attempts["start"]).dt.total_seconds().where(~negative)
    attempts["duration_s"] = duration

    jobs = jobs.assign(submitted=submitted.array).drop(columns="submitted_raw")
    prev_end = attempts.groupby("jobid", sort=False)["end"].shift(1)
    first = attempts["attempt"] == 0
    submit_of_attempt = attempts[["jobid"]].merge(jobs[["jobid", "submitted"]], on="jobid", how="left")["submitted"]
    submit_of_attempt.index = attempts.index
    reference = prev_end.where(~first, submit_of_attempt)
    attempts["requeue_delay_s"] = (attempts["start"] - reference).dt.total_seconds()
    attempts = attempts[["jobid", "attempt", "start", "end", "running", "num_gpus", "num_servers",
                         "requeue_delay_s", "duration_s"]].reset_index(drop=True)

    firsts = attempts[first.to_numpy()].set_index("jobid")
    lasts = attempts.groupby("jobid", sort=False).tail(1).set_index("jobid")
    gpu_time = (attempts["duration_s"] * attempts["num_gpus"]).groupby(attempts["jobid"]).sum(min_count=1)
    per_job = pd.DataFrame({
        "first_start": firsts["start"], "num_gpus": firsts["num_gpus"], "num_servers": firsts["num_servers"],
    }).join(lasts["end"].rename("last_end"), how="outer").join(gpu_time.rename("gpu_time_s"), how="outer")
    jobs = jobs.join(per_job, on="jobid")
    jobs["first_start"] = jobs["first_start"].astype("datetime64[ns, UTC]")
    jobs["last_end"] = jobs["last_end"].astype("datetime64[ns, UTC]")
    jobs["num_gpus"] = jobs["num_gpus"].astype("Int64")
    jobs["num_servers"] = jobs["num_servers"].astype("Int64")
    jobs["num_attempts"] = jobs["num_attempts"].astype("Int64")
    jobs["queueing_delay_s"] = (jobs["first_start"] - jobs["submitted"]).dt.total_seconds()
    jobs["run_time_s"] = (jobs["last_end"] - jobs["first_start"]).dt.total_seconds()
    jobs["gpu_time_s"] = jobs["gpu_time_s"].astype("float64")
    jobs["source"] = source
    jobs = jobs.astype({"jobid": "str", "vc": "str", "user": "string", "status": "string", "source": "str"})
    attempts = attempts.astype({"jobid": "str"})
    placements = placements.astype({"jobid": "str", "machine": "str"})
    placements = placements.astype({"attempt": "int64", "gpu": "int64"}).reset_index(drop=True)
    return jobs[list(JOBS_COLUMNS)].reset_index(drop=True), attempts, placements
