"""An ingest killed midway (SIGKILL, in a subprocess) resumes to exactly the result of an uninterrupted one."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from dlcluster.trace.ingest import IncompleteIngestError, ingest, load_ingested
from dlcluster.sim.synthetic import generate_raw_trace

BLOCK = 256 << 10     # small blocks: the 4 MB synthetic files give a dozen parts each

# Runs ingest in a child that kills itself (SIGKILL: no cleanup, no finally) at a chosen point.
KILLER = r"""
import os, signal, sys
from pathlib import Path
import dlcluster.trace.ingest as ing

raw, out, point, nth, block = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
seen = [0]

def tick():
    seen[0] += 1
    if seen[0] == nth:
        os.kill(os.getpid(), signal.SIGKILL)

write_parquet, write_journal, replace = ing._write_parquet, ing._write_journal, os.replace
if point == "part":            # a part written, its journal entry not yet
    def patched(table, path):
        write_parquet(table, path)
        if path.name.startswith("part-"):
            tick()
    ing._write_parquet = patched
elif point == "journal":       # just after a journal was saved
    def patched(path, journal):
        write_journal(path, journal)
        if path.name.endswith("_util.json"):
            tick()
    ing._write_journal = patched
elif point == "publish":       # a finished table renamed into place, the journal not yet updated
    def patched(src, dst):
        replace(src, dst)
        if Path(dst).name.endswith("_util"):
            tick()
    ing.os.replace = patched
elif point == "manifest":      # everything written but the manifest
    write_text = ing.atomic_write_text
    def patched(path, text):
        if Path(path).name == "manifest.json":
            tick()
        write_text(path, text)
    ing.atomic_write_text = patched
ing.ingest(raw, out, block_bytes=block, progress=False)
"""


@pytest.fixture(scope="module")
def synthetic_raw(tmp_path_factory):
    return generate_raw_trace(tmp_path_factory.mktemp("synthetic") / "raw", scale=0.002, seed=3, progress=False)


@pytest.fixture(scope="module")
def uninterrupted(synthetic_raw, tmp_path_factory):
    return ingest(synthetic_raw, tmp_path_factory.mktemp("clean") / "ingested", block_bytes=BLOCK, progress=False)


def assert_same_ingest(a: Path, b: Path) -> None:
    ta, tb = load_ingested(a), load_ingested(b)
    for name in ("jobs", "attempts", "placements", "machines", "gpu_util", "host_util"):
        pd.testing.assert_frame_equal(ta[name], tb[name])
    pd.testing.assert_frame_equal(ta["quality"].to_frame(), tb["quality"].to_frame())
    pd.testing.assert_frame_equal(ta["quality"].summary(), tb["quality"].summary())
    ma, mb = (json.loads((d / "manifest.json").read_text()) for d in (a, b))
    assert ma == mb
    for table in ("gpu_util", "cpu_util", "mem_util"):
        parts_a = sorted(p.name for p in (a / table).iterdir())
        assert parts_a == sorted(p.name for p in (b / table).iterdir())


def kill_midway(raw: Path, out: Path, point: str, nth: int) -> None:
    child = subprocess.run([sys.executable, "-c", KILLER, str(raw), str(out), point, str(nth), str(BLOCK)],
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == -signal.SIGKILL, child.stderr


@pytest.mark.parametrize("point, nth", [("part", 1), ("part", 5), ("part", 20), ("journal", 3), ("journal", 17),
                                        ("publish", 1), ("publish", 2), ("manifest", 1)])
def test_killed_ingest_resumes_to_the_same_result(synthetic_raw, uninterrupted, tmp_path, point, nth):
    out = tmp_path / "ingested"
    kill_midway(synthetic_raw, out, point, nth)
    assert not (out / "manifest.json").exists()
    with pytest.raises(IncompleteIngestError):
        load_ingested(out)
    ingest(synthetic_raw, out, block_bytes=BLOCK, progress=False)
    assert not (out / ".staging").exists()
    assert_same_ingest(out, uninterrupted)


def test_killed_twice_at_unplanned_moments(synthetic_raw, uninterrupted, tmp_path):
    """SIGKILL from outside while the child works, at whatever it is doing; twice; then finish."""
    out = tmp_path / "ingested"
    for parts_before_kill in (3, 8):
        child = subprocess.Popen([sys.executable, "-c",
                                  ("import sys; from dlcluster.trace.ingest import ingest; "
                                   "ingest(sys.argv[1], sys.argv[2], block_bytes=int(sys.argv[3]), progress=False)"),
                                  str(synthetic_raw), str(out), str(BLOCK // 4)])
        journal = out / ".staging" / "gpu_util.json"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            try:
                if json.loads(journal.read_text())["parts"] >= parts_before_kill:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL, "the child finished before it could be killed"
    ingest(synthetic_raw, out, block_bytes=BLOCK // 4, progress=False)
    expected = ingest(synthetic_raw, tmp_path / "expected", block_bytes=BLOCK // 4, progress=False)
    assert_same_ingest(out, expected)


def test_quality_counts_survive_a_resume_without_double_counting(synthetic_raw, uninterrupted, tmp_path):
    out = tmp_path / "ingested"
    kill_midway(synthetic_raw, out, "part", 14)         # well into the GPU file, past some malformed lines
    ingest(synthetic_raw, out, block_bytes=BLOCK, progress=False)
    quality = load_ingested(out, with_util=False)["quality"]
    meta = json.loads((synthetic_raw / "metadata.json").read_text())
    for file in ("cluster_gpu_util", "cluster_cpu_util", "cluster_mem_util"):
        counts = quality.counts(file)
        assert counts["read"] == meta["rows_per_util_file"]
        assert counts["quarantined"] == {kind: 1 for kind in {d["kind"] for d in meta["defects"][file]}}
        assert counts["loaded"] == meta["rows_per_util_file"] - 3
