"""A sweep cell function for the tests that run Dask workers as separate processes (they import it by name).

When ``SWEEP_CELL_LOG`` names a directory, each call writes a ``start`` and a ``done`` line with its
parameters to ``<dir>/<pid>.log`` and sleeps ``SWEEP_CELL_SLEEP_S`` seconds in between: a test sees
which worker process ran which cell, and can kill a worker while a cell runs on it. Only the test's
worker processes get these variables; the result depends on the parameters alone.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd


def recorded_cell(params: dict) -> pd.DataFrame:
    """Two rows from a generator seeded by the cell (like a small simulation), optionally logged and slowed."""
    log_dir = os.environ.get("SWEEP_CELL_LOG")
    if log_dir:
        _record(log_dir, "start", params)
        time.sleep(float(os.environ.get("SWEEP_CELL_SLEEP_S", "0")))
    rng = np.random.default_rng([params["seed"], params["a"]])
    rows = pd.DataFrame({"row": [0, 1], "value": rng.normal(size=2), "a_squared": params["a"] ** 2})
    if log_dir:
        _record(log_dir, "done", params)
    return rows


def _record(log_dir: str, event: str, params: dict) -> None:
    with open(Path(log_dir) / f"{os.getpid()}.log", "a", encoding="utf-8") as log:
        log.write(f"{event} {json.dumps(params, sort_keys=True)}\n")


def read_records(log_dir: Path) -> list[tuple[int, str, str]]:
    """Every logged event as ``(pid, "start" | "done", canonical JSON of the cell)``, per process in order."""
    records = []
    for path in sorted(Path(log_dir).glob("*.log")):
        for line in path.read_text(encoding="utf-8").split("\n")[:-1]:  # a line still being written is left out
            event, params = line.split(" ", 1)
            records.append((int(path.stem), event, params))
    return records
