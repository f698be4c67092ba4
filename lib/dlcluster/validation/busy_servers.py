"""What the occupancy record's "active" count is, settled from the data, and the replay in the same units.

The record (``node_sequence``: Helios's per-minute ``active`` and ``total``
Philly nodes) states no definition, and its authors' code only plots it as
running nodes. Three readings are possible: GPUs allocated (in servers' worth),
servers with at least one job, or servers reporting utilization. The public
data can test them:

* **Where it comes from.** At every minute whose ``active`` is 0 (a monitoring
  gap), DRE's own records show jobs running: a count made from the job log
  could not be 0 then, so ``active`` comes from the monitoring (utilization)
  record, and shares its gaps.
* **What ``total`` is.** A fixed set of servers, not the 539 servers with GPUs:
  420 on most days, the official machine list's 552 for two local days, and
  another value for the hour repeated at the daylight-saving change. When the
  set changes, ``active`` jumps at the same minute by about the busy share of
  the servers added: it counts servers of that set, not GPUs.
* **Servers in use, not servers reporting.** ``active`` falls with the load
  (DRE's servers with a job fall with it), it stays at or above the servers
  that DRE's jobs alone occupy nearly every minute, and the share of servers
  not active is below the share of GPU-minutes at 0% in the utilization CDF,
  as it must be if an inactive server's GPUs all read 0%.

:func:`record_evidence` measures each of these; :func:`record_definition_text`
states the reading they support; :func:`replay_in_record_units` puts the
replay beside the record as a count of busy servers, as a share of servers
and as allocated GPUs in 8-GPU servers' worth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .measures import monitoring_gaps, real_allocated_lower_bound

_MINUTE = 60_000_000_000


def _minute_index(times: pd.Series, up: bool = False) -> np.ndarray:
    """Minutes since the epoch of each time, rounded down (or ``up``)."""
    t = pd.to_datetime(pd.Series(times), utc=True)
    t = t.dt.ceil("min") if up else t.dt.floor("min")
    return t.dt.tz_localize(None).to_numpy().astype("datetime64[ns]").astype(np.int64) // _MINUTE


def servers_and_gpus_in_use(attempts: pd.DataFrame, placements: pd.DataFrame, minutes: pd.DatetimeIndex
                            ) -> pd.DataFrame:
    """Per minute of ``minutes`` (UTC, on the minute): servers hosting at least one attempt, and GPUs held.

    An attempt holds its servers from its start's minute up to (not including) its end's minute, rounded up: a
    job that ran during a minute counts in it. Attempts without a start or an end are left out.
    """
    att = attempts.dropna(subset=["start", "end"])
    per_server = (placements.merge(att[["jobid", "attempt", "start", "end"]], on=["jobid", "attempt"])
                  .groupby(["jobid", "attempt", "machine"], observed=True, sort=True)
                  .agg(gpus=("gpu", "size"), start=("start", "first"), end=("end", "first")).reset_index())
    grid = _minute_index(pd.Series(minutes))
    first = np.searchsorted(grid, _minute_index(per_server["start"]))
    last = np.searchsorted(grid, _minute_index(per_server["end"], up=True))
    gpus = np.zeros(len(grid) + 1)
    np.add.at(gpus, first, per_server["gpus"].to_numpy(float))
    np.add.at(gpus, last, -per_server["gpus"].to_numpy(float))
    servers = np.zeros(len(grid), dtype=np.int64)
    for _, rows in per_server.groupby("machine", observed=True, sort=True).indices.items():
        busy = np.zeros(len(grid) + 1, dtype=np.int64)
        np.add.at(busy, first[rows], 1)
        np.add.at(busy, last[rows], -1)
        servers += np.cumsum(busy)[:-1] > 0
    return pd.DataFrame({"servers": servers, "gpus": np.cumsum(gpus)[:-1]}, index=minutes)


def record_evidence(occupancy: pd.DataFrame, attempts: pd.DataFrame, placements: pd.DataFrame,
                    machines: pd.DataFrame, gpu_util_cdf: pd.DataFrame) -> dict:
    """The figures that settle what ``active`` counts (module docstring).

    ``attempts`` and ``placements``: a job set with start times and servers (DRE's records: a sample of the jobs,
    so its servers in use are a lower bound on the cluster's). Returns a dict of plain numbers and a ``totals``
    table (each value of ``total``: minutes, first and last minute).
    """
    occ = occupancy.sort_values("time", kind="stable").set_index("time")
    gaps = monitoring_gaps(occ).to_numpy()
    used = servers_and_gpus_in_use(attempts, placements, occ.index)
    totals = (occ.reset_index().groupby("total", sort=True)["time"].agg(["size", "min", "max"])
              .rename(columns={"size": "minutes", "min": "first", "max": "last"}))
    # where the counted set changes, how far active moves at that minute
    change = np.flatnonzero(np.diff(occ["total"].to_numpy()) != 0)
    jumps = pd.DataFrame({"time": occ.index[change + 1],
                          "total_before": occ["total"].to_numpy()[change],
                          "total_after": occ["total"].to_numpy()[change + 1],
                          "active_before": occ["active"].to_numpy()[change],
                          "active_after": occ["active"].to_numpy()[change + 1]})
    seen = ~gaps
    hourly = pd.DataFrame({"active": occ["active"], "servers": used["servers"], "gpus": used["gpus"]})[seen]
    hourly = hourly.resample("1h").mean().dropna()
    # no ties: only the values are kept, not which server had them
    sizes = np.sort(pd.to_numeric(machines["num_gpus"], errors="coerce").fillna(0).to_numpy(int))[::-1]
    most_gpus = np.concatenate([[0], np.cumsum(sizes)])
    active = occ["active"].to_numpy()[seen]
    at_zero = 1.0 - real_allocated_lower_bound(gpu_util_cdf)
    return {
        "minutes": int(len(occ)), "gap_minutes": int(gaps.sum()),
        "gap_minutes_with_jobs": int((used["servers"].to_numpy()[gaps] > 0).sum()),
        "gap_mean_servers_in_use": float(used["servers"].to_numpy()[gaps].mean()) if gaps.any() else np.nan,
        "totals": totals, "jumps": jumps,
        "modal_total": int(occ["total"].mode().iloc[0]),
        "servers_with_gpus": int((sizes > 0).sum()), "gpus_in_service": int(sizes.sum()),
        "machines_listed": int(len(machines)),
        "servers_used_by_job_set": int(placements["machine"].nunique()),
        "max_active": int(occ["active"].max()),
        "max_active_at_modal_total": int(occ.loc[occ["total"] == occ["total"].mode().iloc[0], "active"].max()),
        "minutes_job_set_above_active": int((used["servers"].to_numpy()[seen] > active).sum()),
        "minutes_compared": int(seen.sum()),
        "job_set_mean_servers": float(used["servers"].to_numpy()[seen].mean()),
        "corr_active_servers": float(hourly["active"].corr(hourly["servers"])),
        "corr_active_gpus": float(hourly["active"].corr(hourly["gpus"])),
        "inactive_share": float(1.0 - (occ["active"] / occ["total"]).to_numpy()[seen].mean()),
        "gpu_minutes_at_zero": at_zero,
        # if active counted servers of those with GPUs, the most GPUs they could hold (largest servers first)
        "max_gpu_share_on_active": float(most_gpus[np.minimum(active, len(sizes))].mean() / sizes.sum()),
        "allocated_lower_bound": 1.0 - at_zero,
    }


def record_definition_text(ev: dict) -> str:
    """The reading of ``active`` that the evidence supports, in sentences generated from its figures."""
    jumps = ev["jumps"]
    growth = jumps[jumps["total_after"] > jumps["total_before"]]
    jump = ""
    if len(growth):
        j = growth.iloc[0]
        added = int(j["total_after"] - j["total_before"])
        moved = int(j["active_after"] - j["active_before"])
        jump = (f" When the set grows from {int(j['total_before'])} to {int(j['total_after'])} servers "
                f"({j['time']:%Y-%m-%d %H:%M} UTC), active moves by {moved:+d} at the same minute, "
                f"{moved / added:.0%} of the servers added: it counts servers of the set, not GPUs.")
    source = ("it comes from the monitoring record, not the job log"
              if ev["gap_minutes"] and ev["gap_minutes_with_jobs"] == ev["gap_minutes"] else
              "the job log cannot rule out that it was counted from the jobs")
    in_use = ev["inactive_share"] <= ev["gpu_minutes_at_zero"]
    fits = ev["max_gpu_share_on_active"] >= ev["allocated_lower_bound"]
    fit_text = (": consistent, but only with the busy servers nearly full" if fits else
                ": they must be counted on another set")
    return (
        f"The record's active count is not defined by its authors; the data support one reading. In all "
        f"{ev['gap_minutes']:,} "
        f"minutes where it is 0, the DRE job records show jobs running ({ev['gap_minutes_with_jobs']:,} minutes, "
        f"{ev['gap_mean_servers_in_use']:.0f} servers in use on average): {source}. Its total is a fixed set of "
        f"servers, {ev['modal_total']} on {ev['totals'].loc[ev['modal_total'], 'minutes'] / ev['minutes']:.0%} of "
        f"the minutes, neither the {ev['servers_with_gpus']} servers with GPUs nor the {ev['machines_listed']} "
        f"listed (the DRE jobs alone used {ev['servers_used_by_job_set']}); read as GPUs in 8-GPU servers' worth it "
        f"would be {8 * ev['modal_total']:,} GPUs, more than the {ev['gpus_in_service']:,} in service, so it counts "
        f"servers.{jump} Active never reaches the set "
        f"(at most {ev['max_active_at_modal_total']} of {ev['modal_total']}), and the servers that DRE's jobs alone "
        f"occupy exceed it in {ev['minutes_job_set_above_active']:,} of {ev['minutes_compared']:,} minutes; hour by "
        f"hour it follows DRE's servers in use (correlation {ev['corr_active_servers']:.2f}) more than DRE's GPUs "
        f"({ev['corr_active_gpus']:.2f}). {ev['inactive_share']:.1%} of the servers are not active on average, "
        f"{'below' if in_use else 'above'} the {ev['gpu_minutes_at_zero']:.1%} of GPU-minutes at 0% in the "
        f"utilization CDF{', as it must be if an inactive server reads 0% on all its GPUs' if in_use else ''}. "
        f"Were the active servers among the {ev['servers_with_gpus']} with GPUs, they could hold at most "
        f"{ev['max_gpu_share_on_active']:.1%} of the {ev['gpus_in_service']:,} GPUs (largest servers first), "
        f"{'above' if fits else 'below'} the {ev['allocated_lower_bound']:.1%} that the CDF says were allocated at "
        f"least{fit_text}. "
        f"Reading: active = servers of the set with at least one GPU in use (a job), as the monitoring saw them "
        f"(whether a server whose only job idles at 0% counts, the public data cannot tell); a replay is compared "
        f"with it as servers with a job, in the record's units."
    )


def replay_in_record_units(result, occupancy: pd.DataFrame, span: tuple | None = None, freq: str = "1h"
                           ) -> pd.DataFrame:
    """Per ``freq`` bin (monitoring gaps left out, within ``span``): the record's active count beside the replay's
    servers with a job (a count), its busy share scaled to the record's total, and its allocated GPUs in 8-GPU
    servers' worth. Columns ``real``, ``total``, ``servers_with_a_job``, ``busy_share_of_total``,
    ``gpus_in_8gpu_servers``."""
    ts = result.timeseries
    times = result.epoch + pd.to_timedelta(ts["time_s"].to_numpy(), unit="s")
    servers = result.topology.num_servers
    busy = pd.Series(servers - ts["idle_servers"].to_numpy(), index=times)
    gpus = pd.Series(ts["allocated_gpus"].to_numpy() / 8.0, index=times)
    occ = occupancy[~monitoring_gaps(occupancy)].set_index("time")
    table = pd.concat([occ["active"].resample(freq).mean().rename("real"),
                       occ["total"].resample(freq).mean().rename("total"),
                       busy.resample(freq).mean().rename("servers_with_a_job"),
                       gpus.resample(freq).mean().rename("gpus_in_8gpu_servers")], axis=1, join="inner").dropna()
    table["busy_share_of_total"] = table["servers_with_a_job"] / servers * table["total"]
    if span is not None:
        table = table[(table.index >= span[0]) & (table.index < span[1])]
    return table


def record_units_errors(table: pd.DataFrame) -> pd.DataFrame:
    """Each replay measure of :func:`replay_in_record_units` against the record: MAE and mean difference in points
    of the record's total, and the hour-by-hour correlation."""
    rows = {}
    for col in ("servers_with_a_job", "busy_share_of_total", "gpus_in_8gpu_servers"):
        diff = 100.0 * (table[col] - table["real"]) / table["total"]
        rows[col] = {"mae_pp": float(diff.abs().mean()), "bias_pp": float(diff.mean()),
                     "correlation": float(table[col].corr(table["real"]))}
    return pd.DataFrame(rows).T
