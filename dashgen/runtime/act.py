"""`dashgen act`: an Alertmanager webhook receiver that acts on the alerts of one run.

Alertmanager posts its notifications to http://ADDRESS/alerts with a bearer token (the receiver
`dashgen-act` of the rendered alertmanager.yml). Each alert in a notification gets one decision,
appended to the audit log (JSONL), and at most one action, as the config's `act.actions` says:

- log:     record it only (the default, a dry run);
- stop:    stop the run: SIGTERM to the trainer whose PID is in a pid file (`dashgen export
           --pid-file`); when that trainer's parent is its `dashgen export -- CMD` supervisor, the
           signal goes to the supervisor, which passes it to the trainer's process group, kills the
           group after its kill timeout, and publishes the run as stopped, not crashed. Or the Ray
           Jobs API's stop for a submission id;
- command: run an argv (no shell) in a process group of its own, with the alert in DASHGEN_ALERT_*
           environment variables; its exit status is the outcome.

It never acts on a resolved alert nor on one whose project/experiment is not the guarded run, and
acts once per alert occurrence (alert, run, fingerprint, startsAt), also across restarts: the audit
log remembers what was done. A stop is idempotent: a process it has signalled is not signalled
again (two alerts set to stop, a re-notified one), since a trainer or supervisor may take a second
SIGTERM as "kill now" and cut a checkpoint's save short. With --dry-run every action is only
recorded as what it would do.
"""

from __future__ import annotations

import hmac
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

from dashgen.bounded_read import TooLarge, read_bounded
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.model import ACT_PATH, ActSection
from dashgen.records import record
from dashgen.runtime.process_group import end_group, start_group, wait_for_exit
from dashgen.sources.chosen import metric_source

TOKEN_ENV = "DASHGEN_ACT_TOKEN"
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_BYTES = 4096
MAX_PID_FILE_BYTES = 64
# An audit line holds one alert's labels and a detail; longer ones were not written by act.
MAX_AUDIT_LINE_BYTES = 1 << 20
# Linux' ceiling for kernel.pid_max on 64-bit; /proc/sys/kernel/pid_max gives the machine's own.
PID_MAX_LIMIT = 1 << 22
# Alertmanager's notifications nest 4 deep; a deeper body is refused before Python's parser recurses.
MAX_JSON_DEPTH = 32
# Connections the listening socket queues while every handler is busy (http.server's default is 5).
LISTEN_BACKLOG = 128

# Decisions, as the audit log and the HTTP answer name them.
ACTED, WOULD_ACT, LOGGED, FAILED = "acted", "would-act", "logged", "failed"
DUPLICATE, RESOLVED, OTHER_RUN = "duplicate", "ignored-resolved", "ignored-other-run"


class ActionFailed(Exception):
    """An action could not be carried out; the message says why (it goes to the audit log)."""


@record
class ActSettings:
    project: str
    experiment: str
    actions: dict[str, str]  # alertname -> log | stop | command; alerts not named: log
    audit_log: Path
    pid_file: Path | None = None
    ray_dashboard_url: str = ""
    ray_submission_id: str = ""
    command: tuple[str, ...] = ()
    command_timeout: float = 60.0
    dry_run: bool = False
    max_body_bytes: int = 1 << 20
    # The label naming the run's experiment in the alerts: the metric source's (experiment_name for RL-Insight).
    experiment_label: str = "experiment"

    @classmethod
    def from_config(cls, config: Config, project: str | None = None, experiment: str | None = None,
                    pid_file: Path | None = None, audit_log: Path | None = None,
                    dry_run: bool = False) -> "ActSettings":
        # The config's schema has checked the types, the actions and the durations.
        act = config.section(ActSection)
        timeout = act.command_timeout.seconds
        pid_path = pid_file or (Path(act.pid_file) if act.pid_file else None)
        settings = cls(project or act.project, experiment or act.experiment, dict(act.actions),
                       audit_log or Path(act.audit_log), pid_path, act.ray_dashboard_url,
                       act.ray_submission_id, tuple(act.command), timeout, dry_run,
                       act.max_body_bytes, metric_source(config).label("experiment"))
        settings.check()
        return settings

    def check(self) -> None:
        if not self.project or not self.experiment:
            raise BuildError("dashgen act guards one run: give --project and --experiment "
                             "(or act.project and act.experiment in the config)")
        used = set(self.actions.values())
        ray = bool(self.ray_dashboard_url or self.ray_submission_id)
        if "stop" in used:
            if self.pid_file is None and not ray:
                raise BuildError("act.actions has 'stop', but nothing says how: give --pid-file (the trainer's PID "
                                 "file of `dashgen export --pid-file`) or act.ray_dashboard_url and "
                                 "act.ray_submission_id in the config")
            if self.pid_file is not None and ray:
                raise BuildError("stop has two targets: a pid file and a Ray job; configure one of them")
            if ray and not (self.ray_dashboard_url and self.ray_submission_id):
                raise BuildError("stopping a Ray job needs both act.ray_dashboard_url and act.ray_submission_id")
        if "command" in used and (not self.command or not all(self.command)):
            raise BuildError("act.actions has 'command', but act.command is not a list of arguments, "
                             "e.g. [/usr/local/bin/notify-oncall, --urgent]")

    def describe(self, action: str) -> str:
        if action == "stop" and self.pid_file is not None:
            return (f"send SIGTERM to the trainer whose PID is in {self.pid_file} (through its dashgen export, "
                    f"if that supervises it)")
        if action == "stop":
            return f"stop Ray job {self.ray_submission_id} at {self.ray_dashboard_url}"
        if action == "command":
            return f"run {shlex.join(self.command)}"
        return "record the alert"


@record
class Decision:
    alertname: str
    status: str
    project: str
    experiment: str
    fingerprint: str
    startsAt: str
    action: str
    decision: str
    detail: str

    @property
    def key(self) -> str:
        """One alert occurrence of one run; JSON, so no field's text can make two keys equal."""
        return json.dumps([self.alertname, self.project, self.experiment, self.fingerprint, self.startsAt])


class Actor:
    """Decides for each alert, acts, and records; one notification at a time."""

    def __init__(self, settings: ActSettings):
        self.settings = settings
        self._lock = threading.Lock()
        # Occurrences already handled: acted on in earlier lifetimes (from the audit log), or seen now.
        self._handled = self._acted_before()
        # Processes stopped in this lifetime, by PID and start time -> what that stop did.
        self._stopped: dict[tuple[int, float | None], str] = {}
        try:
            open(settings.audit_log, "a").close()
        except OSError as exc:
            raise BuildError(f"{settings.audit_log}: cannot append to the audit log: {exc.strerror}") from None

    def handle(self, notification: dict) -> list[Decision]:
        with self._lock:
            return [self._decide(alert) for alert in notification["alerts"]]

    def _decide(self, alert: dict) -> Decision:
        labels = alert["labels"]
        name = labels.get("alertname", "")
        action = self.settings.actions.get(name, "log")
        run = (labels.get("project", ""), labels.get(self.settings.experiment_label, ""))

        def decision(outcome: str, detail: str) -> Decision:
            return Decision(name, alert["status"], run[0], run[1], alert["fingerprint"], alert["startsAt"], action,
                            outcome, detail)

        key = decision("", "").key
        if alert["status"] != "firing":
            result = decision(RESOLVED, f"status {alert['status']}: resolved alerts are never acted on")
        elif run != (self.settings.project, self.settings.experiment):
            result = decision(OTHER_RUN, f"run {run[0] or '-'}/{run[1] or '-'} is not the guarded run "
                                         f"{self.settings.project}/{self.settings.experiment}")
        elif key in self._handled:
            result = decision(DUPLICATE, "this occurrence (fingerprint, startsAt) was handled already")
        elif action == "log":
            result = decision(LOGGED, "recorded only")
        elif self.settings.dry_run:
            result = decision(WOULD_ACT, f"dry run: would {self.settings.describe(action)}")
        else:
            try:
                result = decision(ACTED, self._perform(action, alert))
            except ActionFailed as exc:
                result = decision(FAILED, str(exc))
        if result.decision in (ACTED, WOULD_ACT, LOGGED):
            self._handled.add(key)
        self._record(result)
        return result

    def _perform(self, action: str, alert: dict) -> str:
        settings = self.settings
        if action == "stop" and settings.pid_file is not None:
            return stop_pid_file(settings.pid_file, self._stopped)
        if action == "stop":
            return stop_ray_job(settings.ray_dashboard_url, settings.ray_submission_id)
        return run_command(settings.command, settings.command_timeout, alert)

    def _record(self, decision: Decision) -> None:
        record = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **asdict(decision)}
        line = json.dumps(record, sort_keys=False) + "\n"
        with open(self.settings.audit_log, "a") as log:
            log.write(line)
            log.flush()
            os.fsync(log.fileno())
        print(loggable(f"dashgen act: {decision.alertname} {decision.project}/{decision.experiment}: "
                       f"{decision.decision}: {decision.detail}"), file=sys.stderr, flush=True)

    def _acted_before(self) -> set[str]:
        handled: set[str] = set()
        path = self.settings.audit_log
        if path.exists() and not path.is_file():  # /dev/zero, a FIFO: would never end
            raise BuildError(f"--audit-log {path}: not a regular file; give the JSONL file act appends to")
        try:
            with open(path, "rb") as log:
                lines = list(self._audit_lines(log))
        except FileNotFoundError:
            return handled
        except OSError as exc:
            raise BuildError(f"{path}: cannot read the audit log: {exc.strerror}") from None
        for line in lines:
            try:
                record = json.loads(line)
                if record.get("decision") == ACTED:
                    handled.add(Decision(**{f: record[f] for f in Decision.__dataclass_fields__}).key)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a torn last line after a crash
        return handled

    @staticmethod
    def _audit_lines(log) -> Iterator[bytes]:
        """The audit log's lines of the `acted` decisions; a line over the limit is not one of ours."""
        while line := log.readline(MAX_AUDIT_LINE_BYTES + 1):
            if len(line) > MAX_AUDIT_LINE_BYTES:
                while line and not line.endswith(b"\n"):  # skip the rest of it
                    line = log.readline(MAX_AUDIT_LINE_BYTES)
            elif b'"acted"' in line:
                yield line


# --- Actions ------------------------------------------------------------------------------------

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


# --- HTTP ---------------------------------------------------------------------------------------

def load_token(token_file: Path | None, configured_file: str) -> tuple[str, str]:
    """The bearer token and where it came from: --token-file, else $DASHGEN_ACT_TOKEN, else the config's file."""
    if token_file is None and os.environ.get(TOKEN_ENV):
        token, source = os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        path = token_file or Path(configured_file)
        try:
            token, source = read_bounded(path, MAX_TOKEN_BYTES).decode("utf-8").strip(), str(path)
        except OSError as exc:
            raise BuildError(f"cannot read the act token from {path}: {exc.strerror}; create it with\n"
                             f"  head -c 32 /dev/urandom | base64 > {path}\nor set ${TOKEN_ENV}") from None
        except (TooLarge, UnicodeDecodeError) as exc:
            problem = exc if isinstance(exc, TooLarge) else "not UTF-8 text"
            raise BuildError(f"the act token file {path} is {problem}: it should hold one token, e.g. from\n"
                             f"  head -c 32 /dev/urandom | base64 > {path}") from None
    if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
        raise BuildError(f"the act token from {source} must be at least {MIN_TOKEN_LENGTH} characters without "
                         f"spaces; e.g. head -c 32 /dev/urandom | base64")
    return token, source


def webhook_problem(payload) -> str | None:
    """What keeps `payload` from being an Alertmanager webhook notification, or None."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        return "expected Alertmanager's webhook payload: an object with an 'alerts' list"
    for index, alert in enumerate(payload["alerts"]):
        if not isinstance(alert, dict):
            return f"alerts[{index}] is not an object"
        labels = alert.get("labels")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            return f"alerts[{index}].labels is not an object of strings"
        for key in ("status", "startsAt", "fingerprint"):
            if not isinstance(alert.get(key), str) or not alert[key]:
                return f"alerts[{index}].{key} is missing or not a string"
    return None


class ActServer(ThreadingHTTPServer):
    # On shutdown, wait for the requests being handled: their actions and audit lines finish.
    daemon_threads = False
    block_on_close = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: tuple[str, int], token: str, actor: Actor):
        self.token = token.encode()
        self.actor = actor
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: ActServer
    timeout = 10  # seconds a client may take to send its request; a slow one does not hold a thread

    def do_GET(self) -> None:
        if self.path == "/-/ready":
            self._reply(200, {"status": "ready"})
        else:
            self._reply(404, {"error": f"not found; Alertmanager posts to {ACT_PATH}"})

    def do_POST(self) -> None:
        if urllib.parse.urlsplit(self.path).path != ACT_PATH:
            return self._reply(404, {"error": f"not found; Alertmanager posts to {ACT_PATH}"})
        header = self.headers.get("Authorization")
        if header is None:
            return self._reply(401, {"error": "missing bearer token"})
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), self.server.token):
            return self._reply(401, {"error": "wrong bearer token"})
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            return self._reply(411, {"error": "Content-Length required"})
        if not length_text.isdigit():
            return self._reply(400, {"error": "bad Content-Length"})
        length, limit = int(length_text), self.server.actor.settings.max_body_bytes
        if length > limit:
            return self._reply(413, {"error": f"body of {length} bytes is over the limit of {limit}"})
        body = self.rfile.read(length)
        if len(body) != length:
            return self._reply(400, {"error": "body shorter than its Content-Length"})
        if json_depth_exceeds(body, MAX_JSON_DEPTH):
            return self._reply(400, {"error": f"body nests deeper than {MAX_JSON_DEPTH} levels; not a notification"})
        try:
            payload = json.loads(body)
        except ValueError as exc:  # also bad UTF-8
            return self._reply(400, {"error": f"body is not JSON: {exc}"})
        problem = webhook_problem(payload)
        if problem is not None:
            return self._reply(400, {"error": problem})
        decisions = self.server.actor.handle(payload)
        self._reply(200, {"decisions": [asdict(d) for d in decisions]})

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", "Bearer")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def log_message(self, format: str, *args) -> None:
        sys.stderr.write(loggable(f"dashgen act: {self.address_string()} {format % args}") + "\n")


def loggable(text: str) -> str:
    """`text` on one line with nothing a terminal acts on: control characters (newlines, ANSI
    escapes) written as escapes, so a label cannot forge a log line or recolour the terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def json_depth_exceeds(body: bytes, limit: int) -> bool:
    """Whether JSON `body` opens more than `limit` nested arrays or objects (brackets in strings
    do not count); checked before parsing, whose recursion such a body would exhaust."""
    depth, in_string, escaped = 0, False, False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def serve(settings: ActSettings, host: str, port: int, token: str, say=print) -> None:
    """Receive notifications until SIGTERM or Ctrl-C."""
    actor = Actor(settings)
    try:
        server = ActServer((host, port), token, actor)
    except OSError as exc:
        raise BuildError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    port = server.server_address[1]  # the port bound, when 0 asked for a free one
    shown_host = f"[{host}]" if ":" in host else host
    actions = ", ".join(f"{name}: {action}" for name, action in sorted(settings.actions.items())) or "none"
    say(f"dashgen act: guarding run {settings.project}/{settings.experiment} on http://{shown_host}:{port}{ACT_PATH}"
        f"{' (dry run)' if settings.dry_run else ''}; actions: {actions}; audit log: {settings.audit_log}")
    for action in sorted(set(settings.actions.values()) - {"log"}):
        say(f"dashgen act: {action} will {settings.describe(action)}")
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
