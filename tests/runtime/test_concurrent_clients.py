"""20 clients at once on `/metrics` and on `dashgen act`: none is dropped, even while the server is
too busy to accept (here: stopped with SIGSTOP), because the listen backlog holds them all."""

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time


import pytest

from act_support import ActProcess

pytestmark = pytest.mark.live

CLIENTS = 20


@contextlib.contextmanager
def paused(process: subprocess.Popen):
    """The process stopped (it accepts nothing), and continued on leaving, also on failure."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


def status_of(port: int, path: str, connected: threading.Barrier) -> str:
    """GET path; the status line, or what went wrong. Connects within 2 s, as a scraper would."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as client:
            connected.wait(timeout=10)
            client.settimeout(30)
            client.sendall(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".encode())
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        return answer.split(b"\r\n", 1)[0].decode()
    except (OSError, threading.BrokenBarrierError) as exc:
        return f"failed: {exc!r}"


def clients_while_paused(process: subprocess.Popen, port: int, path: str) -> list[str]:
    """CLIENTS clients connect while the server is stopped, then it continues; each one's outcome."""
    results: list[str] = [""] * CLIENTS
    connected = threading.Barrier(CLIENTS + 1)

    def client(index: int) -> None:
        results[index] = status_of(port, path, connected)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    with paused(process):
        for thread in threads:
            thread.start()
        try:
            connected.wait(timeout=5)  # every connection queued by the kernel while the server sleeps
        except threading.BrokenBarrierError:
            pass
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_metrics_queues_20_clients(tmp_path, exporters):
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    log.write_text('{"step": 1, "data": {"actor/ppo_kl": 0.1}}\n')
    exporter = exporters(log, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    exporter.scrape(timeout=30)
    started = time.monotonic()
    results = clients_while_paused(exporter.process, exporter.port, "/metrics")
    assert results == ["HTTP/1.0 200 OK"] * CLIENTS, results
    assert time.monotonic() - started < 30


def test_act_queues_20_clients(tmp_path):
    with ActProcess(tmp_path / "act", {}) as act:
        results = clients_while_paused(act.process, act.port, "/-/ready")
    assert results == ["HTTP/1.0 200 OK"] * CLIENTS, results
