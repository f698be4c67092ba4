import subprocess
import sys
from pathlib import Path


def run(*args):
    return subprocess.run([sys.executable, "-m", "dlcluster.cli", *args], capture_output=True, text=True)


def test_summary_of_a_raw_directory(raw_small):
    res = run("summary", str(raw_small))
    assert res.returncode == 0, res.stderr
    assert "cluster_job_log" in res.stdout and "duplicate jobid" in res.stdout


def test_bad_source_exits_2_with_a_message(tmp_path):
    res = run("summary", str(tmp_path / "missing"))
    assert res.returncode == 2
    assert "expected 'public', 'philly' or a directory" in res.stderr
    assert "Traceback" not in res.stderr


def test_philly_without_make_data_explains(tmp_path):
    import os
    env = dict(os.environ, DLCLUSTER_ROOT=str(tmp_path))
    res = subprocess.run([sys.executable, "-m", "dlcluster.cli", "summary", "philly"], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 2 and "run `make data`" in res.stderr


def test_python_m_dlcluster_works_like_the_dlcluster_script(tmp_path):
    script = Path(sys.executable).with_name("dlcluster")  # installed by `make setup` beside the venv's python
    as_script = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    as_module = subprocess.run([sys.executable, "-m", "dlcluster", "--help"], capture_output=True, text=True)
    assert as_module.returncode == as_script.returncode == 0, as_module.stderr
    assert as_module.stdout == as_script.stdout and as_module.stdout.startswith("usage: dlcluster ")
    failed = subprocess.run([sys.executable, "-m", "dlcluster", "summary", str(tmp_path / "missing")],
                            capture_output=True, text=True)
    assert failed.returncode == 2 and "expected 'public', 'philly' or a directory" in failed.stderr
