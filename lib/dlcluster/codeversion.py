"""The code version of a cached result: a hash of the source files of the modules that compute it.

Shared by the experiment sweep's cell cache (:mod:`dlcluster.experiments.sweep`) and the cached
calibration (:func:`dlcluster.validation.calibration.calibrated_params`): editing the code that made a
cached result invalidates it.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Iterable


def _module_files(name: str) -> list[Path]:
    module = importlib.import_module(name)
    path = Path(module.__file__)
    if path.name == "__init__.py":
        return sorted(path.parent.rglob("*.py"))
    return [path]


def code_version(modules: Iterable[str]) -> str:
    """sha256 over the source of these modules (a package counts with all its ``.py`` files)."""
    digest = hashlib.sha256()
    files = sorted({f.resolve() for name in modules for f in _module_files(name)})
    for file in files:
        digest.update(file.name.encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
