"""Locality and colocation benchmark of ResNet-50 training (Table 4 of the study).

The study measured a ResNet-50 job's GPU utilization and images/s when its GPUs
share one server, span two servers, and share servers with other jobs. This
harness measures what one machine allows, for a model defined in the project
(:mod:`dlcluster.sources.colocation.resnet`):

========================  ===============================================================
configuration             what runs (K, N: optional count suffix, e.g. ``colocated_gpu3``)
========================  ===============================================================
``alone``                 one training process on one device
``dataparallel[N]``       one job, N DDP processes on N GPUs of this server (CPU: N
                          processes on the CPU, gloo); default N = all GPUs (CPU: 2)
``colocated_gpu[K]``      K independent training processes on the same device (default 2)
``colocated[K]``          same as ``colocated_gpu[K]``
``colocated_server[K]``   K independent processes, each on its own GPU of this server
                          (needs K GPUs; on a CPU every process shares one device: skipped)
``dataparallel_colocated[N]``  the N-GPU DDP job while N independent processes train on
                          the other N GPUs of the server (needs 2N GPUs; default N = half the
                          GPUs; CPU: N = 2, all share it)
========================  ===============================================================

Spanning two servers (the study's DiffServer/InterServer) needs two machines and is
not measured here. Input is synthetic by nature of a throughput benchmark: one
fixed batch of random ImageNet-shaped tensors per process (no data loading), so
the numbers are an upper bound on a real input pipeline. Each process warms up,
all processes pass a barrier together, run ``steps`` timed steps (CUDA
synchronised before and after), and pass a second barrier; GPU utilization is
sampled with NVML in the parent between the two barriers (``NA`` without a GPU
or without ``nvidia-ml-py``). A configuration that needs more GPUs than exist
is written as a ``skipped`` row saying why.

CLI: ``python -m dlcluster.sources.colocation.benchmark --device cpu --model tiny
--configs alone,colocated2 --steps 5 --out results.csv``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import platform
import re
import socket
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import atomic_write_text

CSV_COLUMNS = [
    "config", "repeat", "status", "reason", "device", "hardware", "model", "batch_size", "image_size",
    "steps", "warmup", "processes", "jobs", "processes_per_job", "gpus", "images_per_s_per_job",
    "images_per_s_total", "step_time_s", "gpu_util_pct", "gpu_util_source", "threads_per_process", "input",
    "torch_version", "seed", "started_utc", "load_avg_1min",
]
CONFIG_KINDS = ("alone", "dataparallel", "colocated_gpu", "colocated_server", "dataparallel_colocated")
SYNTHETIC_INPUT = "synthetic: one fixed batch of random ImageNet-shaped tensors per process"
_CONFIG_PATTERN = re.compile(r"^(?P<kind>[a-z_]+?)(?P<count>\d*)$")


@dataclass(frozen=True)
class Config:
    """One configuration: its name as given, its kind and the process/GPU count (None = default)."""

    name: str
    kind: str
    count: int | None


def parse_config(name: str) -> Config:
    """``colocated_gpu3`` -> Config(kind='colocated_gpu', count=3); ``colocated`` is ``colocated_gpu``."""
    match = _CONFIG_PATTERN.match(name.strip())
    kind = match["kind"] if match else ""
    kind = "colocated_gpu" if kind == "colocated" else kind
    if kind not in CONFIG_KINDS:
        raise ValueError(f"unknown configuration {name!r}; expected one of {', '.join(CONFIG_KINDS)} "
                         "(optionally followed by a count, e.g. colocated_gpu2)")
    count = int(match["count"]) if match["count"] else None
    if count is not None and count < 1:
        raise ValueError(f"configuration {name!r}: the count must be at least 1")
    if kind == "alone" and count not in (None, 1):
        raise ValueError(f"configuration {name!r}: 'alone' runs exactly one process")
    if kind.startswith("dataparallel") and count == 1:
        raise ValueError(f"configuration {name!r}: a data-parallel job needs at least 2 processes")
    return Config(name.strip(), kind, count)


@dataclass(frozen=True)
class Process:
    """What one process runs: its device, its job, and its rank within a DDP job."""

    device: str
    job: int
    rank: int = 0
    world_size: int = 1
    measured: bool = True


@dataclass
class Plan:
    processes: list[Process] = field(default_factory=list)
    skipped: str = ""


def plan_config(config: Config, device: str, gpu_count: int) -> Plan:
    """Which processes a configuration starts on this machine, or why it cannot run here.

    ``device`` is ``cpu`` or ``cuda``; ``gpu_count`` the GPUs visible (ignored on CPU).
    """
    on_gpu = device == "cuda"
    if on_gpu and gpu_count < 1:
        return Plan(skipped="no CUDA GPU visible")

    def dev(i: int) -> str:
        return f"cuda:{i}" if on_gpu else "cpu"

    kind, count = config.kind, config.count
    if kind == "alone":
        return Plan([Process(dev(0), job=0)])
    if kind == "colocated_gpu":
        k = count or 2
        return Plan([Process(dev(0), job=j) for j in range(k)])
    if kind == "colocated_server":
        k = count or 2
        if not on_gpu:
            return Plan(skipped="on a CPU every process shares one device; see colocated_gpu")
        if k > gpu_count:
            return Plan(skipped=f"needs {k} GPUs on one server, {gpu_count} visible")
        return Plan([Process(dev(j), job=j) for j in range(k)])
    share = 1 if kind == "dataparallel" else 2  # dataparallel_colocated: as many neighbours as ranks
    n = count or (gpu_count // share if on_gpu else 2)
    if n < 2:
        return Plan(skipped=f"needs {2 * share} GPUs on one server, {gpu_count} visible")
    if on_gpu and share * n > gpu_count:
        return Plan(skipped=f"needs {share * n} GPUs on one server, {gpu_count} visible")
    job = [Process(dev(r), job=0, rank=r, world_size=n) for r in range(n)]
    if kind == "dataparallel":
        return Plan(job)
    neighbours = [Process(dev(n + j), job=1 + j, measured=False) for j in range(n)]
    return Plan(job + neighbours)


@dataclass(frozen=True)
class RunSettings:
    model: str
    batch_size: int
    image_size: int
    steps: int
    warmup: int
    threads: int
    seed: int
    timeout_s: float
    port: int = 0


def _sync(torch, device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _stop_requested(torch, torch_dist, stop, proc: Process, device) -> bool:
    """Whether to stop the background load; the ranks of a DDP job decide together (no hang)."""
    local = stop.is_set()
    if proc.world_size == 1:
        return local
    flag = torch.tensor([1 if local else 0], device=device)
    torch_dist.all_reduce(flag, op=torch_dist.ReduceOp.MAX)
    return bool(flag.item())


def _worker(index: int, proc: Process, settings: RunSettings, barrier, stop, queue) -> None:
    """Train on synthetic input: warm up, pass the start barrier, time ``steps`` steps, report,
    then keep training untimed until the parent says stop, so that every process still in
    its timed window has its neighbours' load."""
    try:
        import torch
        import torch.distributed as torch_dist
        from torch.nn.parallel import DistributedDataParallel

        from .resnet import MODELS, build_model

        torch.set_num_threads(settings.threads)
        torch.manual_seed(settings.seed + index)
        device = torch.device(proc.device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
            torch.backends.cudnn.benchmark = True
        spec = MODELS[settings.model]
        model = build_model(settings.model).to(device)
        if proc.world_size > 1:
            torch_dist.init_process_group(
                "nccl" if device.type == "cuda" else "gloo",
                init_method=f"tcp://127.0.0.1:{settings.port}", rank=proc.rank,
                world_size=proc.world_size)
            model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss()
        images = torch.randn(settings.batch_size, 3, settings.image_size, settings.image_size, device=device)
        labels = torch.randint(0, spec.num_classes, (settings.batch_size,), device=device)

        def step():
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            return loss

        for _ in range(settings.warmup):
            step()
        _sync(torch, device)
        barrier.wait(settings.timeout_s)
        started = time.perf_counter()
        for _ in range(settings.steps):
            loss = step()
        _sync(torch, device)
        elapsed = time.perf_counter() - started
        queue.put({"index": index, "elapsed_s": elapsed, "loss": float(loss.detach().cpu())})
        while not _stop_requested(torch, torch_dist, stop, proc, device):
            step()
        _sync(torch, device)
        if proc.world_size > 1:
            torch_dist.destroy_process_group()
    except BaseException:  # report any failure to the parent, then release the others
        queue.put({"index": index, "error": traceback.format_exc()})
        barrier.abort()


class _NvmlSampler:
    """Samples NVML GPU utilization (% of time a kernel ran) of some GPUs every ``interval_s``."""

    def __init__(self, cuda_indices: list[int], interval_s: float = 0.1):
        self.samples: list[float] = []
        self.source = ""
        self._handles = []
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = None
        try:
            import pynvml
        except ImportError:
            self.source = "NA: nvidia-ml-py (pynvml) not installed"
            return
        try:
            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [self._handle(pynvml, i) for i in cuda_indices]
            self.source = "nvml"
        except Exception as exc:  # NVML missing driver/library: record why, keep benchmarking
            self.source = f"NA: NVML unavailable ({type(exc).__name__}: {exc})"

    @staticmethod
    def _handle(pynvml, cuda_index: int):
        """The NVML handle of CUDA device ``cuda_index``, matched by UUID (CUDA and NVML orders differ)."""
        import torch

        uuid = getattr(torch.cuda.get_device_properties(cuda_index), "uuid", None)
        if uuid is not None:
            return pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}")
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [v for v in visible.split(",") if v.strip()]
        nvml_index = int(ids[cuda_index]) if ids and all(v.strip().isdigit() for v in ids) else cuda_index
        return pynvml.nvmlDeviceGetHandleByIndex(nvml_index)

    def _run(self) -> None:
        while not self._stop.is_set():
            for handle in self._handles:
                self.samples.append(float(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            self._stop.wait(self._interval)

    def start(self) -> None:
        if self._handles:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()

    def stop(self) -> float:
        """Stop sampling; the mean utilization over all sampled GPUs (NaN if none)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        return float(np.mean(self.samples)) if self.samples else float("nan")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def hardware_description(device: str) -> str:
    """CPU model and core count, plus the GPU name on CUDA, for the CSV's ``hardware`` column."""
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    text = f"{cpu}, {os.cpu_count()} logical cores"
    if device == "cuda":
        import torch

        if torch.cuda.is_available():
            text = f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}; host {text}"
    return text


def run_config(config: Config, device: str, settings: RunSettings, gpu_count: int) -> dict:
    """Run one configuration in fresh spawned processes and return its CSV row."""
    import multiprocessing as mp
    import queue as queue_module

    row = {"config": config.name, "status": "ok", "reason": "", "jobs": np.nan, "processes": 0,
           "processes_per_job": np.nan,
           "gpus": 0, "images_per_s_per_job": np.nan, "images_per_s_total": np.nan,
           "step_time_s": np.nan, "gpu_util_pct": np.nan,
           "gpu_util_source": "NA: CPU run" if device == "cpu" else ""}
    plan = plan_config(config, device, gpu_count)
    if plan.skipped:
        row.update(status="skipped", reason=plan.skipped, gpu_util_source="NA: not run")
        return row
    procs = plan.processes
    measured_gpus = sorted({int(p.device.split(":")[1]) for p in procs if p.measured and p.device != "cpu"})
    measured_jobs = [p.job for p in procs if p.measured]
    row.update(processes=len(procs), jobs=len(set(measured_jobs)),
               processes_per_job=len(measured_jobs) // len(set(measured_jobs)),
               gpus=len({p.device for p in procs if p.device != "cpu"}))
    settings = RunSettings(**{**asdict(settings), "port": _free_port()})
    ctx = mp.get_context("spawn")
    barrier, stop, results = ctx.Barrier(len(procs) + 1), ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(i, p, settings, barrier, stop, results), daemon=True)
               for i, p in enumerate(procs)]
    for w in workers:
        w.start()
    sampler = _NvmlSampler(measured_gpus) if device == "cuda" else None
    finished: dict[int, dict] = {}
    try:
        barrier.wait(settings.timeout_s)
        if sampler:
            sampler.start()
        while len(finished) < len(workers):  # until every process has finished its timed window
            item = results.get(timeout=settings.timeout_s)
            finished[item["index"]] = item
            if "error" in item:
                break
    except (threading.BrokenBarrierError, queue_module.Empty):
        pass
    finally:
        util = sampler.stop() if sampler else float("nan")
        stop.set()
        while True:  # an error raised before the start barrier is still in the queue
            try:
                item = results.get(timeout=1)
            except queue_module.Empty:
                break
            if "error" in item or item["index"] not in finished:
                finished[item["index"]] = item
        for w in workers:
            w.join(timeout=60)
            if w.is_alive():
                w.terminate()
                w.join()
    errors = [item["error"] for item in finished.values() if "error" in item]
    if errors or len(finished) < len(workers):
        last_lines = [e.strip().splitlines()[-1] for e in errors]
        # the root cause, not the BrokenBarrierError it caused in the other workers
        causes = [line for line in last_lines if "BrokenBarrierError" not in line] or last_lines
        last_line = causes[0] if causes else "a worker exited without a result"
        row.update(status="failed", reason=last_line)
        return row
    row.update(_throughput(procs, finished, settings))
    if sampler:
        row.update(gpu_util_pct=util, gpu_util_source=sampler.source)
    return row


def _throughput(procs: list[Process], finished: dict[int, dict], settings: RunSettings) -> dict:
    """Images/s per measured job (its ranks' images over its slowest rank's time) and in total."""
    frame = pd.DataFrame([{"job": p.job, "measured": p.measured, "elapsed_s": finished[i]["elapsed_s"]}
                          for i, p in enumerate(procs)])
    images = settings.steps * settings.batch_size
    per_job = frame.groupby("job").agg(ranks=("elapsed_s", "size"), elapsed_s=("elapsed_s", "max"),
                                       measured=("measured", "first"))
    per_job["images_per_s"] = per_job["ranks"] * images / per_job["elapsed_s"]
    measured = per_job[per_job["measured"]]
    return {"images_per_s_per_job": float(measured["images_per_s"].mean()),
            "images_per_s_total": float(per_job["images_per_s"].sum()),
            "step_time_s": float((measured["elapsed_s"] / settings.steps).mean())}


def run_benchmark(configs: list[str], device: str, model: str, steps: int, warmup: int,
                  batch_size: int | None = None, image_size: int | None = None, threads: int = 1,
                  seed: int = 0, timeout_s: float = 600.0, repeats: int = 1) -> pd.DataFrame:
    """Run the configurations in turn, ``repeats`` rounds (interleaved, so that a change in the
    machine's background load hits every configuration alike); one CSV row per configuration
    and round (ok, skipped or failed). ``load_avg_1min`` records the host's load at each start."""
    import torch

    from .resnet import MODELS

    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; expected one of {sorted(MODELS)}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if steps < 1 or warmup < 0 or repeats < 1:
        raise ValueError("steps and repeats must be >= 1 and warmup >= 0")
    parsed = [parse_config(c) for c in configs]
    spec = MODELS[model]
    settings = RunSettings(model=model, batch_size=batch_size or spec.default_batch_size,
                           image_size=image_size or spec.image_size, steps=steps, warmup=warmup,
                           threads=threads, seed=seed, timeout_s=timeout_s)
    gpu_count = torch.cuda.device_count() if device == "cuda" else 0
    common = {"device": device, "hardware": hardware_description(device), "model": model,
              "batch_size": settings.batch_size, "image_size": settings.image_size, "steps": steps,
              "warmup": warmup, "threads_per_process": threads, "input": SYNTHETIC_INPUT,
              "torch_version": torch.__version__, "seed": seed}
    rows = []
    for repeat in range(repeats):
        for config in parsed:
            started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            rows.append({**common, "repeat": repeat, "started_utc": started, "load_avg_1min": os.getloadavg()[0],
                         **run_config(config, device, settings, gpu_count)})
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


def write_results(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write the benchmark CSV atomically."""
    buffer = io.StringIO()
    frame[CSV_COLUMNS].to_csv(buffer, index=False)
    return atomic_write_text(path, buffer.getvalue())


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a benchmark CSV, checking it has every documented column."""
    frame = pd.read_csv(path, keep_default_na=True)
    missing = [c for c in CSV_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: not a colocation benchmark CSV, missing columns {missing}")
    bad = ~frame["status"].isin(["ok", "skipped", "failed"])
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 2
        raise ValueError(f"{path}, line {line}: field 'status' is {frame['status'][bad].iloc[0]!r}; "
                         "expected ok, skipped or failed")
    return frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlcluster.sources.colocation.benchmark",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--model", choices=["tiny", "resnet50"], default="resnet50")
    parser.add_argument("--configs", default="alone,dataparallel,colocated_server,colocated_gpu",
                        help="comma-separated: " + ", ".join(CONFIG_KINDS) + " (optional count suffix)")
    parser.add_argument("--steps", type=int, default=50, help="timed training steps per process")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps before timing")
    parser.add_argument("--batch-size", type=int, default=None, help="per process (default: per model)")
    parser.add_argument("--image-size", type=int, default=None, help="default: 224 for resnet50, 32 for tiny")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads per process")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over all configurations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait at each barrier")
    parser.add_argument("--out", required=True, help="CSV to write (atomically)")
    args = parser.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c.strip()]
    for c in configs:  # fail before starting any process
        try:
            parse_config(c)
        except ValueError as exc:
            parser.error(str(exc))
    if args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        parser.error("--steps and --repeats must be >= 1 and --warmup >= 0")
    frame = run_benchmark(configs, args.device, args.model, args.steps, args.warmup, args.batch_size,
                          args.image_size, args.threads, args.seed, args.timeout, args.repeats)
    path = write_results(frame, args.out)
    print(frame[["config", "repeat", "status", "processes", "images_per_s_per_job", "images_per_s_total",
                 "gpu_util_pct", "reason"]].to_string(index=False))
    print(f"wrote {path}")
    return 1 if (frame["status"] == "failed").any() else 0


if __name__ == "__main__":
    sys.exit(main())
