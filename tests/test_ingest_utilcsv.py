"""The block reader of the utilization CSVs: exact line numbers, every line accounted, any block size."""

import numpy as np
import pandas as pd
import pytest

from dlcluster.trace.quality import QualityReport
from dlcluster.trace.utilcsv import iter_raw_blocks, iter_util_blocks, read_layout, read_util

HEADER = "time,machineId," + ",".join(f"gpu{i}_util" for i in range(8)) + "\n"
GOOD = "2017-10-03 00:10:00 PDT,m1,10,20,NA,NA,NA,NA,NA,NA,\n"

# line: what is wrong with it (the header is line 1)
DIRTY_LINES = {
    2: ("2017-10-03 00:10:00 PDT,m1,10,20,NA,NA,NA,NA,NA,NA,\r\n", None),              # CRLF: fine
    3: ("\n", "empty line"),
    4: ("2017-10-03 00:11:00 PDT, m1 , 11 ,NaN,None,nan,,NA,NA, NA ,\n", None),       # blanks, NaN: fine
    5: ("2017-10-03 00:12:00 PDT,m1,1e1,+2.5,NA,NA,NA,NA,NA,NA,x\n", "unexpected value after the trailing comma"),
    6: ("2017-10-03 00:13:00 PDT,,1,2,NA,NA,NA,NA,NA,NA,\n", "empty machine id"),
    7: ("2017-10-03 00:14:00 EST,m1,1,2,NA,NA,NA,NA,NA,NA,\n", "time not like 'YYYY-MM-DD HH:MM:SS PDT|PST'"),
    8: ("2017-10-03 00:15:00 PDT,m1,1,2,NA,NA,NA,NA,NA,NA\n", "wrong number of fields"),
    9: ("2017-10-03 00:16:00 PDT,m1,1,2%,NA,NA,NA,NA,NA,NA,\n", "non-numeric utilization value"),
    10: ("2017-10-03 00:17:00 PST,m1,30,40,NA,NA,NA,NA,NA,NA,", None),                  # no final newline
}


@pytest.fixture
def dirty_file(tmp_path):
    path = tmp_path / "cluster_gpu_util"
    path.write_bytes((HEADER + "".join(text for text, _ in DIRTY_LINES.values())).encode())
    return path


@pytest.mark.parametrize("block_bytes", [1, 60, 100, 1 << 20])
def test_every_line_is_loaded_or_quarantined_with_its_line_number(dirty_file, block_bytes):
    quality = QualityReport()
    frame = pd.concat(list(iter_util_blocks(dirty_file, "gpu", quality, block_bytes=block_bytes)),
                      ignore_index=True)
    counts = quality.counts("cluster_gpu_util")
    assert counts["read"] == 9 and counts["loaded"] == 3
    expected = {reason: 1 for _, reason in DIRTY_LINES.values() if reason}
    assert counts["quarantined"] == expected
    examples = quality.to_frame().set_index("reason")["examples"]
    for line, (_, reason) in DIRTY_LINES.items():
        if reason:
            assert examples[reason].startswith(f"line {line}")
    assert examples["wrong number of fields"] == "line 8: expected 11 fields, got 10"
    loaded = frame.pivot_table(index="time", columns="gpu", values="util", dropna=False)
    assert loaded.loc[pd.Timestamp("2017-10-03 07:11", tz="UTC"), 0] == 11          # blanks trimmed
    assert np.isnan(loaded.loc[pd.Timestamp("2017-10-03 07:11", tz="UTC"), 1])      # 'NaN' is missing
    assert loaded.loc[pd.Timestamp("2017-10-03 08:17", tz="UTC"), 1] == 40           # PST = UTC-8
    assert set(frame["machine"]) == {"m1"}
    assert counts["flags"]["GPU cells 'NA' (offline or absent GPU; cells, not rows)"] == 6 + 7 + 6


def test_blocks_cover_the_file_and_resume_anywhere(dirty_file):
    layout = read_layout(dirty_file, "gpu")
    blocks = list(iter_raw_blocks(dirty_file, layout.data_offset, 2, block_bytes=70))
    data = dirty_file.read_bytes()
    assert b"".join(b.data for b in blocks) == data[layout.data_offset:]
    assert [b.first_line for b in blocks] == list(np.cumsum([2] + [b.num_lines for b in blocks[:-1]]))
    middle = blocks[3]
    resumed = list(iter_raw_blocks(dirty_file, middle.offset, middle.first_line, block_bytes=70))
    assert resumed == blocks[3:]


def test_a_clean_file_reads_the_same_at_any_block_size(raw_small):
    whole = read_util(raw_small / "cluster_gpu_util", "gpu", QualityReport())
    tiny_quality = QualityReport()
    tiny = pd.concat(list(iter_util_blocks(raw_small / "cluster_gpu_util", "gpu", tiny_quality, block_bytes=1)),
                     ignore_index=True)
    pd.testing.assert_frame_equal(whole, tiny)
    assert tiny_quality.counts("cluster_gpu_util")["read"] == 9


def test_host_files_and_memory_percent(tmp_path):
    path = tmp_path / "cluster_mem_util"
    path.write_text("time,machine_id,mem_total,mem_free\n"
                    "2017-10-03 00:10:00 PDT,m1,200,50\n"
                    "2017-10-03 00:10:00 PDT,m2,-5,1\n"
                    "2017-10-03 00:10:00 PDT,m3,NA,1\n")
    quality = QualityReport()
    frame = read_util(path, "mem", quality)
    assert frame["mem_util"].iloc[0] == 75.0 and np.isnan(frame["mem_util"].iloc[1])
    assert quality.counts("cluster_mem_util")["quarantined"] == {"mem_total not positive": 1}
    assert quality.to_frame()["examples"].iloc[0] == "line 3"


@pytest.mark.parametrize("block_bytes", [1, 60, 1 << 20])
def test_a_carriage_return_inside_a_line_is_quarantined_not_split_into_two_rows(tmp_path, block_bytes):
    # Arrow ends a row at a lone CR: line 3 would read as two rows, balancing the empty line 4 in a row count.
    path = tmp_path / "cluster_gpu_util"
    path.write_bytes((HEADER + GOOD.replace("00:10", "00:11") + GOOD.rstrip("\n") + "\r" + GOOD + "\n"
                      + GOOD.replace("m1,10", "m1,\r10")).encode())
    quality = QualityReport()
    frame = pd.concat(list(iter_util_blocks(path, "gpu", quality, block_bytes=block_bytes)), ignore_index=True)
    counts = quality.counts("cluster_gpu_util")
    assert counts["read"] == 4 and counts["loaded"] == 1
    assert counts["quarantined"] == {"carriage return inside a line": 2, "empty line": 1}
    assert quality.to_frame().set_index("reason")["examples"]["carriage return inside a line"] == "line 3; line 5"
    assert frame["time"].unique().tolist() == [pd.Timestamp("2017-10-03 07:11", tz="UTC")]
