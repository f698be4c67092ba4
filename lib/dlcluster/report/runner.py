"""Execute the study's notebooks with papermill: ``dlcluster reports``.

Each ``notebooks/NN-topic.ipynb`` is run with the parameters of a YAML file
(top-level keys for every notebook, plus a ``notebooks: {stem: {...}}``
section for one notebook; only parameters a notebook declares are passed).
Outputs go to ``<out>/<stem>.ipynb`` and ``<out>/<stem>.html``, and the
notebook itself writes ``<out>/<stem>/results.json`` and figures. A notebook
is executed into a temporary file that is renamed only on success; a failure
leaves ``<stem>.FAILED.ipynb`` and exits non-zero, naming notebook and cell.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import yaml

from .index import write_index
from ..paths import repo_root


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


def execute_notebook(nb: Path, out_dir: Path, params: dict, kernel: str = "python3",
                     html: bool = True, progress: bool = True) -> Path:
    import papermill as pm

    declared = set(pm.inspect_notebook(str(nb)).keys())
    stem = nb.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{stem}.ipynb"
    failed = out_dir / f"{stem}.FAILED.ipynb"
    tmp = out_dir / f".{stem}.running.ipynb"
    for stale in (target, failed, out_dir / f"{stem}.html", out_dir / stem / "results.json"):
        stale.unlink(missing_ok=True)
    given = notebook_params(params, stem, declared, out_dir / stem)
    try:
        pm.execute_notebook(str(nb), str(tmp), parameters=given, kernel_name=kernel,
                            cwd=str(repo_root()), progress_bar=progress, log_output=False)
    except Exception as exc:  # papermill raises PapermillExecutionError for cell failures
        if tmp.exists():
            os.replace(tmp, failed)
        raise NotebookFailed(f"{nb.name} failed in {_failed_cell(exc, failed)} (executed copy: {failed})") from exc
    os.replace(tmp, target)
    if html:
        render_html(target)
    return target


def render_html(executed: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(executed, as_version=4))
    out = executed.with_suffix(".html")
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(body)
    os.replace(tmp, out)
    return out


def run_reports(params_path: str | Path, out_dir: str | Path | None = None, only: list[str] | None = None,
                html: bool = True) -> list[Path]:
    params_path = Path(params_path)
    params = read_params(params_path)
    out_dir = Path(out_dir) if out_dir else repo_root() / "reports" / params_path.stem
    notebooks = list_notebooks(repo_root() / "notebooks", only)
    done = []
    for nb in notebooks:
        started = time.time()
        print(f"[dlcluster] running {nb.name} with {params_path} -> {out_dir}", flush=True)
        done.append(execute_notebook(nb, out_dir, params, html=html, progress=sys.stderr.isatty()))
        print(f"[dlcluster] {nb.name} done in {time.time() - started:.1f} s", flush=True)
    write_index(out_dir, params_path, done)
    return done
