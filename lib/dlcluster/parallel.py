"""Independent computations side by side on up to two cores: the calibration's trials, the ablation rows, the
failure classifier's cross-validation fits.

Each item is one Python process's work (seconds to tens of seconds of one
core). :func:`map_in_processes` runs a function over items in forked worker
processes, which inherit the inputs the function closes over (no pickling of
the workloads), and returns the results in the items' order: the same results
whatever the number of workers (to the last bits of a BLAS sum: each worker's
BLAS has one thread). Forked processes need a POSIX system; with one worker
(or where fork is missing) it runs in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Callable, Iterable

from .codeversion import environment_version

#: At most this many replays at once: ``make reports`` is budgeted on 2 cores, and each replay holds ~1 GB.
MAX_WORKERS = 2

_FUNCTION: Callable | None = None


def default_workers() -> int:
    """The cores this process may use, at most :data:`MAX_WORKERS` (``DLCLUSTER_WORKERS`` overrides)."""
    if os.environ.get("DLCLUSTER_WORKERS"):
        return max(1, int(os.environ["DLCLUSTER_WORKERS"]))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_WORKERS, cores))


def _call(item):
    return _FUNCTION(item)


def _one_thread_each() -> None:
    """A worker's BLAS and OpenMP pools keep one thread: two workers with a pool of one thread per core each would
    spin against each other (the classifier's fits ran 3 to 5 times slower side by side than one after another)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def map_in_processes(function: Callable, items: Iterable, workers: int | None = None) -> list:
    """``[function(item) for item in items]``, computed in up to ``workers`` forked processes."""
    global _FUNCTION
    items = list(items)
    workers = default_workers() if workers is None else max(1, int(workers))
    if workers == 1 or len(items) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [function(item) for item in items]
    _FUNCTION = function
    # the environment's fingerprint (BLAS threads included) taken here, before the workers shrink their thread
    # pools: a cache key a worker computes is the one this process computes
    environment_version()
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(items)), initializer=_one_thread_each) as pool:
            return pool.map(_call, items, chunksize=1)
    finally:
        _FUNCTION = None
