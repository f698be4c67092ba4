"""Where the project's data and reports live.

The library is installed editable from the repository, so data is found relative
to the repository root; ``DLCLUSTER_ROOT`` overrides that (e.g. for a copy of
``data/`` elsewhere). ``DLCLUSTER_CACHE_DIR`` names the folder of cached sweep
cells and calibrations (default ``reports/.sweep-cache``; the tests set it to a
folder of their own, so no result cached by ``make reports`` satisfies them).
"""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    env = os.environ.get("DLCLUSTER_ROOT")
    if env:
        return Path(env).resolve()
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    return repo_root() / "data"


def external_dir() -> Path:
    """Verbatim copies of the real public data (immutable; see data/README.md)."""
    return data_dir() / "external"


def public_dir() -> Path:
    """Tidy Parquet tables converted from ``external/`` by ``dlcluster build-public``."""
    return data_dir() / "public"


def raw_philly_dir() -> Path:
    """The full official trace, extracted by ``make data`` (ignored by git)."""
    return data_dir() / "raw" / "philly"


def ingested_philly_dir() -> Path:
    """Parquet tables ingested from the full trace by ``make data`` (ignored by git)."""
    return data_dir() / "philly"


#: The environment variable that overrides :func:`cache_dir`.
CACHE_DIR_ENV = "DLCLUSTER_CACHE_DIR"


def cache_dir() -> Path:
    """Where finished sweep cells and calibrations are cached:
    ``$DLCLUSTER_CACHE_DIR``, else ``reports/.sweep-cache``."""
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).resolve()
    return repo_root() / "reports" / ".sweep-cache"
