"""Run a grid of experiment cells in parallel, once: ``expand_grid`` + ``run_sweep``.

A *cell* is a flat mapping of JSON-serialisable parameters (policy, load,
seed, ...). ``run_sweep(cells, fn, cache_dir)`` calls ``fn(cell)`` for every
cell that is not cached yet and returns one tidy table: the rows each call
returned, with the cell's parameters as columns, in the order of ``cells``
(whatever order the cells finished in).

* **Where it runs**: on all local cores by default (a process pool), on a
  Dask distributed cluster when given ``scheduler_address``, or in this
  process with ``n_jobs=1``. ``fn`` must be importable (a module-level
  function) for the process pool and Dask.
* **Cache**: each finished cell is stored as ``<cache_dir>/<key>.parquet``,
  ``key`` = sha256 of the cell's parameters and the *code version* (a hash of
  the files of the modules that compute it, every file of a package, :func:`code_version`) and the
  installed environment (:func:`~dlcluster.codeversion.environment_version`). A rerun skips cached
  cells; editing the simulator or the experiment code, or installing other package versions,
  invalidates them. Inputs that are not code (data) belong in the parameters
  (e.g. a fingerprint of the workload).
* **Failures**: a cell that raises does not stop the others; when all have
  run, :class:`SweepError` names every failed cell with its parameters and
  traceback. Finished cells are cached, so a rerun only redoes the failures.
* **Progress**: a tqdm bar (inside a notebook it lands in the notebook's
  output), and one event per finished cell for ``dlcluster reports`` to print
  in the terminal (:func:`dlcluster.report.progress.emit`; nothing without it).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import pandas as pd

from ..atomic import atomic_target
from ..codeversion import code_version, environment_version
from ..paths import cache_dir as default_cache_dir
from ..report.progress import emit as emit_progress

#: Columns run_sweep adds to each row: the cell's position in the grid and its cache key.
CELL_COLUMNS = ("cell", "cell_key")


class SweepError(RuntimeError):
    """One or more cells raised; ``failures`` lists ``(params, traceback text)`` for each."""

    def __init__(self, failures: list[tuple[dict, str]], total: int):
        self.failures = failures
        lines = [f"{len(failures)} of {total} sweep cells failed (finished cells are cached; rerun to retry):"]
        for params, text in failures:
            last = text.strip().splitlines()[-1] if text.strip() else "unknown error"
            lines.append(f"  cell {json.dumps(params, sort_keys=True)}: {last}")
        lines.append("first traceback:\n" + failures[0][1])
        super().__init__("\n".join(lines))


def expand_grid(axes: Mapping[str, Sequence], fixed: Mapping | None = None) -> list[dict]:
    """Every combination of the ``axes`` values (the last axis varies fastest), each with ``fixed`` added.

    ``expand_grid({"policy": ["fifo", "srtf"], "seed": [0, 1]}, {"load": 1.0})`` gives 4 cells.
    Values must be JSON-serialisable (they form the cache key).
    """
    fixed = dict(fixed or {})
    axes = dict(axes)
    both = sorted(set(axes) & set(fixed))
    if both:
        raise ValueError(f"expand_grid: {both} given both as an axis and as a fixed parameter")
    for name, values in axes.items():
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise ValueError(f"expand_grid: axis {name!r} must be a list of values, got {values!r}")
        if len(values) == 0:
            raise ValueError(f"expand_grid: axis {name!r} has no values")
    cells = [{**fixed, **dict(zip(axes, combo, strict=True))} for combo in itertools.product(*axes.values())]
    for cell in cells:
        _canonical(cell)
    return cells


def _canonical(params: Mapping) -> str:
    try:
        return json.dumps(params, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"sweep cell parameters must be JSON-serialisable (no NaN): {params!r}: {exc}") from None


def cell_key(params: Mapping, version: str) -> str:
    """The cache key of a cell: sha256 of its canonical JSON parameters and the code version."""
    return hashlib.sha256(f"{_canonical(params)}\n{version}".encode()).hexdigest()


def _call(fn: Callable, params: dict):
    """Run one cell; never raises (so one failure does not hide the others): ('ok', frame) or ('error', text)."""
    try:
        out = fn(dict(params))
        if isinstance(out, Mapping):
            out = pd.DataFrame([out])
        if not isinstance(out, pd.DataFrame):
            raise TypeError(f"sweep function returned {type(out).__name__}; expected a DataFrame or a dict")
        return "ok", out.reset_index(drop=True)
    except Exception:  # reported with the cell's parameters by run_sweep
        return "error", traceback.format_exc()


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    with atomic_target(path) as tmp:
        frame.to_parquet(tmp, index=False)


def _progress(total: int, cached: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=cached, unit="cell", desc="sweep", mininterval=5.0, file=sys.stderr)


def _run_local(fn, pending, n_jobs):
    if n_jobs == 1 or len(pending) <= 1:
        for i, params in pending:
            yield i, _call(fn, params)
        return
    import multiprocessing

    # spawn: a fresh interpreter per worker, safe inside a Jupyter kernel (which has threads). Forking the kernel
    # instead (its inputs already loaded) was tried: in one fresh-clone run the full grid's cells took ~7.7 CPU-s
    # against ~5.7 spawned, cause not settled (that run also recompiled every module per process)
    pool = ProcessPoolExecutor(max_workers=min(n_jobs, len(pending)), mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(_call, fn, params): i for i, params in pending}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:  # on an interrupt, do not wait for the cells not started yet
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(fn, pending, address):
    """Run the cells on a Dask scheduler; a cell the cluster gives up on is reported as that cell's failure.

    Dask reruns a task whose worker died, so each cell still arrives here once. A result is released as
    soon as it has arrived: the loss of a worker then makes Dask recompute only the cells it was running,
    not the finished ones whose results it still held.
    """
    from distributed import Client, as_completed as dask_completed

    with Client(address) as client:
        cells = {client.submit(_call, fn, params, pure=False, key=f"sweep-cell-{i}-{os.getpid()}"): i
                 for i, params in pending}
        for future in dask_completed(list(cells)):
            i = cells.pop(future)
            try:
                outcome = future.result()
            except Exception:  # not the cell's own error (_call catches it): e.g. KilledWorker after repeated losses
                outcome = "error", traceback.format_exc()
            future.release()
            yield i, outcome


def run_sweep(cells: Sequence[Mapping], fn: Callable[[dict], pd.DataFrame | dict],
              cache_dir: str | Path | None = None, *, code_modules: Iterable[str] | None = None,
              out: str | Path | None = None, n_jobs: int | None = None, scheduler_address: str | None = None,
              progress: bool = True, same_as: Callable[[dict], dict] | None = None) -> pd.DataFrame:
    """Run ``fn`` on every cell not yet cached; return all rows, with parameters, in cell order.

    ``fn(params) -> DataFrame | dict`` (a dict is one row). ``code_modules``:
    modules whose source makes up the code version (default: ``fn``'s module
    and this one). ``out``: also write the table to this Parquet file
    (atomically). ``cache_dir``: where finished cells are kept (None: the default,
    :func:`dlcluster.paths.cache_dir`). ``n_jobs``: local worker processes (None = all cores,
    1 = in this process). ``scheduler_address``: run on that Dask distributed
    scheduler instead (e.g. ``"tcp://10.0.0.5:8786"``). ``same_as(cell)``: the
    cell whose result ``cell``'s equals by construction (default: itself); cells
    with the same one are one simulation, run once (``fn`` gets that cell), and
    each keeps its own parameters in the table. Parameters that are lists or
    mappings appear in the table as JSON text.
    """
    return run_sweeps([(cells, same_as, out)], fn, cache_dir, code_modules=code_modules, n_jobs=n_jobs,
                      scheduler_address=scheduler_address, progress=progress)[0]


def run_sweeps(parts: Sequence[tuple[Sequence[Mapping], Callable[[dict], dict] | None, str | Path | None]],
               fn: Callable[[dict], pd.DataFrame | dict], cache_dir: str | Path | None = None, *,
               code_modules: Iterable[str] | None = None, n_jobs: int | None = None,
               scheduler_address: str | None = None, progress: bool = True) -> list[pd.DataFrame]:
    """Several grids run as one sweep: each part ``(cells, same_as, out)`` as :func:`run_sweep` takes them; returns
    each part's table.

    Every part's simulations not yet cached go to one pool of workers, so that one grid's slowest cells run beside
    the next grid's: grids swept one after the other leave all but one core idle while each grid's last cell
    finishes (notebook 06's policy arms, the longest, come last in its main grid). A simulation two parts name is
    run once.
    """
    if n_jobs is not None and (int(n_jobs) != n_jobs or n_jobs < 1):
        raise ValueError(f"run_sweep: n_jobs must be a positive integer or None, got {n_jobs!r}")
    version = code_version(list(code_modules or [fn.__module__, __name__])) + environment_version()
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    prepared, todo = [], {}
    for cells, same_as, out in parts:
        cells = [dict(c) for c in cells]
        if not cells:
            raise ValueError("run_sweep: no cells to run")
        duplicated = sorted(c for c, n in Counter(map(_canonical, cells)).items() if n > 1)
        if duplicated:
            raise ValueError(f"run_sweep: cells given more than once: {duplicated[:3]}")
        simulated = [dict(same_as(dict(c))) for c in cells] if same_as is not None else cells
        keys = [cell_key(c, version) for c in simulated]
        paths = [cache_dir / f"{k}.parquet" for k in keys]
        for i, key in enumerate(keys):   # one cell per simulation, the first that names it
            todo.setdefault(key, (len(prepared), i, simulated[i], paths[i]))
        prepared.append((cells, keys, paths, out))
    order = list(todo.values())
    pending = [(n, params) for n, (_, _, params, path) in enumerate(order) if not path.exists()]
    total = len(order)
    workers = n_jobs or len(os.sched_getaffinity(0))
    bar = _progress(total, total - len(pending), progress)
    done, started = total - len(pending), time.monotonic()
    emit_progress({"event": "sweep", "done": done, "total": total, "cached": done, "elapsed_s": 0.0})
    failures = []
    runs = _run_dask(fn, pending, scheduler_address) if scheduler_address else _run_local(fn, pending, workers)
    try:
        for n, (status, payload) in runs:
            if status == "ok":
                _write_parquet(payload, order[n][3])
            else:
                failures.append((n, payload))
            if bar is not None:
                bar.update(1)
            done += 1
            emit_progress({"event": "sweep", "done": done, "total": total, "cached": total - len(pending),
                           "elapsed_s": round(time.monotonic() - started, 3)})
    finally:
        runs.close()  # stops the workers now if the loop ended early (an interrupt, a failed write)
        if bar is not None:
            bar.close()
    if failures:
        failures.sort()
        named = [(prepared[order[n][0]][0][order[n][1]], text) for n, text in failures]
        raise SweepError(named, sum(len(p[0]) for p in prepared))
    tables = []
    for cells, keys, paths, out in prepared:
        table = _assemble(cells, keys, paths)
        if out is not None:
            _write_parquet(table, Path(out))
        tables.append(table)
    return tables


def _param_value(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, (list, dict, tuple)) else value


def _assemble(cells: list[dict], keys: list[str], paths: list[Path]) -> pd.DataFrame:
    parts = []
    for i, (params, key, path) in enumerate(zip(cells, keys, paths, strict=True)):
        rows = pd.read_parquet(path)
        clash = sorted(set(rows.columns) & (set(params) | set(CELL_COLUMNS)))
        if clash:
            raise ValueError(f"sweep cell {params}: returned column(s) {clash} that clash with its parameters")
        head = pd.DataFrame({"cell": i, "cell_key": key, **{k: _param_value(v) for k, v in params.items()}},
                            index=range(len(rows)))
        parts.append(pd.concat([head, rows], axis=1))
    return pd.concat(parts, ignore_index=True)


def describe_cells(cells: Sequence[Mapping]) -> str:
    """'N cells over a x b x ...' for a log line: how many values each varying parameter takes."""
    frame = pd.DataFrame([{k: _param_value(v) for k, v in c.items()} for c in cells])
    counts = {c: frame[c].nunique(dropna=False) for c in frame.columns}
    varying = ", ".join(f"{k} ({n})" for k, n in counts.items() if n > 1)
    return f"{len(cells)} cells" + (f" over {varying}" if varying else "")
