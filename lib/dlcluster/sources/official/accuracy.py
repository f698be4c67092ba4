"""How far the digitizer reads from the truth: known CDFs drawn in the official style and read back.

:func:`round_trip` draws seeded random CDFs shaped like the official figures' (log-time delays and run times with
point masses, utilizations with masses at 0 and 100 %, curves that overlap or coincide) with
:mod:`.render`, digitizes them and measures every point against the curve that was drawn:

* vertical error, CDF points: the gap between the digitized span of a pixel column and the true curve's span
  over the same column widened by one column either side (0 where they overlap: a 1.5 px line spills into the
  next column, so the raster places a steep stretch only to within a column; :func:`.curves.column_slack`);
* horizontal error (read where the curve is steep, rising over 2 points across the column): from the column's
  centre to where the true curve has the middle of the values read there, as a factor (10 ** decades) on the
  log axes, in utilization points on the linear ones.

The known CDFs are synthetic by design: they are the measuring instrument's test, never data.

:func:`real_figure_agreement` redraws each real figure from its digitized points and sets the pixels beside the
original's: a check on the real figures themselves, where no truth is known.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import ndimage

from .curves import column_slack
from .digitize import Digitized, classify_ink, digitize_cdf_figure
from .figures import BUCKET_SERIES, GPU_SERIES, FigureSpec, Series, figure_specs
from .pixels import composite_on_white, find_frame, find_legend, fit_axes
from .render import official_cdf, render_cdfs


def _time_sample(rng: np.random.Generator, n: int) -> np.ndarray:
    """Minutes: a lognormal mixture with a point mass or two (queueing delays and run times look like this)."""
    parts = [np.exp(rng.normal(rng.uniform(-2, 6), rng.uniform(0.4, 2.5), size=n))]
    if rng.random() < 0.7:
        mass = rng.integers(1, max(2, n // 4))
        parts.append(np.full(mass, np.exp(rng.uniform(-1.5, 4))) * (1 + 1e-6 * np.arange(mass)))
    if rng.random() < 0.4:
        parts.append(np.exp(rng.normal(rng.uniform(-2, 8), 0.3, size=max(1, n // 3))))
    return np.concatenate(parts)


def _util_sample(rng: np.random.Generator, n: int) -> np.ndarray:
    """Percent: a mass at 0, a beta-shaped body and a mass near 100 (GPU and host utilization look like this)."""
    zero = np.zeros(int(n * rng.uniform(0, 0.35)))
    body = 100 * rng.beta(rng.uniform(0.5, 3), rng.uniform(0.5, 3), size=n)
    full = np.full(int(n * rng.uniform(0, 0.15)), 100.0)
    return np.concatenate([zero, body, full])


def known_figures(seed: int = 0, count: int = 12) -> list[tuple[FigureSpec, list]]:
    """``count`` figures of known CDFs, on the log-time axes and on utilization axes (one in six: two black
    curves, solid and dash-dot), seeded.

    Every third figure repeats one series' data in another (identical curves: the earlier one is wholly
    covered), and some others draw a series a little off another (the lines touch), so covered and touching
    segments occur as in the real figures.
    """
    rng = np.random.default_rng(seed)
    specs = figure_specs()
    time_spec, util_spec = specs["fig3_queueing_delay_vc_b436b2.png"], specs["fig5_gpu_util_pass.png"]
    black_spec = specs["fig7_host_cpu_memory.png"]
    out = []
    for i in range(count):
        if i % 6 == 5:   # two black curves told apart by line style (Figures 6 and 7)
            n = int(rng.choice([200, 3000]))
            low = _util_sample(rng, n)
            high = 100 - (100 - low) * rng.uniform(0.2, 0.8)   # quantile by quantile higher: the curves never cross
            out.append((black_spec, [(*official_cdf(low), black_spec.series[0]),
                                     (*official_cdf(high), black_spec.series[1])]))
            continue
        log = i % 2 == 0
        spec = time_spec if log else util_spec
        palette = BUCKET_SERIES if log else GPU_SERIES
        k = int(rng.integers(1, 5))
        chosen = sorted(rng.choice(len(palette), size=k, replace=False))
        curves = []
        for j in chosen:
            n = int(rng.choice([5, 20, 200, 3000]))
            values = _time_sample(rng, n) if log else _util_sample(rng, n)
            if i % 3 == 2 and curves:
                values = curves[0][2]
            elif i % 4 == 3 and curves:   # nearly the same curve: the lines touch and partly cover each other
                base = curves[0][2]
                values = base * rng.uniform(1.02, 1.1) if log else np.clip(base + rng.uniform(0.5, 2), 0, 100)
            curves.append((Series(*palette[j]), n, values))
        if log and rng.random() < 0.5:
            curves = curves[::-1]     # Figure 3 draws the buckets in the order they first occur
        out.append((spec, [(*official_cdf(v), s) for s, _, v in curves]))
    return out


def _true_span(x_curve: np.ndarray, p_curve: np.ndarray, lo: np.ndarray, hi: np.ndarray, log: bool):
    """The drawn polyline's CDF values over [lo, hi] (a column widened by one either side; its part inside the
    curve's x range; NaN wholly outside it, where a digitized point would be spurious)."""
    t = np.log10(x_curve) if log else x_curve
    keep = np.isfinite(t)
    t, p = t[keep], p_curve[keep]
    tl, th = (np.log10(lo), np.log10(hi)) if log else (lo, hi)
    outside = (th < t[0]) | (tl > t[-1])
    # a vertical jump is a run of equal x: its lowest value is the curve's left limit there, its highest the right
    first = np.concatenate([[True], np.diff(t) > 0])
    last = np.concatenate([np.diff(t) > 0, [True]])
    low = np.interp(np.clip(tl, t[0], t[-1]), t[first], p[first])
    high = np.interp(np.clip(th, t[0], t[-1]), t[last], p[last])
    return np.where(outside, np.nan, low), np.where(outside, np.nan, high)


def _gap(a_lo, a_hi, b_lo, b_hi):
    """Distance between intervals [a_lo, a_hi] and [b_lo, b_hi] (0 where they overlap)."""
    return np.maximum(0.0, np.maximum(a_lo - b_hi, b_lo - a_hi))


def point_errors(points: pd.DataFrame, curves, log: bool) -> pd.DataFrame:
    """Each digitized point beside the curve that was drawn: vertical error (CDF points) and horizontal error
    (decades on a log axis, x units on a linear one)."""
    truth = {s.name: (x, p) for x, p, s in curves}
    frames = []
    for name, part in points.groupby("series", sort=False):
        x, p = truth[name]
        low, high = _true_span(x, p, *column_slack(part), log)
        vertical = _gap(part["cdf_low"].to_numpy(), part["cdf_high"].to_numpy(), low, high)
        t = np.log10(x) if log else x
        q_mid = np.interp((part["cdf_low"].to_numpy() + part["cdf_high"].to_numpy()) / 2, p, t)
        centre = np.log10(part["x"].to_numpy()) if log else part["x"].to_numpy()
        horizontal = np.abs(centre - q_mid)
        centre_value = np.interp(centre, t, p, left=np.nan, right=np.nan)
        frames.append(part.assign(true_low=low, true_high=high, error_pp=vertical, error_x=horizontal,
                                  error_pp_centre=np.abs(part["cdf"].to_numpy() - centre_value)))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class RoundTrip:
    """The digitizer's measured error over a set of known figures (see :func:`round_trip`)."""

    errors: pd.DataFrame       # one row per digitized point, with error_pp and error_x and the figure's axis
    figures: int

    def clean(self) -> pd.DataFrame:
        """Points away from covered segments: not hidden, not touching another line or the frame."""
        e = self.errors
        return e[(e["flag"] != "hidden") & ~e["near_other"].astype(bool) & (e["hidden_by"] != "frame")
                 & e["error_pp"].notna()]

    def summary(self) -> dict:
        """Typical error: the median distance from the value read at a column's centre to the true curve's value
        there, over visible points where the true curve rises by under half a point across the column (there a
        vertical reading is what is measured); typical factor: the median over points where it and the reading
        rise by over 2 points (steep: the x reading is measured). Worst: over every point away from covered
        segments (:meth:`clean`)."""
        e = self.errors[self.errors["error_pp"].notna()]
        clean = self.clean()
        visible = e[e["flag"] != "hidden"]
        rise = visible["true_high"] - visible["true_low"]

        def steep_log(frame):   # steep in the truth and in the reading: where an x reading is what is measured
            return frame[(frame["axis"] == "log") & (frame["true_high"] - frame["true_low"] > 2.0)
                         & (frame["cdf_high"] - frame["cdf_low"] > 2.0)]
        return {
            "figures": self.figures, "points": len(e), "points_clean": len(clean),
            "typical_error_pp": float(visible.loc[rise < 0.5, "error_pp_centre"].median()),
            "mean_error_pp": float(visible["error_pp"].mean()),
            "worst_error_pp": float(clean["error_pp"].max()),
            "p99_error_pp": float(clean["error_pp"].quantile(0.99)),
            "worst_error_pp_touching": float(visible["error_pp"].max()),
            "worst_error_pp_hidden": float(e.loc[e["flag"] == "hidden", "error_pp"].max())
            if (e["flag"] == "hidden").any() else float("nan"),
            "typical_factor_log": float(10 ** steep_log(visible)["error_x"].median()),
            "worst_factor_log": float(10 ** steep_log(clean)["error_x"].max()),
            "share_hidden": float((e["flag"] == "hidden").mean()),
            "spurious_points": int(self.errors["error_pp"].isna().sum()),
        }


def round_trip(seed: int = 0, count: int = 12) -> RoundTrip:
    """Draw ``count`` known figures (:func:`known_figures`), digitize them and measure every point."""
    frames = []
    for i, (spec, curves) in enumerate(known_figures(seed, count)):
        rgb = render_cdfs(curves, spec, title={3: "VC test", 5: "Pass"}.get(spec.figure), grid=spec.figure != 7)
        digitized = digitize_cdf_figure(rgb, spec, where=f"known figure {i} (seed {seed})")
        errors = point_errors(digitized.points, curves, spec.x_scale == "log")
        frames.append(errors.assign(known_figure=i, axis=spec.x_scale))
    return RoundTrip(pd.concat(frames, ignore_index=True), count)


# --------------------------------------------------------------------------- a real figure redrawn from its points


def _title(spec: FigureSpec) -> str | None:
    if spec.figure == 3:
        return f"VC {spec.panel}"
    if spec.figure == 5:
        return spec.panel.capitalize()
    return None


def redraw(digitized: Digitized, x_factor: float = 1.0) -> np.ndarray:
    """The figure drawn again, in the official style, from its digitized points (every row, hidden ones too; a
    steep column as its two ends). ``x_factor`` multiplies every x (on a linear axis: shifts by
    ``x_factor - 1`` times 100 points): a deliberately wrong redraw, to show the comparison catches it."""
    spec = digitized.spec
    curves = []
    for series in digitized.series:
        part = digitized.points[digitized.points["series"] == series.name].sort_values("x", kind="stable")
        x = np.repeat(part["x"].to_numpy(), 2)
        p = np.column_stack([part["cdf_low"], part["cdf_high"]]).ravel()
        x = x * x_factor if spec.x_scale == "log" else x + (x_factor - 1.0) * 100.0
        curves.append((x, p, series))
    return render_cdfs(curves, spec, title=_title(spec), grid=spec.figure != 7)


def _frame_crop(rgb: np.ndarray, spec: FigureSpec) -> tuple[np.ndarray, tuple]:
    frame = find_frame(rgb, spec.file)
    return rgb[frame.top + 2:frame.bottom - 1, frame.left + 2:frame.right - 1], frame


def pixel_agreement(original: np.ndarray, redrawn: np.ndarray, spec: FigureSpec, series) -> pd.DataFrame:
    """Per line colour: the share of the original's ink with redrawn ink within one pixel (``recall``), and of
    the redrawn ink with original ink within one pixel (``precision``), inside the axes and off the legend
    (the two images are aligned on their axes frames)."""
    a, frame_a = _frame_crop(original, spec)
    b, frame_b = _frame_crop(redrawn, spec)
    h, w = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    a, b = a[:h, :w], b[:h, :w]
    keep = np.ones((h, w), dtype=bool)
    legend = find_legend(original, fit_axes(original, frame_a, spec.x_ticks, spec.y_ticks, spec.x_scale == "log"),
                         spec.legend)
    if legend is not None:
        lt, lb, ll, lr = legend
        keep[max(lt - frame_a.top - 4, 0):lb - frame_a.top, max(ll - frame_a.left - 4, 0):lr - frame_a.left] = False
    colors = list(dict.fromkeys(s.color for s in series))
    owner_a, cov_a = classify_ink(a, colors)
    owner_b, cov_b = classify_ink(b, colors)
    rows = []
    near = np.ones((3, 3), dtype=bool)
    for k, color in enumerate(colors):
        ink_a = (owner_a == k) & (cov_a >= 0.4) & keep
        ink_b = (owner_b == k) & (cov_b >= 0.4) & keep
        rows.append({"figure": spec.figure, "panel": spec.panel, "color": color,
                     "series": "/".join(s.name for s in series if s.color == color),
                     "ink_px": int(ink_a.sum()),
                     "recall": float((ink_a & ndimage.binary_dilation(ink_b, near)).sum() / max(ink_a.sum(), 1)),
                     "precision": float((ink_b & ndimage.binary_dilation(ink_a, near)).sum() / max(ink_b.sum(), 1))})
    return pd.DataFrame(rows)


def real_figure_agreement(directory=None, x_factor: float = 1.0) -> pd.DataFrame:
    """:func:`pixel_agreement` of every real CDF figure with its redraw from the digitized points."""
    from . import png_dir

    directory = png_dir() if directory is None else directory
    frames = []
    for name, spec in figure_specs().items():
        if spec.kind != "cdf":
            continue
        original = composite_on_white(directory / name)
        read = digitize_cdf_figure(original, spec, where=name)
        frames.append(pixel_agreement(original, redraw(read, x_factor), spec, read.series).assign(file=name))
    return pd.concat(frames, ignore_index=True)
