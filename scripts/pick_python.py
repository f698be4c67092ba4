"""Print the interpreter `make` builds .venv with: the fastest build of the default python3's version on this machine.

The simulator is pure Python, so the interpreter's build sets its speed. On the machines this project is built on,
Debian's /usr/bin/python3.11 (built with profile-guided and link-time optimisation) ran `make reports` in 15% less
CPU time than the python3 first on the PATH, pyenv's 3.11 (built from source without --enable-optimizations): 10:56
instead of 12:53, one fresh clone after the other, with the same results. That decides whether `make reports` fits
in its 15 minutes.

Candidates: ``python3`` on the PATH, then ``python3.X`` (its version) on the PATH and in /usr/bin and /usr/local/bin.
Each must report the same version and be able to create a virtual environment with pip (``venv``, ``ensurepip``).
Each runs the same pure-Python loop (heaps, dicts, objects: what the simulator does) five times, the candidates
taking turns, and its best time counts; the fastest is used if it is at least 5% faster than the first candidate, else
the first, so that a near tie never changes the choice. Results do not depend on the choice (the golden results hold
on either). ``make PYTHON=...`` overrides it.

    python3 scripts/pick_python.py        # prints e.g. /usr/bin/python3.11; says why on stderr
"""

import os
import shutil
import subprocess
import sys

#: Another build must be at least this much faster than the default to be chosen.
MARGIN = 0.05
#: Each candidate's loop is timed this many times, the candidates taking turns (a slow moment of a shared machine then
#: falls on one timing of each, not on all timings of one); its best time counts.
ROUNDS = 5

PROBE = r"""
import heapq, sys, time
try:
    import ensurepip, venv
    usable = True
except ImportError:
    usable = False

class Job:
    __slots__ = ("key", "gpus", "left")
    def __init__(self, key, gpus):
        self.key, self.gpus, self.left = key, gpus, 0.0

def loop():
    heap, groups, total = [], {}, 0
    for i in range(60000):
        job = Job((i * 7919) % 10007, 1 + i % 8)
        heapq.heappush(heap, (job.key, i, job))
        groups.setdefault(job.gpus, []).append(job)
    while heap:
        _, i, job = heapq.heappop(heap)
        job.left += job.gpus * 0.5
        total += len(groups[job.gpus]) if i % 3 else int(job.left)
    return total

started = time.perf_counter()
loop()
print("%d.%d" % sys.version_info[:2], usable, time.perf_counter() - started, sys.executable)
"""


def probe(command: str):
    """(version, can make a venv, seconds of one run of the loop, executable) of ``command``, or None if it does not
    run."""
    try:
        out = subprocess.run([command, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True).stdout
        version, usable, seconds, executable = out.split(maxsplit=3)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return version, usable == "True", float(seconds), os.path.realpath(executable.strip())


def choose(found: list) -> tuple:
    """The candidate to use, of ``found`` = [(name, seconds, executable)] in order of preference: the fastest if it
    runs the loop at least :data:`MARGIN` faster than the first, else the first."""
    fastest = min(found, key=lambda candidate: candidate[1])
    return fastest if fastest[1] < found[0][1] * (1 - MARGIN) else found[0]


def candidates(version: str) -> list:
    """The commands to try, in order of preference (``python3`` first)."""
    return ["python3", shutil.which(f"python{version}"), f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"]


def main() -> None:
    default = probe("python3")
    if default is None:
        print("python3")
        return
    version = default[0]
    found, seen = [], set()
    for name in candidates(version):
        if not name or (name != "python3" and not os.access(name, os.X_OK)):
            continue
        result = default if name == "python3" else probe(name)
        if result is None or result[0] != version or not result[1] or result[3] in seen:
            continue
        seen.add(result[3])
        found.append((name, result[2], result[3]))
    if not found:
        print("python3")
        return
    for _ in range(ROUNDS - 1):
        for i, (name, seconds, executable) in enumerate(found):
            again = probe(name)
            if again is not None:
                found[i] = (name, min(seconds, again[2]), executable)
    chosen = choose(found)
    if len(found) > 1:
        timings = ", ".join(f"{exe} {seconds * 1000:.0f} ms" for _, seconds, exe in found)
        print(f"pick_python: Python {version} builds here: {timings}; using {chosen[2]} (make PYTHON=... to choose)",
              file=sys.stderr)
    print(chosen[0])


if __name__ == "__main__":
    main()
