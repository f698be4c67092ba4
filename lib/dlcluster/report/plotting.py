"""Shared plotting helpers: one look for every figure of the study, and the rules every figure keeps.

The rules (each a helper here, and checked on every saved figure by :func:`figure_problems`, which
:meth:`dlcluster.report.Report.figure` runs and records in results.json):

* a curve says how many values it holds (``n=`` in its legend entry) and a curve of few values is drawn faded and
  dotted (:func:`plot_cdf`, :data:`FEW`);
* a log axis is named, says it is a log scale, and names its unit (:func:`duration_axis` for times: ticks in
  s/min/h/d, never raw seconds);
* a legend covers no more than a few data points (:func:`place_legend` picks the emptiest corner, or puts it
  outside) and has no entry without a curve;
* every panel with data has its axes named (its own label, a label shared by its row or column, or category
  tick labels);
* long category labels are wrapped, not rotated into a strip (:func:`wrap_labels`);
* a legend can be read in the saved PNG: its text is at least :data:`LEGEND_MIN_POINTS` at the reports' resolution
  (:data:`REPORT_DPI`; :func:`place_legend` raises a smaller size to it);
* a panel holds data of ours or says so in its title (:func:`no_data_title`): a panel with no curve at all, or only
  reference curves (the full trace's, drawn by :func:`mark_reference`), is hidden or titled so.
"""

from __future__ import annotations

import math
import re
import textwrap

import numpy as np
import pandas as pd

SIZE_COLORS = {"1": "#4C72B0", "2-4": "#55A868", "5-8": "#C44E52", ">8": "#8172B2"}
#: A curve of fewer values than this is drawn faded and dotted, and its legend entry says so.
FEW = 30
#: A legend may cover at most this many data points (or this share of a panel's points, if more).
LEGEND_MAX_COVERED = 3
LEGEND_MAX_COVERED_SHARE = 0.01
#: The resolution the reports save figures at (:meth:`dlcluster.report.Report.figure`), dots per inch.
REPORT_DPI = 110
#: The smallest legend text that reads in a saved PNG: 7 pt at :data:`REPORT_DPI` (about 11 pixels tall).
LEGEND_MIN_POINTS = 7.0
#: What the title of a panel without data of ours says (:func:`no_data_title`); the check looks for "no ..." in it.
NO_DATA = "no data of ours"
NO_DATA_WORDS = re.compile(r"\bno\b|\bnone\b|\bnot in (our|the) data\b", re.IGNORECASE)
#: The gid of an artist drawn from a reference (the full trace's own figure), not from data of ours.
REFERENCE_GID = "reference"
#: Durations a time axis may put a tick at (seconds, label).
DURATION_TICKS = [(1, "1 s"), (2, "2 s"), (5, "5 s"), (10, "10 s"), (20, "20 s"), (30, "30 s"), (60, "1 min"),
                  (120, "2 min"), (300, "5 min"), (600, "10 min"), (1200, "20 min"), (1800, "30 min"),
                  (3600, "1 h"), (7200, "2 h"), (10800, "3 h"), (21600, "6 h"), (43200, "12 h"), (86400, "1 d"),
                  (172800, "2 d"), (259200, "3 d"), (432000, "5 d"), (604800, "1 w"), (1209600, "2 w"),
                  (2592000, "30 d"), (6048000, "10 w"), (31536000, "1 y")]
#: The unit words a log axis's label or tick labels may name.
UNIT = re.compile(r"(\b(s|min|h|d|w|y|seconds?|minutes?|hours?|days?|weeks?|GPUs?|servers?|jobs?|images/s|"
                  r"points?|x|times|relative|ratio|share|fraction|factor)\b|%|×|÷|/)", re.IGNORECASE)


#: Tick labels that carry a time unit ('1s', '10m', '1 h', '2d').
TICK_UNIT = re.compile(r"\d\s*(s|m|min|h|d|w|y)\b")


def setup_style() -> None:
    """The study's look, on the non-interactive Agg backend everywhere (a headless run needs no display). Inside a
    notebook the figures still show: :meth:`dlcluster.report.Report.figure` displays each saved PNG in its cell.
    Tables show their texts whole."""
    import warnings

    import matplotlib

    # tqdm.auto (imported by optuna, which the calibration uses) warns in a kernel without ipywidgets that it cannot
    # draw widget bars: the notebooks draw no progress bar, and a reader should not meet the note
    warnings.filterwarnings("ignore", message="IProgress not found")
    matplotlib.use("Agg", force=False)
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    # a table shows its values whole: pandas cuts a text at 50 characters ("RFold's rea...") by default
    pd.set_option("display.max_colwidth", None)


def ecdf(values) -> tuple[np.ndarray, np.ndarray]:
    """Sorted finite values and their cumulative fractions (0..1]."""
    v = np.sort(pd.Series(values, dtype="float64").dropna().to_numpy(), kind="stable")
    return v, np.arange(1, len(v) + 1) / max(len(v), 1)


def plot_cdf(ax, values, label: str | None = None, min_n: int = FEW, **kwargs):
    """Step CDF of ``values``; the label gets the sample size appended, and a curve of fewer than ``min_n`` values
    is drawn faded and dotted ('n=5, few'). Nothing is drawn, and no legend entry made, without a value."""
    x, y = ecdf(values)
    if len(x) == 0:
        return None
    few = len(x) < min_n
    text = f"{label} (n={len(x):,}{', few' if few else ''})" if label else None
    if few:   # dotted whatever style the caller gave (by either of matplotlib's names for it)
        kwargs = {**{k: v for k, v in kwargs.items() if k not in ("ls", "linestyle")},
                  "alpha": min(kwargs.get("alpha", 1.0), 0.45), "linestyle": ":"}
    return ax.step(x, y, where="post", label=text, **kwargs)


def duration_ticks(low_s: float, high_s: float, most: int = 7) -> list[tuple[float, str]]:
    """Ticks for a log time axis from ``low_s`` to ``high_s``: round durations with their unit, at most ``most``
    (every other one dropped until they fit), and at least two where the range allows."""
    low_s, high_s = max(float(low_s), 1e-9), max(float(high_s), 1e-9)
    inside = [(t, text) for t, text in DURATION_TICKS if low_s <= t <= high_s]
    coarse = [(t, text) for t, text in inside if text.split()[0] == "1" or t in (600, 21600, 2592000)]
    ticks = coarse if len(coarse) >= 3 else inside
    while len(ticks) > most:
        ticks = ticks[::2]
    return ticks


def duration_axis(ax, axis: str = "x", label: str | None = None, low_s: float | None = None,
                  high_s: float | None = None) -> None:
    """A log time axis: ticks at round durations with their unit (never raw seconds, minor ticks unlabelled), and
    the label ``'<label> (log scale)'``. The range is the axis's current one unless given."""
    from matplotlib.ticker import NullFormatter

    setter = ax.set_xscale if axis == "x" else ax.set_yscale
    setter("log")
    lim = ax.get_xlim() if axis == "x" else ax.get_ylim()
    low_s, high_s = low_s or lim[0], high_s or lim[1]
    ticks = duration_ticks(low_s, high_s)
    part = ax.xaxis if axis == "x" else ax.yaxis
    if ticks:
        part.set_ticks([t for t, _ in ticks], [text for _, text in ticks])
    part.set_minor_formatter(NullFormatter())
    (ax.set_xlim if axis == "x" else ax.set_ylim)(low_s, high_s)
    if label is not None:
        (ax.set_xlabel if axis == "x" else ax.set_ylabel)(f"{label} (log scale)")


def seconds_axis(ax, axis: str = "x", label: str | None = None) -> None:
    """Log time axis with ticks at 1 s, 1 min, 10 min, 1 h, 1 d, 1 w; ``label`` names it ('... (log scale)')."""
    ticks = [1, 60, 600, 3600, 86400, 604800]
    labels = ["1s", "1m", "10m", "1h", "1d", "1w"]
    if axis == "x":
        ax.set_xscale("log")
        ax.set_xticks(ticks, labels)
    else:
        ax.set_yscale("log")
        ax.set_yticks(ticks, labels)
    if label is not None:
        (ax.set_xlabel if axis == "x" else ax.set_ylabel)(f"{label} (log scale)")


def legend_points(size=None) -> float:
    """A legend font size (points) no smaller than :data:`LEGEND_MIN_POINTS`; a named size ('small') counts as the
    minimum."""
    return max(float(size), LEGEND_MIN_POINTS) if isinstance(size, (int, float)) else LEGEND_MIN_POINTS


def mark_reference(*artists) -> None:
    """Mark artists drawn from a reference (the full trace's own figure): a panel that holds only these has no data
    of ours, and must say so in its title."""
    for artist in artists:
        for part in artist if isinstance(artist, (list, tuple)) else [artist]:
            part.set_gid(REFERENCE_GID)


def no_data_title(ax, title: str, has_ours: bool, **kwargs) -> None:
    """Title a panel, adding ': no data of ours' when ``has_ours`` is false (the rule for panels without our data)."""
    ax.set_title(title if has_ours else f"{title}: {NO_DATA}", **kwargs)


def wrap_labels(labels, width: int = 14) -> list[str]:
    """Category labels wrapped onto lines of at most ``width`` characters (instead of rotated)."""
    return [textwrap.fill(str(label), width) for label in labels]


# --------------------------------------------------------------------------- legends and what they cover


def _has_data(artist) -> bool:
    """Whether an artist that carries a legend label draws anything."""
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    if isinstance(artist, Line2D):
        xy = _line_xy(artist)
        return bool(len(xy)) and bool(np.isfinite(xy).all(axis=1).any())
    if isinstance(artist, Collection):
        return len(artist.get_offsets()) > 0 or len(artist.get_paths()) > 0
    if isinstance(artist, Rectangle):
        return artist.get_width() != 0 and artist.get_height() != 0 and np.isfinite(artist.get_height())
    return True


def _line_xy(line) -> np.ndarray:
    """A line's points as floats (dates and categories converted by the axes' units, as drawn)."""
    try:
        return np.asarray(line.get_xydata(), dtype=float).reshape(-1, 2)
    except (TypeError, ValueError):
        return np.empty((0, 2))


def _labelled(ax) -> list:
    return [a for a in (*ax.lines, *ax.collections, *ax.patches, *ax.containers)
            if not str(a.get_label()).startswith("_")]


def _data_points(ax) -> np.ndarray:
    """The axes' data points in display coordinates: line vertices, scatter offsets, bar tops."""
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Rectangle

    parts = []
    for line in ax.lines:
        xy = _line_xy(line)
        if len(xy):
            parts.append(line.get_transform().transform(xy))
    for coll in ax.collections:
        if isinstance(coll, PathCollection) and len(coll.get_offsets()):
            parts.append(coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), float)))
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_width() and patch.get_height() \
                and np.isfinite([patch.get_width(), patch.get_height()]).all():
            # a bar: its middle and the middle of its far end (in the unit square the patch transform maps)
            parts.append(patch.get_transform().transform([[0.5, 0.5], [0.5, 1.0], [1.0, 0.5]]))
    if not parts:
        return np.empty((0, 2))
    points = np.concatenate(parts)
    return points[np.isfinite(points).all(axis=1)]


def _inside(points: np.ndarray, box) -> np.ndarray:
    return ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1))


def _covered(ax, legend, renderer) -> tuple[int, int]:
    """(data points of ``ax`` under ``legend``'s box, data points of ``ax`` in its frame)."""
    points = _data_points(ax)
    frame = ax.get_window_extent(renderer)
    points = points[_inside(points, frame)]
    return int(_inside(points, legend.get_window_extent(renderer)).sum()), len(points)


def _allowed(total: int) -> int:
    return max(LEGEND_MAX_COVERED, int(math.ceil(LEGEND_MAX_COVERED_SHARE * total)))


def place_legend(ax, outside_loc: str = "upper left", **kwargs):
    """A legend of the entries that draw something, in the corner where it covers the fewest data points; outside
    the panel (to the right) when every corner covers more than a few. Its font is at least
    :data:`LEGEND_MIN_POINTS`."""
    kwargs["fontsize"] = legend_points(kwargs.get("fontsize"))
    handles, labels = [], []
    for artist in _labelled(ax):
        if _has_data(artist):
            handles.append(artist)
            labels.append(artist.get_label())
    if not handles:
        return None
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    best = None
    for tried, loc in enumerate(("lower right", "upper left", "upper right", "lower left", "center right",
                                 "center left")):
        legend = ax.legend(handles, labels, loc=loc, **kwargs)
        if not tried:   # the panel's layout, drawn once: a legend moved within the panel moves nothing else
            fig.canvas.draw()
        covered, total = _covered(ax, legend, renderer)
        if best is None or covered < best[0]:
            best = (covered, total, loc)
        if covered == 0:
            return legend
    covered, total, loc = best
    if covered <= _allowed(total):
        return ax.legend(handles, labels, loc=loc, **kwargs)
    box = ax.get_position()
    right_of = [o for o in fig.axes if o is not ax and o.get_visible() and o.get_position().x0 >= box.x1 - 1e-6
                and o.get_position().y0 < box.y1 and o.get_position().y1 > box.y0]
    if not right_of:   # nothing to its right: beside the panel
        return ax.legend(handles, labels, loc=outside_loc, bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **kwargs)
    # a panel to its right: under this one, below its axis label
    return ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.22), borderaxespad=0, **kwargs)


# --------------------------------------------------------------------------- the checks


def _named(text: str) -> bool:
    return bool(str(text or "").strip())


def _category_ticks(part) -> bool:
    """Tick labels that are words (categories), not numbers."""
    texts = [t.get_text() for t in part.get_ticklabels() if t.get_text()]
    return bool(texts) and any(re.search(r"[A-Za-z]", t) for t in texts)


def _panels_with_data(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and (ax.lines or ax.collections or ax.patches or ax.images)
            and ax.get_label() != "<colorbar>"]


def _data_artists(ax) -> list:
    """The artists of a panel that draw data: not a line or span across the axes (``axvline``, ``axhspan``: their
    transform is not the data's), nor an empty one."""
    out = []
    for artist in (*ax.lines, *ax.patches):
        if artist.get_transform().contains_branch(ax.transData) and (artist.get_gid() == REFERENCE_GID
                                                                      or _has_data(artist)):
            out.append(artist)
    out += [a for a in (*ax.collections, *ax.images) if a.get_gid() == REFERENCE_GID or _has_data(a)]
    return out


def _empty_panels(fig) -> list[str]:
    """Panels shown with no data of ours whose title does not say so."""
    problems = []
    for k, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison or ax.get_label() == "<colorbar>":
            continue
        title = " ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t)
        if NO_DATA_WORDS.search(title) or any(NO_DATA_WORDS.search(t.get_text()) for t in ax.texts):
            continue   # it says so, in its title or in a note on the panel
        drawn = _data_artists(ax)
        if not drawn:
            problems.append(f"{title or f'panel {k + 1}'}: the panel has no data; hide it or say so in its title")
        elif all(a.get_gid() == REFERENCE_GID for a in drawn):
            problems.append(f"{title or f'panel {k + 1}'}: the panel holds only reference curves, no data of ours; "
                            f"say so in its title ({NO_DATA!r}: plotting.no_data_title)")
    return problems


def _small_legends(fig, dpi: float) -> list[str]:
    """Legends whose text is smaller in the saved PNG than :data:`LEGEND_MIN_POINTS` at :data:`REPORT_DPI`."""
    least_px = LEGEND_MIN_POINTS * REPORT_DPI / 72
    problems = []
    legends = [(ax.get_title() or f"panel {k + 1}", ax.get_legend()) for k, ax in enumerate(fig.axes)]
    for name, legend in [*legends, *(("the figure", lg) for lg in fig.legends)]:
        if legend is None or not legend.get_visible() or not legend.get_texts():
            continue
        smallest = min(t.get_fontsize() for t in legend.get_texts())
        if smallest * dpi / 72 < least_px - 1e-6:
            problems.append(f"{name}: the legend's text is {smallest:g} pt, {smallest * dpi / 72:.1f} px at {dpi:g} "
                            f"dpi; at least {least_px:.1f} px ({LEGEND_MIN_POINTS:g} pt at {REPORT_DPI} dpi) reads")
    return problems


def figure_problems(fig, dpi: float = REPORT_DPI) -> list[str]:
    """What a machine can check of the rules above, on a figure about to be saved at ``dpi``: a legend over more than
    a few data points, a legend entry without a curve, a panel's axis without a name, a log axis without its unit, a
    legend too small to read, a panel without data of ours that does not say so."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    problems = _small_legends(fig, dpi) + _empty_panels(fig)
    panels = _panels_with_data(fig)
    rows: dict[float, list] = {}
    cols: dict[float, list] = {}
    for ax in panels:
        box = ax.get_position()
        rows.setdefault(round(box.y0, 2), []).append(ax)
        cols.setdefault(round(box.x0, 2), []).append(ax)
    for k, ax in enumerate(panels):
        name = ax.get_title() or f"panel {k + 1}"
        for axis, part, label, shared in (("x", ax.xaxis, ax.get_xlabel(), cols[round(ax.get_position().x0, 2)]),
                                          ("y", ax.yaxis, ax.get_ylabel(), rows[round(ax.get_position().y0, 2)])):
            others = [o.get_xlabel() if axis == "x" else o.get_ylabel() for o in shared]
            if not (_named(label) or any(_named(o) for o in others) or _category_ticks(part)
                    or not any(t.get_text() for t in part.get_ticklabels())):
                problems.append(f"{name}: the {axis} axis has no label")
            if part.get_scale() == "log":
                texts = " ".join(t.get_text() for t in part.get_ticklabels())
                names = [n for n in (label, *others) if _named(n)]
                if not names:
                    problems.append(f"{name}: the log {axis} axis is not named")
                elif not any("log" in n.lower() for n in names):
                    problems.append(f"{name}: the log {axis} axis does not say it is a log scale")
                elif not (any(UNIT.search(re.sub(r"\blog scale\b", "", n)) for n in names) or UNIT.search(texts)
                          or TICK_UNIT.search(texts)):
                    problems.append(f"{name}: the log {axis} axis names no unit")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            for other in panels:   # its own panel's data, or a neighbour's where it sits outside
                covered, total = _covered(other, legend, renderer)
                if covered > _allowed(total):
                    whose = "" if other is ax else f" of {other.get_title() or 'another panel'}"
                    problems.append(f"{name}: the legend covers {covered} of {total} data points{whose}")
        entries = {t.get_text() for lg in [legend, *fig.legends] if lg is not None for t in lg.get_texts()}
        for artist in _labelled(ax):
            if artist.get_label() in entries and not _has_data(artist):
                problems.append(f"{name}: legend entry {artist.get_label()!r} has no curve")
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for k, ax in enumerate(panels):
            points = _data_points(ax)
            points = points[_inside(points, ax.get_window_extent(renderer))]
            covered = int(_inside(points, box).sum())
            if covered > _allowed(len(points)):
                problems.append(f"{ax.get_title() or f'panel {k + 1}'}: the figure's legend covers {covered} of "
                                f"{len(points)} data points")
    return problems
