"""The code version of a cached result: a hash of the files of the modules that compute it.

Shared by the experiment sweep's cell cache (:mod:`dlcluster.experiments.sweep`), the cached
calibration (:func:`dlcluster.validation.calibration.calibrated_params`) and the report runner's
notebook fingerprint (:func:`dlcluster.report.runner.notebook_fingerprint`): editing the code that
made a cached result invalidates it. A package counts with every file under its folder, not only its
``.py`` files (``analysis/failure_rules.yaml`` is code too); bytecode (``__pycache__``, ``*.pyc``) is
left out, since Python rewrites it on its own.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Iterable

#: Files of a package folder that are not part of its code version.
BYTECODE_SUFFIXES = (".pyc", ".pyo")


def _module_files(name: str) -> list[Path]:
    """A module's file, or every file under a package's folder but bytecode."""
    path = Path(importlib.import_module(name).__file__).resolve()
    if path.name != "__init__.py":
        return [path]
    folder = path.parent
    return [f for f in folder.rglob("*") if f.is_file() and "__pycache__" not in f.relative_to(folder).parts
            and f.suffix not in BYTECODE_SUFFIXES]


def code_version(modules: Iterable[str]) -> str:
    """sha256 over the files of these modules (a package counts with every file under its folder).

    Each file counts with its path from the top-level package's parent folder, so moving or renaming
    a file changes the version, and the same files give the same version in any checkout.
    """
    digest = hashlib.sha256()
    modules = list(modules)
    files = sorted({f for name in modules for f in _module_files(name)})
    roots = {Path(importlib.import_module(name.split(".")[0]).__file__).resolve().parent.parent for name in modules}
    for file in files:
        root = next((r for r in roots if file.is_relative_to(r)), file.parent)
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()
