"""The actions `dashgen act` carries out (dashgen/runtime/act.py decides which): stop the trainer of
a pid file or its supervisor, stop a Ray job, run a command. Each returns what it did, or raises
ActionFailed saying why not."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from dashgen.bounded_read import TooLarge, read_bounded
from dashgen.runtime.process_group import end_group, start_group, wait_for_exit

MAX_PID_FILE_BYTES = 64
# Linux' ceiling for kernel.pid_max on 64-bit; /proc/sys/kernel/pid_max gives the machine's own.
PID_MAX_LIMIT = 1 << 22


class ActionFailed(Exception):
    """An action could not be carried out; the message says why (it goes to the audit log)."""


def read_pid(pid_file: Path) -> int:
    try:
        text = read_bounded(pid_file, MAX_PID_FILE_BYTES).decode("ascii").strip()
    except OSError as exc:
        raise ActionFailed(f"cannot read {pid_file}: {exc.strerror}") from None
    except (TooLarge, UnicodeDecodeError):
        raise ActionFailed(f"{pid_file} holds more than a PID (over {MAX_PID_FILE_BYTES} bytes or not ASCII), "
                           f"not the PID of a trainer") from None
    # ASCII digits only: str.isdigit() also takes '²' and fullwidth digits. 0, -1 and 1 would signal
    # a process group, every process, or init.
    if not (text.isascii() and text.isdigit() and 1 < int(text) <= pid_max()):
        raise ActionFailed(f"{pid_file} holds {text[:40]!r}, not the PID of a trainer (2 to {pid_max()})")
    return int(text)


def pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return PID_MAX_LIMIT


def stop_pid_file(pid_file: Path, stopped: dict[tuple[int, float | None], str] | None = None) -> str:
    """SIGTERM to the trainer of `pid_file`, or to its supervising exporter; once per process:
    `stopped` (process and start time -> what was done) holds the stops sent before."""
    stopped = {} if stopped is None else stopped
    pid = read_pid(pid_file)
    started = process_start_time(pid)
    try:
        written = pid_file.stat().st_mtime
    except OSError as exc:
        raise ActionFailed(f"cannot read {pid_file}: {exc.strerror}") from None
    if started is not None and started > written + 1:
        raise ActionFailed(f"process {pid} started after {pid_file} was written: the trainer has ended and its "
                           f"PID was reused; not signalling it")
    supervisor = supervising_exporter(pid)
    target = (supervisor or pid, process_start_time(supervisor or pid))
    if target in stopped:
        return f"already stopping: {stopped[target]}; not signalled again, its kill timeout runs from the first stop"
    try:
        os.kill(supervisor or pid, signal.SIGTERM)
    except ProcessLookupError:
        raise ActionFailed(f"no process {pid} (from {pid_file}): the trainer has already ended") from None
    except PermissionError:
        raise ActionFailed(f"not allowed to signal process {supervisor or pid} (from {pid_file})") from None
    if supervisor is not None:
        stopped[target] = (f"sent SIGTERM to dashgen export (pid {supervisor}), which stops its trainer (pid {pid}, "
                           f"from {pid_file}) and publishes the run as stopped")
    else:
        stopped[target] = f"sent SIGTERM to pid {pid} (from {pid_file})"
    return stopped[target]


def supervising_exporter(pid: int) -> int | None:
    """The `dashgen export ... -- CMD` process that started the trainer `pid`, if that is its parent.

    Signalled instead of the trainer, it forwards the signal and publishes the run as stopped; a
    trainer killed behind its back would be published as crashed (and page as VerlRunCrashed)."""
    try:
        parent = int(_proc_stat(pid)[1])
        argv = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError, IndexError):
        return None
    names = [Path(arg.decode(errors="replace")).name for arg in argv]
    return parent if "dashgen" in names and "export" in names else None


def process_start_time(pid: int) -> float | None:
    """When a process started (Unix seconds), from Linux' /proc; None where that is not available."""
    try:
        ticks = int(_proc_stat(pid)[19])
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return int(boot.split()[1]) + ticks / os.sysconf("SC_CLK_TCK")


def _proc_stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (which may hold spaces and parentheses):
    [0] state, [1] parent PID, ... [19] start time in clock ticks after boot."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def stop_ray_job(dashboard_url: str, submission_id: str, timeout: float = 10.0) -> str:
    """POST /api/jobs/<submission_id>/stop to the Ray dashboard (Ray Jobs REST API)."""
    url = f"{dashboard_url.rstrip('/')}/api/jobs/{urllib.parse.quote(submission_id, safe='')}/stop"
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise ActionFailed(f"POST {url}: the Ray dashboard answered {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ActionFailed(f"POST {url}: {exc}") from None
    if isinstance(answer, dict) and answer.get("stopped") is True:
        return f"Ray job {submission_id}: stop requested (POST {url})"
    return f"Ray job {submission_id} was not running (POST {url} answered {answer!r})"


def run_command(argv: tuple[str, ...], timeout: float, alert: dict) -> str:
    """Run the command in a process group of its own; its exit status is the outcome.

    Its output goes to a file, not a pipe, so a child it leaves in the background cannot hold the
    outcome up; what it leaves in its group is killed once it exits, and the whole group on a timeout."""
    labels = alert["labels"]
    env = {**os.environ,
           "DASHGEN_ALERT_NAME": labels.get("alertname", ""),
           "DASHGEN_ALERT_PROJECT": labels.get("project", ""),
           "DASHGEN_ALERT_EXPERIMENT": labels.get("experiment", labels.get("experiment_name", "")),
           "DASHGEN_ALERT_FINGERPRINT": alert["fingerprint"],
           "DASHGEN_ALERT_STARTS_AT": alert["startsAt"],
           "DASHGEN_ALERT_LABELS": json.dumps(labels, sort_keys=True)}
    with tempfile.TemporaryFile() as output:
        try:
            process = start_group(list(argv), env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=output)
        except OSError as exc:
            raise ActionFailed(f"cannot run {argv[0]}: {exc.strerror}") from None
        finished = wait_for_exit(process, timeout)
        status = end_group(process)
        if not finished:
            raise ActionFailed(f"{shlex.join(argv)} did not finish within {timeout:g} s; killed its process group")
        if status != 0:
            output.seek(0)
            tail = output.read()[-4096:].decode(errors="replace").strip().splitlines()[-3:]
            raise ActionFailed(f"{shlex.join(argv)} exited with status {status}: {' | '.join(tail)}")
    return f"ran {shlex.join(argv)} (exit 0)"
