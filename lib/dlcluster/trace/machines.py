"""Machine lists: the official one, the reconstruction, and their disagreement.

The released ``cluster_machine_list`` gives wrong GPU counts (philly-traces
issue #8: it says 2 or 8 GPUs per server, while the GPU-utilization file shows
servers with 8, 4, 3, 2 and 0 GPUs). The reconstructed list, derived from the
utilization file, is authoritative for ``num_gpus``; the official count is kept
beside it as ``num_gpus_listed``.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pandas as pd

from .quality import QualityReport, TraceFormatError, not_utf8

_MEM = re.compile(r"^\d+(\.\d+)?\s*[GM]B$")


def _read_list(path: str | Path, file: str, **options) -> pd.DataFrame:
    """A machine list as strings (a UTF-8 BOM is skipped); unreadable input is a TraceFormatError naming the file."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8", **options)
    except UnicodeDecodeError as exc:
        with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as fh:
            data = fh.read()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as where:
            raise not_utf8(file, data, where) from None
        raise TraceFormatError(f"{file}: not valid UTF-8 ({exc})") from None
    except pd.errors.EmptyDataError:
        raise TraceFormatError(f"{file}: empty file (expected a header line)") from None
    except pd.errors.ParserError as exc:
        raise TraceFormatError(f"{file}: {str(exc).replace('Error tokenizing data. C error: ', '')}") from None


def read_official_machine_list(path: str | Path, quality: QualityReport, file: str | None = None) -> pd.DataFrame:
    """``machineId, number of GPUs, single GPU mem`` -> machine, num_gpus_listed, gpu_mem."""
    file = file or Path(path).name
    raw = _read_list(path, file, skipinitialspace=True)
    expected = ["machineId", "number of GPUs", "single GPU mem"]
    if [c.strip() for c in raw.columns] != expected:
        raise TraceFormatError(f"{file}: line 1: header {list(raw.columns)} is not the expected {expected}")
    raw.columns = expected
    quality.read(file, len(raw))
    gpus = pd.to_numeric(raw["number of GPUs"].str.strip(), errors="coerce")
    bad = gpus.isna() | (gpus < 0) | (raw["machineId"].str.strip() == "")
    for i in raw.index[bad]:
        quality.quarantine(file, "machineId empty or GPU count not a non-negative integer", where=f"line {i + 2}")
    dup = raw["machineId"].duplicated() & ~bad
    for i in raw.index[dup]:
        quality.quarantine(file, "duplicate machineId", where=f"line {i + 2}")
    keep = ~bad & ~dup
    quality.loaded(file, int(keep.sum()))
    mem = raw["single GPU mem"].str.strip()
    quality.flag(file, "GPU memory not like '12GB'", int((~mem[keep].str.match(_MEM)).sum()))
    return pd.DataFrame({"machine": raw.loc[keep, "machineId"].str.strip().to_numpy(),
                         "num_gpus_listed": gpus[keep].astype("int64").to_numpy(),
                         "gpu_mem": mem[keep].to_numpy()})


def read_reconstructed_machine_list(path: str | Path, quality: QualityReport, file: str | None = None) -> pd.DataFrame:
    """The reconstructed list (``,machineId,number of GPUs``) -> machine, num_gpus."""
    file = file or Path(path).name
    raw = _read_list(path, file)
    if "machineId" not in raw or "number of GPUs" not in raw:
        raise TraceFormatError(f"{file}: line 1: expected columns 'machineId' and 'number of GPUs', "
                               f"got {list(raw.columns)}")
    quality.read(file, len(raw))
    gpus = pd.to_numeric(raw["number of GPUs"], errors="coerce")
    bad = gpus.isna() | (gpus < 0) | (raw["machineId"].str.strip() == "") | raw["machineId"].duplicated()
    for i in raw.index[bad]:
        quality.quarantine(file, "machineId empty/duplicate or GPU count invalid", where=f"line {i + 2}")
    quality.loaded(file, int((~bad).sum()))
    return pd.DataFrame({"machine": raw.loc[~bad, "machineId"].str.strip().to_numpy(),
                         "num_gpus": gpus[~bad].astype("int64").to_numpy()})


def reconstruct_from_gpu_util(gpu_util: pd.DataFrame) -> pd.DataFrame:
    """GPUs per server = GPU columns that ever report a value (all-NA servers get 0)."""
    seen = gpu_util[gpu_util["util"].notna()].groupby("machine")["gpu"].nunique()
    machines = pd.Index(gpu_util["machine"].unique(), name="machine")
    return pd.DataFrame({"machine": machines,
                         "num_gpus": seen.reindex(machines, fill_value=0).astype("int64").to_numpy()})


def _flag_gpu_beyond_count(placements: pd.DataFrame, machines: pd.DataFrame, quality: QualityReport,
                           file: str) -> None:
    """Placements on a GPU the server does not have (index >= its GPU count): kept, flagged."""
    count = placements["machine"].map(machines.set_index("machine")["num_gpus"])
    beyond = (placements["gpu"] >= count).fillna(False).to_numpy(dtype=bool)
    rows = placements[beyond].assign(count=count[beyond])
    quality.flag_many(file, "placement on a GPU index beyond the server's GPU count (kept)", int(beyond.sum()),
                      (f"job {r.jobid} attempt {r.attempt}: {r.machine} gpu{r.gpu} of {r.count}"
                       for r in rows.itertuples(index=False)))


def combine_machine_lists(official: pd.DataFrame | None, reconstructed: pd.DataFrame | None,
                          placements: pd.DataFrame, quality: QualityReport, file: str) -> pd.DataFrame:
    """One machines table; machines only seen in placements are added and flagged."""
    official = official if official is not None else pd.DataFrame(columns=["machine", "num_gpus_listed", "gpu_mem"])
    reconstructed = reconstructed if reconstructed is not None else pd.DataFrame(columns=["machine", "num_gpus"])
    merged = reconstructed.merge(official, on="machine", how="outer")
    used = placements.groupby("machine")["gpu"].max().add(1)
    missing = used.index.difference(pd.Index(merged["machine"]))
    extra = pd.DataFrame({"machine": missing, "num_gpus": pd.NA, "num_gpus_listed": pd.NA, "gpu_mem": pd.NA})
    merged["in_job_log_only"] = False
    extra["in_job_log_only"] = True
    merged = pd.concat([merged, extra], ignore_index=True) if len(extra) else merged
    # A machine without a reconstructed count falls back to the official count, then to the
    # highest GPU index the job log used on it; each fallback is flagged.
    no_recon = merged["num_gpus"].isna()
    quality.flag(file, "machine absent from the reconstructed list (GPU count from the official list)",
                 int((no_recon & merged["num_gpus_listed"].notna()).sum()))
    quality.flag(file, "machine in the job log but in no machine list (GPU count from its placements)", len(missing))
    merged["num_gpus"] = merged["num_gpus"].fillna(merged["num_gpus_listed"]).fillna(merged["machine"].map(used))
    merged["num_gpus"] = merged["num_gpus"].astype("Int64")
    merged["num_gpus_listed"] = merged["num_gpus_listed"].astype("Int64")
    _flag_gpu_beyond_count(placements, merged, quality, file)
    merged["gpu_mem"] = merged["gpu_mem"].astype("string")
    merged["gpu_count_disagrees"] = (merged["num_gpus_listed"].notna()
                                     & (merged["num_gpus"] != merged["num_gpus_listed"])).fillna(False).astype(bool)
    quality.flag(file, "official GPU count disagrees with the reconstruction (philly-traces issue #8)",
                 int(merged["gpu_count_disagrees"].sum()))
    merged["in_job_log_only"] = merged["in_job_log_only"].astype(bool)
    number = merged["machine"].str.extract(r"(\d+)$")[0].astype(float).fillna(-1)   # m2 before m10
    ordered = merged.assign(number=number).sort_values(["number", "machine"], kind="stable")
    return ordered.reset_index(drop=True)[["machine", "num_gpus", "num_gpus_listed", "gpu_mem",
                                           "gpu_count_disagrees", "in_job_log_only"]]
