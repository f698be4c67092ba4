"""Bring your own jobs: another cluster's job table (CSV, CSV.gz, Parquet) as a simulator workload."""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlcluster.cli import main as dlcluster_main
from dlcluster.sim import parse_spec, simulate, workload_from_job_table
from dlcluster.trace.jobtable import NO_VC_FLAG, load_job_table
from dlcluster.trace.quality import TraceFormatError

REPO = Path(__file__).resolve().parents[1]
OPENB = REPO / "data" / "external" / "alibaba_openb"
OPENB_TABLE = OPENB / "openb_pod_list_first2000.csv.gz"
OPENB_MAP = OPENB / "columns.yaml"

# A small table in the Helios cluster_log.csv layout (hand-written values).
HELIOS_LIKE = """job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
101,uA,vcX,1,4,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 19:41:01,3600,0
102,uB,vcY,8,32,1,FAILED,2020-06-09 18:42:00,2020-06-09 18:50:00,2020-06-09 18:52:00,120,480
103,uA,vcX,16,64,2,CANCELLED,2020-06-09 18:45:30,2020-06-09 18:45:30,2020-06-10 00:45:30,21600,0
"""


def _openb_rows() -> list[dict]:
    with gzip.open(OPENB_TABLE, "rt", newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_real_openb_excerpt_loads_with_its_mapping():
    jobs, quality = load_job_table(OPENB_TABLE, OPENB_MAP)
    rows = _openb_rows()
    # the expected counts, computed here from the raw rows
    zero_gpu = [r for r in rows if int(r["num_gpu"]) == 0]
    never_scheduled = [r for r in rows if int(r["num_gpu"]) > 0 and r["scheduled_time"] == ""]
    loaded = [r for r in rows if int(r["num_gpu"]) > 0 and r["scheduled_time"] != ""]
    counts = quality.counts(OPENB_TABLE.name)
    assert counts["read"] == len(rows) == 2000
    assert counts["quarantined"] == {"GPU count zero or negative": len(zero_gpu),
                                     "start time missing or unparseable": len(never_scheduled)}
    assert counts["loaded"] == len(jobs) == len(loaded) == 1581
    assert counts["flags"] == {NO_VC_FLAG: 1581}
    assert set(jobs["vc"]) == {"all"} and jobs["user"].isna().all()
    assert jobs.attrs["columns"] == {"submit": "creation_time", "gpus": "num_gpu", "start": "scheduled_time",
                                     "end": "deletion_time", "status": "pod_phase", "jobid": "name"}
    gpu_seconds = sum(int(r["num_gpu"]) * (int(r["deletion_time"]) - int(r["scheduled_time"])) for r in loaded)
    assert jobs["gpu_time_s"].sum() == pytest.approx(gpu_seconds, rel=1e-12)
    assert jobs["num_gpus"].sum() == sum(int(r["num_gpu"]) for r in loaded)
    pod = jobs.set_index("jobid").loc["openb-pod-0017"]  # the 8-GPU pod the trace's README shows
    assert pod["num_gpus"] == 8 and pod["status"] == "Succeeded"
    assert pod["submitted"] == pd.Timestamp("1970-01-01", tz="UTC") + pd.Timedelta(seconds=9437497)
    assert pod["run_time_s"] == 10769854 - 9437497 and pod["queueing_delay_s"] == 0
    assert pod["last_end"] == pd.Timestamp("1970-01-01", tz="UTC") + pd.Timedelta(seconds=10769854)


def test_csv_gzip_and_parquet_give_the_same_jobs(tmp_path):
    plain = _write(tmp_path / "helios.csv", HELIOS_LIKE)
    with gzip.open(tmp_path / "helios.csv.gz", "wt") as fh:
        fh.write(HELIOS_LIKE)
    typed = pd.read_csv(plain)  # Parquet with real types: int64 counts, datetime64 times
    for column in ("submit_time", "start_time", "end_time"):
        typed[column] = pd.to_datetime(typed[column])
    typed.to_parquet(tmp_path / "helios.parquet", index=False)
    loaded = [load_job_table(tmp_path / name)[0] for name in ("helios.csv", "helios.csv.gz", "helios.parquet")]
    for other in loaded[1:]:
        pd.testing.assert_frame_equal(loaded[0].drop(columns="source"), other.drop(columns="source"))
    jobs = loaded[0]
    assert list(jobs["jobid"]) == ["101", "102", "103"]
    assert list(jobs["num_gpus"]) == [1, 8, 16] and list(jobs["run_time_s"]) == [3600, 120, 21600]
    assert list(jobs["vc"]) == ["vcX", "vcY", "vcX"] and list(jobs["user"]) == ["uA", "uB", "uA"]
    assert list(jobs["status"]) == ["COMPLETED", "FAILED", "CANCELLED"]
    assert jobs["submitted"].iloc[1] == pd.Timestamp("2020-06-09 18:42:00", tz="UTC")
    assert jobs.attrs["columns"] == {"submit": "submit_time", "gpus": "gpu_num", "duration": "duration",
                                     "vc": "vc", "user": "user", "status": "state", "jobid": "job_id"}


def test_seconds_from_an_origin_match_the_same_timestamps(tmp_path):
    stamps = _write(tmp_path / "stamps.csv", "t,g,d\n2020-06-09 00:00:00,1,60\n2020-06-09 01:30:05,2,60\n")
    seconds = _write(tmp_path / "seconds.csv", "t,g,d\n0,1,60\n5405,2,60\n")
    columns = {"submit": "t", "gpus": "g", "duration": "d"}
    by_stamp = load_job_table(stamps, columns)[0]
    by_seconds = load_job_table(seconds, columns, origin="2020-06-09")[0]
    pd.testing.assert_series_equal(by_stamp["submitted"], by_seconds["submitted"])
    unix = load_job_table(seconds, columns)[0]  # no origin: the Unix epoch
    assert unix["submitted"].iloc[1] == pd.Timestamp("1970-01-01 01:30:05", tz="UTC")
    # naive timestamps are wall-clock times in --timezone; explicit offsets are honoured
    shanghai = load_job_table(stamps, columns, timezone="Asia/Shanghai")[0]
    assert shanghai["submitted"].iloc[0] == pd.Timestamp("2020-06-08 16:00:00", tz="UTC")
    offset = _write(tmp_path / "offset.csv", "t,g,d\n2020-06-09T08:00:00+08:00,1,60\n2020-06-09T02:00:00+02:00,1,60\n")
    assert list(load_job_table(offset, columns)[0]["submitted"]) == [pd.Timestamp("2020-06-09", tz="UTC")] * 2
    mixed = _write(tmp_path / "mixed.csv", "t,g,d\n2020-06-09T08:00:00+08:00,1,60\n2020-06-09 08:00:00,1,60\n")
    with pytest.raises(TraceFormatError, match=r"mixed\.csv: column 't': some timestamps carry a zone"):
        load_job_table(mixed, columns)
    # a wall-clock time in the repeated hour of a DST change is read as its first occurrence and flagged
    repeated = _write(tmp_path / "dst.csv", "t,g,d\n2017-11-05 01:30:00,1,60\n2017-11-05 03:00:00,1,60\n")
    jobs, quality = load_job_table(repeated, columns, timezone="America/Los_Angeles")
    assert jobs["submitted"].iloc[0] == pd.Timestamp("2017-11-05 08:30:00", tz="UTC")
    assert quality.counts("dst.csv")["flags"] == {
        "time in a repeated daylight-saving hour in America/Los_Angeles (read as the first)": 1, NO_VC_FLAG: 2}


def test_a_missing_column_names_the_file_the_column_and_what_was_found(tmp_path):
    table = _write(tmp_path / "cluster_log.csv", "when,gpus_wanted,secs\n0,1,5\n")
    with pytest.raises(TraceFormatError) as err:
        load_job_table(table, {"submit": "submit_time", "gpus": "gpus_wanted", "duration": "secs"})
    message = str(err.value)
    assert "cluster_log.csv" in message and "'submit_time'" in message and "'submit'" in message
    assert "['when', 'gpus_wanted', 'secs']" in message
    with pytest.raises(TraceFormatError) as err:  # nothing mapped and no common name present
        load_job_table(table, {"submit": "when", "duration": "secs"})
    assert "cluster_log.csv" in str(err.value) and "'gpus'" in str(err.value) and "gpu_num" in str(err.value)
    with pytest.raises(TraceFormatError, match="'duration'"):
        load_job_table(_write(tmp_path / "h.csv", HELIOS_LIKE), autodetect=False,
                       columns={"submit": "submit_time", "gpus": "gpu_num"})


def test_bad_rows_are_counted_per_reason(tmp_path):
    table = _write(tmp_path / "dirty.csv", "\n".join([
        "id,submitted,gpus,seconds,team",
        "a,2020-01-01 00:00:00,1,10,t1",       # line 2: good
        "b,2020-01-01 00:01:00,2,,t1",         # 3: duration missing
        "c,2020-01-01 00:02:00,2,-5,t1",       # 4: duration negative
        "d,2020-01-01 00:03:00,1.5,10,t1",     # 5: GPUs not an integer
        "e,2020-01-01 00:04:00,0,10,t1",       # 6: zero GPUs
        "f,2020-01-01 00:05:00,-8,10,t2",      # 7: negative GPUs
        "g,2020-01-01 00:06:00,four,10,t2",    # 8: GPUs not a number
        "h,yesterday,1,10,t2",                 # 9: submit unparseable
        "i,,1,10,t2",                          # 10: submit missing
        "j,2020-01-01 00:09:00,1,abc,t2",      # 11: duration not a number
        "k,2020-01-01 00:10:00,4,10,",         # 12: VC empty
        "a,2020-01-01 00:11:00,1,10,t2",       # 13: duplicate id
        "l,2020-01-01 00:12:00,2.0,0,t2",      # 14: good (2.0 GPUs is 2; zero duration is allowed)
        ",2020-01-01 00:13:00,1,10,t2",        # 15: id empty
    ]) + "\n")
    columns = {"jobid": "id", "submit": "submitted", "gpus": "gpus", "duration": "seconds", "vc": "team"}
    jobs, quality = load_job_table(table, columns)
    counts = quality.counts("dirty.csv")
    assert counts["read"] == 14 and counts["loaded"] == 2 and list(jobs["jobid"]) == ["a", "l"]
    assert counts["quarantined"] == {
        "submit time missing or unparseable": 2, "GPU count missing or not a number": 1,
        "GPU count not an integer": 1, "GPU count zero or negative": 2, "duration missing or not a number": 2,
        "duration negative": 1, "VC empty": 1, "job id empty": 1, "duplicate job id (first kept)": 1}
    assert counts["flags"] == {}
    examples = quality.to_frame().set_index("reason")["examples"]
    assert examples["GPU count zero or negative"] == "line 6; line 7"
    assert examples["duplicate job id (first kept)"] == "line 13"
    assert list(jobs["num_gpus"]) == [1, 2] and list(jobs["run_time_s"]) == [10, 0]


def test_start_and_end_stand_in_for_a_missing_duration(tmp_path):
    table = _write(tmp_path / "se.csv", "s,g,b,e\n0,1,30,90\n10,1,,90\n20,1,50,40\n30,1,35,x\n")
    jobs, quality = load_job_table(table, {"submit": "s", "gpus": "g", "start": "b", "end": "e"})
    assert list(jobs["run_time_s"]) == [60] and list(jobs["queueing_delay_s"]) == [30]
    assert quality.counts("se.csv")["quarantined"] == {
        "start time missing or unparseable": 1, "end before start": 1, "end time missing or unparseable": 1}


def test_map_file_errors_name_the_file_and_key(tmp_path):
    bad = _write(tmp_path / "cols.yaml", "submit: t\ngpu: g\n")
    with pytest.raises(TraceFormatError, match=r"cols\.yaml: unknown key\(s\) \['gpu'\]"):
        load_job_table(_write(tmp_path / "t.csv", "t,g,d\n0,1,1\n"), bad)
    with pytest.raises(TraceFormatError, match=r"expected a \.csv, \.csv\.gz or \.parquet"):
        load_job_table(_write(tmp_path / "t.json", "[]"), {"submit": "t"})
    table = _write(tmp_path / "ok.csv", "t,g,d\n0,1,1\n")
    with pytest.raises(ValueError, match="timezone 'Mars/Olympus': not a known time zone"):
        load_job_table(table, {"submit": "t", "gpus": "g", "duration": "d"}, timezone="Mars/Olympus")
    with pytest.raises(ValueError, match="origin 'last spring'"):
        load_job_table(table, {"submit": "t", "gpus": "g", "duration": "d"}, origin="last spring")


def test_python_api_replays_a_job_table_deterministically():
    workload, quality = workload_from_job_table(OPENB_TABLE, OPENB_MAP)
    assert len(workload) == 1581 and workload.source == "job table openb_pod_list_first2000.csv.gz"
    assert workload.excluded == quality.counts(OPENB_TABLE.name)["quarantined"]
    again, _ = workload_from_job_table(OPENB_TABLE, OPENB_MAP)
    first = simulate(workload, parse_spec("1x2x8"), "fifo", progress=False)
    second = simulate(again, parse_spec("1x2x8"), "fifo", progress=False)
    pd.testing.assert_frame_equal(first.jobs, second.jobs)
    assert len(first.jobs) == 1581 and (first.jobs["status"] == "Pass").all()
    assert first.timeseries["allocated_gpus"].max() <= 16


def test_cli_simulates_a_job_table_from_flags_and_a_map(tmp_path, capsys):
    table = _write(tmp_path / "tiny.csv", "\n".join([
        "JobName,Queue,Submitted,GPUs,Secs",
        "j1,q1,2021-03-01 00:00:00,8,600",
        "j2,q1,2021-03-01 00:00:10,8,600",    # waits for j1 on a one-server cluster
        "j3,q2,2021-03-01 00:00:20,0,600",    # quarantined: zero GPUs
        "j4,q2,2021-03-01 00:00:30,8,60",     # waits for j1 and j2
    ]) + "\n")
    mapping = _write(tmp_path / "map.yaml", "submit: Submitted\ngpus: GPUs\nduration: Secs\njobid: JobName\n")
    out = tmp_path / "run"
    code = dlcluster_main(["simulate", "--jobs", str(table), "--map", str(mapping), "--vc-col", "Queue",
                           "--topology", "1x1x8", "--policy", "fifo", "--no-progress", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads(captured.out)
    assert summary["jobs"] == 3 and summary["jobs_input"]["rows_read"] == 4
    assert summary["jobs_input"]["quarantined"] == {"GPU count zero or negative": 1}
    assert "job table data quality" in captured.err and "2 VCs in the table" in captured.err
    jobs = pd.read_parquet(out / "jobs.parquet").set_index("jobid")
    assert jobs.loc["j1", "queueing_delay_s"] == 0 and jobs.loc["j2", "queueing_delay_s"] == pytest.approx(590)
    assert jobs.loc["j4", "queueing_delay_s"] == pytest.approx(1170)
    assert json.loads((out / "summary.json").read_text())["jobs_input"]["rows_loaded"] == 3
    # without a VC column every job goes to one VC, and the output says so
    code = dlcluster_main(["simulate", "--jobs", str(table), "--submit-col", "Submitted", "--gpus-col", "GPUs",
                           "--duration-col", "Secs", "--topology", "1x1x8", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0 and "no VC column: all 3 jobs go to one VC, 'all'" in captured.err
    assert json.loads(captured.out)["jobs_input"]["flagged"] == {NO_VC_FLAG: 3}


def test_cli_errors_name_the_problem(tmp_path, capsys):
    table = _write(tmp_path / "tiny.csv", "a,b\n1,2\n")
    assert dlcluster_main(["simulate", "--jobs", str(table), "--topology", "1x1x8", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "tiny.csv" in err and "'submit'" in err and "['a', 'b']" in err
    assert dlcluster_main(["simulate", "--jobs", str(table), "--generate", "5", "--no-progress"]) == 2
    assert "--generate and --jobs" in capsys.readouterr().err
    assert dlcluster_main(["simulate", "--jobs", str(tmp_path / "none.csv"), "--no-progress"]) == 2
    assert "none.csv" in capsys.readouterr().err


def test_loading_is_deterministic():
    first, q1 = load_job_table(OPENB_TABLE, OPENB_MAP)
    second, q2 = load_job_table(OPENB_TABLE, OPENB_MAP)
    pd.testing.assert_frame_equal(first, second)
    pd.testing.assert_frame_equal(q1.to_frame(), q2.to_frame())
    assert np.array_equal(first["submitted"].to_numpy(), np.sort(first["submitted"].to_numpy()))
