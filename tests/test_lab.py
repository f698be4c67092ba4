"""`make lab`, headless: the server it starts lists the dlcluster kernel, and that kernel (and the
`python3` kernel the notebooks name in their metadata) imports this checkout's dlcluster.

The server runs the Makefile's own `lab` recipe line, with a random token on a free localhost port
and no browser; the code goes through the REST API and the kernel's websocket, as JupyterLab does.
"""

import asyncio
import json
import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import nbformat
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

REPO = Path(__file__).resolve().parents[1]
KERNEL = "dlcluster"
STARTUP_S = 40


def lab_command() -> list[str]:
    """The recipe of the Makefile's `lab` target, with $(BIN) the bin directory of this Python."""
    recipe = re.search(r"^lab:.*\n\t(.+)$", (REPO / "Makefile").read_text(), re.M)
    assert recipe, "the Makefile has no one-line `lab` recipe"
    return shlex.split(recipe.group(1).replace("$(BIN)", str(Path(sys.executable).parent)))


class Lab:
    """A JupyterLab server on 127.0.0.1 with a token, driven through its REST API."""

    def __init__(self, tmp_path: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.token = secrets.token_hex(16)
        self.log = tmp_path / "lab.log"
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
                   JUPYTER_CONFIG_DIR=str(tmp_path / "config"))  # no user config, no files left in ~
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                lab_command() + ["--no-browser", f"--IdentityProvider.token={self.token}", f"--port={self.port}",
                                 "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1"]
                # CI containers run as root, which jupyter refuses unless told
                + (["--allow-root"] if os.geteuid() == 0 else []),
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def url(self, path: str, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def api(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(self.url(path), method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"jupyter lab exited {self.proc.returncode}:\n{self.log.read_text()}"
            try:
                self.api("GET", "/api/status")
                return
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"jupyter lab did not answer in {STARTUP_S} s:\n{self.log.read_text()}")

    def run(self, kernel_id: str, code: str) -> str:
        """Execute `code` in a kernel over its websocket; returns its stdout."""
        return asyncio.run(asyncio.wait_for(self._execute(kernel_id, code), STARTUP_S))

    async def _execute(self, kernel_id: str, code: str) -> str:
        request = HTTPRequest(self.url(f"/api/kernels/{kernel_id}/channels", "ws"),
                              headers={"Authorization": f"token {self.token}"})
        conn = await websocket_connect(request)
        msg_id = uuid.uuid4().hex
        conn.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                       "session": uuid.uuid4().hex, "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        stdout, replied, idle = [], False, False
        try:
            while not (replied and idle):
                raw = await conn.read_message()
                assert raw is not None, "the kernel's websocket closed"
                msg = json.loads(raw)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                kind, content = msg["msg_type"], msg["content"]
                if kind == "error":
                    raise AssertionError("\n".join(content["traceback"]))
                if kind == "stream" and content["name"] == "stdout":
                    stdout.append(content["text"])
                replied |= kind == "execute_reply"
                idle |= kind == "status" and content["execution_state"] == "idle"
        finally:
            conn.close()
        return "".join(stdout)

    def stop(self) -> None:
        """Shut down through the API (which stops the kernels); kill the process group if it lingers."""
        try:
            if self.proc.poll() is None:
                self.api("POST", "/api/shutdown")
                self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_make_lab_serves_a_kernel_that_imports_dlcluster(tmp_path):
    notebook_kernels = {nbformat.read(nb, as_version=4).metadata.kernelspec.name
                        for nb in sorted((REPO / "notebooks").glob("*.ipynb"))}
    lab, kernel_pids = Lab(tmp_path), []
    try:
        lab.wait_ready()
        specs = lab.api("GET", "/api/kernelspecs")
        assert KERNEL in specs["kernelspecs"], \
            f"no {KERNEL!r} kernel: run `make setup`; got {sorted(specs['kernelspecs'])}"
        assert specs["kernelspecs"][KERNEL]["spec"]["display_name"] == "Python (dlcluster)"
        assert specs["default"] == KERNEL  # new notebooks get it
        for name in sorted({KERNEL} | notebook_kernels):  # and the notebooks' own kernel imports it too
            kernel = lab.api("POST", "/api/kernels", {"name": name})
            out = lab.run(kernel["id"], "import os, dlcluster\nprint(dlcluster.__file__)\nprint(os.getpid())")
            module_file, pid = out.split()
            kernel_pids.append(int(pid))
            assert Path(module_file) == REPO / "lib" / "dlcluster" / "__init__.py", (name, module_file)
    finally:
        lab.stop()
        deadline = time.monotonic() + 10
        while any(map(_alive, kernel_pids)) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in filter(_alive, kernel_pids):
            os.kill(pid, signal.SIGKILL)
    assert lab.proc.returncode == 0, lab.log.read_text()
    assert not any(map(_alive, kernel_pids)), "a kernel outlived the server's shutdown"
