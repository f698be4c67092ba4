"""The sweep on a real Dask cluster: a scheduler and two workers as separate OS processes on 127.0.0.1.

Workers run without a nanny, so each worker is one process we started and killing it loses it for
good: the sweep must finish on the other one. Every wait is bounded; the processes (each in its own
process group) are killed when the test ends, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from dlcluster.experiments.sweep import SweepError, expand_grid, run_sweep
from sweep_cells import read_records, recorded_cell

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parent
LIB = TESTS.parent / "lib"
HELPER = ["sweep_cells"]
START_TIMEOUT_S = 60
SWEEP_TIMEOUT_S = 120


@dataclass
class DaskProcesses:
    """A scheduler and its workers, started as ``python -m dask scheduler`` / ``python -m dask worker``."""

    root: Path
    log_dir: Path
    address: str = ""
    workers: list[subprocess.Popen] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def spawn(self, name: str, args: list[str], env: dict) -> subprocess.Popen:
        output = open(self.root / f"{name}.out", "wb")
        try:
            proc = subprocess.Popen([sys.executable, "-m", "dask", *args], env=env, stdout=output,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root)
        finally:
            output.close()
        self.processes.append(proc)
        return proc

    def output(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.root.glob("*.out"))

    def stop(self) -> None:
        """Workers first, then the scheduler: SIGTERM to the process group, SIGKILL after 10 s."""
        for proc in reversed(self.processes):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    break
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    continue


@pytest.fixture
def dask_processes(tmp_path):
    """``start(cell_sleep_s, allowed_failures, n_workers)``: a scheduler and single-threaded workers (two by
    default) importing this worktree's code. ``allowed_failures``: how many worker deaths a task survives
    (Dask's default: 3)."""
    started: list[DaskProcesses] = []

    def start(cell_sleep_s: float, allowed_failures: int | None = None, n_workers: int = 2) -> DaskProcesses:
        cluster = DaskProcesses(root=tmp_path / "dask", log_dir=tmp_path / "dask" / "cells")
        cluster.log_dir.mkdir(parents=True)
        started.append(cluster)
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join([str(LIB), str(TESTS), os.environ.get("PYTHONPATH", "")]),
               "SWEEP_CELL_LOG": str(cluster.log_dir), "SWEEP_CELL_SLEEP_S": str(cell_sleep_s),
               "OMP_NUM_THREADS": "1"}
        if allowed_failures is not None:
            env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = str(allowed_failures)
        scheduler_file = cluster.root / "scheduler.json"
        scheduler = cluster.spawn("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                                "--no-dashboard", "--scheduler-file", str(scheduler_file)], env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not cluster.address:
            if scheduler.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Dask scheduler did not start:\n{cluster.output()}")
            if scheduler_file.exists():
                try:
                    cluster.address = json.loads(scheduler_file.read_text())["address"]
                except (ValueError, KeyError):  # written but not complete yet
                    pass
            time.sleep(0.1)
        assert cluster.address.startswith("tcp://127.0.0.1:")
        for n in range(n_workers):
            cluster.workers.append(cluster.spawn(f"worker{n}", [
                "worker", cluster.address, "--nworkers", "1", "--nthreads", "1", "--no-nanny", "--no-dashboard",
                "--host", "127.0.0.1", "--name", f"worker{n}", "--death-timeout", "30",
                "--local-directory", str(cluster.root / f"worker{n}")], env))
        from distributed import Client
        with Client(cluster.address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
            try:
                client.wait_for_workers(n_workers, timeout=START_TIMEOUT_S)
            except TimeoutError:
                pytest.fail(f"the Dask workers did not join:\n{cluster.output()}")
            pids = set(client.run(os.getpid).values())
        assert pids == {w.pid for w in cluster.workers}  # the processes we started, not children of them
        return cluster

    yield start
    for cluster in started:
        cluster.stop()


def _local(cells, cache: Path) -> pd.DataFrame:
    return run_sweep(cells, recorded_cell, cache, code_modules=HELPER, n_jobs=1, progress=False)


def _assert_one_cache_file_per_cell(cache: Path, table: pd.DataFrame, n_cells: int) -> None:
    keys = table.drop_duplicates("cell")["cell_key"]
    assert len(keys) == keys.nunique() == n_cells
    assert sorted(p.name for p in cache.iterdir()) == sorted(f"{k}.parquet" for k in keys)  # no temporary left


def test_two_worker_processes_give_the_local_table(tmp_path, dask_processes):
    cluster = dask_processes(cell_sleep_s=0.2)
    cells = expand_grid({"a": [1, 2, 3, 4, 5, 6]}, {"seed": 3})
    local = _local(cells, tmp_path / "local")
    started = time.perf_counter()
    remote = run_sweep(cells, recorded_cell, tmp_path / "remote", code_modules=HELPER,
                       scheduler_address=cluster.address, progress=False)
    print(f"6 cells on two Dask worker processes: {time.perf_counter() - started:.2f} s")
    pd.testing.assert_frame_equal(remote, local)
    assert remote["cell"].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    records = read_records(cluster.log_dir)
    assert {pid for pid, _, _ in records} == {w.pid for w in cluster.workers}  # both workers, not this process
    done = Counter(params for _, event, params in records if event == "done")
    assert done == Counter(json.dumps(c, sort_keys=True) for c in cells)  # each cell ran once
    _assert_one_cache_file_per_cell(tmp_path / "remote", remote, len(cells))


def _kill_a_worker_mid_cell(cluster: DaskProcesses, cache: Path, sweep) -> tuple[int, str]:
    """Once 2 cells are cached, SIGKILL a worker that has finished a cell, while it runs another one.

    Returns the killed worker's PID and the cell it was running. It is killed when it holds no finished
    result: everything it computed before has reached the sweep, so only the running cell is lost.
    """
    from distributed import Client

    deadline = time.monotonic() + SWEEP_TIMEOUT_S
    held_results = False
    with Client(cluster.address, timeout=START_TIMEOUT_S, set_as_default=False) as client:
        address_of = {pid: address for address, pid in client.run(os.getpid).items()}
        while time.monotonic() < deadline and not sweep.done():
            if len(list(cache.glob("*.parquet"))) >= 2:
                running, finished_some = {}, set()
                for pid, event, params in read_records(cluster.log_dir):
                    running[pid] = params if event == "start" else None
                    if event == "done":
                        finished_some.add(pid)
                held = client.has_what()
                for worker in cluster.workers:
                    cell = running.get(worker.pid)
                    if cell is None or worker.pid not in finished_some:
                        continue
                    if held.get(address_of[worker.pid]):
                        held_results = True
                        continue
                    os.kill(worker.pid, signal.SIGKILL)
                    worker.wait(timeout=10)
                    return worker.pid, cell
            time.sleep(0.02)
    if held_results:
        pytest.fail("workers kept finished cells' results while running the next cell: losing one would make "
                    "Dask compute those cells again")
    pytest.fail(f"found no moment to kill a worker mid-cell (sweep finished: {sweep.done()})\n{cluster.output()}")


def _sweep_killing_a_worker(cluster: DaskProcesses, cells, cache: Path):
    """Run the sweep in a thread and kill a worker mid-cell: (table or the SweepError raised, victim, its cell)."""
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        started = time.perf_counter()
        sweep = pool.submit(run_sweep, cells, recorded_cell, cache, code_modules=HELPER,
                            scheduler_address=cluster.address, progress=False)
        victim, lost_cell = _kill_a_worker_mid_cell(cluster, cache, sweep)
        try:
            outcome = sweep.result(timeout=SWEEP_TIMEOUT_S)
        except SweepError as error:
            outcome = error
        print(f"{len(cells)} cells, a worker killed mid-cell: {time.perf_counter() - started:.2f} s")
        return outcome, victim, lost_cell
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def test_a_worker_killed_mid_sweep_loses_and_duplicates_nothing(tmp_path, dask_processes):
    cluster = dask_processes(cell_sleep_s=1.0)
    cells = expand_grid({"a": [1, 2, 3, 4, 5, 6, 7, 8]}, {"seed": 5})
    local = _local(cells, tmp_path / "local")
    cache = tmp_path / "remote"
    remote, victim, lost_cell = _sweep_killing_a_worker(cluster, cells, cache)
    pd.testing.assert_frame_equal(remote, local)
    _assert_one_cache_file_per_cell(cache, remote, len(cells))
    records = read_records(cluster.log_dir)
    survivor = next(w.pid for w in cluster.workers if w.pid != victim)
    assert (victim, "done", lost_cell) not in records  # the kill did interrupt that cell ...
    assert (survivor, "done", lost_cell) in records  # ... and the other worker redid it
    done = Counter(params for _, event, params in records if event == "done")
    assert done == Counter(json.dumps(c, sort_keys=True) for c in cells)  # nothing finished was computed again
    assert any(pid == victim and event == "done" for pid, event, _ in records)  # the victim had done some


def test_a_cell_dask_gives_up_on_is_named_and_the_rest_cached(tmp_path, dask_processes):
    cluster = dask_processes(cell_sleep_s=0.6, allowed_failures=0)  # the first worker death fails the task
    cells = expand_grid({"a": [1, 2, 3, 4]}, {"seed": 7})
    cache = tmp_path / "remote"
    error, victim, lost_cell = _sweep_killing_a_worker(cluster, cells, cache)
    assert isinstance(error, SweepError)
    assert [json.dumps(params, sort_keys=True) for params, _ in error.failures] == [lost_cell]
    assert "KilledWorker" in error.failures[0][1] and "1 of 4 sweep cells failed" in str(error)
    assert len(list(cache.glob("*.parquet"))) == 3
    rerun = run_sweep(cells, recorded_cell, cache, code_modules=HELPER, scheduler_address=cluster.address,
                      progress=False)  # on the surviving worker: only the lost cell runs again
    pd.testing.assert_frame_equal(rerun, _local(cells, tmp_path / "local"))
    done = Counter(params for _, event, params in read_records(cluster.log_dir) if event == "done")
    assert done == Counter(json.dumps(c, sort_keys=True) for c in cells)

