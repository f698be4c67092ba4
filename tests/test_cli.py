import subprocess
import sys


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
