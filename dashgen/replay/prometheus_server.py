"""Real `prometheus` and `alertmanager` processes on loopback, for backtests and live tests.

Each binds 127.0.0.1 on a free port, keeps its data where it is told, and is stopped by the
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
from dashgen.parent_death import die_with_parent_hook
from dashgen.promtool import find_binary


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_process(process: subprocess.Popen | None, timeout: float = 15) -> None:
    """SIGTERM to the process started, SIGKILL if it has not exited after `timeout` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout)


class PrometheusServer:
    binary = "prometheus"
    ready_path = "/-/ready"  # answers 200 once the server serves queries

    def __init__(self, config_file: Path, storage_dir: Path, extra_args: Sequence[str] = (),
                 ready_timeout: float = 60.0, port: int | None = None):
        self.requested_port = port  # None: a free one
        self.config_file = config_file
        self.storage_dir = storage_dir
        self.extra_args = list(extra_args)
        self.ready_timeout = ready_timeout
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.env: dict[str, str] | None = None  # None: this process' environment
        self.log_path = storage_dir.parent / f"{storage_dir.name}.{self.binary}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "PrometheusServer":
        self.port = self.requested_port or free_port()
        command = self.command()
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            try:
                # Killed with this process (Linux), so a SIGKILLed backtest leaves no server behind.
                self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, env=self.env,
                                                preexec_fn=die_with_parent_hook())
            except OSError as exc:
                raise BuildError(f"cannot run {self.binary} ({command[0]}): {exc.strerror or exc}") from None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def command(self) -> list[str]:
        return [find_binary(self.binary), *self.arguments(), *self.extra_args]

    def arguments(self) -> list[str]:
        return [f"--config.file={self.config_file}", f"--storage.tsdb.path={self.storage_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}"]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BuildError(f"{self.binary} exited with status {self.process.returncode} at start-up:\n"
                                 f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}{self.ready_path}", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        raise BuildError(f"{self.binary} was not ready after {self.ready_timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        process, self.process = self.process, None
        stop_process(process)

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


class AlertmanagerServer(PrometheusServer):
    """Alertmanager alone: no cluster (its gossip port would listen on every interface)."""

    binary = "alertmanager"

    def arguments(self) -> list[str]:
        return [f"--config.file={self.config_file}", f"--storage.path={self.storage_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="]

    def api(self, path: str, **params: str):
        """GET /api/v2/<path>; the decoded JSON answer."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v2/{path}?{query}", timeout=30) as response:
            return json.load(response)


def check_reload_url(url: str) -> None:
    """BuildError unless `url` is an http(s) base URL with a host (and a valid port, if any)."""
    try:
        parts = urllib.parse.urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # an unclosed [IPv6 address, a port out of range
        valid = False
    if not valid:
        raise BuildError(f"--reload {url!r}: expected Prometheus' base URL, e.g. http://localhost:9090")


def reload_prometheus(url: str, timeout: float = 30) -> None:
    """POST <url>/-/reload: Prometheus re-reads its config and rule files; BuildError if it refuses."""
    check_reload_url(url)
    request = urllib.request.Request(url.rstrip("/") + "/-/reload", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace").strip()
        hint = (" (start Prometheus with --web.enable-lifecycle)" if exc.code in (403, 405) else "")
        raise BuildError(f"rendered/ is written, but Prometheus at {url} did not reload: HTTP {exc.code} "
                         f"{body}{hint}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise BuildError(f"rendered/ is written, but Prometheus at {url} did not reload: {reason}") from None
