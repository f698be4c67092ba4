"""The full trace's own figures: the official analysis notebook's Figures 2-7, read back into numbers.

The trace's authors ran ``analysis/Philly Trace Analysis.ipynb`` on the **full trace** and saved its figures
(``data/external/official_notebook/``, 22 PNGs, byte for byte; provenance in ``data/README.md``). They are the
only public view of the full trace's distributions. This package reads them:

* :mod:`.figures`: what the notebook's code drew in each PNG (axes, series, colours, line styles);
* :mod:`.pixels`, :mod:`.digitize`: the CDF figures (2, 3, 5, 6, 7) into points with a flag each (observed,
  interpolated across a dash gap, hidden under a later-drawn line), never inventing one;
* :mod:`.scatter`: Figure 4, what its overlapping markers still tell (server counts, delay ranges);
* :mod:`.render`, :mod:`.accuracy`: known CDFs drawn in the same style and read back (the measured error),
  and each real figure redrawn from its points beside the original pixels;
* :mod:`.curves`: medians, means and the KS distance from a digitized curve to a sample of ours.

``dlcluster build-public`` writes the tables into ``data/public/official/`` (:func:`build_official`, with each
PNG's sha256 in its ``manifest.json``); :func:`load_official` reads them. Tables:

* ``cdf_points``: one row per series and pixel column (:data:`.digitize.POINT_COLUMNS`, plus ``file``);
  Figure 3's rows are ``figure == 3``, ``panel`` = the VC, ``series`` = the size bucket ("1", "2-4", "5-8", ">8");
* ``cdf_summary``: per figure, panel and series (:func:`.curves.summarize`): median, 90th percentile, mean;
* ``fig4_levels``, ``fig4_ranges``: Figure 4 per job size and server count (:mod:`.scatter`);
* ``figures``: per PNG, its sha256, the fitted axes and the series its legend lists, in drawing order.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from ... import paths
from ...atomic import atomic_write_text
from .curves import crossing, ks_distance, mean_percent, sampling_margin, summarize, value_at, within_margin  # noqa: F401
from .digitize import FLAGS, POINT_COLUMNS, Digitized, digitize_cdf_figure  # noqa: F401
from .figures import FIG3_VCS, FIG5_STATUSES, FigureSpec, Series, figure_specs, spec_for  # noqa: F401
from .pixels import DigitizeError  # noqa: F401
from .scatter import ScatterLevels, digitize_scatter  # noqa: F401

TABLES = ("cdf_points", "cdf_summary", "fig4_levels", "fig4_ranges", "figures")
SUBDIR = "official"


def official_dir() -> Path:
    """Where the digitized tables live: ``data/public/official``."""
    return paths.public_dir() / SUBDIR


def png_dir() -> Path:
    """The verbatim PNGs: ``data/external/official_notebook``."""
    return paths.external_dir() / "official_notebook"


def digitize_all(directory: str | Path | None = None) -> dict:
    """Digitize every PNG of ``directory`` (default :func:`png_dir`) into the tables of the module doc."""
    directory = Path(directory) if directory is not None else png_dir()
    specs = figure_specs()
    missing = [name for name in specs if not (directory / name).exists()]
    if missing:
        raise FileNotFoundError(f"{directory}: missing {len(missing)} of the official notebook's PNGs, e.g. "
                                f"{missing[0]} (see data/README.md)")
    points, figures, levels, ranges = [], [], [], []
    for name, spec in specs.items():
        path = directory / name
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if spec.kind == "scatter":
            read = digitize_scatter(path, spec)
            levels.append(read.levels.drop(columns="covered_ranges"))
            ranges += [{"series": row.series, "servers": row.servers, "delay_from": a, "delay_to": b}
                       for row in read.levels.itertuples() for a, b in row.covered_ranges]
            series = [s.name for s in spec.series]
            extra = {"x_factor_error": read.factor_error}
        else:
            read = digitize_cdf_figure(path, spec)
            points.append(read.points.assign(file=name))
            series = [s.name for s in read.series]
        frame = read.frame
        figures.append({"file": name, "sha256": digest, "figure": spec.figure, "panel": spec.panel,
                        "quantity": spec.quantity, "x_unit": spec.x_unit, "x_scale": spec.x_scale,
                        "series_in_drawing_order": ",".join(series),
                        "x_px_per_unit": frame.x.scale, "y_px_per_unit": frame.y.scale,
                        "x_worst_tick_px": frame.x.worst_tick_residual_px,
                        "y_worst_tick_px": frame.y.worst_tick_residual_px,
                        "x_factor_error": extra["x_factor_error"] if spec.kind == "scatter" else float("nan")})
    cdf_points = pd.concat(points, ignore_index=True)
    return {"cdf_points": cdf_points, "cdf_summary": summarize(cdf_points),
            "fig4_levels": pd.concat(levels, ignore_index=True), "fig4_ranges": pd.DataFrame(ranges),
            "figures": pd.DataFrame(figures)}


def build_official(external: str | Path, out: str | Path) -> Path:
    """Digitize ``external``'s PNGs into Parquet tables in ``out`` (atomically, via a temporary folder),
    with a ``manifest.json`` that names each PNG's sha256 and each table's rows."""
    import pyarrow as pa

    tables = digitize_all(external)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    try:
        for name in TABLES:
            tables[name].to_parquet(tmp / f"{name}.parquet", index=False, compression="zstd")
        manifest = {
            "inputs": {row.file: {"path": f"official_notebook/{row.file}", "sha256": row.sha256}
                       for row in tables["figures"].itertuples()},
            "source": "msr-fiddle/philly-traces, analysis/Philly Trace Analysis.ipynb, commit "
                      "73877391f3127393d4dc130c9c8ca9a86ca89822 (outputs drawn from the full trace)",
            "tables": {name: len(tables[name]) for name in TABLES},
            "pandas": pd.__version__, "pyarrow": pa.__version__,
        }
        atomic_write_text(tmp / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True))
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def load_official(directory: str | Path | None = None) -> dict[str, pd.DataFrame]:
    """The digitized tables (module doc) from ``directory`` (default :func:`official_dir`)."""
    directory = Path(directory) if directory is not None else official_dir()
    if not (directory / "manifest.json").exists():
        raise FileNotFoundError(f"{directory}: no digitized official figures; run `dlcluster build-public`")
    return {name: pd.read_parquet(directory / f"{name}.parquet") for name in TABLES}


def fig3_curves(directory: str | Path | None = None) -> pd.DataFrame:
    """Figure 3's digitized points: the full trace's queueing delay CDF per VC (``panel``) and size bucket
    (``series``), minutes, every attempt's wait with waits of 0 dropped (the official definition)."""
    points = load_official(directory)["cdf_points"]
    return points[points["figure"] == 3].reset_index(drop=True)
