"""Execute the study's notebooks with papermill: ``dlcluster reports``.

Each ``notebooks/NN-topic.ipynb`` is run with the parameters of a YAML file
(top-level keys for every notebook, plus a ``notebooks: {stem: {...}}``
section for one notebook; only parameters a notebook declares are passed).
Outputs go to ``<out>/<stem>.ipynb`` and ``<out>/<stem>.html``, and the
notebook itself writes ``<out>/<stem>/results.json`` and figures. A notebook
is executed into a temporary file that is renamed only on success; a failure
leaves ``<stem>.FAILED.ipynb`` and exits non-zero, naming notebook and cell.

* **Progress**: one line per event on stdout (no bars, so logs read the same):
  each code cell as it starts, each notebook's elapsed time, and the sweeps
  run inside a kernel (through :mod:`dlcluster.report.progress`).
* **Ctrl-C** stops the kernel (and what it started), removes the unfinished
  notebook's outputs and leaves the index as it was: :class:`ReportsInterrupted`.
* **Quiet**: the kernel talks over local IPC sockets (so ipykernel has no
  unencrypted TCP to warn about); ``verbose`` also streams cell output.
* **Cache**: ``<out>/<stem>/run.json`` keeps the :func:`notebook_fingerprint` of a
  finished run; an unchanged notebook is reused, not executed (``force`` reruns).
* **Findings**: once every notebook has run (or been reused), each notebook's cell tagged ``findings`` is filled
  from the scorecard of all of them and its HTML rendered again (:func:`write_findings`), then the index is written.
* **Two at a time**: the notebooks are independent (those that share the
  calibration wait for one search, :func:`dlcluster.validation.calibration.calibrated_params`),
  so up to ``jobs`` run side by side, each in its own kernel: one notebook's
  single-core cells use the core the other leaves idle. A notebook that waits
  for the calibration another one computes says so (a ``waiting`` progress
  event) and does not count meanwhile: the next notebook starts, and starts
  computing as soon as the calibration is there. After a failure no
  new notebook starts; those running finish.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Callable

import yaml

from .findings import findings, with_findings
from .index import write_index
from .progress import PROGRESS_ENV, ProgressTail, format_duration
from .reproduction import scorecard
from ..atomic import atomic_write_text
from ..codeversion import code_version, environment_version
from ..paths import data_dir, repo_root

# nbformat validates notebooks with jsonschema, which imports rfc3987_syntax where it is installed (jupyterlab's
# jupyter-events brings it) only to check the "iri" string formats, which no notebook schema uses. Its import compiles
# 39 grammars: ~2.5 s of every `dlcluster reports` and of every process that runs a notebook. Marked absent before
# papermill loads, jsonschema goes without those two format checks (it has no other use of the module).
if "jsonschema" not in sys.modules:
    sys.modules.setdefault("rfc3987_syntax", None)

#: Papermill's tag on the cell it adds with the given parameters (not a cell of the source notebook).
INJECTED_TAG = "injected-parameters"
#: Folders of data/ left out of the fingerprint: the full trace, large and described by its own manifest.
UNHASHED_DATA = ("raw", "philly")


class NotebookFailed(RuntimeError):
    pass


def read_params(path: str | Path) -> dict:
    path = Path(path)
    try:
        params = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping of parameter names to values")
    return params


def notebook_params(params: dict, stem: str, declared: set[str], output_dir: Path) -> dict:
    """Global keys + the notebook's own section, restricted to what it declares."""
    merged = {k: v for k, v in params.items() if k != "notebooks"}
    merged.update((params.get("notebooks") or {}).get(stem, {}) or {})
    merged["output_dir"] = str(output_dir)
    return {k: v for k, v in merged.items() if k in declared}


def list_notebooks(notebooks_dir: Path, only: list[str] | None = None) -> list[Path]:
    found = sorted(notebooks_dir.glob("[0-9][0-9]-*.ipynb"))
    if only:
        found = [nb for nb in found if any(nb.stem.startswith(o) for o in only)]
        if not found:
            raise FileNotFoundError(f"no notebook in {notebooks_dir} matches {only}")
    return found


def _failed_cell(exc: Exception, executed: Path) -> str:
    """'cell N' counted in the source notebook (cells papermill adds are not counted)."""
    ename = getattr(exc, "ename", type(exc).__name__)
    evalue = getattr(exc, "evalue", str(exc))
    count = getattr(exc, "exec_count", None)
    if count is None or not executed.exists():
        return f"a cell: {ename}: {evalue}"
    import nbformat
    added = {"injected-parameters", "papermill-error-cell-tag"}
    source_cells = [c for c in nbformat.read(executed, as_version=4).cells
                    if not added & set(c.metadata.get("tags", []))]
    for number, cell in enumerate(source_cells, start=1):
        if cell.get("execution_count") == count:
            first_line = (cell.source.strip().splitlines() or [""])[0][:60]
            return f"cell {number} ({first_line!r}): {ename}: {evalue}"
    return f"the cell run as [{count}]: {ename}: {evalue}"


def _source_cells(cells) -> list:
    """The cells of the source notebook: those papermill did not add."""
    return [c for c in cells if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]


@lru_cache(maxsize=1)
def _engine_name() -> str:
    """Register (once) a papermill engine that reports each code cell as it starts."""
    from papermill.engines import NBClientEngine, papermill_engines

    class ProgressEngine(NBClientEngine):
        @classmethod
        def execute_managed_notebook(cls, nb_man, kernel_name, on_cell=None, **kwargs):
            if on_cell is not None:
                cell_start = nb_man.cell_start
                source = _source_cells(nb_man.nb.cells)
                numbers = {id(c): n for n, c in enumerate(source, start=1)}

                def report_cell(cell, cell_index=None, **kw):
                    cell_start(cell, cell_index, **kw)
                    if cell.cell_type == "code" and id(cell) in numbers:
                        on_cell(numbers[id(cell)], len(source))
                nb_man.cell_start = report_cell
            return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)

    papermill_engines.register("dlcluster", ProgressEngine)
    return "dlcluster"


def _kernel_manager_class(socket_dir: Path, started: list, env: dict[str, str] | None = None):
    """A kernel manager on IPC sockets in ``socket_dir`` (no TCP, so no transport warning).

    Each kernel it starts is appended to ``started`` as ``(manager, process)``,
    so that an interrupt can kill it even when nbclient's own cleanup is cut short.
    ``env``: variables added to the kernel's environment (this process's own is
    shared by notebooks running side by side).
    """
    from jupyter_client.manager import AsyncKernelManager

    class LocalKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            if sys.platform != "win32":  # Windows has no IPC transport: it keeps TCP
                kwargs.setdefault("transport", "ipc")
                kwargs.setdefault("ip", str(socket_dir / "kernel"))
            super().__init__(**kwargs)

        async def _async_pre_start_kernel(self, **kwargs):
            kwargs["env"] = {**kwargs.get("env", os.environ), **(env or {})}
            return await super()._async_pre_start_kernel(**kwargs)

        async def _async_post_start_kernel(self, **kwargs):
            started.append((self, self.provisioner.process))
            await super()._async_post_start_kernel(**kwargs)

    return LocalKernelManager


def _kill_kernels(started: list) -> None:
    """Kill each kernel with its whole process group (a sweep's worker processes too)."""
    for km, process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the kernel leads its own session: its group id is its pid
        except (ProcessLookupError, PermissionError, AttributeError):  # already gone, or no process groups
            if process.poll() is None:
                process.kill()
        process.wait()
        km.cleanup_connection_file()


@contextmanager
def _interrupts_ignored():
    """Ctrl-C pressed again while cleaning up after the first must not leave the cleanup half done."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _hash_files(digest, files, root: Path) -> None:
    for file in files:
        digest.update(str(file.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())


def notebook_fingerprint(nb: Path, given: dict) -> str:
    """sha256 over what a notebook's outputs depend on, conservatively.

    The notebook file, its effective parameters (``output_dir`` aside), every
    file of the library (``failure_rules.yaml`` as well as the ``.py`` files:
    :func:`~dlcluster.codeversion.code_version`), the installed environment (package versions, numpy's SIMD
    paths, the BLAS kernel: :func:`~dlcluster.codeversion.environment_version`), and the data: every file
    under ``data/`` but the full trace (``data/raw``, ``data/philly``: only the latter's ``manifest.json``);
    for a ``trace`` that is a directory, each file's name, size and mtime.
    """
    digest = hashlib.sha256()
    digest.update(nb.read_bytes())
    effective = {k: v for k, v in given.items() if k != "output_dir"}
    digest.update(json.dumps(effective, sort_keys=True, default=str).encode())
    digest.update(code_version(["dlcluster"]).encode())
    digest.update(environment_version().encode())
    data = data_dir()
    files = sorted(f for f in data.rglob("*") if f.is_file()
                   and f.relative_to(data).parts[0] not in UNHASHED_DATA and "__pycache__" not in f.parts)
    _hash_files(digest, files, data)
    manifest = data / "philly" / "manifest.json"
    if manifest.exists():
        _hash_files(digest, [manifest], data)
    trace = Path(str(given.get("trace", "public")))
    if trace.is_dir():
        for f in sorted(p for p in trace.rglob("*") if p.is_file()):
            stat = f.stat()
            digest.update(f"{f.relative_to(trace)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _outputs(out_dir: Path, stem: str) -> dict[str, Path]:
    """The files that make a notebook's report look complete, ``run.json`` (the cache record) first."""
    return {"run": out_dir / stem / "run.json", "notebook": out_dir / f"{stem}.ipynb",
            "html": out_dir / f"{stem}.html", "results": out_dir / stem / "results.json"}


def reusable_run(out_dir: Path, stem: str, current: str, html: bool) -> dict | None:
    """The stored run record if the notebook's outputs are complete and their fingerprint is ``current``."""
    outputs = _outputs(out_dir, stem)
    needed = [p for name, p in outputs.items() if html or name != "html"]
    if not all(p.exists() for p in needed):
        return None
    try:
        record = json.loads(outputs["run"].read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) and record.get("fingerprint") == current else None


def execute_notebook(nb: Path, out_dir: Path, params: dict, kernel: str = "python3", html: bool = True,
                     on_cell: Callable[[int, int], None] | None = None, verbose: bool = False,
                     progress_file: Path | None = None, fingerprint: str | None = None,
                     kernels: list | None = None, stop: threading.Event | None = None) -> Path:
    """Run one notebook into ``out_dir``; its ``fingerprint``, if given, is written last (``<stem>/run.json``).

    On Ctrl-C the kernel is killed and none of the notebook's complete-looking
    outputs (``.ipynb``, ``.html``, ``results.json``, ``run.json``) is left.
    ``kernels``: the list its kernel is added to (for another thread to kill);
    ``stop``: set by the thread that killed it, so that the notebook's failure
    is taken for the interrupt it is (raised here as ``KeyboardInterrupt``).
    """
    import papermill as pm

    declared = set(pm.inspect_notebook(str(nb)).keys())
    stem = nb.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs = _outputs(out_dir, stem)
    failed = out_dir / f"{stem}.FAILED.ipynb"
    tmp = out_dir / f".{stem}.running.ipynb"
    for stale in (*outputs.values(), failed):
        stale.unlink(missing_ok=True)
    given = notebook_params(params, stem, declared, out_dir / stem)
    socket_dir = Path(tempfile.mkdtemp(prefix="dlcluster-kernel-"))
    managers: list = kernels if kernels is not None else []
    env = {PROGRESS_ENV: str(progress_file)} if progress_file is not None else {}
    try:
        try:
            pm.execute_notebook(str(nb), str(tmp), parameters=given, kernel_name=kernel, cwd=str(repo_root()),
                                progress_bar=False, log_output=verbose, engine_name=_engine_name(),
                                on_cell=on_cell, kernel_manager_class=_kernel_manager_class(socket_dir, managers, env),
                                shutdown_kernel="immediate")  # kill at the end: no graceful interrupt to report
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # papermill raises PapermillExecutionError for cell failures
            if stop is not None and stop.is_set():   # its kernel was killed by the interrupt (whatever nbclient
                raise KeyboardInterrupt from exc      # raises then: a dead kernel, a cancelled task)
            if not isinstance(exc, Exception):
                raise
            if tmp.exists():
                os.replace(tmp, failed)
            raise NotebookFailed(f"{nb.name} failed in {_failed_cell(exc, failed)} (executed copy: {failed})") from exc
        os.replace(tmp, outputs["notebook"])
        if html:
            render_html(outputs["notebook"])
        if fingerprint is not None:
            record = {"fingerprint": fingerprint, "finished": _utc_now()}
            atomic_write_text(outputs["run"], json.dumps(record, indent=2, sort_keys=True))
    except KeyboardInterrupt:
        with _interrupts_ignored():
            _kill_kernels(managers)
            for partial in (tmp, *outputs.values()):
                partial.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    return outputs["notebook"]


#: The reports' HTML template (``templates/dlcluster``): JupyterLab's, with each code cell folded behind a toggle.
TEMPLATES = Path(__file__).with_name("templates")


def render_html(executed: Path, nb=None) -> Path:
    """The executed notebook (``nb``, its node, if given, else read from ``executed``) as a report beside it: text,
    tables and figures first, every code cell folded behind a toggle."""
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(extra_template_basedirs=[str(TEMPLATES)], template_name="dlcluster")
    body, _ = exporter.from_notebook_node(nb if nb is not None else nbformat.read(executed, as_version=4))
    return atomic_write_text(executed.with_suffix(".html"), body)


def write_findings(out_dir: Path, executed: list[Path], html: bool = True) -> list[Path]:
    """Fill each executed notebook's findings cell from the scorecard of ``out_dir`` (reused notebooks too, since
    another notebook's result may have changed them) and render its HTML again; the notebooks it rewrote.

    Each file is replaced atomically, the HTML before the notebook: interrupted between the two, the notebook
    still holds its old findings, so the next run writes both again.
    """
    import nbformat

    table = findings(scorecard(out_dir))
    rewritten = []
    for path in executed:
        nb = with_findings(path, table) if path.exists() else None
        if nb is None:
            continue
        if html:
            render_html(path, nb)
        atomic_write_text(path, nbformat.writes(nb))
        rewritten.append(path)
    return rewritten


class ReportsInterrupted(Exception):
    """Ctrl-C during ``dlcluster reports``; the message says what was interrupted and what was kept."""


def _utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


#: Notebooks run side by side by :func:`run_reports` (``make reports`` is budgeted on 2 cores).
DEFAULT_JOBS = 2


class _Run:
    """One notebook to execute, and where it got to (for the interrupt's message)."""

    def __init__(self, number: int, total: int, nb: Path, fingerprint: str):
        self.nb, self.fingerprint = nb, fingerprint
        self.prefix = f"[{number}/{total}] {nb.stem}"
        self.kernels: list = []
        self.where = "before its first cell"
        self.started = time.monotonic()
        # set when its thread is done: waited on rather than the thread, since a Thread.join() that Ctrl-C
        # interrupts can take the thread for finished while it still runs (CPython before 3.13)
        self.finished = threading.Event()
        self.error: BaseException | None = None
        self.waiting = False   # its kernel waits for a result another notebook computes (a progress event says so)

    def elapsed(self) -> str:
        return format_duration(time.monotonic() - self.started)


def _close_event_loop() -> None:
    """Close the event loop that papermill's client set on this (notebook) thread. Left open, the loop is freed only by
    the cyclic garbage collector, whenever a full collection comes, warning of it and its two sockets then."""
    policy = asyncio.get_event_loop_policy()
    try:
        loop = policy.get_event_loop()
    except RuntimeError:   # no loop was set on this thread
        return
    if not loop.is_running():
        loop.close()
    policy.set_event_loop(None)


def run_reports(params_path: str | Path, out_dir: str | Path | None = None, only: list[str] | None = None,
                html: bool = True, *, notebooks_dir: str | Path | None = None, force: bool = False,
                verbose: bool = False, echo: Callable[[str], None] | None = None,
                jobs: int = DEFAULT_JOBS) -> list[Path]:
    """Execute (or reuse, when unchanged) each notebook, up to ``jobs`` side by side, then write the index page.

    ``echo``: where progress lines go (default: stdout, flushed; one line at a time). Raises
    :class:`NotebookFailed` (after the notebooks running beside the failed one have finished) or
    :class:`ReportsInterrupted` (the index is then left as it was).
    """
    import papermill as pm

    if int(jobs) != jobs or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    say = echo or (lambda line: print(line, flush=True))
    lines = threading.Lock()

    def echo_line(line: str) -> None:
        with lines:
            say(line)

    params_path = Path(params_path)
    params = read_params(params_path)
    # absolute: notebooks run with the repository as working directory
    out_dir = Path(out_dir).resolve() if out_dir else repo_root() / "reports" / params_path.stem
    notebooks = list_notebooks(Path(notebooks_dir) if notebooks_dir else repo_root() / "notebooks", only)
    status: dict[str, str] = {}
    echo_line(f"dlcluster reports: {len(notebooks)} notebook(s) with {params_path} -> {out_dir}")
    queue = []
    for number, nb in enumerate(notebooks, start=1):
        given = notebook_params(params, nb.stem, set(pm.inspect_notebook(str(nb)).keys()), out_dir / nb.stem)
        current = notebook_fingerprint(nb, given)
        record = None if force else reusable_run(out_dir, nb.stem, current, html)
        if record is not None:
            status[nb.stem] = f"reused (unchanged since {record['finished']})"
            echo_line(f"[{number}/{len(notebooks)}] {nb.stem}: {status[nb.stem]}")
        else:
            queue.append(_Run(number, len(notebooks), nb, current))
    _engine_name()   # registered once, before any thread uses it
    stop = threading.Event()

    def execute(run: _Run) -> None:
        def on_cell(cell: int, total: int) -> None:
            if stop.is_set():   # Ctrl-C came before this notebook's kernel could be killed: stop here
                raise KeyboardInterrupt
            run.where = f"at cell {cell}/{total}"
            echo_line(f"{run.prefix}: cell {cell}/{total} ... ({run.elapsed()})")

        def on_wait(waits: bool, what: str) -> None:
            run.waiting = waits
            echo_line(f"{run.prefix}: waiting for {what}, which another notebook computes (its core goes to the next "
                      "notebook meanwhile)" if waits else f"{run.prefix}: {what} is ready ({run.elapsed()})")

        progress_file = out_dir / f".{run.nb.stem}.progress.jsonl"
        progress_file.unlink(missing_ok=True)
        try:
            with ProgressTail(progress_file, lambda line: echo_line(f"{run.prefix}: {line}"), on_wait=on_wait):
                execute_notebook(run.nb, out_dir, params, html=html, on_cell=on_cell, verbose=verbose,
                                 progress_file=progress_file, fingerprint=run.fingerprint, kernels=run.kernels,
                                 stop=stop)
        except BaseException as exc:   # KeyboardInterrupt too: the interrupt's cleanup is done, the caller reports
            run.error = exc
            return
        finally:
            progress_file.unlink(missing_ok=True)
            _close_event_loop()
            run.finished.set()
        status[run.nb.stem] = f"executed in {run.elapsed()}"
        echo_line(f"{run.prefix}: done in {run.elapsed()}")

    running: list[_Run] = []
    finished: list[_Run] = []
    try:
        while queue or running:
            # a notebook that waits for another's result (the calibration) does not count against ``jobs``
            while queue and sum(not r.waiting for r in running) < jobs and not any(r.error for r in finished):
                run = queue.pop(0)
                run.started = time.monotonic()
                echo_line(f"{run.prefix}: running")
                threading.Thread(target=execute, args=(run,), name=f"notebook {run.nb.stem}", daemon=True).start()
                running.append(run)
            if not running:
                break   # a notebook failed: none is started after it
            running[0].finished.wait(timeout=0.2)   # a short wait, so that Ctrl-C reaches this thread
            finished.extend(r for r in running if r.finished.is_set())
            running = [r for r in running if not r.finished.is_set()]
    except KeyboardInterrupt:
        stop.set()
        with _interrupts_ignored():
            for run in running:
                _kill_kernels(run.kernels)
            for run in running:
                run.finished.wait()
        where = ", ".join(f"{r.nb.name} {r.where} after {r.elapsed()}" for r in running) or "between notebooks"
        complete = len(status)   # reused or executed
        raise ReportsInterrupted(
            f"interrupted: {where}; {'its kernel was' if len(running) == 1 else 'their kernels were'} stopped and "
            f"none of {'its' if len(running) == 1 else 'their'} outputs kept; {complete} notebook(s) are complete; "
            f"{out_dir / 'index.html'} was not updated") from None
    failed = [r for r in finished if r.error is not None]
    if failed:
        raise failed[0].error
    done = [out_dir / f"{nb.stem}.ipynb" for nb in notebooks]
    try:
        write_findings(out_dir, done, html=html)
    except KeyboardInterrupt:
        raise ReportsInterrupted(
            f"interrupted while writing the findings into the notebooks: every notebook is complete, but some may "
            f"show the findings of an earlier run until the next; {out_dir / 'index.html'} was not updated") from None
    write_index(out_dir, params_path, done, status=status)
    echo_line(f"dlcluster reports: wrote {out_dir / 'index.html'}")
    return done
