"""The embedded real public data: counts, known records and the real dirt of the DRE windows."""

import gzip
from pathlib import Path

import pandas as pd
import pytest

from dlcluster.trace import QualityReport
from dlcluster.trace.public import read_dre_util_windows, read_rfold_jobs


def test_sources_and_counts(public_trace):
    counts = public_trace.jobs["source"].value_counts().to_dict()
    assert counts == {"pollux": 82247, "dre": 5910}
    assert public_trace.jobs["jobid"].is_unique
    assert len(public_trace.machines) == 552
    assert public_trace.vc_quotas.set_index("vc").loc["6214e9", "gpus"] == 64 * 8


def test_rfold_jobs_loaded_in_their_own_table(public_trace):
    rf = public_trace.rfold_jobs
    assert len(rf) == 111549 and rf["rfold_id"].is_unique
    assert rf["arrival_offset_s"].min() == 0 and rf["arrival_offset_s"].is_monotonic_increasing
    assert (rf["topology"] == "CLOS").all()
    # job 112 asks for 16 GPUs as two full 8-GPU servers
    j = rf.set_index("rfold_id").loc[112]
    assert j["shape"] == "8+8" and j["num_gpus"] == 16 and j["duration_s"] == 1453510.0
    c = public_trace.quality.counts("rfold_philly_jobs.csv.gz")
    assert c["read"] == c["loaded"] == 111549


def test_rfold_bad_rows_are_counted(tmp_path):
    text = ("#job id,arrival time (sec),topology,shape,size,duration (sec)\n"
            "0,0.0,CLOS,1,1,10.0\n"
            "1,5.0,CLOS,1,0,10.0\n"          # size 0
            "2,x,CLOS,1,1,10.0\n"            # bad arrival
            "3,6.0,CLOS,1,1,0.0\n"           # zero duration: kept, flagged
            "3,7.0,CLOS,1,1,5.0\n")          # duplicate id
    q = QualityReport()
    rf = read_rfold_jobs(_write_gz(tmp_path / "r.csv.gz", text), q)
    c = q.counts("r.csv.gz")
    assert c["read"] == 5 and c["loaded"] == 2 and list(rf["rfold_id"]) == [0, 3]
    assert c["quarantined"] == {"job id not a unique integer": 1, "size not a positive integer": 1,
                                "arrival time not a non-negative number": 1}
    assert c["flags"] == {"duration 0 s (kept: a job that ended at once)": 1}


def test_rfold_wrong_header_names_file(tmp_path):
    from dlcluster.trace import TraceFormatError
    with pytest.raises(TraceFormatError, match=r"r\.csv\.gz: line 1: header"):
        read_rfold_jobs(_write_gz(tmp_path / "r.csv.gz", "id,arrival\n0,0\n"), QualityReport())


def test_official_readme_example_job(public_trace):
    # application_1506638472019_14199: submitted 01:11:39, start 01:13:30, end 2017-10-09 06:53:12 (PDT), 8 GPUs on m412
    j = public_trace.jobs.set_index("jobid").loc["application_1506638472019_14199"]
    assert j["queueing_delay_s"] == 111
    assert j["run_time_s"] == 2 * 86400 + 5 * 3600 + 39 * 60 + 42
    assert j["num_gpus"] == 8 and j["num_servers"] == 1 and j["status"] == "Pass"
    p = public_trace.placements[public_trace.placements["jobid"] == "application_1506638472019_14199"]
    assert set(p["machine"]) == {"m412"} and sorted(p["gpu"]) == list(range(8))


def test_pollux_jobs_gpu_time(public_trace):
    pol = public_trace.jobs_of("pollux")
    assert (pol["gpu_time_s"] == pol["run_time_s"] * pol["num_gpus"]).all()
    assert pol["status"].isna().all() and pol["first_start"].isna().all()


def test_every_file_adds_up_and_dirt_is_counted(public_trace):
    s = public_trace.quality.summary().set_index("file")
    assert (s["rows_read"] == s["rows_loaded"] + s["rows_quarantined"]).all()
    c = public_trace.quality.counts("dre_util_windows.csv.gz")
    assert c["read"] == 59654
    pasted = c["flags"]["cell holds a pasted pandas Series: duplicated DST minute, value ambiguous (NaN; cells)"]
    assert pasted == 80
    assert c["flags"]["empty cell (NaN; cells, not rows)"] == 6428
    assert c["flags"]["negative value (the sources' -1 'no sample' sentinel; NaN; cells)"] == 497
    machines = public_trace.quality.counts("machines (combined)")
    assert machines["flags"]["official GPU count disagrees with the reconstruction (philly-traces issue #8)"] == 526


def test_utilization_windows_are_relative_minutes(public_trace):
    g = public_trace.gpu_util
    assert g["minute"].min() == -10 and g["minute"].max() == 3
    assert g["util"].between(0, 100).all()
    assert set(g["jobid"]) <= set(public_trace.jobs_of("dre")["jobid"])


def _write_gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    return path


def test_dre_window_dirt_on_a_hand_made_file(tmp_path):
    header = "jobid,name,machine_type,trace," + ",".join(str(m) for m in range(-10, 4)) + "\n"
    ok = ",".join(["5"] * 14)
    series = ('"time                 machine_id\n2017-11-05 01:53:00  m280          81.74\n'
              '                     m280          71.25\nName: cpu_util, dtype: object"')
    text = (header
            + f"j1,m1_gpu0,gpu,utilization,{ok}\n"
            + f"j1,m1,cpu,utilization,{series}," + ",".join(["1"] * 12) + ",\n"   # pasted series + empty cell
            + f"j1,m1,cpu,memory,{ok}\n"
            + f"j2,m1_gpu0,gpu,utilization,{ok}\n"                                 # unknown job
            + f"j1,m1_gpu0,disk,utilization,{ok}\n"                                # unknown kind
            + "j1,m1_gpu0,gpu,utilization,1,2\n")                                  # short row
    path = _write_gz(tmp_path / "w.csv.gz", text)
    q = QualityReport()
    jobs = pd.DataFrame({"jobid": ["j1"]})
    gpu, host = read_dre_util_windows(path, jobs, q)
    c = q.counts("w.csv.gz")
    assert c["read"] == 6 and c["loaded"] == 3
    assert c["quarantined"] == {"jobid not among the DRE job records": 1, "unknown machine_type/trace pair": 1,
                                "wrong number of fields (expected 18)": 1}
    assert c["flags"] == {"empty cell (NaN; cells, not rows)": 1,
                          "cell holds a pasted pandas Series: duplicated DST minute, value ambiguous (NaN; cells)": 1}
    assert len(gpu) == 14 and (gpu["util"] == 5).all()
    cpu = host.set_index("minute")["cpu_util"]
    assert pd.isna(cpu.loc[-10]) and pd.isna(cpu.loc[3]) and cpu.loc[0] == 1


def test_build_public_is_reproducible(tmp_path):
    from dlcluster import paths
    from dlcluster.trace.public import build_public, load_public
    out = build_public(paths.external_dir(), tmp_path / "public")
    rebuilt = load_public(out)
    committed = load_public(paths.public_dir())
    for name in ("jobs", "attempts", "placements", "machines", "gpu_util", "host_util", "rfold_jobs"):
        pd.testing.assert_frame_equal(rebuilt[name], committed[name], check_dtype=True)
