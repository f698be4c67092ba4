"""The version of a cached result: a hash of the files of the modules that compute it, and of the environment.

Shared by the experiment sweep's cell cache (:mod:`dlcluster.experiments.sweep`), the cached
calibration (:func:`dlcluster.validation.calibration.calibrated_params`) and the report runner's
notebook fingerprint (:func:`dlcluster.report.runner.notebook_fingerprint`): editing the code that
made a cached result invalidates it. A package counts with every file under its folder, not only its
``.py`` files (``analysis/failure_rules.yaml`` is code too); bytecode (``__pycache__``, ``*.pyc``) is
left out, since Python rewrites it on its own. :func:`environment_version` covers the rest: the installed
packages' versions, numpy's SIMD paths and the BLAS kernel, each of which can move a result.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

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


#: Installed distributions that cannot change a result: the tools that install the others.
INSTALLERS = frozenset({"pip", "setuptools", "wheel"})
#: The project's extras for working on it, not for computing a result: ``make test`` and ``make lab`` install them
#: after ``make reports`` may have run without them.
DEVELOPMENT_EXTRAS = ("test", "lab")


def _requirement_closure(roots: list, installed: dict) -> set[str]:
    """Canonical names of the installed distributions that requirements ``roots`` pull in, transitively
    (``installed``: canonical name -> metadata headers)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen, todo = set(), list(roots)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        headers = installed.get(name)
        if headers is None or (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        for text in headers.get_all("Requires-Dist") or ():
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
                todo.append(sub)
    return {name for name, _ in seen}


def development_only(headers) -> set[str]:
    """Canonical names of the installed distributions that only the project's :data:`DEVELOPMENT_EXTRAS` pull in
    (pytest, ruff, JupyterLab and what they need, not what the project itself needs): installing them changes no
    result. ``headers``: the installed distributions' metadata. Empty where the project is not installed (its
    requirements are unknown)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    installed = {canonicalize_name(h["Name"]): h for h in headers if h["Name"]}
    if "dlcluster" not in installed:
        return set()
    core = _requirement_closure([Requirement("dlcluster")], installed)
    everything = _requirement_closure([Requirement(f"dlcluster[{','.join(DEVELOPMENT_EXTRAS)}]")], installed)
    return everything - core


@lru_cache(maxsize=1)
def environment_version() -> str:
    """sha256 over what a result depends on besides the code and the data: the installed environment.

    Computed once per process (reading every distribution's metadata takes a fraction of a second); none of it
    changes while a process runs.

    * every installed distribution's name and version (:data:`INSTALLERS` and :func:`development_only` aside),
      so a pin bump in ``pyproject.toml``, once installed, invalidates every cached result;
    * numpy's SIMD: the targets compiled in (baseline, dispatch) and the CPU features in use
      (``NPY_DISABLE_CPU_FEATURES`` turns some off), since sorts and reductions take other paths on other ones;
    * the BLAS libraries loaded by numpy and scipy.linalg: implementation, version, kernel
      (``OPENBLAS_CORETYPE``), threading layer and thread count.
    """
    from importlib import metadata

    import numpy  # noqa: F401  (loads numpy's BLAS for threadpoolctl to see)
    import scipy.linalg  # noqa: F401  (and scipy's)
    from numpy._core import _multiarray_umath as simd
    from packaging.utils import canonicalize_name
    from threadpoolctl import threadpool_info

    headers = [d.metadata for d in metadata.distributions()]   # each parsed once (``d.version`` parses it again)
    left_out = INSTALLERS | development_only(headers)
    packages = sorted({(h["Name"].lower().replace("_", "-"), h["Version"]) for h in headers
                       if h["Name"] and canonicalize_name(h["Name"]) not in left_out})
    blas = sorted((i.get("internal_api"), i.get("version"), i.get("architecture"), i.get("threading_layer"),
                   i.get("num_threads")) for i in threadpool_info() if i.get("user_api") == "blas")
    described = {
        "packages": packages,
        "numpy_simd": {"baseline": list(simd.__cpu_baseline__), "dispatch": list(simd.__cpu_dispatch__),
                       "features": sorted(k for k, on in simd.__cpu_features__.items() if on),
                       "disabled": os.environ.get("NPY_DISABLE_CPU_FEATURES", "")},
        "blas": [list(map(str, b)) for b in blas],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def cached_result(name: str, settings, modules: Iterable[str], compute: Callable[[], object], *,
                  pickled: bool = False):
    """``compute()``, computed once per installation and then read back.

    Kept in the cache folder (:func:`dlcluster.paths.cache_dir`) as ``<name>-<key>.json`` (``name`` may hold a
    subfolder), the key a sha256 of ``settings`` (JSON-ready), the code of ``modules`` (:func:`code_version`) and the
    installed environment: for a result several notebooks and processes ask for. A second process asking meanwhile
    waits for the first one's answer. A JSON result's floats come back exactly (JSON writes their shortest exact
    form); ``pickled``: a ``.pickle`` instead, for an object that is not JSON-ready (a cache of this machine's own
    objects, never shared data).
    """
    import pickle

    from .atomic import atomic_write_bytes, exclusive_lock
    from .paths import cache_dir

    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    digest.update(code_version(modules).encode())
    digest.update(environment_version().encode())
    path = cache_dir() / f"{name}-{digest.hexdigest()[:20]}.{'pickle' if pickled else 'json'}"
    dump, load = (pickle.dumps, pickle.loads) if pickled else (lambda v: json.dumps(v).encode(), json.loads)
    if not path.exists():
        with exclusive_lock(path.with_suffix(".lock")):
            if not path.exists():
                atomic_write_bytes(path, dump(compute()))
    return load(path.read_bytes())
