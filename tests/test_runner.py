"""The report runner: parameter selection, atomic outputs, failures that name notebook and cell,
and ``dlcluster reports`` as its user sees it: progress lines, quiet output, the cache, Ctrl-C."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from dlcluster.report.runner import NotebookFailed, execute_notebook, notebook_params, read_params

REPO = Path(__file__).resolve().parents[1]
LIB = REPO / "lib"
WRITE_RESULTS = ("import json, pathlib\np = pathlib.Path(output_dir); p.mkdir(parents=True, exist_ok=True)\n"
                 "(p / 'results.json').write_text(json.dumps({'notebook': 'x', 'results': {'v': value}}))")


def _notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('output_dir = "x"\nvalue = 1\nsleep_s = 0')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params] + [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_notebook_params_merge_and_filter(tmp_path):
    params = {"trace": "public", "seed": 3, "notebooks": {"01-x": {"seed": 5, "grid": "small"}}}
    got = notebook_params(params, "01-x", {"trace", "seed", "output_dir"}, tmp_path / "01-x")
    assert got == {"trace": "public", "seed": 5, "output_dir": str(tmp_path / "01-x")}
    assert notebook_params(params, "02-y", {"seed"}, tmp_path) == {"seed": 3}


def test_fingerprint_follows_the_failure_rules_yaml(tmp_path):
    """Editing a non-Python file of the library (notebook 04's classifier rules) changes every notebook's
    fingerprint, so ``dlcluster reports`` reruns notebook 04 instead of reusing its old report. Run on a
    copy of the library (first on PYTHONPATH), never on this checkout's own rules."""
    copy = tmp_path / "lib"
    shutil.copytree(LIB / "dlcluster", copy / "dlcluster", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "data").mkdir()  # DLCLUSTER_ROOT: an empty data folder keeps the fingerprint cheap
    nb = REPO / "notebooks" / "04-failures-rtf.ipynb"
    probe = ("import sys, dlcluster; from pathlib import Path; "
             "from dlcluster.report.runner import notebook_fingerprint;"
             "print(dlcluster.__file__); print(notebook_fingerprint(Path(sys.argv[1]), {'trace': 'public'}))")
    env = {**os.environ, "PYTHONPATH": str(copy), "DLCLUSTER_ROOT": str(tmp_path)}

    def fingerprint() -> str:
        done = subprocess.run([sys.executable, "-c", probe, str(nb)], env=env, capture_output=True, text=True,
                              check=True)
        where, value = done.stdout.split()
        assert Path(where) == copy / "dlcluster" / "__init__.py"  # the copy, not this checkout
        return value

    before = fingerprint()
    assert fingerprint() == before
    rules = copy / "dlcluster" / "analysis" / "failure_rules.yaml"
    rules.write_text(rules.read_text() + "\n# an edited rule\n")
    assert fingerprint() != before


def test_read_params_rejects_non_mapping(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match=r"p\.yaml: expected a mapping"):
        read_params(bad)


@pytest.mark.notebook
def test_success_writes_notebook_html_and_results(tmp_path):
    nb = _notebook(tmp_path / "07-ok.ipynb", [WRITE_RESULTS])
    out = tmp_path / "out"
    cells = []
    execute_notebook(nb, out, {"value": 42}, on_cell=lambda n, total: cells.append((n, total)))
    assert (out / "07-ok.ipynb").exists() and (out / "07-ok.html").exists()
    assert json.loads((out / "07-ok" / "results.json").read_text())["results"] == {"v": 42}
    assert cells == [(1, 2), (2, 2)]  # each code cell of the source notebook, not papermill's injected one


@pytest.mark.notebook
def test_failure_names_notebook_and_cell_and_leaves_no_complete_copy(tmp_path):
    nb = _notebook(tmp_path / "08-bad.ipynb", ["a = 1", "raise ValueError('broken input')"])
    out = tmp_path / "out"
    with pytest.raises(NotebookFailed, match=r"08-bad.ipynb failed in cell 3 \(.raise ValueError\(.broken input.\).\): "
                                             r"ValueError: broken input"):
        execute_notebook(nb, out, {})
    assert not (out / "08-bad.ipynb").exists() and not (out / "08-bad.html").exists()
    assert (out / "08-bad.FAILED.ipynb").exists()


def _reports(tmp_path, *args, env=None, **popen):
    """Start ``dlcluster reports`` on the fixture notebooks of ``tmp_path/nbs`` as its user would (``env``: more
    environment variables)."""
    env = {**os.environ, "PYTHONPATH": str(LIB), **(env or {})}
    command = [sys.executable, "-m", "dlcluster.cli", "reports", "--notebooks", str(tmp_path / "nbs"),
               "--out", str(tmp_path / "out"), *args]
    # as from a terminal: Ctrl-C delivered. A test run started in the background (``make test &``, a CI runner
    # without job control) hands its children SIGINT ignored, and Python then never raises KeyboardInterrupt
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            preexec_fn=_interrupt_as_from_a_terminal, **popen)


def _interrupt_as_from_a_terminal():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _params(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return str(path)


@pytest.fixture
def tiny_notebooks(tmp_path):
    (tmp_path / "nbs").mkdir()
    _notebook(tmp_path / "nbs" / "01-tiny.ipynb", ["import time\ntime.sleep(sleep_s)", WRITE_RESULTS])
    _notebook(tmp_path / "nbs" / "02-sweep.ipynb", [
        ("from dlcluster.experiments.sweep import run_sweep\n"
         "run_sweep([{'a': 1}, {'a': 2}, {'a': 3}], lambda p: {'b': p['a']}, output_dir + '/cache', n_jobs=1,\n"
         "          code_modules=['dlcluster.experiments.sweep'])"), WRITE_RESULTS])
    return tmp_path


@pytest.mark.notebook
def test_reports_prints_progress_quietly_and_reuses_unchanged_notebooks(tiny_notebooks):
    tmp = tiny_notebooks
    first = _reports(tmp, "--params", _params(tmp, "value: 5\n")).communicate(timeout=120)[0]
    assert "[1/2] 01-tiny: cell 2/3 ..." in first and "[1/2] 01-tiny: done in" in first, first
    noise = [line for line in first.splitlines() if "without encryption" in line or "Warning" in line]
    assert noise == [], first
    assert all(line.startswith(("dlcluster reports: ", "[1/2] 01-tiny: ", "[2/2] 02-sweep: "))
               for line in first.splitlines()), first  # nothing but the runner's own lines
    assert "[2/2] 02-sweep: sweep 0/3 simulations" in first, first  # from inside the kernel
    assert "[2/2] 02-sweep: sweep 3/3 simulations, finished in" in first, first
    assert json.loads((tmp / "out" / "01-tiny" / "results.json").read_text())["results"] == {"v": 5}
    stamp = (tmp / "out" / "01-tiny.ipynb").stat().st_mtime_ns

    again = _reports(tmp, "--params", _params(tmp, "value: 5\n")).communicate(timeout=120)[0]
    assert "[1/2] 01-tiny: reused (unchanged since " in again and "cell 2/3" not in again, again
    assert (tmp / "out" / "01-tiny.ipynb").stat().st_mtime_ns == stamp
    assert "reused (unchanged since " in (tmp / "out" / "index.html").read_text()

    changed = _reports(tmp, "--params", _params(tmp, "value: 6\n"), "--only", "01").communicate(timeout=120)[0]
    assert "cell 2/3" in changed and "reused" not in changed, changed
    assert json.loads((tmp / "out" / "01-tiny" / "results.json").read_text())["results"] == {"v": 6}

    forced = _reports(tmp, "--params", _params(tmp, "value: 6\n"), "--only", "01", "--force", "-v").communicate(
        timeout=120)[0]
    assert "cell 2/3" in forced and "reused" not in forced, forced
    assert "papermill: Executing Cell" in forced  # -v: papermill's log and the cells' output too


@pytest.mark.notebook
def test_another_package_version_or_cpu_path_reruns_notebooks_and_sweep_cells(tiny_notebooks):
    """A pin bump, once installed, reruns every notebook and recomputes the cached sweep cells, and so does a run on
    other SIMD paths (numpy's NPY_DISABLE_CPU_FEATURES, as on an older CPU). The bumped package is a distribution
    of this test's own on PYTHONPATH (``dlcluster-probe``), moved from version 1.0 to 1.1."""
    tmp = tiny_notebooks
    site = tmp / "site"

    def install(version: str) -> dict:
        shutil.rmtree(site, ignore_errors=True)
        info = site / f"dlcluster_probe-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: dlcluster-probe\nVersion: {version}\n")
        return {"PYTHONPATH": os.pathsep.join([str(LIB), str(site)])}

    params = _params(tmp, "value: 5\n")
    first = _reports(tmp, "--params", params, env=install("1.0")).communicate(timeout=120)[0]
    assert "[2/2] 02-sweep: sweep 3/3 simulations, finished in" in first and "cached" not in first, first
    same = _reports(tmp, "--params", params, env=install("1.0")).communicate(timeout=120)[0]
    assert same.count("reused (unchanged since ") == 2, same

    bumped = _reports(tmp, "--params", params, env=install("1.1")).communicate(timeout=120)[0]
    assert "[1/2] 01-tiny: cell 2/3" in bumped and "reused" not in bumped, bumped
    assert "sweep 3/3 simulations, finished in" in bumped and "cached" not in bumped, bumped  # cells recomputed
    again = _reports(tmp, "--params", params, env=install("1.1")).communicate(timeout=120)[0]
    assert again.count("reused (unchanged since ") == 2, again

    other_cpu = _reports(tmp, "--params", params, env={**install("1.1"), "NPY_DISABLE_CPU_FEATURES": "X86_V3"})
    other_cpu = other_cpu.communicate(timeout=120)[0]
    assert "[1/2] 01-tiny: cell 2/3" in other_cpu and "reused" not in other_cpu, other_cpu


@pytest.mark.notebook
def test_ctrl_c_stops_the_kernel_and_leaves_no_complete_looking_report(tiny_notebooks):
    tmp = tiny_notebooks
    out = tmp / "out"
    _notebook(tmp / "nbs" / "01-tiny.ipynb", [
        WRITE_RESULTS,  # results.json exists before the interrupt: it must not survive it
        ("import os, pathlib, time\npathlib.Path(output_dir, 'kernel.pid').write_text(str(os.getpid()))\n"
         "time.sleep(sleep_s)")])
    run = _reports(tmp, "--params", _params(tmp, "sleep_s: 60\n"), "--only", "01")
    for line in run.stdout:
        if "cell 3/3" in line:
            break
    pid_file = out / "01-tiny" / "kernel.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    kernel_pid = int(pid_file.read_text())
    run.send_signal(signal.SIGINT)
    rest = run.communicate(timeout=60)[0]
    assert run.returncode == 130, rest
    assert "interrupted: 01-tiny.ipynb at cell 3/3" in rest and "was not updated" in rest
    left = {p.name for p in out.iterdir()} | {p.name for p in (out / "01-tiny").iterdir()}
    assert not left & {"01-tiny.ipynb", "01-tiny.html", "results.json", "run.json", "index.html",
                       ".01-tiny.running.ipynb"}, left
    with pytest.raises(ProcessLookupError):
        os.kill(kernel_pid, 0)  # the kernel is gone, not left computing


STAMP_TIMES = ("import json, pathlib, time\np = pathlib.Path(output_dir); p.mkdir(parents=True, exist_ok=True)\n"
               "start = time.time(); time.sleep(sleep_s)\n"
               "(p / 'times.json').write_text(json.dumps([start, time.time()]))")


@pytest.mark.notebook
def test_two_notebooks_run_side_by_side_and_a_failure_stops_only_what_has_not_started(tmp_path):
    (tmp_path / "nbs").mkdir()
    for name in ("01-a", "02-b"):
        _notebook(tmp_path / "nbs" / f"{name}.ipynb", [STAMP_TIMES, WRITE_RESULTS])
    params = _params(tmp_path, "sleep_s: 3\n")

    def spans(*args):
        text = _reports(tmp_path, "--params", params, "--force", *args).communicate(timeout=120)[0]
        assert "[1/2] 01-a: done in" in text and "[2/2] 02-b: done in" in text and "wrote" in text, text
        return [json.loads((tmp_path / "out" / n / "times.json").read_text()) for n in ("01-a", "02-b")]

    (a0, a1), (b0, b1) = spans()                      # two at a time (the default): they overlap
    assert b0 < a1 and a0 < b1
    (a0, a1), (b0, b1) = spans("--jobs", "1")         # one after another
    assert b0 >= a1
    # 01 fails while 02 runs beside it: 02 completes, 03 never starts, the index is not rewritten
    _notebook(tmp_path / "nbs" / "01-a.ipynb", ["import time\ntime.sleep(1)\nraise ValueError('broken')"])
    _notebook(tmp_path / "nbs" / "03-c.ipynb", [STAMP_TIMES, WRITE_RESULTS])
    shutil.rmtree(tmp_path / "out")
    run = _reports(tmp_path, "--params", params)
    text = run.communicate(timeout=120)[0]
    assert run.returncode == 1 and "01-a.ipynb failed in cell 2" in text, text
    assert "[2/3] 02-b: done in" in text and "03-c: running" not in text, text
    assert (tmp_path / "out" / "02-b" / "results.json").exists() and (tmp_path / "out" / "02-b.ipynb").exists()
    assert not (tmp_path / "out" / "03-c").exists() and not (tmp_path / "out" / "index.html").exists()


HOLD_LOCK = ("import json, pathlib, time\nfrom dlcluster.atomic import exclusive_lock\n"
             "p = pathlib.Path(output_dir); p.mkdir(parents=True, exist_ok=True)\n"
             "start = time.time()\nwith exclusive_lock(p.parent / 'shared.lock'):\n    time.sleep(sleep_s)\n"
             "(p / 'times.json').write_text(json.dumps([start, time.time()]))")
WAIT_FOR_LOCK = ("import json, pathlib, time\nfrom dlcluster.atomic import exclusive_lock\n"
                 "from dlcluster.report.progress import emit\n"
                 "p = pathlib.Path(output_dir); p.mkdir(parents=True, exist_ok=True)\n"
                 "start = time.time(); time.sleep(1)\n"
                 "with exclusive_lock(p.parent / 'shared.lock', on_wait=lambda waits: emit(\n"
                 "        {'event': 'waiting', 'for': 'the shared result', 'waiting': waits})):\n    pass\n"
                 "(p / 'times.json').write_text(json.dumps([start, time.time()]))")


@pytest.mark.notebook
def test_a_notebook_waiting_for_a_result_another_computes_lends_its_slot_to_the_next(tmp_path):
    """As notebooks 05 and 06 wait for the calibration that 01 runs: with one slot each, the next notebook starts
    while the waiting one waits, not after it."""
    (tmp_path / "nbs").mkdir()
    _notebook(tmp_path / "nbs" / "01-computes.ipynb", [HOLD_LOCK, WRITE_RESULTS])
    _notebook(tmp_path / "nbs" / "02-waits.ipynb", [WAIT_FOR_LOCK, WRITE_RESULTS])
    _notebook(tmp_path / "nbs" / "03-next.ipynb", [STAMP_TIMES, WRITE_RESULTS])
    params = _params(tmp_path, "sleep_s: 0\nnotebooks:\n  01-computes:\n    sleep_s: 12\n")
    text = _reports(tmp_path, "--params", params, "--jobs", "2").communicate(timeout=180)[0]
    assert "wrote" in text, text
    assert "[2/3] 02-waits: waiting for the shared result, which another notebook computes" in text, text
    assert "[2/3] 02-waits: the shared result is ready" in text, text
    (a0, a1), (b0, b1), (c0, c1) = [json.loads((tmp_path / "out" / n / "times.json").read_text())
                                    for n in ("01-computes", "02-waits", "03-next")]
    assert b1 >= a1   # it did wait for the lock
    assert c0 < a1 and c0 < b1, (a0, a1, b0, b1, c0, c1)   # 03 did not wait for a slot to end
    # where a lock is free, nobody says it waits
    assert "waiting for" not in _reports(tmp_path, "--params", _params(tmp_path, "sleep_s: 0\n"), "--force",
                                         "--jobs", "2").communicate(timeout=180)[0]


def test_a_notebook_thread_closes_the_event_loop_its_client_left():
    import asyncio
    import threading

    from dlcluster.report.runner import _close_event_loop

    seen = {}

    def notebook_thread():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)   # as nbclient does in a thread
        _close_event_loop()
        seen["closed"] = loop.is_closed()
        _close_event_loop()            # none left: nothing to do
        try:
            asyncio.get_event_loop_policy().get_event_loop()
            seen["cleared"] = False
        except RuntimeError:           # no loop set on this thread any more
            seen["cleared"] = True

    thread = threading.Thread(target=notebook_thread)
    thread.start()
    thread.join()
    assert seen == {"closed": True, "cleared": True}
