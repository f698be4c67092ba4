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
    ("  File \"train.py\", line 9, in resume\n    with open('out/checkpoints/model.ckpt', 'rb') as f:\n"
     "PermissionError: [Errno 13] Permission denied: 'out/checkpoints/model.ckpt'", "permission_error"),
    # a full disk while torch.save writes is a checkpoint error
    ("    torch.save(model.state_dict(), 'best.pt')\nOSError: [Errno 28] No space left on device", "model_checkpoint_error"),
    # the launcher's SIGTERM to the other ranks follows the real cause
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered\nSending process 7 closing signal SIGTERM", "gpu_ecc_error"),
    # bad_alloc aborts and dumps core, but the cause is memory
    ("terminate called after throwing an instance of 'std::bad_alloc'\nAborted (core dumped)", "cpu_out_of_memory"),
    # round 2 of the real-message tuning (data/failure_messages/README.md):
    # TensorFlow's OOM on the CPU device is host memory, on a GPU device GPU memory
    ("Resource exhausted: OOM when allocating tensor with shape[64,8] and type float on "
     "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu", "cpu_out_of_memory"),
    ("Resource exhausted: OOM when allocating tensor with shape[64,8] and type float on "
     "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc", "gpu_out_of_memory"),
    # a private submodule gone from an installed package is a version mismatch; a missing package or an
    # unbuilt compiled extension is an import error
    ("ModuleNotFoundError: No module named 'torch._six'", "semantic_error"),
    ("ModuleNotFoundError: No module named 'maskrcnn_benchmark._C'", "import_error"),
    ("ModuleNotFoundError: No module named 'apex'", "import_error"),
    # an aborted NCCL communicator takes the process down: the terminate is the consequence
    ("RuntimeError: NCCL communicator was aborted on rank 3.\n"
     "terminate called after throwing an instance of 'std::runtime_error'", "mpi_runtime_failure"),
    # NCCL calls a vanished peer an internal error; the transport line names the cause
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, internal error\n"
     "Net : Connection closed by remote peer host<50260>", "mpi_runtime_failure"),
    # a missing cuDNN library aborts the process: the library is the cause
    ("Could not load library libcudnn_ops_infer.so.8. Error: libcudnn_ops_infer.so.8: cannot open shared object file: "
     "No such file or directory\nAborted (core dumped)", "cannot_load_libs"),
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
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n"
     "torch.distributed.elastic.multiprocessing.api.SignalException: Process 77 got signal: 15", "cuda_init_failed"),
    ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 77 got signal: 15", "job_preempted"),
    # PyTorch 0.x's wording of CUDA error 2 is GPU memory, not a generic CUDA failure
    ("RuntimeError: cuda runtime error (2) : out of memory at /tmp/THC/THCCachingAllocator.cpp:510",
     "gpu_out_of_memory"),
    # a full disk is a checkpoint error, but a full /dev/shm of DataLoader workers is not
    ("OSError: [Errno 28] No space left on device", "model_checkpoint_error"),
    ("RuntimeError: unable to write to file </torch_31_2087>: No space left on device (28)", NO_SIGNATURE),
    # bash's report of a SIGKILLed job, and 'Killed' at the end of a progress bar, are the OOM killer
    ("train.sh: line 12: 31337 Killed                  python train.py", "cpu_out_of_memory"),
    (" 45%|#####     | 450/1000 [01:02<01:16,  7.19it/s]Killed", "cpu_out_of_memory"),
    ("[2024-01-01 10:00:00] INFO worker finished; Killed 3 stale processes", NO_SIGNATURE),
    # a model file that does not fit the model cannot be loaded: incorrect inputs
    ("RuntimeError: Error(s) in loading state_dict for ResNet:\n\tMissing key(s) in state_dict: \"fc.weight\"",
     "incorrect_inputs"),
    # an import error without the exception's name
    ("No module named 'torchvision'", "import_error"),
])
def test_precedence_between_signatures(text, reason):
    assert classify(text).reason == reason


def test_no_signature_and_the_evidence_reported():
    m = classify("epoch 1 loss 0.3\nepoch 2 loss 0.2\nValueError: shapes (3,) and (4,) not aligned\n")
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
    with pytest.raises(ValueError, match=r"rules\.yaml:7: rule 'typo' names unknown reason 'sytnax_error' \(field 'reason'"):
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
    with pytest.raises(ValueError, match=r"rules\.yaml:6: rule 'bad-context' has an invalid pattern \(field 'requires'\)"):
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
