"""scripts/pick_python.py: which interpreter `make` builds .venv with."""

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "pick_python.py"


def _module():
    spec = importlib.util.spec_from_file_location("pick_python", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_candidate_is_kept_unless_another_is_clearly_faster():
    choose = _module().choose
    assert choose([("python3", 1.00, "/a"), ("/usr/bin/python3.11", 0.97, "/b")])[0] == "python3"   # 3%: a near tie
    assert choose([("python3", 1.00, "/a"), ("/usr/bin/python3.11", 0.90, "/b")])[0] == "/usr/bin/python3.11"
    assert choose([("python3", 0.70, "/a"), ("/usr/bin/python3.11", 1.00, "/b")])[0] == "python3"
    # of several clearly faster ones, the fastest
    assert choose([("python3", 1.0, "/a"), ("x", 0.9, "/b"), ("y", 0.8, "/c"), ("z", 0.92, "/d")])[0] == "y"


def test_the_choice_runs_python3s_own_version_and_can_make_a_venv():
    chosen = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True).stdout.strip()
    probe = "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"
    default = subprocess.run(["python3", "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert subprocess.run([chosen, "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == default
