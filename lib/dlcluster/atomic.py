"""Atomic file writes: a reader never sees a half-written file (write a temporary file, then rename); and a lock
for work that two processes must not do at once."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable


def umask_mode() -> int:
    """The mode a plain ``open()`` would give a new file (mkstemp's 0600 is too strict for shared outputs)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_target(path: str | Path):
    """A temporary file beside ``path`` for the ``with`` block to write: renamed to ``path`` (atomic on POSIX) when
    the block ends, removed if it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file and rename (atomic on POSIX)."""
    with atomic_target(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and rename (atomic on POSIX)."""
    with atomic_target(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


@contextlib.contextmanager
def exclusive_lock(path: str | Path, on_wait: Callable[[bool], None] | None = None):
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block; a second process waits.

    For a cached result two processes may ask for at once (two notebooks, two test workers): the second waits,
    then finds the first one's result instead of computing it beside it. An advisory POSIX lock (``fcntl``),
    released when the process ends; where ``fcntl`` is missing, no lock. ``on_wait``: called with True when the
    lock is held by another process (this one is about to wait), and with False once it has the lock after waiting.
    """
    try:
        import fcntl
    except ImportError:   # not POSIX: no lock
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait(True)
            fcntl.flock(handle, fcntl.LOCK_EX)
            if on_wait is not None:
                on_wait(False)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
