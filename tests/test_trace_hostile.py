"""Hostile but realistic raw input: bytes that are not UTF-8, a byte-order mark, physically implausible values.

Each case is the valid fixture (tests/fixtures/raw_small) with one kind of
damage; the in-memory loader and the out-of-core ingest must agree on it.
"""

import json
import shutil
import warnings

import pandas as pd
import pytest

from dlcluster.trace import TraceFormatError, load_trace
from dlcluster.trace.ingest import ingest, load_ingested
from dlcluster.trace.times import EARLIEST_PLAUSIBLE_TIME, LATEST_PLAUSIBLE_TIME, TRACE_PERIOD

BOM = b"\xef\xbb\xbf"
UTIL = ("cluster_gpu_util", "cluster_cpu_util", "cluster_mem_util")
GPU_RANGE = "GPU utilization outside 0-100 % (kept; cells, not rows)"
CPU_RANGE = "CPU utilization outside 0-100 % (kept)"
MEM_RANGE = "memory use outside 0-100 % (mem_free negative or above mem_total; kept)"
UTIL_PERIOD = f"time outside the trace period {TRACE_PERIOD} (kept)"
SUBMIT_PERIOD = f"submitted_time outside the trace period {TRACE_PERIOD} (kept)"
ATTEMPT_PERIOD = f"attempt start_time or end_time outside the trace period {TRACE_PERIOD} (kept)"
NEGATIVE = "attempt ends before it starts (duration set to NaN)"
BEYOND = "placement on a GPU index beyond the server's GPU count (kept)"


@pytest.fixture
def raw(tmp_path, raw_small):
    shutil.copytree(raw_small, tmp_path / "raw_small")     # the same name: jobs carry it as their source
    return tmp_path / "raw_small"


def _same_quality(raw, out):
    direct = load_trace(raw).quality
    ingested = load_ingested(ingest(raw, out, block_bytes=64, progress=False))["quality"]
    pd.testing.assert_frame_equal(ingested.to_frame(), direct.to_frame())
    pd.testing.assert_frame_equal(ingested.summary(), direct.summary())
    return direct


def _examples(quality, file, reason):
    frame = quality.to_frame()
    return frame[(frame["file"] == file) & (frame["reason"] == reason)]["examples"].item()


def test_trace_period_bounds_are_a_month_around_the_released_submits():
    assert EARLIEST_PLAUSIBLE_TIME == pd.Timestamp("2017-07-07 00:00", tz="America/Los_Angeles")
    assert LATEST_PLAUSIBLE_TIME == pd.Timestamp("2018-01-23 00:00", tz="America/Los_Angeles")
    assert TRACE_PERIOD == "2017-07-07..2018-01-22 US/Pacific"


def test_job_log_byte_that_is_not_utf8_names_file_line_offset_and_job(raw, tmp_path):
    data = (raw / "cluster_job_log").read_bytes()
    at = data.index(b'"u3"') + 1                       # the user of job #3, application_1_0004, on line 9
    (raw / "cluster_job_log").write_bytes(data[:at] + b"\xff" + data[at + 1:])
    expected = (rf"cluster_job_log: line 9, byte offset {at}: byte 0xff is not valid UTF-8 "
                r"in job #3 \(application_1_0004\)")
    with pytest.raises(TraceFormatError, match=expected):
        load_trace(raw)
    with pytest.raises(TraceFormatError, match=expected):
        ingest(raw, tmp_path / "out", progress=False)


def test_job_log_bad_byte_outside_any_record_names_line_and_offset(raw):
    data = (raw / "cluster_job_log").read_bytes()
    (raw / "cluster_job_log").write_bytes(b"\xfe" + data)
    with pytest.raises(TraceFormatError, match=r"cluster_job_log: line 1, byte offset 0: byte 0xfe is not valid "
                                               r"UTF-8 \(save the file as UTF-8\)"):
        load_trace(raw)


@pytest.mark.parametrize("name", UTIL)
def test_utilization_byte_that_is_not_utf8_names_file_line_and_offset(raw, tmp_path, name):
    lines = (raw / name).read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"m", b"m\xe9", 1)      # Latin-1 'é' in the machine id of line 3
    (raw / name).write_bytes(b"\n".join(lines))
    offset = len(lines[0]) + 1 + len(lines[1]) + 1 + lines[2].index(b"\xe9")
    expected = rf"{name}: line 3, byte offset {offset}: byte 0xe9 is not valid UTF-8"
    with pytest.raises(TraceFormatError, match=expected):
        load_trace(raw)
    with pytest.raises(TraceFormatError, match=expected):      # the ingest, in blocks of 64 bytes
        ingest(raw, tmp_path / "out", block_bytes=64, progress=False)


def test_utilization_header_that_is_not_utf8_is_named(raw):
    data = (raw / "cluster_cpu_util").read_bytes()
    (raw / "cluster_cpu_util").write_bytes(data.replace(b"time", b"t\xefme", 1))
    with pytest.raises(TraceFormatError, match=r"cluster_cpu_util: line 1, byte offset 1: byte 0xef"):
        load_trace(raw)


def test_machine_list_that_is_not_utf8_or_not_csv_is_named(raw):
    data = (raw / "cluster_machine_list").read_bytes()
    (raw / "cluster_machine_list").write_bytes(data.replace(b"m3", b"m\xff3"))
    with pytest.raises(TraceFormatError, match=r"cluster_machine_list: line 4, byte offset 65: byte 0xff is not valid"):
        load_trace(raw)
    (raw / "cluster_machine_list").write_bytes(data + b"m5,2,12GB,24GB\n")
    with pytest.raises(TraceFormatError, match=r"cluster_machine_list: Expected 3 fields in line 6, saw 4"):
        load_trace(raw)


def test_byte_order_marks_are_accepted(raw, raw_small, tmp_path):
    for name in ("cluster_job_log", "cluster_machine_list", *UTIL):
        (raw / name).write_bytes(BOM + (raw_small / name).read_bytes())
    with_bom, plain = load_trace(raw), load_trace(raw_small)
    for table in ("jobs", "attempts", "placements", "machines", "gpu_util", "host_util"):
        pd.testing.assert_frame_equal(getattr(with_bom, table), getattr(plain, table))
    pd.testing.assert_frame_equal(with_bom.quality.to_frame(), plain.quality.to_frame())
    pd.testing.assert_frame_equal(_same_quality(raw, tmp_path / "out").summary(), plain.quality.summary())


def test_the_valid_fixture_has_two_placements_beyond_the_reconstructed_gpu_count(raw_small):
    quality = load_trace(raw_small).quality
    assert quality.counts("machines (combined)")["flags"][BEYOND] == 2
    assert _examples(quality, "machines (combined)", BEYOND) == (
        "job application_1_0002 attempt 0: m1 gpu2 of 2; job application_1_0002 attempt 1: m3 gpu0 of 0")
    for reason in (SUBMIT_PERIOD, ATTEMPT_PERIOD, NEGATIVE):
        assert reason not in quality.counts("cluster_job_log")["flags"]
    for name in UTIL:
        assert set(quality.counts(name)["flags"]) <= {"GPU cells 'NA' (offline or absent GPU; cells, not rows)"}


def _job(jobid, submitted, start, end, gpus=("gpu0",), ip="m4"):
    return {"status": "Pass", "vc": "vc1", "jobid": jobid, "user": "u9", "submitted_time": submitted,
            "attempts": [{"start_time": start, "end_time": end, "detail": [{"ip": ip, "gpus": list(gpus)}]}]}


def test_implausible_values_are_loaded_and_flagged_with_exact_counts(raw, raw_small, tmp_path):
    records = json.loads((raw / "cluster_job_log").read_text())
    records += [
        _job("epoch", "1969-12-31 16:00:00", "1969-12-31 16:00:05", "2017-10-03 00:00:00"),   # a default date
        _job("backwards", "2017-10-05 00:00:00", "2017-10-05 02:00:00", "2017-10-05 01:00:00"),
        _job("future", "2017-10-05 00:00:00", "2017-10-05 01:00:00", "2019-01-01 00:00:00"),
        _job("early", "2017-07-06 23:59:59", "2017-07-07 00:00:00", "2018-01-22 23:59:59"),   # just inside, once
        _job("wide", "2017-10-05 00:00:00", "2017-10-05 01:00:00", "2017-10-05 02:00:00",
             gpus=("gpu7", "gpu8", "gpu9")),                                                 # m4 has 8 GPUs
    ]
    (raw / "cluster_job_log").write_text(json.dumps(records))
    with open(raw / "cluster_gpu_util", "a") as fh:
        fh.write("2017-10-03 00:15:00 PDT,m1,150,-3,NA,NA,NA,NA,NA,NA,\n"      # line 11: two cells
                 "1969-12-31 16:00:00 PST,m1,10,20,NA,NA,NA,NA,NA,NA,\n"       # line 12: the Unix epoch
                 "2018-01-23 00:00:00 PST,m1,100,0,NA,NA,NA,NA,NA,NA,\n")      # line 13: the first day after
    with open(raw / "cluster_cpu_util", "a") as fh:
        fh.write("2017-10-03 00:15:00 PDT,m1,100.5\n2017-10-03 00:16:00 PDT,m1,-0.1\n")
    with open(raw / "cluster_mem_util", "a") as fh:
        fh.write("2017-10-03 00:15:00 PDT,m1,100,120\n2017-10-03 00:16:00 PDT,m1,100,-1\n")

    quality = _same_quality(raw, tmp_path / "out")
    tr = load_trace(raw)
    jobs = quality.counts("cluster_job_log")
    assert jobs["read"] == 16 and jobs["loaded"] == 11            # every new job loaded, none quarantined
    assert jobs["flags"][SUBMIT_PERIOD] == 2                      # epoch, early
    assert _examples(quality, "cluster_job_log", SUBMIT_PERIOD) == "job epoch; job early"
    assert jobs["flags"][ATTEMPT_PERIOD] == 2                     # epoch (start), future (end)
    assert _examples(quality, "cluster_job_log", ATTEMPT_PERIOD) == "job epoch attempt 0; job future attempt 0"
    assert jobs["flags"][NEGATIVE] == 1
    assert _examples(quality, "cluster_job_log", NEGATIVE) == "job backwards attempt 0"
    backwards = tr.attempts.set_index("jobid").loc["backwards"]
    assert pd.isna(backwards["duration_s"]) and backwards["end"] < backwards["start"]
    assert tr.jobs.set_index("jobid").loc["epoch", "submitted"] == pd.Timestamp("1970-01-01", tz="UTC")

    machines = quality.counts("machines (combined)")["flags"]
    assert machines[BEYOND] == 2 + 2                               # the fixture's two, and gpu8, gpu9 on m4
    assert _examples(quality, "machines (combined)", BEYOND).endswith(
        "job wide attempt 0: m4 gpu8 of 8; job wide attempt 0: m4 gpu9 of 8")

    gpu = quality.counts("cluster_gpu_util")
    assert gpu["read"] == 12 and gpu["loaded"] == 9
    assert gpu["flags"][GPU_RANGE] == 2 and gpu["flags"][UTIL_PERIOD] == 2
    assert _examples(quality, "cluster_gpu_util", GPU_RANGE) == "line 11; line 11"
    assert _examples(quality, "cluster_gpu_util", UTIL_PERIOD) == "line 12; line 13"
    m1 = tr.gpu_util[tr.gpu_util["machine"] == "m1"]
    assert sorted(m1["util"])[:1] == [-3] and m1["util"].max() == 150         # kept as given
    assert quality.counts("cluster_cpu_util")["flags"] == {CPU_RANGE: 2}
    assert quality.counts("cluster_mem_util")["flags"] == {MEM_RANGE: 2}
    assert sorted(tr.host_util["mem_util"].dropna()) == [-20.0, 75.0, 101.0]


def test_a_number_where_a_time_belongs_is_not_read_as_an_epoch(raw):
    records = json.loads((raw / "cluster_job_log").read_text())
    records += [_job("numeric_submit", 1506638472, "2017-10-05 01:00:00", "2017-10-05 02:00:00"),
                _job("numeric_start", "2017-10-05 00:00:00", 1506638472, "2017-10-05 02:00:00")]
    (raw / "cluster_job_log").write_text(json.dumps(records))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # pandas deprecates reading numbers with a format
        tr = load_trace(raw)
    counts = tr.quality.counts("cluster_job_log")
    assert counts["quarantined"]["unparseable submitted_time"] == 2       # the fixture's 'yesterday' and the number
    assert counts["flags"]["attempt start_time unparseable (set to NaT)"] == 1
    assert pd.isna(tr.attempts.set_index("jobid").loc["numeric_start", "start"])
