"""The official notebook's figures read back: the digitizer on known answers, its measured error, the tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dlcluster.sources import official
from dlcluster.sources.official import accuracy, curves
from dlcluster.sources.official.digitize import digitize_cdf_figure
from dlcluster.sources.official.figures import BUCKET_SERIES, GPU_SERIES, Series, figure_specs
from dlcluster.sources.official.pixels import DigitizeError
from dlcluster.sources.official.render import official_cdf, render_cdfs, render_scatter
from dlcluster.sources.official.scatter import digitize_scatter

SPECS = figure_specs()
TIME = SPECS["fig3_queueing_delay_vc_b436b2.png"]
UTIL = SPECS["fig5_gpu_util_pass.png"]
BUCKET = {name: Series(name, color, style) for name, color, style in BUCKET_SERIES}
SIZE = {name: Series(name, color, style) for name, color, style in GPU_SERIES}


def _lognormal(seed, n=800, mu=1.0, sigma=1.5):
    return np.exp(np.random.default_rng(seed).normal(mu, sigma, n))


def _read(curve_list, spec=TIME):
    rgb = render_cdfs([(*official_cdf(v), s) for v, s in curve_list], spec, title="VC test")
    return digitize_cdf_figure(rgb, spec)


def test_round_trip_meets_the_target():
    """Known CDFs drawn in the official style and read back: typical <= 0.5 CDF points, worst <= 2 away from
    covered segments, and no point where no curve was drawn."""
    summary = accuracy.round_trip(seed=0, count=8).summary()
    assert summary["typical_error_pp"] <= 0.5
    assert summary["worst_error_pp"] <= 2.0
    assert summary["spurious_points"] == 0
    assert summary["worst_factor_log"] < 1.1
    assert summary["points_clean"] > 1000


def test_the_digitization_margin_is_measured_once_and_read_back_exactly(tmp_path, monkeypatch):
    """Notebooks 00, 01 and 02 share one measurement of the digitizer's error (a cache over its code and the
    installed packages): the first call measures, the others read the same summary, other settings measure again."""
    from dlcluster.analysis import official as analysis_official
    from dlcluster.paths import CACHE_DIR_ENV

    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    measured = []
    real = accuracy.round_trip

    def counted(seed, count):
        measured.append((seed, count))
        return real(seed, count)

    monkeypatch.setattr(accuracy, "round_trip", counted)
    first = analysis_official.digitization(seed=1, count=2)
    assert measured == [(1, 2)] and first.summary == real(1, 2).summary()
    again = analysis_official.digitization(seed=1, count=2)
    assert measured == [(1, 2)] and again.summary == first.summary and again.margin_pp == first.margin_pp
    analysis_official.digitization(seed=2, count=2)
    assert measured == [(1, 2), (2, 2)]
    assert len(list(tmp_path.glob("official-digitization-*.json"))) == 2


def test_a_known_curve_reads_back_its_quantiles_and_distance():
    sample = _lognormal(1)
    read = _read([(sample, BUCKET["2-4"])])
    points = read.points
    assert set(points["series"]) == {"2-4"}
    assert set(points["flag"]) <= {"observed", "interpolated"}
    # dash-dot: gaps bridged by interpolation, never more than the dash gap apart
    assert (points["flag"] == "interpolated").mean() < 0.4
    median = curves.crossing(points, 50.0)
    assert median == pytest.approx(np.median(sample), rel=0.05)
    ks, _ = curves.ks_distance(points, sample)
    assert ks < 1.0


def test_a_shifted_sample_is_caught_and_the_same_one_passes():
    """The comparison's verdict: the drawn sample is reproduced, the same sample 1.5x longer differs."""
    sample = _lognormal(2, n=3000)
    points = _read([(sample, BUCKET["5-8"])]).points
    ks_same, _ = curves.ks_distance(points, sample)
    ks_shifted, _ = curves.ks_distance(points, sample * 1.5)
    assert curves.within_margin(ks_same, len(sample), 1.0)[0] is True
    assert curves.within_margin(ks_shifted, len(sample), 1.0)[0] is False
    assert ks_shifted > 5 * max(ks_same, 1.0)


def test_a_covered_curve_is_flagged_hidden_under_the_line_that_covers_it():
    sample = _lognormal(3)
    read = _read([(sample, BUCKET["1"]), (sample, BUCKET["5-8"])])
    green = read.points[read.points["series"] == "1"]
    hidden = green[green["flag"] == "hidden"]
    assert len(hidden) > 0.5 * len(green)
    # named by the line that covers it (a column covered only by pixels where the two blend says "another line")
    assert hidden["hidden_by"].value_counts().idxmax() == "5-8"
    assert set(hidden["hidden_by"]) <= {"5-8", "another line"}
    # where it is hidden, it is under the covering line: the same values within a pixel
    red = read.points[read.points["series"] == "5-8"].set_index("column")
    both = hidden.set_index("column").join(red[["cdf"]].rename(columns={"cdf": "cdf_red"}), how="inner")
    assert (both["cdf"] - both["cdf_red"]).abs().max() < 1.0


def test_figure3_order_comes_from_the_legend():
    """Figure 3 draws the buckets in the order they first occur in the VC's jobs: the legend tells it."""
    read = _read([(_lognormal(4), BUCKET[">8"]), (_lognormal(5, mu=3), BUCKET["1"])])
    assert [s.name for s in read.series] == [">8", "1"]


def test_two_black_curves_are_told_apart_by_line_style():
    spec = SPECS["fig7_host_cpu_memory.png"]
    rng = np.random.default_rng(6)
    cpu, memory = 100 * rng.beta(1, 4, 2000), 100 * rng.beta(6, 1.5, 2000)
    rgb = render_cdfs([(*official_cdf(cpu), spec.series[0]), (*official_cdf(memory), spec.series[1])], spec,
                      grid=False)
    read = digitize_cdf_figure(rgb, spec)
    for series, sample in (("cpu", cpu), ("memory", memory)):
        part = read.points[read.points["series"] == series]
        assert curves.ks_distance(part, sample)[0] < 1.5
        assert curves.mean_percent(part) == pytest.approx(sample.mean(), abs=1.5)


def test_a_figure_that_is_not_the_spec_is_an_error_naming_it():
    path = official.png_dir() / "fig5_gpu_util_pass.png"
    with pytest.raises(DigitizeError, match=r"fig5_gpu_util_pass\.png.*log x axis"):
        digitize_cdf_figure(path, SPECS["fig2_run_time.png"])


def test_scatter_levels_read_back():
    """Figure 4: the server counts found are exactly those drawn, and the outer delays within a pixel where
    no other marker covers them."""
    rng = np.random.default_rng(7)
    x8 = np.clip(np.exp(rng.normal(1, 3, 1500)), 0.09, 6e4)
    y8 = rng.choice([1, 2, 4, 8], p=[0.5, 0.2, 0.2, 0.1], size=1500)
    x8[:2] = [0.09, 6e4]
    x16 = np.clip(np.exp(rng.normal(0, 2, 300)), 0.09, 6e4)
    y16 = rng.choice([2, 4, 12, 16, 32], size=300)
    read = digitize_scatter(render_scatter({">8": (x16, y16), "5-8": (x8, y8)}), SPECS["fig4_delay_vs_servers.png"])
    levels = read.levels.set_index(["series", "servers"])
    truth = {(">8", int(k)): x16[y16 == k] for k in np.unique(y16)} | {("5-8", int(k)): x8[y8 == k]
                                                                       for k in np.unique(y8)}
    assert set(levels.index) == set(truth)
    px = read.frame.x.scale
    for key, values in truth.items():
        row = levels.loc[key]
        if not row["min_end_covered"]:
            assert abs(np.log10(row["delay_min"] / values.min())) * px <= 1.0
        if not row["max_end_covered"]:
            assert abs(np.log10(row["delay_max"] / values.max())) * px <= 1.0


def test_the_committed_tables_are_what_the_pngs_give():
    """data/public/official holds exactly what digitizing data/external/official_notebook gives (make public)."""
    fresh = official.digitize_all()
    stored = official.load_official()
    for name in ("cdf_points", "fig4_levels", "figures"):
        pd.testing.assert_frame_equal(stored[name], fresh[name], check_exact=False, rtol=1e-9)


def test_every_real_figure_reads_with_the_series_its_code_drew():
    tables = official.load_official()
    figures = tables["figures"].set_index("file")
    assert len(figures) == 22
    assert (figures[["x_worst_tick_px", "y_worst_tick_px"]] <= 1.0).all().all()
    assert figures.loc["fig2_run_time.png", "series_in_drawing_order"] == "1,2-4,5-8,>8"
    assert figures.loc["fig3_queueing_delay_vc_795a4c.png", "series_in_drawing_order"] == "1"
    assert figures.loc["fig3_queueing_delay_vc_b436b2.png", "series_in_drawing_order"] == ">8,5-8,2-4,1"
    assert figures.loc["fig7_host_cpu_memory.png", "series_in_drawing_order"] == "cpu,memory"
    points = tables["cdf_points"]
    assert set(points["flag"]) <= set(official.FLAGS)
    # a CDF never decreases along a series (within a pixel's reading)
    for _, part in points.groupby(["figure", "panel", "series"]):
        seen = curves.visible(part).sort_values("x")
        assert (np.diff(seen["cdf"].to_numpy()) > -1.0).all()
    levels = tables["fig4_levels"]
    assert set(levels.loc[levels["series"] == ">8", "servers"]) >= {2, 16, 32}
    assert 1 in set(levels.loc[levels["series"] == "5-8", "servers"])


def test_a_real_figure_redrawn_from_its_points_matches_its_pixels_and_a_shifted_one_does_not():
    """Figure 2 redrawn from its digitized points in the same style: nearly every ink pixel of the original
    has redrawn ink within a pixel; the same points drawn 15% to the right do not."""
    spec = SPECS["fig2_run_time.png"]
    original = accuracy.composite_on_white(official.png_dir() / spec.file)
    read = digitize_cdf_figure(original, spec)
    good = accuracy.pixel_agreement(original, accuracy.redraw(read), spec, read.series)
    shifted = accuracy.pixel_agreement(original, accuracy.redraw(read, x_factor=1.15), spec, read.series)
    assert (good["recall"] > 0.93).all() and (good["precision"] > 0.93).all()
    assert (shifted["recall"] < 0.6).all()
