"""What locality and colocation cost a training job (Table 4 of the study and its inputs).

Two measured sources, both real:

* (c) the public learning-curve data (Pollux artifact, six models):
  ``data/external/learning_curves/<model>/placements.csv`` holds the measured
  step time of each placement -- a string of GPUs per server, ``4`` = 4 GPUs on
  one server, ``22`` = 2+2 on two, ``1111`` = one on each of four -- at several
  per-GPU batch sizes. :func:`placement_slowdowns` divides the step time of each
  spread placement by that of the one-server placement with the same GPU count
  and the same per-GPU batch size (``local_bsz``). Servers there hold at most
  4 GPUs, so only 2-4 GPU jobs have a one-server baseline.
* (b) our colocation benchmark (:mod:`dlcluster.sources.colocation.benchmark`), a CSV per
  machine: :func:`benchmark_slowdowns` gives each configuration's per-process
  throughput relative to one process running alone in the same round.

A slowdown is a time ratio (>= 1 means slower); the simulator's speed factor is
its inverse.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..paths import external_dir

PLACEMENT_COLUMNS = ["placement", "local_bsz", "step_time", "sync_time"]


def learning_curves_dir() -> Path:
    return external_dir() / "learning_curves"


def parse_placement(placement: str) -> list[int]:
    """``"1123"`` -> [1, 1, 2, 3]: GPUs on each server used."""
    text = str(placement).strip()
    if not text or not text.isdigit() or "0" in text:
        raise ValueError(f"placement {placement!r}: expected digits 1-9, one per server (GPUs on it)")
    return [int(c) for c in text]


def read_placements(path: str | Path, model: str) -> pd.DataFrame:
    """One model's measured placements, validated (errors name the file, line and field)."""
    path = Path(path)
    table = pd.read_csv(path, dtype={"placement": str})
    missing = [c for c in PLACEMENT_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing}")
    for index, value in table["placement"].items():
        try:
            parse_placement(value)
        except ValueError as exc:
            raise ValueError(f"{path}, line {index + 2}: field 'placement': {exc}") from None
    for column in ("local_bsz", "step_time", "sync_time"):
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() | (values < 0) | ((values == 0) & (column != "sync_time"))
        if bad.any():
            index = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{path}, line {index + 2}: field {column!r} is {table[column].iloc[index]!r}; "
                             "expected a positive number")
        table[column] = values
    servers = table["placement"].map(parse_placement)
    return pd.DataFrame({"model": model, "placement": table["placement"],
                         "num_gpus": servers.map(sum).astype("int64"),
                         "num_servers": servers.map(len).astype("int64"),
                         "local_bsz": table["local_bsz"].astype("int64"),
                         "step_time": table["step_time"], "sync_time": table["sync_time"]})


def load_placements(directory: str | Path | None = None, models: list[str] | None = None) -> pd.DataFrame:
    """Every model's ``placements.csv`` under ``directory`` (default: the public learning curves)."""
    directory = Path(directory) if directory else learning_curves_dir()
    files = sorted(directory.glob("*/placements.csv"))
    if models is not None:
        files = [f for f in files if f.parent.name in models]
    if not files:
        raise FileNotFoundError(f"no <model>/placements.csv under {directory}")
    return pd.concat([read_placements(f, f.parent.name) for f in files], ignore_index=True)


def placement_slowdowns(placements: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Step time of each spread placement / the one-server placement's, same model, GPUs and batch.

    Returns ``(slowdowns, dropped)``: one row per spread measurement with
    ``baseline_step_time`` and ``slowdown``; ``dropped`` counts the spread rows
    that have no baseline, by reason. Repeated measurements of one placement and
    batch size are averaged first (their count is in ``dropped`` too).
    """
    keys = ["model", "placement", "num_gpus", "num_servers", "local_bsz"]
    repeats = placements.duplicated(keys)
    means = placements.groupby(keys, as_index=False, sort=True)[["step_time", "sync_time"]].mean()
    single = means[means["num_servers"] == 1]
    baseline = single.set_index(["model", "num_gpus", "local_bsz"])["step_time"].rename("baseline_step_time")
    spread = means[means["num_servers"] > 1].join(baseline, on=["model", "num_gpus", "local_bsz"])
    gpus_with_baseline = set(zip(single["model"], single["num_gpus"], strict=True))
    no_size = ~pd.Series([(m, g) in gpus_with_baseline
                          for m, g in zip(spread["model"], spread["num_gpus"], strict=True)],
                         index=spread.index, dtype=bool)
    no_batch = spread["baseline_step_time"].isna() & ~no_size
    dropped = pd.DataFrame({"reason": [
        "repeated measurement of a placement and batch size (averaged)",
        "no one-server placement with that many GPUs (servers hold at most 4 GPUs in this data)",
        "one-server placement not measured at that per-GPU batch size"],
        "rows": [int(repeats.sum()), int(no_size.sum()), int(no_batch.sum())]})
    out = spread[spread["baseline_step_time"].notna()].copy()
    out["slowdown"] = out["step_time"] / out["baseline_step_time"]
    return out.reset_index(drop=True), dropped


def _geomean(values: pd.Series) -> float:
    return float(np.exp(np.log(values).mean()))


def slowdown_summary(slowdowns: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Measurements, geometric mean, median, min and max slowdown per group."""
    grouped = slowdowns.groupby(by, sort=True)["slowdown"]
    return grouped.agg(measurements="size", geomean=_geomean, median="median", min="min",
                       max="max").reset_index()


def spread_slowdown_by_model(slowdowns: pd.DataFrame) -> pd.DataFrame:
    """Per model, the median slowdown of a spread placement; plus the median over models (``all``).

    Each model counts once in ``all`` however many placements it was measured on.
    """
    per_model = slowdown_summary(slowdowns, ["model"])
    overall = {"model": "all (median of models)", "measurements": int(per_model["measurements"].sum()),
               "geomean": float(np.median(per_model["geomean"])), "median": float(np.median(per_model["median"])),
               "min": float(per_model["min"].min()), "max": float(per_model["max"].max())}
    return pd.concat([per_model, pd.DataFrame([overall])], ignore_index=True)


def spread_speed_factor(by_model: pd.DataFrame) -> float:
    """The speed factor of a spread placement measured as the simulator fits it: the median over models of each
    model's speed (1 / its median slowdown; ``by_model``: :func:`spread_slowdown_by_model`).

    Not 1 / the ``all`` row's median slowdown: over an even number of models a median averages the middle two, and
    the inverse of an average is not the average of the inverses (six models: 0.719 against 0.680).
    """
    per_model = by_model.loc[~by_model["model"].str.startswith("all"), "median"].to_numpy(float)
    if not len(per_model):
        raise ValueError("spread_speed_factor: no model's slowdown")
    return float(np.median(1.0 / per_model))


BENCH_MEASURES = ["images_per_s_per_job", "images_per_s_total", "step_time_s", "gpu_util_pct"]


def benchmark_by_config(bench: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration (in CSV order): the median of each measure over its successful
    repeats, ``repeats_ok`` of ``repeats``; a configuration that never succeeded keeps its first
    row's status and reason."""
    ok = bench[bench["status"] == "ok"]
    medians = ok.groupby("config", sort=False)[BENCH_MEASURES].median()
    out = bench.drop_duplicates("config").set_index("config").drop(columns=BENCH_MEASURES).join(medians)
    out["repeats"] = bench.groupby("config").size()
    out["repeats_ok"] = ok.groupby("config").size().reindex(out.index, fill_value=0)
    out.loc[out["repeats_ok"] > 0, ["status", "reason"]] = ["ok", ""]
    return out.reset_index()


def benchmark_slowdowns(bench: pd.DataFrame) -> pd.DataFrame:
    """Per configuration that ran, throughput per process and slowdown vs one process alone.

    Per process = images/s of a measured job / its processes (a DDP job of N
    processes counts N). Slowdown = the same round's ``alone`` images/s / that,
    so a change of the machine's background load between rounds cancels; the
    median over rounds is reported (rounds without a successful ``alone`` are left out).
    """
    ok = bench[bench["status"] == "ok"].copy()
    ok["images_per_s_per_process"] = ok["images_per_s_per_job"] / ok["processes_per_job"]
    alone = ok[ok["config"] == "alone"].set_index("repeat")["images_per_s_per_process"]
    if alone.empty:
        raise ValueError("benchmark has no successful 'alone' row to compare with")
    ok["slowdown_vs_alone"] = ok["repeat"].map(alone) / ok["images_per_s_per_process"]
    per_round = ok.groupby("config", sort=False).agg(
        images_per_s_per_process=("images_per_s_per_process", "median"),
        slowdown_vs_alone=("slowdown_vs_alone", "median"))
    ran = benchmark_by_config(bench).join(per_round, on="config", how="inner")
    return ran[["config", "repeats_ok", "processes", "processes_per_job", "jobs", "images_per_s_per_job",
                "images_per_s_per_process", "slowdown_vs_alone", "gpu_util_pct"]].reset_index(drop=True)
