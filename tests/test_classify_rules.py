"""The rule-based failure classifier (dlcluster.analysis.classify) and its rule file."""

import textwrap

import pytest

from dlcluster.analysis.classify import NO_SIGNATURE, RuleSet, classify, classify_dir, load_rules

# The failure reasons the paper names (shared/reference/atc19_published.md, section 4.2:
# "failure reasons defined" and "other reasons named", the rows of its failure table).
PAPER_REASONS = [
    "incorrect inputs", "semantic error", "model checkpoint error", "MPI runtime failure", "job preempted",
    "invalid memory access", "CPU out of memory", "GPU out of memory", "core dump", "CUDA failure",
    "syntax error", "import error", "permission error", "CUDA init failed", "model diverged",
    "CUDA version mismatch", "GPU ECC error", "cannot load libs", "no signature",
]


def test_rule_file_covers_every_reason_the_paper_names():
    rules = load_rules()
    labels = [r.label for r in rules.reasons.values()] + [rules.no_signature.label]
    assert sorted(labels) == sorted(PAPER_REASONS)
    assert set(rules.categories) == {"infrastructure", "ai_engine", "user"}
    ruled = {rule.reason for rule in rules.rules}
    assert ruled == set(rules.reasons)


@pytest.mark.parametrize("text, reason, rule_id", [
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB", "gpu_out_of_memory", "torch-cuda-oom"),
    ("PermissionError: [Errno 13] Permission denied: 'data/train.tsv'", "permission_error", "permission-denied"),
    ("ModuleNotFoundError: No module named 'tensorflow'", "import_error", "python-module-not-found"),
    ("  File \"train.py\", line 3\n    print 'x'\nSyntaxError: invalid syntax", "syntax_error", "python-syntax-error"),
    ("java.io.FileNotFoundException: File does not exist: hdfs://x/y", "incorrect_inputs", "hdfs-file-not-found"),
    ("MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD", "mpi_runtime_failure", "mpi-abort"),
    ("Container preempted by scheduler", "job_preempted", "yarn-preempted"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu_ecc_error", "cuda-ecc"),
    ("AssertionError: Model diverged with loss = NaN", "model_diverged", "nan-loss"),
])
def test_single_signatures(text, reason, rule_id):
    m = classify(text)
    assert (m.reason, m.rule_id) == (reason, rule_id)


@pytest.mark.parametrize("text, reason", [
    # a checkpoint write that fails with EACCES is a checkpoint error, not a permission error
    ("saving\nPermissionError: [Errno 13] Permission denied: 'out/checkpoints/model.ckpt'", "model_checkpoint_error"),
    # the loader's message wrapped in an ImportError is a missing library, not a missing module
    ("ImportError: libcudnn.so.7: cannot open shared object file: No such file or directory", "cannot_load_libs"),
    # CUDA's own "out of memory" is GPU memory, not a generic CUDA failure or CPU memory
    ("RuntimeError: CUDA error: out of memory", "gpu_out_of_memory"),
    # a segfault also dumps core: the more specific reason wins
    ("run.sh: line 3:  99 Segmentation fault      (core dumped) python train.py", "invalid_memory_access"),
    # an ECC error reported as a CUDA error is an ECC error
    ("CUDA error: uncorrectable ECC error encountered\nCUDA error: unspecified launch failure", "gpu_ecc_error"),
    # preemption kills the program, whatever it printed last
    ("epoch 3\nSegmentation fault\nContainer preempted by scheduler", "job_preempted"),
    # a plain SIGTERM from the scheduler is a preemption (issue 12)
    ("epoch 7\nTerminated: job received SIGTERM (preempted)", "job_preempted"),
    # a checkpoint path alone does not make a permission error a checkpoint error: here nothing is saved (issue 12)
    (("  File \"train.py\", line 9, in resume\n    with open('out/checkpoints/model.ckpt', 'rb') as f:\n"
      "PermissionError: [Errno 13] Permission denied: 'out/checkpoints/model.ckpt'"), "permission_error"),
    # a full disk while torch.save writes is a checkpoint error
    ("    torch.save(model.state_dict(), 'best.pt')\nOSError: [Errno 28] No space left on device",
     "model_checkpoint_error"),
    # the launcher's SIGTERM to the other ranks follows the real cause
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered\nSending process 7 closing signal SIGTERM",
     "gpu_ecc_error"),
    # bad_alloc aborts and dumps core, but the cause is memory
    ("terminate called after throwing an instance of 'std::bad_alloc'\nAborted (core dumped)", "cpu_out_of_memory"),
    # round 2 of the real-message tuning (data/failure_messages/README.md):
    # TensorFlow's OOM on the CPU device is host memory, on a GPU device GPU memory
    (("Resource exhausted: OOM when allocating tensor with shape[64,8] and type float on "
      "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu"), "cpu_out_of_memory"),
    (("Resource exhausted: OOM when allocating tensor with shape[64,8] and type float on "
      "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc"), "gpu_out_of_memory"),
    # a private submodule gone from an installed package is a version mismatch; a missing package or an
    # unbuilt compiled extension is an import error
    ("ModuleNotFoundError: No module named 'torch._six'", "semantic_error"),
    ("ModuleNotFoundError: No module named 'maskrcnn_benchmark._C'", "import_error"),
    ("ModuleNotFoundError: No module named 'apex'", "import_error"),
    # an aborted NCCL communicator takes the process down: the terminate is the consequence
    (("RuntimeError: NCCL communicator was aborted on rank 3.\n"
      "terminate called after throwing an instance of 'std::runtime_error'"), "mpi_runtime_failure"),
    # NCCL calls a vanished peer an internal error; the transport line names the cause
    (("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, internal error\n"
      "Net : Connection closed by remote peer host<50260>"), "mpi_runtime_failure"),
    # a missing cuDNN library aborts the process: the library is the cause
    (("Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object file: "
      "No such file or directory\nAborted (core dumped)"), "cannot_load_libs"),
    # a bare 'Killed' from the shell is the OOM killer; a word 'Killed' inside another line is no evidence
    ("epoch 3 loss 0.41\nKilled", "cpu_out_of_memory"),
    ("epoch 3 loss 0.41\nKilled the stale worker and retried", NO_SIGNATURE),
    # round 3 (all 301 real messages, data/failure_messages/README.md): a rank's segfault is the root cause, also
    # where Open MPI wraps the line; a SIGKILLed rank stays an MPI runtime failure (the labels' convention)
    ("mpirun noticed that process rank 3 with PID 4242 on node gpu07 exited on signal 11 (Segmentation fault).",
     "invalid_memory_access"),
    ("prterun noticed that process rank 1 with PID 8705 on node vm exited on\nsignal 11 (Segmentation fault).",
     "invalid_memory_access"),
    ("mpirun noticed that process rank 3 with PID 4242 on node gpu07 exited on signal 9 (Killed).",
     "mpi_runtime_failure"),
    # a busy GPU is the cause, the elastic agent's SIGTERM its consequence; alone, the SIGTERM is a preemption
    (("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n"
      "torch.distributed.elastic.multiprocessing.api.SignalException: Process 77 got signal: 15"), "cuda_init_failed"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 77 got signal: 15", "job_preempted"),
    # PyTorch 0.x's wording of CUDA error 2 is GPU memory, not a generic CUDA failure
    ("RuntimeError: cuda runtime error (2) : out of memory at /tmp/THC/THCCachingAllocator.cpp:510",
     "gpu_out_of_memory"),
    # a full disk is a checkpoint error, but a full /dev/shm of DataLoader workers is not: it is host shared memory
    # (round 4: the heldout3 convention for DataLoader shared-memory exhaustion is CPU out of memory)
    ("OSError: [Errno 28] No space left on device", "model_checkpoint_error"),
    ("RuntimeError: unable to write to file </torch_31_2087>: No space left on device (28)", "cpu_out_of_memory"),
    # bash's report of a SIGKILLed job, and 'Killed' at the end of a progress bar, are the OOM killer
    ("train.sh: line 12: 31337 Killed                  python train.py", "cpu_out_of_memory"),
    (" 45%|#####     | 450/1000 [01:02<01:16,  7.19it/s]Killed", "cpu_out_of_memory"),
    ("[2024-01-01 10:00:00] INFO worker finished; Killed 3 stale processes", NO_SIGNATURE),
    # a model file that does not fit the model cannot be loaded: incorrect inputs
    ("RuntimeError: Error(s) in loading state_dict for ResNet:\n\tMissing key(s) in state_dict: \"fc.weight\"",
     "incorrect_inputs"),
    # an import error without the exception's name
    ("No module named 'torchvision'", "import_error"),
    # round 4 (all 403 real messages, data/failure_messages/README.md): wording families from the frameworks' sources.
    # Model writers fail in their own words, any errno; a lower-case quota is still a full storage
    ("RuntimeError: [enforce fail at inline_container.cc:300] . unexpected pos 1600 vs 1494", "model_checkpoint_error"),
    ("RuntimeError: Parent directory ./runs/exp1 does not exist.", "model_checkpoint_error"),
    ("RuntimeError: File out/checkpoints/checkpoint_0.pt cannot be opened.", "model_checkpoint_error"),
    ("[BondReader] File data/bonds.txt cannot be opened.", NO_SIGNATURE),  # a reader's generic wording
    ("ResourceExhaustedError: runs/model.ckpt-9.data-00000-of-00001; No space left on device",
     "model_checkpoint_error"),
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: disk quota exceeded [Op:SaveV2]",
     "model_checkpoint_error"),
    (("OSError: Unable to create file (unable to open file: name = 'w.h5', errno = 13, error message = 'Permission "
      "denied', flags = 13, o_flags = 242)"), "model_checkpoint_error"),
    # ... while TF1's restore node, in the same 'save' name scope, is a read and no evidence of a write
    ("[[Node: save/RestoreV2 = RestoreV2[dtypes=[DT_FLOAT]]]", NO_SIGNATURE),
    # a model or data file that cannot be read: truncated HDF5 (also h5py 3's 'synchronously'), EIO on a named input;
    # but h5py opening a file without permission stays a permission error, and an EIO with no file (print to a
    # closed terminal) is no evidence
    ("OSError: Unable to synchronously open file (truncated file: eof = 96, sblock->base_addr = 0, stored_eof = 2048)",
     "incorrect_inputs"),
    (("OSError: Unable to open file (unable to open file: name = 'x.h5', errno = 13, error message = 'Permission "
      "denied', flags = 0, o_flags = 0)"), "permission_error"),
    ("cat: /mnt/hdfs/train/part-0001: Input/output error", "incorrect_inputs"),
    ("OSError: [Errno 5] Input/output error", NO_SIGNATURE),
    # a checkpoint path that does not exist is one being loaded (incorrect inputs); a read-only file system
    # refusing a model file is a write
    ("FileNotFoundError: [Errno 2] No such file or directory: 'checkpoints/model_best.pth'", "incorrect_inputs"),
    ("OSError: [Errno 30] Read-only file system: '/models/best.pt'", "model_checkpoint_error"),
    # a traceback frame that loads a checkpoint is no checkpoint write
    ("  File \"train.py\", line 80, in load_checkpoint\n_pickle.UnpicklingError: invalid load key, 'v'.",
     "incorrect_inputs"),
    # a CUDA library that cannot be loaded is the cause of the failed cuInit that follows; TensorRT's optional
    # libnvinfer warning is no evidence at all
    (("W dso_loader.cc:55] Could not load dynamic library 'libcuda.so.1'; dlerror: libcuda.so.1: cannot open shared "
      "object file: No such file or directory\nE cuda_driver.cc:318] failed call to cuInit: UNKNOWN ERROR (303)"),
     "cannot_load_libs"),
    ("I tensorflow/stream_executor/cuda/cuda_dnn.cc:1062] Unable to load cuDNN DSO.", "cannot_load_libs"),
    (("W dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open "
      "shared object file: No such file or directory"), NO_SIGNATURE),
    (("W dso_loader.cc:64] Could not load dynamic library 'libnvinfer.so.7'; dlerror: libnvinfer.so.7: cannot open "
      "shared object file: No such file or directory\nRuntimeError: CUDA out of memory."), "gpu_out_of_memory"),
    # host allocation failures abort C++ frameworks: the allocation is the cause; Caffe's CUDA error 2 is GPU memory
    (("F0116 syncedmem.hpp:33] Check failed: *ptr host allocation of size 29935616 failed\n"
      "*** Check failure stack trace: ***\nAborted (core dumped)"), "cpu_out_of_memory"),
    ("F0101 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)  out of memory\nAborted (core dumped)",
     "gpu_out_of_memory"),
    # DataLoader workers out of shared memory are host memory; a plain bus error stays invalid memory access
    (("RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error. It is possible that dataloader's "
      "workers are out of shared memory."), "cpu_out_of_memory"),
    ("Bus error (core dumped)", "invalid_memory_access"),
    # the scheduler's or the cloud's word: memory evictions are host memory; spot reclaims and cancelled steps are
    # preemptions, but a Slurm time limit is no reason of the vocabulary, and a cancelled step after a specific
    # cause does not hide it
    ("Reason:         Evicted\nMessage:        The node was low on resource: memory.", "cpu_out_of_memory"),
    ("start-worker 2024/12/17 16:03:58 GCP Metadata Service says termination is imminent", "job_preempted"),
    ("slurmstepd: error: *** STEP 4714782.0 ON gpu-001 CANCELLED AT 2023-11-29T15:47:21 ***", "job_preempted"),
    ("slurmstepd: error: *** JOB 12 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***", NO_SIGNATURE),
    ("RuntimeError: CUDA out of memory.\nslurmstepd: error: *** STEP 7.0 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***",
     "gpu_out_of_memory"),
    ("jobs of this queue may be preempted by higher-priority jobs", NO_SIGNATURE),
    # a NaN loss in a progress line; a best loss initialised to inf, or a loss scale, is no divergence
    ("100/100 [==============================] - 332s 3s/step - loss: nan - val_loss: nan", "model_diverged"),
    ("best_val_loss = inf", NO_SIGNATURE),
    ("loss_scale: inf", NO_SIGNATURE),
    # a module's missing attribute without the exception name, and unpickling a name the installed release lacks,
    # are version mismatches; an attribute of None is not
    ("module 'tensorflow' has no attribute 'placeholder'", "semantic_error"),
    ("AttributeError: Can't get attribute '_rebuild_tensor_v2' on <module 'torch._utils'>", "semantic_error"),
    ("AttributeError: 'NoneType' object has no attribute 'shape'", NO_SIGNATURE),
    # glibc's messages in a Chinese locale
    ("./train.sh: 行 25: /data/train.tfrecord: 权限不够", "permission_error"),
    ("python: can't open file 'train.py': [Errno 2] 没有那个文件或目录", "incorrect_inputs"),
    # TensorFlow's gRPC runtime losing a peer, and c10d's store timing out, are the distributed runtime's failures
    ("tensorflow.python.framework.errors_impl.UnavailableError: Socket closed", "mpi_runtime_failure"),
    ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "mpi_runtime_failure"),
    # Open MPI's launcher capitalised by the poster is still the launcher
    ("Mpirun noticed that process rank 2 with PID 0 on node n1 exited on signal 9 (Killed).", "mpi_runtime_failure"),
    # torchrun's ChildFailedError is the launcher's consequence: a rank's own error wins, alone it is a failed rank
    ("ModuleNotFoundError: No module named 'foo'\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
     "import_error"),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\ntrain.py FAILED", "mpi_runtime_failure"),
    # round 9, the labelling guide (data/failure_messages/LABELLING.md): a worker's signal decides what its
    # launcher's report means (SIGABRT a native abort, SIGKILL a failed rank, SIGSEGV a bad pointer)
    ("torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGABRT", "core_dump"),
    ("Exception: process 0 terminated with signal SIGKILL", "mpi_runtime_failure"),
    ("Exception: process 1 terminated with signal SIGSEGV", "invalid_memory_access"),
    ("exitcode  : -6 (pid: 42)\ntraceback : Signal 6 (SIGABRT) received by PID 42", "core_dump"),
    # an uncaught exception is named by what it says: a lost peer, a bad pointer, else a native abort (not the
    # permission its what() line mentions)
    ("terminate called after throwing an instance of 'std::system_error'\n  what():  Broken pipe",
     "mpi_runtime_failure"),
    ("terminate called after throwing an instance of 'c10::Error'\n  what():  invalid device pointer: 0x7f00",
     "invalid_memory_access"),
    ("terminate called after throwing an instance of 'std::system_error'\n  what():  Operation not permitted",
     "core_dump"),
    ("Assertion failed: n < size, file src/queue.h, line 41", "core_dump"),
    # NCCL's unhandled CUDA error is a CUDA call failing; its unhandled system error stays the runtime's
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled cuda error, NCCL version 2.7.8", "cuda_failure"),
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:825, unhandled system error, NCCL version 2.7.8",
     "mpi_runtime_failure"),
    # a permission or read-only error on a path that names a model is a failed save; on a cache, or while the
    # traceback shows a checkpoint being read, a permission error
    ("PermissionError: [Errno 13] Permission denied: 'output/checkpoint-500'", "model_checkpoint_error"),
    ("os.makedirs(self.model_dir)\nOSError: [Errno 30] Read-only file system: '/mnt'", "model_checkpoint_error"),
    ("PermissionError: [Errno 13] Permission denied: '/root/.cache/huggingface/models--bert'", "permission_error"),
    (("  File \"net.py\", line 3, in load_from_ckpt\n    with open(path, 'r') as f:\n"
      "PermissionError: [Errno 13] Permission denied: './ckpt/checkpoint'"), "permission_error"),
    ("OSError: [Errno 30] Read-only file system: '/logs'", "permission_error"),
    # an ECC error in any wording; a count of none is no error
    ("The job failed due to an ECC error on GPU 3", "gpu_ecc_error"),
    ("No ECC errors found on GPU 0", NO_SIGNATURE),
    # a device named in a bad_alloc makes it device memory; CUDA error code 35 by number; a guarded import
    ("MemoryError: std::bad_alloc: out_of_memory: CUDA error at: rmm/mr/device/cuda_memory_resource.hpp",
     "gpu_out_of_memory"),
    ("RuntimeError: CUDA error calling cudaGetDeviceCount, code is 35", "cuda_version_mismatch"),
    ("NameError: name 'apex' is not defined", "import_error"),
    ("NameError: name 'model' is not defined", NO_SIGNATURE),
])
def test_precedence_between_signatures(text, reason):
    # the rules alone: where they leave a near-miss without signature, the learned fallback may still guess
    # (tests/test_classify_fallback.py pins what it makes of these lines)
    assert classify(text, fallback=False).reason == reason


def test_no_signature_and_the_evidence_reported():
    # the rules alone (the learned fallback's guess on this log is pinned in tests/test_classify_fallback.py)
    m = classify("epoch 1 loss 0.3\nepoch 2 loss 0.2\nValueError: shapes (3,) and (4,) not aligned\n", fallback=False)
    assert (m.reason, m.label, m.category, m.rule_id, m.matched_line) == (
        NO_SIGNATURE, "no signature", "unknown", None, None)
    m = classify("epoch 1\n  epoch 2\nModuleNotFoundError: No module named 'cntk'  \n")
    assert m.line_number == 3
    assert m.matched_line == "ModuleNotFoundError: No module named 'cntk'"
    assert m.retryable is False and m.category == "user"


def _write_rules(tmp_path, body):
    path = tmp_path / "rules.yaml"
    path.write_text(textwrap.dedent("""\
        categories: {user: "u", infrastructure: "i", ai_engine: "a"}
        no_signature: {label: none, category: unknown, retryable: true, definition: d}
        reasons:
          syntax_error: {label: syntax error, category: user, retryable: false, definition: d}
        """) + textwrap.dedent(body))
    return path


def test_rule_file_errors_name_file_line_and_field(tmp_path):
    bad_reason = _write_rules(tmp_path, """\
        rules:
          - {id: ok, reason: syntax_error, pattern: 'SyntaxError', source: s}
          - {id: typo, reason: sytnax_error, pattern: 'x', source: s}
        """)
    with pytest.raises(ValueError,
                       match=r"rules\.yaml:7: rule 'typo' names unknown reason 'sytnax_error' \(field 'reason'"):
        RuleSet(bad_reason)
    bad_regex = _write_rules(tmp_path, """\
        rules:
          - {id: broken, reason: syntax_error, pattern: '(unclosed', source: s}
        """)
    with pytest.raises(ValueError, match=r"rules\.yaml:6: rule 'broken' has an invalid pattern \(field 'pattern'\)"):
        RuleSet(bad_regex)
    no_rule = _write_rules(tmp_path, "rules: []\n")
    with pytest.raises(ValueError, match=r"reasons without any rule: \['syntax_error'\]"):
        RuleSet(no_rule)
    missing_source = _write_rules(tmp_path, """\
        rules:
          - {id: nosrc, reason: syntax_error, pattern: 'x'}
        """)
    with pytest.raises(ValueError, match=r"rules\.yaml:6: rule lacks the field 'source'"):
        RuleSet(missing_source)


def test_rule_order_decides(tmp_path):
    path = _write_rules(tmp_path, """\
        rules:
          - {id: second-line-rule, reason: syntax_error, pattern: 'beta', source: s}
          - {id: first-line-rule, reason: syntax_error, pattern: 'alpha', source: s}
        """)
    m = RuleSet(path).classify("alpha\nbeta\n")
    assert (m.rule_id, m.line_number) == ("second-line-rule", 2)


def test_rule_requires_another_line(tmp_path):
    path = _write_rules(tmp_path, """\
        rules:
          - {id: needs-context, reason: syntax_error, pattern: 'alpha', requires: 'beta', source: s}
        """)
    rules = RuleSet(path)
    assert rules.classify("alpha\n").reason == NO_SIGNATURE
    m = rules.classify("beta\nalpha\n")
    assert (m.rule_id, m.line_number) == ("needs-context", 2)
    broken = _write_rules(tmp_path, """\
        rules:
          - {id: bad-context, reason: syntax_error, pattern: 'x', requires: '(unclosed', source: s}
        """)
    with pytest.raises(ValueError,
                       match=r"rules\.yaml:6: rule 'bad-context' has an invalid pattern \(field 'requires'\)"):
        RuleSet(broken)


def test_classify_dir_reads_every_log_sorted(tmp_path):
    (tmp_path / "b.log").write_text("Container preempted by scheduler\n")
    (tmp_path / "a.log").write_bytes(b"\xff\xfe binary junk\nSyntaxError: invalid syntax\n")
    (tmp_path / "notes.txt").write_text("SyntaxError: not a log\n")
    got = classify_dir(tmp_path)
    assert list(got["log_file"]) == ["a.log", "b.log"]
    assert list(got["reason"]) == ["syntax_error", "job_preempted"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        classify_dir(tmp_path / "nope")
