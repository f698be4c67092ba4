"""What the official notebook drew in each of its 22 figures: axes, series, colours, line styles.

Read from the code of ``analysis/Philly Trace Analysis.ipynb`` (msr-fiddle/philly-traces, commit 73877391),
which drew these PNGs from the full trace; ``data/external/official_notebook/README.md`` gives the same
definitions in prose. Nothing here is measured from the pixels: it is what the digitizer is told, and it checks
the pixels against it (tick marks where the axis says, a legend entry per series, the line style of each
same-coloured series).

Every figure is matplotlib 3.1.1 at 6 x 4 inches and 72 dpi (IPython's inline backend, saved with a tight
bounding box), lines 1.5 px wide, dash patterns scaled by the line width. Series are drawn in legend order, so
a later series covers an earlier one where they meet.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: matplotlib's named colours that the notebook uses, as 8-bit RGB.
COLORS = {
    "green": (0, 128, 0),
    "blue": (0, 0, 255),
    "red": (255, 0, 0),
    "purple": (128, 0, 128),
    "cyan": (0, 255, 255),
    "black": (0, 0, 0),
}

#: The longest run of a line style without ink, in px along the line at 1.5 px width (matplotlib >= 2.0
#: dash patterns x line width): dashed 5.55 on / 2.4 off, dash-dot 9.6 / 2.4 / 1.5 / 2.4, dotted 1.5 / 2.475.
DASH_GAP_PX = {"-": 0.0, "--": 2.4, "-.": 2.4, ":": 2.475}

#: The size buckets of Figures 2 and 3 (the notebook's get_plot_config_from_bucket), in drawing order.
BUCKET_SERIES = (("1", "green", "-"), ("2-4", "blue", "-."), ("5-8", "red", "--"), (">8", "purple", ":"))
#: The job sizes of Figure 5, in drawing order (sorted GPU counts).
GPU_SERIES = (("1", "green", "-"), ("4", "blue", "-."), ("8", "red", "--"), ("16", "cyan", ":"))

LOG_TIME_TICKS = tuple(10.0 ** k for k in range(-1, 5))     # xlim(1e-1, 1e4)
PERCENT_TICKS = (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)


@dataclass(frozen=True)
class Series:
    name: str         # the legend label without " GPU": "2-4", "16", "cpu", ...
    color: str        # a key of COLORS
    style: str        # "-", "--", "-.", ":"


@dataclass(frozen=True)
class FigureSpec:
    """One PNG: its figure number, panel (VC, status), axes and the series it may hold."""

    file: str
    figure: int
    panel: str                      # "all", a VC hash, a status, "dedicated", "host"
    quantity: str                   # what the x axis measures
    x_scale: str                    # "log" or "linear"
    x_ticks: tuple                  # the labelled major ticks, left to right
    y_ticks: tuple
    series: tuple                   # Series, in drawing order (a figure may lack some: read from its legend)
    x_unit: str
    legend: str = "lower right"
    order_from_legend: bool = False  # Figure 3: the drawing order is the order buckets first occur in the VC's jobs
    x_limits: tuple = field(default=())   # set by the notebook (xlim); empty where matplotlib chose them
    y_limits: tuple = (0.0, 100.0)

    @property
    def kind(self) -> str:
        return "scatter" if self.figure == 4 else "cdf"


def _bucket_series():
    return tuple(Series(n, c, s) for n, c, s in BUCKET_SERIES)


FIG3_VCS = ("0e4a51", "103959", "11cb48", "23dbec", "2869ce", "51b7ef", "6214e9", "6c71a0", "795a4c", "7f04ca",
            "925e2b", "b436b2", "e13805", "ed69ec", "ee9e8c")
FIG5_STATUSES = ("pass", "failed", "killed")


def figure_specs() -> dict[str, FigureSpec]:
    """Every PNG of the official notebook, by file name."""
    specs = [FigureSpec("fig2_run_time.png", 2, "all", "run time", "log", LOG_TIME_TICKS, PERCENT_TICKS,
                        _bucket_series(), "min", x_limits=(0.1, 1e4))]
    specs += [FigureSpec(f"fig3_queueing_delay_vc_{vc}.png", 3, vc, "queueing delay", "log", LOG_TIME_TICKS,
                         PERCENT_TICKS, _bucket_series(), "min", order_from_legend=True, x_limits=(0.1, 1e4))
              for vc in FIG3_VCS]
    specs.append(FigureSpec("fig4_delay_vs_servers.png", 4, "all", "queueing delay", "log",
                            tuple(10.0 ** k for k in range(-1, 6)), tuple(float(v) for v in range(0, 31, 5)),
                            (Series(">8", "red", "o"), Series("5-8", "black", "+")), "min", legend="upper right",
                            y_limits=()))
    specs += [FigureSpec(f"fig5_gpu_util_{status}.png", 5, status, "GPU utilization", "linear", PERCENT_TICKS,
                         PERCENT_TICKS, tuple(Series(n, c, s) for n, c, s in GPU_SERIES), "%", x_limits=(0.0, 100.0))
              for status in FIG5_STATUSES]
    specs.append(FigureSpec("fig6_gpu_util_8_vs_16_dedicated.png", 6, "dedicated", "GPU utilization", "linear",
                            PERCENT_TICKS, PERCENT_TICKS, (Series("8", "black", "-"), Series("16", "black", "-.")),
                            "%", x_limits=(0.0, 100.0)))
    specs.append(FigureSpec("fig7_host_cpu_memory.png", 7, "host", "host utilization", "linear", PERCENT_TICKS,
                            PERCENT_TICKS, (Series("cpu", "black", "-"), Series("memory", "black", "-.")), "%",
                            x_limits=(0.0, 100.0)))
    return {s.file: s for s in specs}


def spec_for(path: str | Path) -> FigureSpec:
    name = Path(path).name
    specs = figure_specs()
    if name not in specs:
        raise ValueError(f"{path}: not one of the official notebook's figures "
                         f"({len(specs)} known, e.g. {next(iter(specs))})")
    return specs[name]
