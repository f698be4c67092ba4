"""The entry page of the reports, ``reports/<config>/index.html``.

``make reports`` ends with :func:`write_index`: for every executed notebook,
its key results beside the paper's published values (with provenance tags),
its figures and a link to its HTML report; then the data sources, the exact
command, the parameters and the package versions.

Which of a notebook's results pair with which published value is the
notebook's call: it gives its rows for
:func:`dlcluster.report.reference.published_vs_ours` (``{"what", "ours", "key",
"data"}``) to ``Report.compare``, which keeps them in ``results.json`` under
``"comparisons"`` (checked by :func:`comparison_rows`). The index renders them
with ``published_vs_ours``, so the published column and its provenance always
come from ``data/reference/atc19.yaml``. A notebook without comparisons shows
its key results only, and says so.
"""

from __future__ import annotations

import html
import json
import platform
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import yaml

from ..paths import data_dir, repo_root
from ..atomic import atomic_write_text
from .notebook import read_results_json
from .findings import findings, findings_html
from .reference import COMPARISON_FIELDS, load_reference, published_vs_ours
from . import verdicts as vd
from .reproduction import OFFICIAL_REFERENCE, VERDICTS, counts, is_missing, official_card, scorecard, write_scorecard

#: Packages whose versions the index lists (those the notebooks and the simulator run on).
PACKAGES = ("numpy", "pandas", "pyarrow", "duckdb", "scipy", "statsmodels", "matplotlib", "seaborn", "tqdm",
            "PyYAML", "papermill", "nbclient", "nbconvert", "ipykernel", "dask", "distributed", "scikit-learn",
            "optuna", "Pillow")
STYLE = """
body{font-family:system-ui,sans-serif;max-width:72em;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
h1{font-size:1.6em} h2{margin-top:2em;border-bottom:2px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em} td,th{padding:3px 9px;border-bottom:1px solid #e3e3e3;
text-align:left;vertical-align:top} th{background:#f4f4f4} code{background:#f4f4f4;padding:0 3px}
.tag{display:inline-block;padding:0 6px;border-radius:8px;font-size:.8em;color:#fff}
.tag.quoted{background:#2e7d32}.tag.summary{background:#1565c0}.tag.trace{background:#6d4c41}
.tag.none{background:#9e9e9e} .warn{color:#b71c1c} .figs img{max-width:23em;margin:.3em;border:1px solid #ddd}
details{margin:.5em 0} summary{cursor:pointer;font-weight:600}
.verdict{display:inline-block;padding:0 6px;border-radius:8px;font-size:.85em;color:#fff;white-space:nowrap}
.scorecard td{font-size:.92em} small{color:#666}
.verdict.reproduced{background:#2e7d32}.verdict.differs{background:#c62828}.verdict.not-comparable{background:#757575}
"""


def _esc(value) -> str:
    return html.escape("" if value is None else str(value))


def _table(frame: pd.DataFrame, raw_columns: tuple[str, ...] = ()) -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{v if c in raw_columns else _esc(v)}</td>" for c, v in row.items())
                   + "</tr>" for _, row in frame.iterrows())
    return f"<table><tr>{head}</tr>{body}</table>"


def _format_value(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _tag(provenance: str) -> str:
    word = provenance.split(" ", 1)[0] if provenance else ""
    css = word if word in ("quoted", "summary", "trace") else "none"
    return f"<span class='tag {css}'>{_esc(provenance or 'not published here')}</span>"


def read_results(path: Path) -> tuple[dict | None, str]:
    """A notebook's results.json, or None and why it cannot be used."""
    if not path.exists():
        return None, f"no {path.name}: the notebook failed or wrote none"
    try:
        doc = read_results_json(path)
    except json.JSONDecodeError as exc:
        return None, f"{path} is not valid JSON ({exc})"
    if not isinstance(doc, dict) or not isinstance(doc.get("results", {}), dict):
        return None, f"{path}: expected an object with a 'results' mapping"
    return doc, ""


def comparisons_table(doc: dict) -> tuple[pd.DataFrame | None, list[str]]:
    """The notebook's published-vs-ours table and problems found in its comparisons (never raises on bad rows)."""
    raw = doc.get("comparisons")
    if not raw:
        return None, []
    problems, rows = [], []
    known = set(load_reference()["key"])
    for i, row in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(row, dict) or "what" not in row or "ours" not in row:
            problems.append(f"comparison {i} is malformed and was left out: {row!r}")
            continue
        if row.get("key") and row["key"] not in known:
            problems.append(f"comparison {row['what']!r} names key {row['key']!r}, which is not in "
                            "data/reference/atc19.yaml")
        rows.append({f: row.get(f) for f in COMPARISON_FIELDS})
    if not isinstance(raw, list):
        problems.append("'comparisons' is not a list and was ignored")
    return (published_vs_ours(rows) if rows else None), problems


#: The results key of a title a notebook computes from its own results (the index shows it instead of the heading)
TITLE_KEY = "notebook.title"


def _notebook_title(executed: Path) -> str:
    """The first heading of the notebook's first markdown cell (else its file stem)."""
    try:
        doc = json.loads(executed.read_text())
    except (OSError, json.JSONDecodeError):
        return executed.stem
    for cell in doc.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = "".join(cell.get("source", []))
            for line in source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
            break
    return executed.stem


def notebook_section(out_dir: Path, executed: Path, status: str = "") -> tuple[str, set[str]]:
    """HTML for one notebook and the reference keys its comparisons use.

    ``status``: how this run got the notebook, e.g. "executed in 42 s" or "reused (unchanged since ...)".
    """
    stem = executed.stem
    report_html = out_dir / f"{stem}.html"
    link = report_html.name if report_html.exists() else executed.name
    run = f" · {_esc(status)}" if status else ""
    doc, why = read_results(out_dir / stem / "results.json")
    # a title the notebook computed from its results (TITLE_KEY, e.g. how many targets it meets), else its heading
    title = (doc or {}).get("results", {}).get(TITLE_KEY)
    title = title if isinstance(title, str) and title else _notebook_title(executed)
    parts = [f"<h2 id='{_esc(stem)}'><a href='{_esc(link)}'>{_esc(title)}</a></h2>",
             f"<p><code>{_esc(stem)}</code> · <a href='{_esc(link)}'>full report</a>{run}</p>"]
    if doc is None:
        parts.append(f"<p class='warn'>{_esc(why)}</p>")
        return "".join(parts), set()
    table, problems = comparisons_table(doc)
    used = {r["key"] for r in doc.get("comparisons") or [] if isinstance(r, dict) and r.get("key")}
    for problem in problems:
        parts.append(f"<p class='warn'>{_esc(problem)}</p>")
    if table is None:
        parts.append("<p>This notebook declares no comparisons with published values; its key results:</p>")
    else:
        shown = table.assign(**{"this reproduction": table["this reproduction"].map(_format_value),
                                "provenance": table["provenance"].map(_tag)})
        parts.append("<h3>Published vs this reproduction</h3>" + _table(shown, raw_columns=("provenance",)))
    results = doc.get("results", {})
    descriptions = doc.get("descriptions", {})
    if results:
        frame = pd.DataFrame({"key": list(results), "value": [_format_value(v) for v in results.values()],
                              "what": [descriptions.get(k, "") for k in results]})
        parts.append(f"<details><summary>All {len(frame)} key results</summary>{_table(frame)}</details>")
    figures = [f for f in doc.get("figures", []) if isinstance(f, dict) and f.get("path")]
    if figures:
        images = "".join(f"<a href='{_esc(stem)}/{_esc(f['path'])}'><img src='{_esc(stem)}/{_esc(f['path'])}' "
                         f"alt='{_esc(f.get('name', ''))}' title='Data: {_esc(f.get('data', ''))}'></a>"
                         for f in figures)
        data = sorted({f.get("data", "") for f in figures if f.get("data")})
        parts.append(f"<details><summary>{len(figures)} figures</summary><div class='figs'>{images}</div>"
                     + "<p>Data: " + "; ".join(_esc(d) for d in data) + "</p></details>")
    return "".join(parts), used


def package_versions(names=PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def git_revision() -> str:
    """The commit of the repository (with '+ uncommitted changes' when dirty), or why it is unknown."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=repo_root(), capture_output=True, text=True,
                               check=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout, or git is missing)"
    return commit + (" + uncommitted changes" if dirty else "")


def data_section(params: dict) -> str:
    """The data sources: data/README.md rendered, and the manifest (sha256 of inputs) of the configured trace."""
    import mistune

    readme = data_dir() / "README.md"
    parts = ["<h2 id='data'>Data sources</h2>"]
    if readme.exists():
        parts.append(f"<details open><summary>data/README.md</summary>{mistune.html(readme.read_text())}</details>")
    else:
        parts.append(f"<p class='warn'>{_esc(readme)} is missing.</p>")
    trace = str(params.get("trace", "public"))
    manifest = {"public": data_dir() / "public" / "manifest.json",
                "philly": data_dir() / "philly" / "manifest.json"}.get(trace)
    if manifest is not None and manifest.exists():
        inputs = json.loads(manifest.read_text()).get("inputs", {})
        frame = pd.DataFrame([{"input": k, "file": v.get("path", ""), "sha256": v.get("sha256", "")}
                              for k, v in inputs.items()])
        parts.append(f"<p>Inputs of the <code>{_esc(trace)}</code> trace tables "
                     f"(<code>{_esc(manifest.relative_to(repo_root()))}</code>):</p>" + _table(frame))
    elif manifest is not None:
        parts.append(f"<p class='warn'>No manifest for trace {_esc(trace)!s} at {_esc(manifest)}.</p>")
    else:
        parts.append(f"<p>Trace: <code>{_esc(trace)}</code> (a raw-format directory).</p>")
    return "".join(parts)


def _verdict(value: str) -> str:
    return f"<span class='verdict {value.replace(' ', '-')}'>{_esc(value)}</span>"


def _ours_cell(row) -> str:
    """Our value (long texts shortened, whole in the tooltip), and under it which figure and data it is."""
    if is_missing(row.ours):
        text = ""
    elif isinstance(row.ours, int) and not isinstance(row.ours, bool):
        text = f"{row.ours:,}"
    else:
        text = _format_value(row.ours)
    short = text if len(text) <= 90 else text[:87] + "..."
    where = " · ".join(_esc(p) for p in (row.figure, row.data) if not is_missing(p) and p != "")
    return f"<span title='{_esc(text)}'>{_esc(short)}</span>" + (f"<br><small>{where}</small>" if where else "")


def _n_cell(n) -> str:
    return "" if is_missing(n) else f"{float(n):,.0f}"


def _why_cell(row) -> str:
    """The verdict's reason (a sentence), and under it the like-for-like statement."""
    statement = getattr(row, "like_for_like", "") or ""
    return _esc(row.detail) + (f"<br><small>{_esc(statement)}</small>" if statement else "")


def _folded(card: pd.DataFrame, render) -> str:
    """The rows that compare nothing (``not comparable``), folded under their reasons' groups
    (:func:`.verdicts.reason_group`), the largest group first; ``render`` makes each group's table."""
    rest = card[card["verdict"] == vd.NOT_COMPARABLE]
    if rest.empty:
        return ""
    groups = rest["reason_group"]
    order = groups.value_counts(sort=False).sort_index(kind="stable").sort_values(ascending=False, kind="stable")
    return "".join(f"<details><summary>Not comparable: {_esc(group)} ({count})</summary>"
                   f"{render(rest[groups == group])}</details>" for group, count in order.items())


def scorecard_section(out_dir: Path) -> str:
    """The reproduction scorecard (:mod:`.reproduction`) as the index page's first section; writes scorecard.json.
    The rows that compare come first, each with its n and like-for-like statement; the others are folded under
    their reasons."""
    card, path = write_scorecard(out_dir)
    tally = counts(card)

    def render(rows: pd.DataFrame, with_verdict: bool = True) -> str:
        shown = pd.DataFrame({
            "verdict": rows["verdict"].map(_verdict),
            "published (paper section)": [f"{_esc(r.what)}: <b>{_esc(r.published)}</b> (§{_esc(r.section)})"
                                          for r in rows.itertuples()],
            "provenance": rows["provenance"].map(_tag),
            "ours": [_ours_cell(r) for r in rows.itertuples()],
            "what the public data show": rows["label"].map(_esc) if "label" in rows else "",
            "jobs (n)": rows["n"].map(_n_cell) if "n" in rows else "",
            "why, or by how much": [_why_cell(r) for r in rows.itertuples()]})
        if not with_verdict:
            shown = shown.drop(columns=["verdict", "jobs (n)"])
        return _table(shown, raw_columns=tuple(shown.columns))

    compared = card[card["verdict"] != vd.NOT_COMPARABLE]
    summary = " · ".join(f"{_verdict(v)} {tally[v]}" for v in VERDICTS)
    return (f"<h2 id='scorecard'>Reproduction scorecard</h2><p>Every published value of the paper "
            f"(<code>data/reference/atc19.yaml</code>) beside ours, with a verdict: {summary} "
            f"(of {len(card)}; also in <code>{_esc(path.name)}</code>). <i>Reproduced</i> and <i>differs</i> mean that "
            f"ours measures the same quantity, by the same definition and selection (both sides stated), on at least "
            f"{vd.MIN_JOBS} real jobs; a finding's direction counts only where its interval excludes zero. Anything "
            f"else is <i>not comparable</i>, with why, and says what the public data show instead (the label the "
            f"findings above list: a direction on a named public selection, the quantity on another selection, or "
            f"cannot be tested). The rules are in "
            f"<code>lib/dlcluster/report/reproduction.yaml</code>, applied by one function "
            f"(<code>dlcluster.report.verdicts.judge</code>) to every verdict of the reports.</p>"
            + (render(compared) if len(compared) else "<p>No published value compares on these reports.</p>")
            + _folded(card, lambda rows: render(rows, with_verdict=False)) + official_section(out_dir))


def official_section(out_dir: Path) -> str:
    """The second reference: every curve of ours held against the full trace's own figure, with its verdict, n and
    like-for-like statement; the comparisons that are not comparable folded under their reasons."""
    card = official_card(out_dir)
    if card.empty:
        return (f"<h3 id='official'>Second reference: {_esc(OFFICIAL_REFERENCE)}</h3><p>No notebook of these reports "
                "compares a curve with the full trace's own figures.</p>")
    tally = counts(card)

    def render(rows: pd.DataFrame, with_verdict: bool = True) -> str:
        shown = pd.DataFrame({"verdict": rows["verdict"].map(_verdict), "comparison": rows["what"].map(_esc),
                              "jobs (n)": rows["n"].map(_n_cell),
                              "why, or by how much": [_why_cell(r) for r in rows.itertuples()],
                              "notebook": rows["notebook"].map(lambda n: f"<a href='#{_esc(n)}'>{_esc(n)}</a>")})
        if not with_verdict:
            shown = shown.drop(columns=["verdict"])
        return _table(shown, raw_columns=tuple(shown.columns))

    compared = card[card["verdict"] != vd.NOT_COMPARABLE]
    summary = " · ".join(f"{_verdict(v)} {tally[v]}" for v in VERDICTS)
    return (f"<h3 id='official'>Second reference: {_esc(OFFICIAL_REFERENCE)}</h3><p>The trace's authors drew "
            "Figures 2-7 from the full trace in their own notebook; digitized (<code>data/public/official</code>, "
            "error measured in notebook 00), each is held against the same curve of ours, by the same standard. "
            "<i>Reproduced</i>: the largest vertical gap (KS, CDF points) within the digitization margin plus the 5% "
            "sampling margin of our sample, on the same definition and selection and at least "
            f"{vd.MIN_JOBS} jobs. {summary} (of {len(card)}).</p>"
            + (render(compared) if len(compared) else "<p>No comparison is like for like on these reports.</p>")
            + _folded(card, lambda rows: render(rows, with_verdict=False)))


def write_index(out_dir: str | Path, params_path: str | Path, executed_notebooks: list[Path],
                command: list[str] | None = None, status: dict[str, str] | None = None) -> Path:
    """Write ``<out_dir>/index.html`` for these executed notebooks (``<out_dir>/<stem>.ipynb``).

    ``command``: the command line that built the reports (default: this process's ``sys.argv``).
    ``status``: per notebook stem, how this run got it (executed, or reused from an unchanged earlier run).
    """
    from .. import __version__

    out_dir, params_path = Path(out_dir), Path(params_path)
    params = (yaml.safe_load(params_path.read_text()) or {}) if params_path.exists() else {}
    sections, used = [], set()
    for executed in executed_notebooks:
        section, keys = notebook_section(out_dir, Path(executed), (status or {}).get(Path(executed).stem, ""))
        sections.append(section)
        used |= keys
    reference = load_reference()
    unused = reference[~reference["key"].isin(used)]
    contents = "".join(f"<li><a href='#{_esc(Path(nb).stem)}'>{_esc(Path(nb).stem)}</a></li>"
                       for nb in executed_notebooks)
    argv = command if command is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]
    installed = package_versions()
    versions = pd.DataFrame({"package": ["python", "dlcluster", *installed],
                             "version": [platform.python_version(), __version__, *installed.values()]})
    unused_table = unused[["key", "item", "value", "provenance"]].assign(
        provenance=unused["provenance"].map(_tag))
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>Philly study reproduction: {_esc(params_path.stem)}</title><style>{STYLE}</style></head><body>"
        f"<h1>Philly study reproduction: reports ({_esc(params_path.stem)})</h1>"
        "<p>Jeon et al., <i>Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads</i>, "
        "USENIX ATC 2019. Each notebook's results beside the published values; provenance tags: "
        f"{_tag('quoted')} a sentence of the paper quoted verbatim, {_tag('summary')} stated by published "
        f"summaries, {_tag('trace')} a fact about the released trace.</p>"
        "<ul><li><a href='#findings'>What the study finds</a></li>"
        f"<li><a href='#scorecard'>Reproduction scorecard</a> (and the <a href='#official'>full trace's own "
        f"figures</a>)</li>{contents}<li><a href='#data'>Data sources</a>"
        "</li><li><a href='#how'>How this was built</a></li></ul>"
        + findings_html(findings(scorecard(out_dir)))
        + scorecard_section(out_dir)
        + "".join(sections)
        + data_section(params)
        + "<h2 id='how'>How this was built</h2>"
        f"<p>Command: <code>{_esc(shlex.join(argv))}</code> (the same as <code>make reports "
        f"PARAMS={_esc(params_path)}</code>)</p>"
        f"<p>Code: commit <code>{_esc(git_revision())}</code> · {_esc(platform.platform())}</p>"
        f"<details open><summary>Parameters ({_esc(params_path)})</summary><pre>"
        f"{_esc(yaml.safe_dump(params, sort_keys=False))}</pre></details>"
        f"<details><summary>Package versions</summary>{_table(versions)}</details>"
        f"<details><summary>Published values no notebook compares yet ({len(unused)})</summary>"
        f"{_table(unused_table, raw_columns=('provenance',))}</details>"
        "</body></html>"
    )
    return atomic_write_text(out_dir / "index.html", page)
