"""A real `prometheus` process on loopback, for backtests and live tests.

It binds 127.0.0.1 on a free port, keeps its TSDB where it is told, and is stopped by the
PID it was started with when the `with` block ends, also on errors and Ctrl-C.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Sequence

from dashgen.errors import BuildError
from dashgen.promtool import find_binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PrometheusServer:
    def __init__(self, config_file: Path, storage_dir: Path, extra_args: Sequence[str] = (),
                 ready_timeout: float = 60.0):
        self.config_file = config_file
        self.storage_dir = storage_dir
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.log_path = storage_dir.parent / f"{storage_dir.name}.prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "PrometheusServer":
        binary = find_binary("prometheus")
        self.port = free_port()
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            try:
                self.process = subprocess.Popen(
                    [binary, f"--config.file={self.config_file}", f"--storage.tsdb.path={self.storage_dir}",
                     f"--web.listen-address=127.0.0.1:{self.port}", *self.extra_args],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            except OSError as exc:
                raise BuildError(f"cannot run prometheus ({binary}): {exc.strerror or exc}") from None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BuildError(f"prometheus exited with status {self.process.returncode} at start-up:\n"
                                 f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise BuildError(f"prometheus was not ready after {self.ready_timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def api(self, path: str, **params: str) -> dict:
        """GET /api/v1/<path>; returns the `data` member, BuildError on an API error."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise BuildError(f"prometheus /api/v1/{path}: {body.get('error', body)}")
        return body["data"]
