"""Serve verl's per-step metrics to Prometheus.

Two front ends over one state: `LogFollower` reads verl's JSONL step log like `tail -F`
(`dashgen export`), and `VerlPrometheusLogger.log(data, step)` is called by code that drives
verl's tracking itself. Only the newest step's values are held, so memory stays flat
however long the run.
"""

from __future__ import annotations

import os
import socket
import stat as stat_mode
import sys
import threading
import time
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Callable, Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from dashgen.catalog import (CATALOG, NONFINITE_LOSS_STREAK_METRIC, NONFINITE_STREAK_METRIC, RUN_STATE_METRIC, VALIDATION_FAMILIES,
                             VALIDATION_LABELS, Catalog)
from dashgen.lifecycle import NonFiniteStreak, RunPhase
from dashgen.verl_log import LineError, StepMapper, ValidationSeries, parse_line

LABELS = ("project", "experiment")
READ_CHUNK = 1 << 20
HEAD_BYTES = 256
# Connections /metrics queues while its threads are busy (socketserver's default is 5).
LISTEN_BACKLOG = 128
# verl's lines are kilobytes; a longer one is dropped (and counted) instead of held in memory.
MAX_LINE_BYTES = 16 << 20


class RunState:
    """The newest step of one run, as a prometheus_client collector."""

    def __init__(self, project: str, experiment: str, catalog: Catalog = CATALOG, export_unknown: bool = True,
                 total_steps: int | None = None):
        self.labels = (project, experiment)
        self._mapper = StepMapper(catalog, export_unknown)
        self._help = {name: m.help for name, m in catalog.items()}
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}
        self.last_step: int | None = None
        self.last_step_time: float | None = None
        self.steps_total = 0
        self.parse_errors_total = 0
        # Sidecar mode: the run is finished once a step >= total_steps is logged.
        self.total_steps = total_steps
        self.phase = RunPhase.RUNNING
        self.exit_code: int | None = None
        self._streak = NonFiniteStreak(catalog)
        self.dropped_lines_total = 0
        # Validation results are logged on test steps only: held until the next test step
        # replaces them (all of them: a series that step lacks is gone) or the run restarts.
        self._validation: dict[ValidationSeries, float] = {}

    def record(self, step: int, data: dict) -> None:
        """Take one step's data: it replaces the previous step's values wholesale."""
        values = self._mapper.map(data)
        with self._lock:
            self._values = values
            self.last_step_time = time.time()
            self._count(step, data)

    def skip(self, step: int, data: dict) -> None:
        """Count a step whose values a newer step already replaces (catching up on a long log)."""
        with self._lock:
            self._count(step, data)

    def _count(self, step: int, data: dict) -> None:
        validation = self._mapper.validation(data)
        if validation:
            self._validation = validation
        elif self.last_step is not None and step < self.last_step:
            self._validation = {}  # a restarted run: the old run's results are not this one's
        self.last_step = step
        self.steps_total += 1
        self._streak.observe(data)
        if self.total_steps is not None and step >= self.total_steps and self.phase is RunPhase.RUNNING:
            self.phase = RunPhase.FINISHED

    def ended(self, phase: RunPhase, exit_code: int | None = None) -> None:
        """The trainer is gone: how it ended, and its exit code when known."""
        with self._lock:
            self.phase = phase
            self.exit_code = exit_code

    def parse_error(self) -> None:
        with self._lock:
            self.parse_errors_total += 1

    def dropped_line(self) -> None:
        with self._lock:
            self.dropped_lines_total += 1

    def take_notes(self) -> list[str]:
        """Messages about keys not exported (collisions, the series limit) since the last call."""
        with self._lock:
            notes, self._mapper.counts.notes = self._mapper.counts.notes, []
        return notes

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            values = dict(self._values)
            last_time, steps, errors = self.last_step_time, self.steps_total, self.parse_errors_total
            phase, exit_code, streak = self.phase, self.exit_code, self._streak.steps
            loss_streak = self._streak.loss_steps
            validation = self._validation
            dropped = (("verl_exporter_dropped_lines", self.dropped_lines_total),
                       ("verl_exporter_dropped_keys", self._mapper.counts.dropped_keys),
                       ("verl_exporter_key_collisions", self._mapper.counts.key_collisions))
        for name in sorted(values):
            family = GaugeMetricFamily(name, self._help.get(name, "verl metric (no catalog entry)"),
                                       labels=LABELS)
            family.add_metric(self.labels, values[name])
            yield family
        if last_time is not None:
            family = GaugeMetricFamily("verl_exporter_last_step_timestamp_seconds",
                                       self._help["verl_exporter_last_step_timestamp_seconds"], labels=LABELS)
            family.add_metric(self.labels, last_time)
            yield family
        for name, value in (("verl_exporter_steps", steps), ("verl_exporter_parse_errors", errors), *dropped):
            family = CounterMetricFamily(name, self._help[f"{name}_total"], labels=LABELS)
            family.add_metric(self.labels, value)
            yield family
        family = GaugeMetricFamily(RUN_STATE_METRIC, self._help[RUN_STATE_METRIC], labels=(*LABELS, "state"))
        for each in RunPhase:
            family.add_metric((*self.labels, each.value), float(each is phase))
        yield family
        if exit_code is not None:
            family = GaugeMetricFamily("verl_run_exit_code", self._help["verl_run_exit_code"], labels=LABELS)
            family.add_metric(self.labels, exit_code)
            yield family
        for name, value in ((NONFINITE_STREAK_METRIC, streak), (NONFINITE_LOSS_STREAK_METRIC, loss_streak)):
            family = GaugeMetricFamily(name, self._help[name], labels=LABELS)
            family.add_metric(self.labels, value)
            yield family
        yield from validation_families(validation, self.labels, self._help)


def validation_families(held: dict[ValidationSeries, float], run: tuple[str, str],
                        help_texts: dict[str, str]) -> Iterator[Metric]:
    for name in VALIDATION_FAMILIES.values():
        series = sorted((key, value) for key, value in held.items() if key[0] == name)
        if series:
            family = GaugeMetricFamily(name, help_texts[name], labels=(*LABELS, *VALIDATION_LABELS))
            for (_, *labels), value in series:
                family.add_metric((*run, *labels), value)
            yield family


class VerlPrometheusLogger:
    """For people who build verl's Tracking themselves: `log(data, step)` like any backend.

    >>> logger = VerlPrometheusLogger("gsm8k", "ppo-7b")
    >>> logger.log({"actor/ppo_kl": 0.01}, step=1)
    Serve `logger.registry` with prometheus_client (e.g. start_http_server(9464, registry=...)).
    """

    def __init__(self, project: str, experiment: str, registry: CollectorRegistry | None = None,
                 export_unknown: bool = True):
        self.state = RunState(project, experiment, export_unknown=export_unknown)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.registry.register(self.state)

    def log(self, data: dict, step: int) -> None:
        try:
            self.state.record(int(step), data)
        except Exception:  # monitoring must never take the training job down
            self.state.parse_error()


class LogFollower:
    """Follow a JSONL file like `tail -F`: wait for it, survive truncation and replacement,
    hold back a partial last line until it is complete (up to max_line_bytes: a longer line is
    dropped and counted). Only regular files are opened, without blocking: a FIFO is waited out."""

    def __init__(self, path: Path, state: RunState, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                 max_line_bytes: int = MAX_LINE_BYTES):
        self.path = path
        self.state = state
        self.say = say
        self._file = None
        self._inode: tuple[int, int] | None = None
        self._offset = 0
        self._partial: list[bytes] = []  # pieces of the incomplete last line, joined once it ends
        self._partial_size = 0
        self._dropping = False  # inside a line longer than max_line_bytes: skip to its end
        self.max_line_bytes = max_line_bytes
        self._head = b""
        self._said_missing = False
        self._said_not_regular = False
        self._previous_step: int | None = None

    def poll(self) -> int:
        """Read whatever is new; returns the number of complete lines handled."""
        self._reopen_if_changed()
        if self._file is None:
            return 0
        handled = 0
        last_good: tuple[int, dict] | None = None
        while True:
            chunk = self._file.read(READ_CHUNK)
            if not chunk:
                break
            self._offset += len(chunk)
            if len(self._head) < HEAD_BYTES:
                self._head = (self._head + chunk)[:HEAD_BYTES]
            for line in self._complete_lines(chunk):
                handled += 1
                if not line.strip():
                    continue
                try:
                    parsed = parse_line(line)
                except LineError:
                    self.state.parse_error()
                    continue
                self._check_order(parsed[0])
                if last_good is not None:
                    # Catching up: only the newest step's values matter, but every step counts.
                    self.state.skip(*last_good)
                last_good = parsed
        if last_good is not None:
            self.state.record(*last_good)
        for note in self.state.take_notes():
            self.say(f"dashgen export: {self.path}: {note}")
        return handled

    def _complete_lines(self, chunk: bytes) -> Iterator[bytes]:
        """The lines `chunk` completes; keeps the rest, within max_line_bytes."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._hold(chunk[start:])
                return
            piece, start = chunk[start:end], end + 1
            if self._dropping:
                self._dropping = False
                continue
            if self._partial:
                self._hold(piece)
                if self._dropping:
                    self._dropping = False
                    continue
                piece = b"".join(self._partial)
                self._partial, self._partial_size = [], 0
            elif len(piece) > self.max_line_bytes:
                self.state.dropped_line()
                continue
            yield piece

    def _hold(self, piece: bytes) -> None:
        if self._dropping or not piece:
            return
        if self._partial_size + len(piece) > self.max_line_bytes:
            self.state.dropped_line()
            self._partial, self._partial_size, self._dropping = [], 0, True
            return
        self._partial.append(piece)
        self._partial_size += len(piece)

    def _check_order(self, step: int) -> None:
        previous = self._previous_step
        self._previous_step = step
        if previous is not None and step < previous:
            self.say(f"dashgen export: step went back from {previous} to {step} in {self.path} "
                     f"(a restarted or resumed run); exporting the new steps")

    def _reopen_if_changed(self) -> None:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            if not self._said_missing:
                self.say(f"dashgen export: waiting for {self.path} to appear")
                self._said_missing = True
            return
        self._said_missing = False
        if not stat_mode.S_ISREG(stat.st_mode):
            if not self._said_not_regular:
                self.say(f"dashgen export: {self.path} is not a regular file (a FIFO or device?); "
                         f"waiting for verl's log file")
                self._said_not_regular = True
            self.close()
            return
        self._said_not_regular = False
        identity = (stat.st_dev, stat.st_ino)
        if self._file is not None and identity == self._inode and stat.st_size >= self._offset \
                and self._same_head():
            return
        if self._file is not None:
            reason = "replaced" if identity != self._inode else "truncated"
            self.say(f"dashgen export: {self.path} was {reason}; reading it from the start")
            self._file.close()
        # O_NONBLOCK: should the path become a FIFO between stat and open, open must not wait
        # for a writer (that would also keep SIGTERM from being handled).
        self._file = os.fdopen(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK), "rb")
        self._inode = identity
        self._offset = 0
        self._partial, self._partial_size, self._dropping = [], 0, False
        self._head = b""

    def _same_head(self) -> bool:
        """A run restarted between two polls may already have written past the old offset:
        the file's first bytes tell a rewritten log from a grown one."""
        return os.pread(self._file.fileno(), len(self._head), 0) == self._head

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def run_from_path(path: Path) -> tuple[str, str]:
    """verl's file logger writes $VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl.

    The path as given (made absolute, symlinks not followed): a link's folder names the run."""
    path = Path(os.path.abspath(path))
    return path.parent.name or "default", path.stem or "default"


class _MetricsServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args) -> None:
        pass  # a line per scrape would bury what the exporter has to say


def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> WSGIServer:
    """/metrics of `registry` on host:port (0: a free port), from a daemon thread; OSError if it cannot listen."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("MetricsServer", (_MetricsServer,), {"address_family": family})
    server = make_server(host, port, make_wsgi_app(registry), server_class, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def follow_forever(follower: LogFollower, interval: float, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            follower.poll()
        except OSError as exc:  # e.g. the file vanished between stat and read: try again
            follower.say(f"dashgen export: reading {follower.path} failed ({exc}); retrying")
            follower.close()
        stop.wait(interval)
