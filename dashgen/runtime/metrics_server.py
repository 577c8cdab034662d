"""Serve a registry's /metrics to Prometheus' scrapes, many at once, from a pool of threads."""

from __future__ import annotations

import queue
import socket
import threading
from typing import Callable, Hashable, Iterable
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

# Connections /metrics queues while its threads are busy (socketserver's default is 5).
LISTEN_BACKLOG = 128
# Threads kept waiting for the next scrape once theirs is answered.
MAX_IDLE_SCRAPE_THREADS = 32


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
