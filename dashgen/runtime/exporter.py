"""Serve verl's per-step metrics to Prometheus.

Two front ends over one state: `LogFollower` reads verl's JSONL step log like `tail -F`
(`dashgen export`), and `VerlPrometheusLogger.log(data, step)` is called by code that drives
verl's tracking itself. Only the newest step's values are held, so memory stays flat
however long the run.
"""

from __future__ import annotations

import os
import queue
import socket
import stat as stat_mode
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Hashable, Iterable, Iterator
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from dashgen.catalog import (CATALOG, NONFINITE_LOSS_STREAK_METRIC, NONFINITE_STREAK_METRIC, RUN_STATE_METRIC, VALIDATION_FAMILIES,
                             VALIDATION_LABELS, Catalog)
from dashgen.lifecycle import NonFiniteStreak, RunPhase
from dashgen.runtime.log_tail import HistoryCounter, HistoryCounts, TailStart, last_line_end, read_tail
from dashgen.runtime.log_watch import LogChanges
from dashgen.sources.verl_log import LineError, StepMapper, ValidationSeries, parse_line

LABELS = ("project", "experiment")
READ_CHUNK = 1 << 20
HEAD_BYTES = 256
# Connections /metrics queues while its threads are busy (socketserver's default is 5).
LISTEN_BACKLOG = 128
# Threads kept waiting for the next scrape once theirs is answered.
MAX_IDLE_SCRAPE_THREADS = 32
# verl's lines are kilobytes; a longer one is dropped (and counted) instead of held in memory.
MAX_LINE_BYTES = 16 << 20
# Lines (bytes of them decoded) of a log's history counted before the first scrape; the rest in the background.
COUNT_HISTORY_AT_ONCE_BYTES = 512 << 10


class RunState:
    """The newest step of one run, as a prometheus_client collector."""

    def __init__(self, project: str, experiment: str, catalog: Catalog = CATALOG, export_unknown: bool = True,
                 total_steps: int | None = None):
        self.labels = (project, experiment)
        self.catalog = catalog
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
        # Started at a long log's tail: the counters are not served until its lines are counted.
        self.history_pending = False
        self.version = 0  # changes whenever what collect() yields may have

    def record(self, step: int, data: dict) -> None:
        """Take one step's data: it replaces the previous step's values wholesale."""
        values = self._mapper.map(data)
        with self._lock:
            self.version += 1
            self._values = values
            self.last_step_time = time.time()
            self._count(step, data)

    def skip(self, step: int, data: dict) -> None:
        """Count a step whose values a newer step already replaces (catching up on a long log)."""
        with self._lock:
            self.version += 1
            self._count(step, data)

    def resume(self, tail: TailStart) -> None:
        """Take what a whole read of the log so far would have left; its lines are counted by add_history."""
        with self._lock:
            self.version += 1
            self.history_pending = True
            if tail.newest is not None:
                step, data = tail.newest
                self._values = self._mapper.map(data)
                self.last_step_time = time.time()
                self.last_step = step
                self._reach(step)
            self._streak.steps, self._streak.loss_steps = tail.nonfinite_steps, tail.nonfinite_loss_steps
            self._validation = tail.validation

    def add_history(self, counts: HistoryCounts) -> None:
        """Count the lines a tail start skipped, as a whole read would have."""
        with self._lock:
            self.version += 1
            self.steps_total += counts.steps
            self.parse_errors_total += counts.parse_errors
            self.dropped_lines_total += counts.dropped_lines
            self._mapper.counts.dropped_keys += counts.dropped_keys
            if counts.highest_step is not None:
                self._reach(counts.highest_step)
            self.history_pending = False

    def _reach(self, step: int) -> None:
        if self.total_steps is not None and step >= self.total_steps and self.phase is RunPhase.RUNNING:
            self.phase = RunPhase.FINISHED

    def _count(self, step: int, data: dict) -> None:
        validation = self._mapper.validation(data)
        if validation:
            self._validation = validation
        elif self.last_step is not None and step < self.last_step:
            self._validation = {}  # a restarted run: the old run's results are not this one's
        self.last_step = step
        self.steps_total += 1
        self._streak.observe(data)
        self._reach(step)

    def ended(self, phase: RunPhase, exit_code: int | None = None) -> None:
        """The trainer is gone: how it ended, and its exit code when known."""
        with self._lock:
            self.version += 1
            self.phase = phase
            self.exit_code = exit_code

    def parse_error(self) -> None:
        with self._lock:
            self.version += 1
            self.parse_errors_total += 1

    def dropped_line(self) -> None:
        with self._lock:
            self.version += 1
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
            counters = () if self.history_pending else (
                ("verl_exporter_steps", steps), ("verl_exporter_parse_errors", errors),
                ("verl_exporter_dropped_lines", self.dropped_lines_total),
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
        for name, value in counters:
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
    dropped and counted). Only regular files are opened, without blocking: a FIFO is waited out.

    The log found at the first look is started at its tail (see log_tail): what is served is what
    a whole read would serve, and the counters follow once its lines are counted (in the
    background for a long log). A log that appears, is truncated or replaced later is read whole."""

    def __init__(self, path: Path, state: RunState, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                 max_line_bytes: int = MAX_LINE_BYTES, start_at_tail: bool = True):
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
        self._start_at_tail = start_at_tail
        self._stop_counting = threading.Event()
        self._counting: threading.Thread | None = None

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
        if self._start_at_tail:
            self._start_at_tail = False
            self._resume_at_tail(stat.st_size)

    def _resume_at_tail(self, size: int) -> None:
        """Skip to the last complete line, taking what the lines before it leave behind."""
        fd = self._file.fileno()
        offset = last_line_end(fd, size)
        self.state.resume(read_tail(fd, offset, self.max_line_bytes, self.state.catalog))
        self._previous_step = self.state.last_step
        self._head = os.pread(fd, min(HEAD_BYTES, offset), 0)
        self._offset = offset
        self._file.seek(offset)
        counter = HistoryCounter(fd, offset, self.max_line_bytes, self.state.catalog)
        if counter.advance(self._stop_counting, COUNT_HISTORY_AT_ONCE_BYTES):
            self.state.add_history(counter.counts)
            return
        counter.fd = os.dup(fd)  # the follower may close or reopen its file meanwhile
        counter.yield_after_each_line = True
        self._counting = threading.Thread(target=self._count_history, args=(counter,), name="log-history",
                                          daemon=True)
        self._counting.start()

    def _count_history(self, counter: HistoryCounter) -> None:
        if hasattr(os, "setpriority"):  # Linux: this thread only; the trainer and scrapes come first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        try:
            if not counter.advance(self._stop_counting):
                return  # stopped
        except OSError as exc:
            self.say(f"dashgen export: counting the lines already in {self.path} failed ({exc}); the "
                     f"verl_exporter_*_total counters count from where the exporter started")
            counter.counts = HistoryCounts()
        finally:
            os.close(counter.fd)
        self.state.add_history(counter.counts)

    def wait_for_history(self, timeout: float | None = None) -> bool:
        """Whether the lines a tail start skipped are counted (waiting up to `timeout` seconds)."""
        if self._counting is not None:
            self._counting.join(timeout)
        return not self.state.history_pending

    def _same_head(self) -> bool:
        """A run restarted between two polls may already have written past the old offset:
        the file's first bytes tell a rewritten log from a grown one."""
        return os.pread(self._file.fileno(), len(self._head), 0) == self._head

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def stop(self) -> None:
        """Close the log and end the count of its history, if one is under way."""
        if self._counting is not None:
            self._stop_counting.set()
            self._counting.join()
            self._counting = None
        self.close()


def run_from_path(path: Path) -> tuple[str, str]:
    """verl's file logger writes $VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl.

    The path as given (made absolute, symlinks not followed): a link's folder names the run."""
    path = Path(os.path.abspath(path))
    return path.parent.name or "default", path.stem or "default"


class _MetricsServer(WSGIServer):
    """Each connection is served by a thread of its own, as with ThreadingMixIn, but threads that
    are done wait for the next one: starting a thread per scrape made the accepting thread wait
    for each new thread to be scheduled, which under load was most of a scrape's p99."""

    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args, **kwargs):
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting on _connections for a connection not yet handed over
        self._closed = False
        self._connections: queue.SimpleQueue = queue.SimpleQueue()
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        with self._lock:
            hand_over = self._idle > 0
            if hand_over:
                self._idle -= 1
        if hand_over:
            self._connections.put((request, client_address))
        else:
            threading.Thread(target=self._serve_connections, args=(request, client_address), name="scrape",
                             daemon=True).start()

    def _serve_connections(self, request, client_address) -> None:
        while request is not None:
            try:
                self.finish_request(request, client_address)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
            with self._lock:
                # Closed while this thread was still answering: nobody would wake it.
                if self._closed or self._idle >= MAX_IDLE_SCRAPE_THREADS:
                    return
                self._idle += 1
            request, client_address = self._connections.get()

    def server_close(self) -> None:
        super().server_close()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._connections.put((None, None))


class _QuietHandler(WSGIRequestHandler):
    wbufsize = 1 << 16  # an answer in one send, not one per header (wsgiref's default)

    def log_message(self, format: str, *args) -> None:
        pass  # a line per scrape would bury what the exporter has to say


class CachedScrapes:
    """A WSGI app that answers a scrape with the bytes made for the last like it while `version()` is unchanged.

    Formatting the exposition is most of a scrape's cost; twenty scrapers at once would otherwise
    each pay it for the same step."""

    MAX_VARIANTS = 8  # Accept and Accept-Encoding headers remembered per version

    def __init__(self, app: Callable, version: Callable[[], Hashable]):
        self.app = app
        self.version = version
        self._lock = threading.Lock()
        self._version: Hashable = None
        self._answers: dict[tuple, tuple[str, list[tuple[str, str]], bytes]] = {}

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("QUERY_STRING"):  # e.g. name[]= filters: made for this request alone
            return self.app(environ, start_response)
        version = self.version()
        variant = (environ.get("PATH_INFO"), environ.get("HTTP_ACCEPT"), environ.get("HTTP_ACCEPT_ENCODING"))
        with self._lock:
            answer = self._answers.get(variant) if version == self._version else None
        if answer is None:
            answer = self._answer(environ)
            with self._lock:
                if version != self._version:
                    self._version, self._answers = version, {}
                if len(self._answers) < self.MAX_VARIANTS:
                    self._answers[variant] = answer
        status, headers, body = answer
        start_response(status, list(headers))
        return [body]

    def _answer(self, environ: dict) -> tuple[str, list[tuple[str, str]], bytes]:
        started: list = []
        body = b"".join(self.app(environ, lambda status, headers, exc_info=None: started.extend((status, headers))))
        return started[0], started[1], body


def serve_metrics(registry: CollectorRegistry, host: str, port: int,
                  version: Callable[[], Hashable] | None = None) -> WSGIServer:
    """/metrics of `registry` on host:port (0: a free port), from a daemon thread; OSError if it cannot listen.

    With `version`, which must change whenever any of the registry's collectors would yield
    something else, a scrape is answered from the last one's bytes while it is unchanged."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("MetricsServer", (_MetricsServer,), {"address_family": family})
    app = make_wsgi_app(registry)
    if version is not None:
        app = CachedScrapes(app, version)
    server = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def follow_forever(follower: LogFollower, changes: LogChanges, interval: float, stop: threading.Event) -> None:
    """Read the log whenever it changes (and every `interval` seconds) until `stop` is set."""
    while not stop.is_set():
        try:
            follower.poll()
        except OSError as exc:  # e.g. the file vanished between stat and read: try again
            follower.say(f"dashgen export: reading {follower.path} failed ({exc}); retrying")
            follower.close()
        changes.wait(interval)
