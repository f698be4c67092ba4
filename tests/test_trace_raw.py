"""Loader known answers on a hand-written directory in the raw Philly format (tests/fixtures/raw_small)."""

import json

import pandas as pd
import pytest

from dlcluster.trace import TraceFormatError, load_trace

UTC = "UTC"


@pytest.fixture(scope="module")
def tr(raw_small):
    return load_trace(raw_small)


def job(tr, jobid):
    return tr.jobs.set_index("jobid").loc[jobid]


def test_two_server_job_delays_and_gpu_time(tr):
    j = job(tr, "application_1_0001")
    assert j["queueing_delay_s"] == 600          # 00:10 - 00:00
    assert j["run_time_s"] == 3600               # 01:10 - 00:10
    assert j["num_gpus"] == 4 and j["num_servers"] == 2
    assert j["gpu_time_s"] == 4 * 3600
    assert j["submitted"] == pd.Timestamp("2017-10-03 07:00:00", tz=UTC)  # PDT = UTC-7


def test_requeue_delays_between_attempts(tr):
    j = job(tr, "application_1_0002")
    assert j["num_attempts"] == 2
    assert j["queueing_delay_s"] == 300          # first start - submit
    assert j["run_time_s"] == 3300               # last end (01:00) - first start (00:05)
    assert j["gpu_time_s"] == 900 + 1800
    att = tr.attempts[tr.attempts["jobid"] == "application_1_0002"].sort_values("attempt")
    assert att["requeue_delay_s"].tolist() == [300, 600]   # 00:30 - 00:20 for the retry
    assert att["duration_s"].tolist() == [900, 1800]


def test_job_without_attempts_is_loaded_never_started(tr):
    j = job(tr, "application_1_0003")
    assert j["num_attempts"] == 0
    assert pd.isna(j["first_start"]) and pd.isna(j["run_time_s"]) and pd.isna(j["num_gpus"])


def test_running_last_attempt(tr):
    att = tr.attempts.set_index("jobid").loc["application_1_0004"]
    assert bool(att["running"]) and pd.isna(att["end"])
    j = job(tr, "application_1_0004")
    assert j["queueing_delay_s"] == 60 and pd.isna(j["run_time_s"])


def test_none_start_time_gives_nat(tr):
    att = tr.attempts.set_index("jobid").loc["application_1_0005"]
    assert pd.isna(att["start"]) and not bool(att["running"])
    assert pd.isna(job(tr, "application_1_0005")["queueing_delay_s"])


def test_run_time_across_the_dst_change_is_exact(tr):
    # 01:30 on 2017-11-05 is ambiguous (read as PDT = 08:30 UTC); 03:00 is PST (11:00 UTC).
    j = job(tr, "application_1_0006")
    assert j["first_start"] == pd.Timestamp("2017-11-05 08:30", tz=UTC)
    assert j["run_time_s"] == 2.5 * 3600          # a naive subtraction would say 1.5 h


def test_placements_attempt_by_server_by_gpu(tr):
    p = tr.placements[tr.placements["jobid"] == "application_1_0001"]
    assert sorted(zip(p["machine"], p["gpu"], strict=True)) == [("m1", 0), ("m1", 1), ("m2", 0), ("m2", 1)]
    assert set(tr.placements[tr.placements["jobid"] == "application_1_0002"]["attempt"]) == {0, 1}


def test_job_log_quarantine_counts(tr):
    c = tr.quality.counts("cluster_job_log")
    assert c["read"] == 11 and c["loaded"] == 6
    assert c["quarantined"] == {
        "unknown status (expected one of Pass, Killed, Failed)": 1,
        "missing field 'jobid'": 1,
        "duplicate jobid": 1,
        "unparseable submitted_time": 1,
        "GPU name 'g1' is not like 'gpu3'": 1,
    }
    assert c["flags"]["job has no attempts (never started)"] == 1
    assert c["flags"]["last attempt still running (end_time None)"] == 1
    assert c["flags"]["attempt start_time missing or None"] == 1


def test_gpu_util_file(tr):
    c = tr.quality.counts("cluster_gpu_util")
    assert c["read"] == 9 and c["loaded"] == 6
    assert c["quarantined"] == {"wrong number of fields": 1,
                                "time not like 'YYYY-MM-DD HH:MM:SS PDT|PST'": 1,
                                "non-numeric utilization value": 1}
    g = tr.gpu_util
    # NA cells are not samples; the trailing comma adds no column
    assert set(g.columns) == {"jobid", "machine", "gpu", "time", "minute", "util"}
    assert len(g[g["machine"] == "m1"]) == 4
    # the duplicated DST hour keeps both samples, one hour apart in UTC
    m2g4 = g[(g["machine"] == "m2") & (g["gpu"] == 4) & (g["time"].dt.month == 11)].sort_values("time")
    assert m2g4["util"].tolist() == [11, 22]
    assert (m2g4["time"].diff().dropna() == pd.Timedelta(hours=1)).all()


def test_host_util(tr):
    h = tr.host_util.set_index("machine")
    assert h.loc["m1", "cpu_util"] == 12.5 and h.loc["m1", "mem_util"] == 75.0
    assert tr.quality.counts("cluster_mem_util")["quarantined"] == {"mem_total not positive": 1}
    assert tr.quality.counts("cluster_cpu_util")["quarantined"] == {"non-numeric utilization value": 1}


def test_machines_reconstructed_and_disagreement(tr):
    m = tr.machines.set_index("machine")
    assert m.loc["m1", "num_gpus"] == 2 and not m.loc["m1", "gpu_count_disagrees"]
    assert m.loc["m2", "num_gpus"] == 8 and m.loc["m2", "num_gpus_listed"] == 2 and m.loc["m2", "gpu_count_disagrees"]
    assert m.loc["m3", "num_gpus"] == 0           # only NA in the utilization file
    assert m.loc["m4", "num_gpus"] == 8           # not in the utilization file: official count
    assert m.loc["m9", "in_job_log_only"] and m.loc["m9", "num_gpus"] == 6   # highest GPU index used + 1


def test_every_file_adds_up(tr):
    s = tr.quality.summary()
    assert (s["rows_read"] == s["rows_loaded"] + s["rows_quarantined"]).all()


def test_invalid_json_names_file_and_line(tmp_path):
    (tmp_path / "cluster_job_log").write_text('[{"jobid": "a",\n  oops}]')
    with pytest.raises(TraceFormatError, match=r"cluster_job_log: line 2"):
        load_trace(tmp_path)


def test_wrong_util_header_is_named(tmp_path, raw_small):
    (tmp_path / "cluster_job_log").write_text(json.dumps([]))
    (tmp_path / "cluster_gpu_util").write_text("time,machine,gpu0\n")
    with pytest.raises(TraceFormatError, match=r"cluster_gpu_util: line 1: header"):
        load_trace(tmp_path)


def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="raw Philly format"):
        load_trace(tmp_path / "nope")


def test_simulated_runs_are_labelled(tmp_path, raw_small):
    import shutil
    run = tmp_path / "run"
    shutil.copytree(raw_small, run)
    (run / "metadata.json").write_text(json.dumps({"simulated": True}))
    tr = load_trace(run)
    assert tr.describe_source("run")["label"] == "SIMULATED run (run)"
    assert load_trace(raw_small).describe_source("raw_small")["label"].startswith("raw-format directory")
