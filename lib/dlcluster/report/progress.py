"""Progress of ``dlcluster reports`` in the terminal, including from inside a notebook's kernel.

A kernel's own output (tqdm bars included) goes into the executed notebook,
never to the terminal. So the runner names a file in the environment variable
:data:`PROGRESS_ENV` before it starts a kernel; code running in the kernel
calls :func:`emit` (one JSON line per event, appended; a no-op when the
variable is unset, so results never depend on it), and a :class:`ProgressTail`
thread in the runner reads the file and prints one throttled line per event.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Callable

#: Environment variable naming the progress file of the running notebook (set by the runner).
PROGRESS_ENV = "DLCLUSTER_PROGRESS_FILE"


def emit(event: dict) -> None:
    """Append one event (a JSON object) to the progress file, if the runner asked for one."""
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return
    line = (json.dumps(event, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write of a short line on an O_APPEND file: never interleaved
    finally:
        os.close(fd)


def format_duration(seconds: float) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min': short and readable in a log line."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def sweep_line(event: dict) -> str:
    """'sweep 12/48 simulations, ~3 min left' from a sweep event (done, total, cached, elapsed_s; ``label``, if given,
    names the sweep instead of 'sweep')."""
    done, total, cached = event["done"], event["total"], event.get("cached", 0)
    text = f"{event.get('label', 'sweep')} {done}/{total} simulations"
    ran = done - cached
    if done >= total:
        return text + f", finished in {format_duration(event['elapsed_s'])}"
    if ran > 0:
        left = event["elapsed_s"] / ran * (total - done)
        return text + f", ~{format_duration(left)} left"
    return text + (f" ({cached} cached)" if cached else "")


class SweepThrottle:
    """Lets a sweep event through at most every ``interval_s``, or when it crosses a 10% step, or at the end; and the
    first event of a sweep with another label (a calibration's next phase)."""

    def __init__(self, interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        self.interval_s, self.clock = interval_s, clock
        self.last_time: float | None = None
        self.last_decile = -1
        self.last_label = None

    def __call__(self, event: dict) -> bool:
        now = self.clock()
        decile = 10 * event["done"] // max(event["total"], 1)
        label = event.get("label")
        due = (self.last_time is None or now - self.last_time >= self.interval_s or label != self.last_label
               or decile > self.last_decile or event["done"] >= event["total"])
        if due:
            self.last_time, self.last_decile, self.last_label = now, decile, label
        return due


class ProgressTail:
    """A thread that follows a progress file and hands each shown event's line to ``show``; ``on_wait`` gets each
    ``waiting`` event (``{"event": "waiting", "for": what, "waiting": bool}``: the kernel waits for a result another
    process computes, or has it now)."""

    def __init__(self, path: Path, show: Callable[[str], None], poll_s: float = 0.5,
                 on_wait: Callable[[bool, str], None] | None = None):
        self.path, self.show, self.poll_s, self.on_wait = Path(path), show, poll_s, on_wait
        self.throttle = SweepThrottle()
        self._stop = threading.Event()
        self._offset = 0
        self._partial = b""
        self._thread = threading.Thread(target=self._run, name="dlcluster-progress", daemon=True)

    def __enter__(self) -> "ProgressTail":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._read()  # the events written just before the end

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._read()

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        for raw in lines:
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                continue  # not ours to judge: progress is informative only
            if event.get("event") == "sweep" and self.throttle(event):
                self.show(sweep_line(event))
            elif event.get("event") == "waiting" and self.on_wait is not None:
                self.on_wait(bool(event.get("waiting")), str(event.get("for", "another process")))
