"""The lock that keeps two processes from computing one cached result side by side (a calibration)."""

import subprocess
import sys
import time

from dlcluster.atomic import exclusive_lock

WAITER = """
import sys, time
from dlcluster.atomic import exclusive_lock
started = time.monotonic()
with exclusive_lock(sys.argv[1]):
    print(time.monotonic() - started)
"""


def test_a_second_process_waits_for_the_lock_and_then_takes_it(tmp_path):
    lock = tmp_path / "calibration-x.lock"
    with exclusive_lock(lock):
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(lock)], stdout=subprocess.PIPE, text=True)
        time.sleep(2.0)   # the waiter has started and is blocked
        assert waiter.poll() is None
    waited = float(waiter.communicate(timeout=60)[0])
    assert waiter.returncode == 0 and waited > 1.0
    with exclusive_lock(lock):   # released by both: taken again at once
        pass
