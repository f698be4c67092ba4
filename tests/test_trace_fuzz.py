"""Property-based fuzzing of the raw readers: hostile variants of the valid fixtures (tests/fixtures/raw_small).

Every mutated input must either load with every row accounted (read = loaded +
quarantined, ``QualityReport.check``) or raise the project's ``TraceFormatError``
naming the file; no other exception may escape. Mutations: byte flips,
truncation, deleted and duplicated spans, inserted junk lines, a byte-order
mark, random bytes, swapped fields, and (job log) values of the wrong type.
Derandomized and database-free, so CI runs the same 540 cases every time
(250 job logs, 250 utilization files, 40 whole directories through the ingest);
warnings are errors. Beyond "no foreign exception", each case is checked against
a plain reading: the job log's record count against ``json.loads``, each
utilization file's empty, CR-split and wrong-width lines against a byte split,
and the in-memory reader against the ingest's block reader.
"""

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dlcluster.trace.ingest import ingest, load_ingested
from dlcluster.trace.quality import QualityReport, TraceFormatError
from dlcluster.trace.rawdir import load_raw_dir
from dlcluster.trace.utilcsv import iter_util_blocks, read_layout, read_util

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "raw_small"
UTIL_FILES = {"gpu": "cluster_gpu_util", "cpu": "cluster_cpu_util", "mem": "cluster_mem_util"}
pytestmark = pytest.mark.filterwarnings("error")      # a deprecation today is a silent change of meaning tomorrow
FUZZ = settings(max_examples=250, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

JUNK_LINES = [b"", b"\r", b",,,,,,,,,,", b"NA,NA,NA", b"\xff\xfe\x00", b"\xef\xbb\xbf", b"null", b"]", b"}, {",
              b'"', b"\x00\x00", b"1e400,-1e400,nan,inf", b"2017-10-03 00:10:00 PDT,m1,101,-5,NA,NA,NA,NA,NA,NA,",
              b"1969-12-31 16:00:00 PST,m1,1,2,3,4,5,6,7,8,", "ünïcödé,€".encode(), b"\xc3\x28", b"\xed\xa0\x80"]
SPECIAL_BYTES = list(b"\r\n,\"\x00\xff\xc3{}[]:")   # line, field and JSON structure, invalid UTF-8
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=12)
    | st.sampled_from(["None", "", "2017-10-03 00:00:00", "1969-12-31 16:00:00", "2099-01-01 00:00:00",
                       "gpu99", "gpu-1", "Pass", "m1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["ip", "gpus", "jobid"]), inner,
                                                                max_size=3),
    max_leaves=6)


def _line_starts(data: bytearray) -> list[int]:
    return [0] + [i + 1 for i, b in enumerate(data) if b == 10]


@st.composite
def byte_mutations(draw, original: bytes) -> bytes:
    """1-4 random edits of the raw bytes, mostly after the first line (a broken header stops every reader)."""
    data = bytearray(original)
    body = draw(st.sampled_from([original.find(b"\n") + 1] * 3 + [0]))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "truncate", "delete", "duplicate", "junk_line", "bom", "random",
                                   "swap_fields"]))
        at = draw(st.integers(min(body, len(data)), len(data)))
        if op == "flip" and data:
            data[min(at, len(data) - 1)] = draw(st.sampled_from(SPECIAL_BYTES) | st.integers(0, 255))
        elif op == "truncate":
            del data[at:]
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 40))]
        elif op == "duplicate":
            span = data[at:at + draw(st.integers(1, 80))]
            data[at:at] = span
        elif op == "junk_line":
            line = draw(st.sampled_from(JUNK_LINES) | st.binary(max_size=40))
            start = draw(st.sampled_from([i for i in _line_starts(data) if i >= body] or [len(data)]))
            data[start:start] = line + b"\n"
        elif op == "bom" and not data.startswith(b"\xef\xbb\xbf"):
            data[0:0] = b"\xef\xbb\xbf"
        elif op == "random":
            data = bytearray(draw(st.binary(max_size=200)))
        elif op == "swap_fields":
            starts = _line_starts(data)
            k = draw(st.integers(0 if body == 0 else min(1, len(starts) - 1), len(starts) - 1))
            end = starts[k + 1] - 1 if k + 1 < len(starts) else len(data)
            fields = bytes(data[starts[k]:end]).split(b",")
            if len(fields) > 1:
                i, j = draw(st.integers(0, len(fields) - 1)), draw(st.integers(0, len(fields) - 1))
                fields[i], fields[j] = fields[j], fields[i]
                data[starts[k]:end] = b",".join(fields)
    return bytes(data)


def _objects(value, found: list) -> list:
    """Every JSON object inside ``value`` (records, attempts, placement entries)."""
    if isinstance(value, dict):
        found.append(value)
        for child in value.values():
            _objects(child, found)
    elif isinstance(value, list):
        for child in value:
            _objects(child, found)
    return found


@st.composite
def job_log_mutations(draw) -> bytes:
    """Valid JSON with swapped or wrongly typed values, or byte-level damage, or both."""
    original = (FIXTURES / "cluster_job_log").read_bytes()
    if draw(st.booleans()):
        records = json.loads(original)
        for _ in range(draw(st.integers(1, 3))):
            obj = draw(st.sampled_from(_objects(records, [])))
            keys = list(obj)
            if not keys:
                continue
            a, b = draw(st.sampled_from(keys)), draw(st.sampled_from(keys))
            if draw(st.booleans()):
                obj[a], obj[b] = obj[b], obj[a]
            else:
                obj[a] = draw(JSON_VALUES)
        original = json.dumps(records, indent=1).encode()
        if draw(st.booleans()):
            return original
    return draw(byte_mutations(original))


def _line_structure(data: bytes, fields: int) -> Counter:
    """A plain reading of the data lines: empty, a CR inside, wrong field count, or structurally good."""
    lines = data.split(b"\n")[1:]
    if data.endswith(b"\n"):
        lines = lines[:-1]
    out = Counter({"empty line": 0, "carriage return inside a line": 0, "wrong number of fields": 0, "good": 0})
    for line in lines:
        if line in (b"", b"\r"):
            out["empty line"] += 1
        elif b"\r" in line.rstrip(b"\r"):
            out["carriage return inside a line"] += 1
        elif line.count(b",") + 1 != fields:
            out["wrong number of fields"] += 1
        else:
            out["good"] += 1
    return out


def _assert_named_format_error(exc: TraceFormatError, file: str) -> None:
    assert file in str(exc), f"error does not name {file}: {exc}"
    event(f"TraceFormatError: {str(exc).split(': ', 2)[-1][:40]}")


@FUZZ
@given(data=job_log_mutations())
def test_fuzzed_job_log_loads_accounted_or_raises_a_named_format_error(data):
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp)
        (raw / "cluster_job_log").write_bytes(data)
        shutil.copy(FIXTURES / "cluster_machine_list", raw)
        try:
            plain = json.loads(data.decode("utf-8-sig"))      # what the standard library makes of it
        except ValueError:
            plain = None
        try:
            tables = load_raw_dir(raw, with_util=False)
        except TraceFormatError as exc:
            _assert_named_format_error(exc, "cluster_job_log")
            assert not isinstance(plain, list), "a JSON list of jobs was refused"
            return
        tables["quality"].check()
        event("loaded")
        counts = tables["quality"].counts("cluster_job_log")
        assert counts["read"] == len(plain) and counts["loaded"] == len(tables["jobs"])


@FUZZ
@given(kind=st.sampled_from(sorted(UTIL_FILES)), block_bytes=st.integers(1, 400), data=st.data())
def test_fuzzed_utilization_file_loads_accounted_or_raises_a_named_format_error(kind, block_bytes, data):
    """The in-memory reader and the block reader of the ingest agree on every mutated file."""
    name = UTIL_FILES[kind]
    mutated = data.draw(byte_mutations((FIXTURES / name).read_bytes()))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(mutated)
        whole_quality, block_quality = QualityReport(), QualityReport()
        try:
            whole = read_util(path, kind, whole_quality)
        except TraceFormatError as exc:
            _assert_named_format_error(exc, name)
            with pytest.raises(TraceFormatError, match=name):
                list(iter_util_blocks(path, kind, block_quality, block_bytes=block_bytes))
            return
        whole_quality.check()
        event("loaded")
        counts = whole_quality.counts(name)
        expected = _line_structure(mutated, len(read_layout(path, kind).names))
        assert counts["read"] == sum(expected.values())
        for reason in ("empty line", "carriage return inside a line", "wrong number of fields"):
            assert counts["quarantined"].get(reason, 0) == expected[reason], reason
        blocks = list(iter_util_blocks(path, kind, block_quality, block_bytes=block_bytes))
        block_quality.check()
        assert block_quality.counts(name) == counts
        assert sum(len(b) for b in blocks) == len(whole)


@settings(FUZZ, max_examples=40)
@given(data=st.data())
def test_fuzzed_raw_directory_ingests_like_the_in_memory_loader_or_raises_a_named_format_error(data):
    """The out-of-core ingest on a directory with every utilization file damaged."""
    with tempfile.TemporaryDirectory() as tmp:
        raw, out = Path(tmp) / "raw", Path(tmp) / "out"
        shutil.copytree(FIXTURES, raw)
        for name in UTIL_FILES.values():
            (raw / name).write_bytes(data.draw(byte_mutations((FIXTURES / name).read_bytes()), label=name))
        try:
            direct = load_raw_dir(raw)
        except TraceFormatError as exc:
            assert any(name in str(exc) for name in UTIL_FILES.values()), str(exc)
            with pytest.raises(TraceFormatError) as again:
                ingest(raw, out, block_bytes=64, progress=False)
            assert str(again.value).split(":")[0] == str(exc).split(":")[0]      # the same file
            return
        ingested = load_ingested(ingest(raw, out, block_bytes=64, progress=False))
        ingested["quality"].check()
        assert ingested["quality"].counts("cluster_gpu_util") == direct["quality"].counts("cluster_gpu_util")
        assert ingested["quality"].summary().equals(direct["quality"].summary())
