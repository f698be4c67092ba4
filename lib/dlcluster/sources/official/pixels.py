"""Pixel work shared by the digitizer: the axes frame and its ticks, the legend box, ink by colour.

Coordinates: ``row`` and ``col`` are pixel indices (row 0 at the top); a pixel's value stands for its centre.
Matplotlib draws the frame and tick marks snapped to whole pixels and the data lines anti-aliased at their true
positions, so an axis is fitted to every tick mark it has (major and minor) by least squares, each tick taken
half a pixel before its snapped pixel (see :func:`_fit_axis`), rather than read from the two spines alone.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage

WHITE = np.array([255.0, 255.0, 255.0])
DARK = 128.0            # a frame or tick pixel is darker than this (they are drawn black, 0.8 px wide)
LEGEND_GRAY = (200.0, 226.0)   # the legend's edge: '0.8' grey at alpha 0.8 on white is 214


class DigitizeError(ValueError):
    """The pixels do not look like the figure the spec describes (names the file and what was expected)."""


def composite_on_white(png) -> np.ndarray:
    """An RGBA PNG (path or bytes) as float RGB on a white page, H x W x 3 (the notebook's figures are
    transparent outside the axes)."""
    source = io.BytesIO(png) if isinstance(png, (bytes, bytearray)) else Path(png)
    with Image.open(source) as image:
        rgba = np.asarray(image.convert("RGBA"), dtype=float)
    alpha = rgba[..., 3:4] / 255.0
    return rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)


@dataclass(frozen=True)
class Axis:
    """pixel = offset + scale * t(value), t = log10 on a log axis; fitted to the tick marks."""

    log: bool
    offset: float
    scale: float
    ticks_used: int
    worst_tick_residual_px: float

    def to_pixel(self, value):
        v = np.asarray(value, dtype=float)
        return self.offset + self.scale * (np.log10(v) if self.log else v)

    def to_value(self, pixel):
        t = (np.asarray(pixel, dtype=float) - self.offset) / self.scale
        return 10.0 ** t if self.log else t


@dataclass(frozen=True)
class Frame:
    """The axes box: the spines' pixel rows and columns, and the two fitted axes."""

    top: int
    bottom: int
    left: int
    right: int
    x: Axis | None = None
    y: Axis | None = None


def find_frame(rgb: np.ndarray, where: str = "") -> Frame:
    """The spines: the outermost rows and columns holding a dark line across most of the image."""
    dark = rgb.max(axis=-1) < DARK
    h, w = dark.shape

    def long_lines(mask2d, length):
        runs = np.zeros(mask2d.shape[0], dtype=int)
        for i, line in enumerate(mask2d):
            if line.any():
                padded = np.concatenate([[0], line.astype(np.int8), [0]])
                edges = np.flatnonzero(np.diff(padded))
                runs[i] = (edges[1::2] - edges[::2]).max()
        return np.flatnonzero(runs >= length)

    rows = long_lines(dark, 0.6 * w)
    cols = long_lines(dark.T, 0.5 * h)
    if len(rows) < 2 or len(cols) < 2:
        raise DigitizeError(f"{where}: no axes frame found (need two long dark rows and columns; "
                            f"found {len(rows)} and {len(cols)})")
    return Frame(top=int(rows.min()), bottom=int(rows.max()), left=int(cols.min()), right=int(cols.max()))


def _tick_positions(strip_near: np.ndarray, strip_far: np.ndarray, lo: int, hi: int):
    """Indices (within lo..hi) of tick marks: dark next to the spine; major ones are dark further out too."""
    idx = np.arange(lo, hi + 1)
    near = strip_near[lo:hi + 1] < DARK
    far = strip_far[lo:hi + 1] < DARK
    return idx[near & far], idx[near & ~far]


def _fit_axis(pixels: np.ndarray, values: np.ndarray, log: bool, where: str) -> Axis:
    # Agg snaps a 0.8 px tick to the pixel holding its position rounded (floor(p + 0.5)), so a tick at pixel index
    # i marks a true centre at i - 0.5 on average (anti-aliased data lines are drawn at their true positions)
    pixels = pixels - 0.5
    t = np.log10(values) if log else values
    design = np.column_stack([np.ones_like(t), t])
    (offset, scale), *_ = np.linalg.lstsq(design, pixels.astype(float), rcond=None)
    residual = np.abs(pixels - (offset + scale * t))
    if residual.max() > 1.0:
        raise DigitizeError(f"{where}: tick marks do not fit the axis (worst {residual.max():.2f} px off a straight "
                            f"{'log' if log else 'linear'} scale)")
    return Axis(log, float(offset), float(scale), len(pixels), float(residual.max()))


def _log_minor_values(major: tuple) -> np.ndarray:
    """The minor tick values between the log axis's first and last major tick (2..9 x each decade)."""
    return np.array([m * k for m in major[:-1] for k in range(2, 10)])


def fit_axes(rgb: np.ndarray, frame: Frame, x_ticks, y_ticks, x_log: bool, where: str = "") -> Frame:
    """The frame with its x and y axes fitted to the tick marks outside the spines.

    The labelled major ticks must be where the spec says (as many, in order); on a log x axis the minor ticks
    (2..9 x each decade) are used too. A figure whose ticks do not match is an error naming the file.
    """
    gray = rgb.max(axis=-1)
    x_major, x_minor = _tick_positions(gray[frame.bottom + 1], gray[frame.bottom + 3], frame.left - 1, frame.right + 1)
    y_major, _ = _tick_positions(gray[:, frame.left - 1], gray[:, frame.left - 2], frame.top - 1, frame.bottom + 1)
    x_ticks, y_ticks = np.asarray(x_ticks, float), np.asarray(y_ticks, float)
    if len(x_major) != len(x_ticks):
        raise DigitizeError(f"{where}: expected {len(x_ticks)} major x tick marks ({x_ticks.tolist()}), found "
                            f"{len(x_major)} at columns {x_major.tolist()}")
    if len(y_major) != len(y_ticks):
        raise DigitizeError(f"{where}: expected {len(y_ticks)} major y tick marks ({y_ticks.tolist()}), found "
                            f"{len(y_major)} at rows {y_major.tolist()}")
    x_pixels, x_values = x_major, x_ticks
    if x_log:   # equally spaced major ticks fit a log and a linear axis alike: the minor ticks tell them apart
        minor_values = _log_minor_values(tuple(x_ticks))
        inside = x_minor[(x_minor > x_major.min()) & (x_minor < x_major.max())]
        if len(inside) != len(minor_values):
            raise DigitizeError(f"{where}: expected a log x axis with {len(minor_values)} minor tick marks between "
                                f"its decades, found {len(inside)}")
        x_pixels = np.concatenate([x_major, inside])
        x_values = np.concatenate([x_ticks, minor_values])
    x = _fit_axis(x_pixels, x_values, x_log, f"{where} x axis")
    # rows grow downwards: the first (top) major y tick is the largest value
    y = _fit_axis(y_major, y_ticks[::-1], False, f"{where} y axis")
    return Frame(frame.top, frame.bottom, frame.left, frame.right, x, y)


def find_legend(rgb: np.ndarray, frame: Frame, corner: str = "lower right") -> tuple[int, int, int, int] | None:
    """The legend box (top, bottom, left, right rows/columns, inclusive) in the given corner of the axes, or None.

    Its edge is the only solid light-grey ring in the axes (grid lines are lighter, curves coloured or darker).
    """
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    lo, hi = LEGEND_GRAY
    edge = (np.abs(r - g) <= 4) & (np.abs(g - b) <= 4) & (r >= lo) & (r <= hi)
    inside = np.zeros_like(edge)
    inside[frame.top + 1:frame.bottom, frame.left + 1:frame.right] = True
    labels, n = ndimage.label(edge & inside, structure=np.ones((3, 3)))
    best = None
    for box in ndimage.find_objects(labels):
        top, bottom = box[0].start, box[0].stop - 1
        left, right = box[1].start, box[1].stop - 1
        if right - left < 25 or bottom - top < 15:
            continue
        near_right = frame.right - right <= 15
        near_bottom = frame.bottom - bottom <= 15
        near_top = top - frame.top <= 15
        if near_right and (near_bottom if corner == "lower right" else near_top):
            area = (bottom - top) * (right - left)
            if best is None or area > best[0]:
                best = (area, (top, bottom, left, right))
    return None if best is None else best[1]


def ink(rgb: np.ndarray, color: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel, the share of it covered by a line of ``color`` on white (0..1), and how far the pixel is from
    that blend (RGB distance): a pixel of one line is ``white + a * (color - white)``."""
    darkness = WHITE - rgb
    direction = WHITE - np.asarray(color, dtype=float)
    a = np.clip(darkness @ direction / (direction @ direction), 0.0, 1.0)
    residual = np.linalg.norm(darkness - a[..., None] * direction, axis=-1)
    return a, residual
