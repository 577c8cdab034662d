"""Benchmark where users wait on `dashgen export` (issue 19), each figure beside a reference from the same run.

- catch-up: an exporter started beside a 100,000-step log, until /metrics serves the last step
  (goal 0.5 s); reference: json.loads of every line of that log, in this process; and its
  resident memory then, and once the log's lines are counted (flat: about the same);
- lag: a step written to the log until /metrics serves it (goal 150 ms; the poll was 0.5 s);
- scrapes: 20 clients scraping /metrics back to back for 10 s, p50 and p99 (goal p99 50 ms);
  reference: one client alone, and the machine's load (others' work on these cores shows in p99).

    .venv/bin/python bench/exporter_latency.py [--steps N] [--scrape-seconds S]
"""

import argparse
import http.client
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dashgen.replay.prometheus_server import free_port, stop_process
from dashgen.evaluation.synthetic_runs import step_line

from _process_memory import status_mib  # bench/, first on sys.path when a bench runs

CLIENTS = 20
TEMPLATES = 1_000  # distinct synthetic steps, renumbered to fill the log quickly


def write_log(path: Path, steps: int) -> None:
    templates = [step_line(step) for step in range(1, TEMPLATES + 1)]
    with open(path, "w") as handle:
        for step in range(1, steps + 1):
            handle.write(renumbered(templates[(step - 1) % TEMPLATES], step))


def renumbered(line: str, step: int) -> str:
    record = json.loads(line)
    old = record["step"]
    return line.replace(f'{{"step": {old}, "data": {{"training/global_step": {old},',
                        f'{{"step": {step}, "data": {{"training/global_step": {step},', 1)


def scrape(port: int) -> str:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        return connection.getresponse().read().decode()
    finally:
        connection.close()


def serves(port: int, text: str) -> bool:
    try:
        return text in scrape(port)
    except OSError:
        return False


def wait_for(port: int, text: str, timeout: float, pause: float = 0.002) -> float:
    """The perf_counter time /metrics first holds `text`."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if serves(port, text):
            return time.perf_counter()
        time.sleep(pause)
    raise RuntimeError(f"/metrics did not serve {text!r} within {timeout} s")


def step_sample(step: int) -> str:
    return f'verl_training_global_step{{experiment="bench",project="runs"}} {float(step)}'


def decode_every_line(path: Path) -> float:
    started = time.perf_counter()
    with open(path, "rb") as handle:
        for line in handle:
            json.loads(line)
    return time.perf_counter() - started


def lag(port: int, log: Path, first_step: int, count: int) -> list[float]:
    """Seconds from each appended step's write to /metrics serving it."""
    lags = []
    with open(log, "a") as handle:
        for step in range(first_step, first_step + count):
            handle.write(renumbered(step_line(step), step))
            handle.flush()
            written = time.perf_counter()
            lags.append(wait_for(port, step_sample(step), 10, pause=0) - written)
            time.sleep(0.05)
    return lags


def scrape_latencies(port: int, seconds: float, clients: int = CLIENTS) -> tuple[list[float], int]:
    """Each scrape's seconds from `clients` connections kept busy back to back, and how many failed.

    One thread drives them all through non-blocking sockets, so a scrape's time is not the
    client's own wait for the GIL, as it would be with a thread per client."""
    request = b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"
    latencies: list[float] = []
    failures = 0
    end = time.perf_counter() + seconds
    waiting = selectors.DefaultSelector()

    def start_scrape() -> None:
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setblocking(False)
        started = time.perf_counter()
        client.connect_ex(("127.0.0.1", port))
        waiting.register(client, selectors.EVENT_WRITE, [started, b""])

    for _ in range(clients):
        start_scrape()
    while waiting.get_map():
        for key, events in waiting.select(timeout=10):
            client, scrape_state = key.fileobj, key.data
            try:
                if events & selectors.EVENT_WRITE:
                    client.sendall(request)
                    waiting.modify(client, selectors.EVENT_READ, scrape_state)
                    continue
                chunk = client.recv(1 << 16)
            except OSError:
                chunk, failures = b"", failures + 1
                scrape_state[1] = b""
            if chunk:
                scrape_state[1] += chunk
                continue
            waiting.unregister(client)
            client.close()
            if scrape_state[1].startswith(b"HTTP/1.0 200"):
                latencies.append(time.perf_counter() - scrape_state[0])
            elif scrape_state[1]:
                failures += 1
            if time.perf_counter() < end:
                start_scrape()
    return latencies, failures


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--scrape-seconds", type=float, default=10.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "runs" / "bench.jsonl"
        log.parent.mkdir()
        write_log(log, options.steps)
        size_mb = log.stat().st_size / 1e6
        decode_seconds = decode_every_line(log)
        port = free_port()
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "dashgen", "export", "--jsonl", str(log),
                                    "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
        try:
            served = wait_for(port, step_sample(options.steps), 120)
            rss_served = status_mib(process.pid, "VmRSS")
            wait_for(port, f'verl_exporter_steps_total{{experiment="bench",project="runs"}} {float(options.steps)}',
                     300, pause=0.1)
            counted = time.perf_counter()
            rss_counted = status_mib(process.pid, "VmRSS")
            lags = lag(port, log, options.steps + 1, 40)
            alone, _ = scrape_latencies(port, 2, clients=1)
            latencies, failures = scrape_latencies(port, options.scrape_seconds)
            load = os.getloadavg()[0]
        finally:
            stop_process(process)
    print(f"log: {options.steps:,} steps, {size_mb:.0f} MB")
    print(f"catch-up: last step served {served - started:.2f} s after start (goal 0.5 s); reference: json.loads "
          f"of every line {decode_seconds:.2f} s; lines counted in the background after {counted - started:.1f} s")
    print(f"memory: {rss_served:.1f} MiB resident when served, {rss_counted:.1f} MiB once counted")
    print(f"lag: write -> served median {statistics.median(lags) * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms "
          f"over {len(lags)} steps (goal 150 ms; the former 0.5 s poll alone waits 250 ms on average)")
    print(f"scrapes: {CLIENTS} clients for {options.scrape_seconds:g} s: {len(latencies):,} scrapes, {failures} failed; "
          f"p50 {percentile(latencies, 0.5) * 1000:.1f} ms, p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
          f"max {max(latencies) * 1000:.0f} ms (goal p99 50 ms); reference: one client alone p50 "
          f"{percentile(alone, 0.5) * 1000:.1f} ms, p99 {percentile(alone, 0.99) * 1000:.1f} ms; "
          f"load average {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
