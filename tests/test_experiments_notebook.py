"""Notebook 06 under params/ci.yaml (the small grid, two seeds): its results, figures and comparisons.

The small grid is a quick run, not a result, and the simulator behind it will change; so the checks are of the
inputs (recomputed from the public data), of figures that notebook 05 computes separately, of expectations that
hold whatever the simulator does (early stopping draws a real curve per job), and of the directions of the
conclusions that hold at these parameters.
"""

import re

import numpy as np
import pandas as pd
import pytest

STEM = "06-design-implications"


def pollux_stop_points(tolerance: float) -> pd.DataFrame:
    """Per real Pollux curve, by hand: the share of its epochs after it first comes within ``tolerance`` of its
    best (equal epochs: the curves log no seconds), and the quality given up by stopping there."""
    from dlcluster.sources import curves as curve_io

    rows = []
    for _, curve in curve_io.load_curve_source("pollux").curves.groupby(["job", "metric"]):
        values = curve.sort_values("epoch")["value"].to_numpy(float)
        lower = curve["direction"].iloc[0] == "lower"
        best = values.min() if lower else values.max()
        within = (values <= best + tolerance * abs(best)) if lower else (values >= best - tolerance * abs(best))
        stop = np.flatnonzero(within)[0] + 1
        reached = values[:stop].min() if lower else values[:stop].max()
        rows.append({"job": curve["job"].iloc[0], "time_after": 1 - stop / len(values),
                     "quality_lost": abs(reached - best) / abs(best)})
    return pd.DataFrame(rows)


@pytest.mark.notebook
def test_small_grid_results(ci_notebook, ci_reports, public_trace):
    doc = ci_notebook(STEM)
    assert doc["params"]["grid"] == "small" and doc["params"]["seeds"] == [0]
    r = doc["results"]
    from dlcluster import experiments as E
    from dlcluster.validation import jobsets as js

    # one replay: every arm replays notebook 05's calibrated replay (params/ci.yaml: 7 days of warm-up, 12 replayed),
    # measured on the jobs submitted in its 12 days, in 12 daily blocks
    cal = E.grid_spec("small").replay.calibration("public", None)
    assert r["jobs_replayed"] == len(cal.replay.workload)
    assert r["replicates.blocks"] == 12 and r["replicates.block_days"] == 1.0
    occupancy = public_trace.occupancy
    begin = occupancy["time"].min()
    rfold, pollux = public_trace.rfold_jobs, public_trace.jobs_of("pollux")
    alignment = js.align_offsets(rfold["arrival_offset_s"], rfold["num_gpus"], rfold["duration_s"],
                                 pollux["submitted"], pollux["num_gpus"], pollux["run_time_s"])
    submitted = js.offsets_to_utc(rfold["arrival_offset_s"], alignment.origin_local)
    assert r["jobs_measured"] == ((submitted >= begin) & (submitted < begin + pd.Timedelta(days=12))).sum()
    # the baseline arm is notebook 05's replay: the same jobs' mean JCT, to the last digit
    assert r["baseline.jct_mean_s"] == pytest.approx(r["baseline.notebook05_jct_mean_s"], rel=1e-12)
    sweep = pd.read_parquet(ci_reports / STEM / "sweep.parquet")
    # busy servers in the record's units (servers with a job against the record's active count, in points of the
    # record's total), per block, from the sweep by hand
    baseline = sweep[(sweep["experiment"] == "failures") & (sweep["retry"] == "none") & (sweep["bucket"] == "all")
                     & (sweep["population"] == "all jobs")].drop_duplicates("block")
    error = 100 * (baseline["busy_servers"] - baseline["busy_servers_real"]) / baseline["record_servers"]
    assert len(baseline) == 12 and r["load.real.busy_servers_error_pp"] == pytest.approx(error.mean(), rel=1e-9)
    assert "load.calibrated_factor" not in r
    # the validation figures are notebook 05's, at the same parameters (params/ci.yaml runs 05 as the small grid's
    # calibration): the cached calibration's held-out replay and 05's own replay give the same figures
    fifth = ci_notebook("05-simulator-validation")
    assert {k: fifth["params"][k] for k in ("fit_days", "replay_days", "warmup_days", "seed")} == {
        "fit_days": 7, "replay_days": 12, "warmup_days": 7, "seed": 0}
    from dlcluster.validation.calibration import HELD_OUT_KEYS
    for key in HELD_OUT_KEYS:   # one name per figure in both notebooks (tests/test_one_number.py)
        in_05 = (f"validation.fig3.{key.removeprefix('fig3_')}" if key.startswith("fig3_")
                 else f"validation.heldout.{key}")
        if in_05 not in fifth["results"]:   # Figure 3 without its digitized table: not measured in either
            assert np.isnan(r[f"validation.heldout.{key}"]), key
            continue
        assert r[f"validation.heldout.{key}"] == pytest.approx(fifth["results"][in_05], rel=1e-9), key
    # the implications, answered in the table's words and tagged by what they rest on
    # (an arm without a steady state: 'unstable: <arm> queue grows X per week', no interval; experiments.intervals)
    words = re.compile(r"^(supported|contradicted|no effect larger than \d+(\.\d)?%|cannot be tested on public data"
                       r"|unstable: .+ queue grows .+ per week)$")
    for key in E.IMPLICATIONS.values():
        assert words.match(r[f"implications.{key}.answer"]), (key, r[f"implications.{key}.answer"])
        assert r[f"implications.{key}.kind"] in E.KINDS
    for key in ("class_aware_retries", "prerun"):
        assert r[f"implications.{key}.answer"] == "cannot be tested on public data"
        assert f"implications.{key}.change" not in r
    # the interference rows, pack (against Philly's spreading) and the gangs isolated (with migration, against packing),
    # under the assumed 'paper' interference
    for key in ("pack", "isolate_gangs"):
        assert r[f"implications.{key}.kind"] == "assumption"
    assert "isolate_or_pack" not in {k.split(".")[1] for k in r if k.startswith("implications.")}
    assert r["implications.early_termination.kind"] == "by construction"
    for key in ("prioritize_locality", "relax_after_wait", "migrate_long_jobs"):
        assert r[f"implications.{key}.kind"] == "mechanism"
        if r[f"implications.{key}.answer"].startswith("unstable: "):   # no interval on an arm without a steady state
            assert f"implications.{key}.change" not in r
            continue
        low, change, high = (r[f"implications.{key}.{k}"] for k in ("ci_low", "change", "ci_high"))
        assert -1 < low <= change <= high and r[f"implications.{key}.detectable"] > 0
        verdict = r[f"implications.{key}.answer"]
        assert (verdict == "supported") == (high < 0) and (verdict == "contradicted") == (low > 0)
    assert r["implications.scorecard.failures"].count("cannot be tested on public data") == 2
    # the same implications across the replays the data allow: the calibrated replay first, the spread slowdown at both
    # ends of the six models' measured range, another VC and latency draw, then the placements allowed as well
    from dlcluster.experiments.members import slowdown_ends
    low_end, high_end = slowdown_ends()
    members = r["implications.ensemble.members"]
    assert members.startswith(f"calibrated, slowdown {low_end:.2f}, slowdown {high_end:.2f}, VC and latency draw 1"), \
        members
    ensemble_words = re.compile(r"^(supported|contradicted|no effect larger than \d+(\.\d)?%|depends on .+|unstable on "
                                r"every member|cannot be tested on public data"
                                r"|not computable \(no member has an interval\))$")
    for key in E.IMPLICATIONS.values():
        answer, values = r[f"implications.{key}.ensemble"], r[f"implications.{key}.ensemble_values"]
        assert ensemble_words.match(answer), (key, answer)
        # the main answer combines the calibrated run with the other draw's (each run's blocks kept together): its
        # point lies between the two runs' points on the log scale, so between their printed values
        main = r[f"implications.{key}.answer"]
        points = dict(re.findall(r"(calibrated|VC and latency draw 1): ([−+±][\d.]+)%", values))
        if main.startswith("unstable: "):
            assert re.search(r"(^|; )(calibrated|VC and latency draw 1): unstable", values), (key, values)
        elif f"implications.{key}.change" in r:
            low, change, high = (r[f"implications.{key}.{k}"] for k in ("ci_low", "change", "ci_high"))
            # each member's point to its printed digits: half its last digit either way
            runs = [(float(v.replace("−", "-").replace("±", "")) / 100, 0.0005 if "." in v else 0.005)
                    for v in points.values()]
            assert r["implications.runs_combined"] == len(runs) == 2, (key, values)
            assert min(v - step for v, step in runs) <= change <= max(v + step for v, step in runs), \
                (key, change, values)
        else:
            assert answer == main == "cannot be tested on public data" and values.startswith("calibrated: no value")
        # a verdict only where every member's interval lies on its side (every implication predicts a reduction)
        if answer in ("supported", "contradicted"):
            ends = re.findall(r": [−+±][\d.]+% \[([−+±][\d.]+%), ([−+±][\d.]+%)\]", values)
            assert "unstable" not in values and len(ends) == values.count("; ") + 1, (key, values)
            assert all((hi.startswith(("−", "±")) if answer == "supported" else lo.startswith(("+", "±")))
                       for lo, hi in ends), (key, values)
        if answer.startswith("depends on "):
            assert set(answer.removeprefix("depends on ").split(", ")) <= {"slowdown", "VC and latency draw",
                                                                            "placement"}, answer
    assert r["implications.scorecard.interference"].startswith("pack against interference: ")
    assert "; isolate gangs against interference: " in r["implications.scorecard.interference"]
    # small grid, one replay per arm: locality 6 (strict, any, the calibrated timeout, long jobs strict or
    # migrated by their work left or by their attained service), interference 5 (pack, spread, each with and without
    # migration, the gangs isolated with migration, under the one assumed scenario of params/ci.yaml; the
    # everyone-dedicated construction only in grid 'full-sensitivity'), failures 5 (none, one attempt, three retry
    # rules), early stop 2, policies 2 x 2 loads (the small grid keeps x1.25)
    assert r["sweep.cells"] == 6 + 5 + 5 + 2 + 4
    assert all(k.startswith(("failures.real.", "early_stop.real.", "early_stop.curve_bootstrap.", "locality.real."))
               for k in r
               if k.startswith(("failures.", "early_stop.", "locality.")))
    # experiment 1: holding 5-8-GPU gangs to locality makes them wait: strict locality waits longer than Philly's
    # relaxing arm (4,638 s against 810 s at these parameters). The arm without any locality (issue 48: GPUs taken
    # wherever its list of servers starts) waits longest of all (27,842 s; it spreads 99% of them against 16%, and
    # spread jobs run at the replay's spread speed, holding their GPUs longer): an outcome, not a premise of this test
    default_arm = f"relax after {E.short_duration(cal.params.relax_after_s)}"
    loc = "locality.real.{}.{}.queue_mean_s"
    waits = [r[loc.format(arm, "5-8")] for arm in ("no locality (any GPUs)", default_arm, "strict locality")]
    assert waits[1] < waits[2], waits
    # the arms differ in locality: without it a job takes GPUs wherever its list of servers starts
    # (experiments.locality.LocalityBlindPlacement), so it spreads more jobs over servers than Philly's placement at
    # the calibrated timeout, and strict locality spreads only the gangs no server holds (>8 GPUs)
    spread = "locality.real.{}.all.spread_share"
    shares = [r[spread.format(arm)] for arm in ("no locality (any GPUs)", default_arm, "strict locality")]
    assert shares[0] > shares[1] + 0.02 and shares[2] <= shares[1], shares
    # relaxing against strict locality: the wait saved beside the locality given up, size by size
    tradeoff = r["locality.real.relax_tradeoff"]
    assert tradeoff.startswith(f"[mechanism] The tradeoff of relaxing locality at the real load (x1), strict locality "
                               f"→ '{default_arm}': 2-4-GPU jobs' mean first wait "), tradeoff
    assert "; 5-8-GPU jobs' mean first wait " in tradeoff and tradeoff.count(" spread over servers instead of ") == 2
    # holding long jobs strict: their 5-8-GPU wait is no shorter than under Philly's relaxation beyond 5% (at these
    # parameters, under issue 47's calibration (back-off for every job, the headroom clock), 803 s against 810 s: the
    # direction the earlier calibration showed is not shown at 12 one-day blocks)
    assert r[loc.format(f"{default_arm}, long jobs strict", "5-8")] > 0.95 * r[loc.format(default_arm, "5-8")]
    # Whether the wait costs strict locality's 5-8-GPU jobs more than the locality gains them (mean JCT against the
    # relaxed arms) flips with the calibration: above the best relaxed arm under the CI calibration of the one-cluster
    # change (198,389 s against 182,270 s), below it under issue 47's final one (155,061 s against 158,747 s). A sign
    # that depends on the replay is no test of the mechanism: issue 48 answers it across the replays the data allow.
    # migrating long jobs by their remaining time (an oracle) and by their attained service: one sentence, each
    # against Philly's arm, the pooled mean JCTs (by hand, every job that ran weighs the same) and the direction it
    # names as the sweep shows them
    every = E.with_arms(sweep)
    every = every[(every["experiment"] == "locality") & (every["bucket"] == "all")
                  & (every["population"] == "all jobs")]

    def pooled_jct(arm):
        rows = every[every["arm"] == arm].drop_duplicates("block")
        ran = rows["jobs"] - rows["rejected"]
        return (rows["jct_mean_s"] * ran).sum() / ran.sum()

    text = r["locality.real.long_jobs_migrated"]
    assert text.startswith("[mechanism] Mean JCT of all jobs at the real load (x1) against Philly's"), text
    said = re.findall(r"(\S+ \S+) → (\S+ \S+), [^:]+: (lower|higher|no significant difference)", text)
    assert len(said) == 2, text
    for arm, (base_text, arm_text, verdict) in zip(
            (f"{default_arm}, long jobs migrated (remaining time known: oracle)",
             f"{default_arm}, long jobs migrated (run at least 1 h: attained service)"), said, strict=True):
        base, after = pooled_jct(default_arm), pooled_jct(arm)
        assert (base_text, arm_text) == (E.format_seconds(base), E.format_seconds(after)), (arm, text)
        assert verdict == "no significant difference" or (verdict == "lower") == (after < base), (arm, text)
    assert "remaining time known: an oracle" in text and "attained service, which a scheduler knows" in text
    # experiment 3: retrying only the failure classes worth retrying wastes less GPU time than retrying everything
    wasted = {k.split(".")[3]: v for k, v in r.items() if k.endswith("wasted_share")}
    assert set(wasted) == {"retry everything (Philly)", "class-aware retries", "1-GPU pre-run + class-aware"}
    assert max(wasted, key=wasted.get) == "retry everything (Philly)"
    assert wasted["class-aware retries"] < 0.75 * wasted["retry everything (Philly)"]
    # experiment 4: each job is given a real Pollux curve drawn at random and ends within 1% of its best. The
    # quality lost is the drawn curves' mean (4 standard errors of it); the GPU-hours saved
    # is the curves' mean share of epochs after that point, 29% (weighted by each job's GPU-hours: a few
    # points either way), and what the shorter queue saves on placement: the slowdown is part of the replay (issue
    # 47), and with early termination no 5-8-GPU job waits long enough to be spread (34% saved at these parameters)
    points = pollux_stop_points(0.01)
    assert len(points) == 40 and points["quality_lost"].max() <= 0.01
    standard_error = points["quality_lost"].std() / np.sqrt(r["jobs_measured"])
    assert r["early_stop.real.tol_0.01.quality_lost"] == pytest.approx(points["quality_lost"].mean(),
                                                                      abs=4 * standard_error)
    saved = r["early_stop.real.tol_0.01.gpu_hours_saved"]
    assert points["time_after"].mean() - 0.03 <= saved <= points["time_after"].mean() + 0.1
    stops = sweep[(sweep["experiment"] == "early_stop") & (sweep["bucket"] == "5-8")
                  & (sweep["population"] == "all jobs")]
    spread = stops.groupby(stops["tolerance"].fillna(-1))["spread_share"].mean()
    assert spread[0.01] < spread[-1]   # fewer 5-8-GPU jobs spread with early termination than without
    # the saving bootstrapped over the 40 curves, its point by hand: each job of the replay stops at the point of the
    # curve the early-stop arm drew for it (the same seeded draw), weighted by its GPU time (its GPUs x its recorded
    # duration), 1 - sum(GPU time x stop share) / sum(GPU time); the interval brackets it and has width
    from dlcluster.experiments.early_stop import curve_picks
    replayed = E.replay_block_inputs("public", E.grid_spec("small").replay, None).workload
    order = E.early_stop_points("pollux", 0.01)["job"]
    stop_share = 1 - points.set_index("job")["time_after"].reindex(order).to_numpy()
    gpu_time = replayed.num_gpus * replayed.service_s
    by_hand = 1 - (gpu_time * stop_share[curve_picks(len(replayed), 40, 0)]).sum() / gpu_time.sum()
    boot = {k: r[f"early_stop.curve_bootstrap.tol_0.01.{k}"] for k in ("saving", "ci_low", "ci_high")}
    assert boot["saving"] == pytest.approx(by_hand, rel=1e-9)
    assert boot["ci_low"] < boot["saving"] < boot["ci_high"]
    # every arm tested for a steady state, one per arm of the sweep; each arm named unstable has a per-block mean total
    # wait whose least-squares line (by hand) grows at the rate it names, ends at least twice where it starts and
    # grows by at least an hour over the run
    arms = E.with_arms(sweep)
    arms = arms[(arms["bucket"] == "all") & (arms["population"] == "all jobs")]
    keys = ["experiment", "load_label", "interference", "arm"]
    assert r["stability.arms"] == arms.groupby(keys, dropna=False).ngroups
    unstable = {k.removeprefix("stability.").removesuffix(".wait_growth_per_week_h"): v for k, v in r.items()
                if k.endswith(".wait_growth_per_week_h")}
    assert r["stability.unstable_arms"] == len(unstable)
    assert (r["stability.sentence"].startswith(f"{len(unstable)} of {r['stability.arms']} arms have no steady state")
            if unstable else r["stability.sentence"].startswith("Every one of the"))
    by_key = {".".join([e, lk, *([i] if isinstance(i, str) and i else []), a]): rows
              for (e, lk, i, a), rows in arms.groupby(["experiment", "load_key", "interference", "arm"], dropna=False)}
    for where, growth in unstable.items():
        blocks = by_key[where].drop_duplicates("block").sort_values("block")
        assert len(blocks) == 12, where
        slope, intercept = np.polyfit(blocks["block"].astype(float), blocks["wait_total_mean_s"], 1)
        start, end = intercept, intercept + slope * 11
        assert growth == pytest.approx(slope * 7 / 3600, rel=1e-6), where   # daily blocks: hours per week
        assert end >= 2 * start and end - start >= 3600, where
    # experiment 5 at the scaled load (a sensitivity), from the sweep table by hand: the calibrated cluster queues
    # at x1.25, and the sentence names the policy with the lowest mean JCT pooled over the blocks
    policies = sweep[(sweep["experiment"] == "policy") & (sweep["bucket"] == "all")
                     & (sweep["population"] == "all jobs")]
    scaled = policies[policies["load"] == 1.25]
    assert sorted(scaled["policy"].unique()) == ["fifo", "philly"] and len(scaled) == 2 * 12   # 12 blocks each
    ran = scaled["jobs"] - scaled["rejected"]
    jct = (scaled["jct_mean_s"] * ran).groupby(scaled["policy"]).sum() / ran.groupby(scaled["policy"]).sum()
    names = {"fifo": "FIFO", "philly": "Philly"}
    assert (scaled["waited_share"] > 0).any() and jct.max() > 1.005 * jct.min()
    assert (f"at load x1.25 (scaled) the lowest mean JCT of the non-oracle policies was {names[jct.idxmin()]}'s"
            in r["sensitivity.policies"]), r["sensitivity.policies"]


@pytest.mark.notebook
def test_small_grid_figures_and_comparisons(ci_notebook):
    doc = ci_notebook(STEM)
    assert {f["name"] for f in doc["figures"]} == {"0_implications_ensemble", "1_locality", "2_interference",
                                                     "3_failures", "4_early_termination", "5_policies",
                                                     "5_policies_load_sensitivity"}
    # the replay named by notebook 05's count of held-out targets met (dlcluster.experiments.naming)
    assert all(re.search(r"SIMULATED (calibrated replay \(\d+ of \d+ held-out targets met\)|validated replay) of "
                         r"[\d,]+ real Philly jobs", f["data"]) for f in doc["figures"])
    keys = [c["key"] for c in doc["comparisons"]]
    assert keys == ["implications.locality", "implications.interference", "implications.failures",
                    "epochs.last_band_gpu_time_passed_pct", None]
    assert all(c["ours"] and "SIMULATED" in c["data"] for c in doc["comparisons"])
    assert "the real load (x1)" in doc["comparisons"][0]["ours"]
    assert doc["comparisons"][0]["ours"].startswith("[mechanism] Holding 5-8-GPU jobs to strict locality instead of "
                                                    "Philly's")
    # every result sentence carries its kind: the failure experiments' and early termination's are no mechanism
    tags = re.compile(r"\[(mechanism|by construction, not a finding: [^\]]+|assumption, not a finding: [^\]]+)\]")
    assert all(tags.search(c["ours"]) for c in doc["comparisons"] if c["key"] != "epochs.last_band_gpu_time_passed_pct")
    assert "[mechanism]" not in doc["comparisons"][2]["ours"]
    # a direction only where the interval over the blocks excludes no change
    assert re.search(r"(raised|cut|made no significant difference at \d+ blocks to) their mean queueing delay",
                     doc["comparisons"][0]["ours"])
    # experiment 2 under the one assumed interference of params/ci.yaml; the sentence says the result is the
    # assumption's. The small grid runs no everyone-dedicated arm, so the isolating arm it names is the gangs isolated
    text = doc["comparisons"][1]["ours"]
    speeds = {m.group(1): tuple(map(float, m.groups()[1:])) for m in re.finditer(
        r"Assuming interference '([^']+)': \[assumption, not a finding: [^\]]+\] At [^,]+, jobs ran at a mean speed "
        r"of ([\d.]+) with the gangs isolated vs "
        r"([\d.]+) packed and ([\d.]+) spread", text)}
    assert set(speeds) == {"paper"}, text
    r = doc["results"]
    from dlcluster.experiments import DEDICATED_ARM
    arms = ("isolate gangs + migration", "pack (best fit)", "spread (Philly)")
    assert not any(DEDICATED_ARM in k for k in r)
    assert speeds["paper"] == pytest.approx(tuple(r[f"interference.real.paper.{arm}.speed_mean"] for arm in arms),
                                            abs=0.005)
    assert all(0 < r[f"interference.real.paper.{arm}.speed_mean"] <= 1 for arm in arms)
    assert "No data here measure colocation interference: each scenario is an assumption" in text
    assert "x1.25" not in doc["comparisons"][4]["ours"]
