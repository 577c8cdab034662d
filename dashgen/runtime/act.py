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
import sys
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
from dashgen.runtime.act_actions import ActionFailed, run_command, stop_pid_file, stop_ray_job
from dashgen.sources.chosen import metric_source

TOKEN_ENV = "DASHGEN_ACT_TOKEN"
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_BYTES = 4096
# An audit line holds one alert's labels and a detail; longer ones were not written by act.
MAX_AUDIT_LINE_BYTES = 1 << 20
# Alertmanager's notifications nest 4 deep; a deeper body is refused before Python's parser recurses.
MAX_JSON_DEPTH = 32
# Connections the listening socket queues while every handler is busy (http.server's default is 5).
LISTEN_BACKLOG = 128

# Decisions, as the audit log and the HTTP answer name them.
ACTED, WOULD_ACT, LOGGED, FAILED = "acted", "would-act", "logged", "failed"
DUPLICATE, RESOLVED, OTHER_RUN = "duplicate", "ignored-resolved", "ignored-other-run"


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
