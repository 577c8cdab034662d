"""Benchmark `dashgen export` on a hostile log (issue 9: bounded memory whatever a line holds).

flood: feeds the exporter, while it runs, with: 200 steps of 10,000 new keys each, one 300 MB
line without a newline, and a line nested 100,000 deep; then a normal step. Prints the exporter's
peak resident memory (VmHWM) after each phase and the time it took to serve the final step.

repeated-step (issue 38): starts the exporter, in this project (so it computes the step
statistics its build lists), on a log already holding 200,000 lines that all log one step, and on
one of 200,000 distinct steps for comparison. Prints the time from start to the first scrape that
serves the newest line, and the peak resident memory then. It models a trainer stuck re-logging
one step (or a hostile writer); it leaves out a log that also grows meanwhile.

    .venv/bin/python bench/export_hostile_log.py [flood|repeated-step]   (default: both)
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from dashgen.replay.prometheus_server import free_port

from _process_memory import status_mib  # bench/, first on sys.path when a bench runs

FLOOD_STEPS = 200
KEYS_PER_STEP = 10_000
REPEATED_LINES = 200_000


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def wait_for(port: int, text: str, timeout: float = 300) -> float:
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        try:
            if text in scrape(port):
                return time.perf_counter() - start
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"not served within {timeout} s: {text}")


def flood() -> None:
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        log = Path(tmp) / "runs" / "bench.jsonl"
        log.parent.mkdir()
        log.touch()
        port = free_port()
        process = subprocess.Popen([sys.executable, "-m", "dashgen", "export", "--jsonl", str(log),
                                    "--listen", f"127.0.0.1:{port}", "--poll-interval", "0.1"],
                                   stderr=subprocess.DEVNULL)
        try:
            wait_for(port, "verl_exporter_steps_total")
            print(f"started:                     peak {status_mib(process.pid, 'VmHWM'):7.1f} MiB")
            with open(log, "a") as handle:
                for step in range(1, FLOOD_STEPS + 1):
                    data = {f"flood/s{step}/k{i}": 1.0 for i in range(KEYS_PER_STEP)}
                    handle.write(json.dumps({"step": step, "data": data}) + "\n")
                    handle.flush()
            wait_for(port, f'verl_exporter_steps_total{{experiment="bench",project="runs"}} {float(FLOOD_STEPS)}')
            print(f"{FLOOD_STEPS} x {KEYS_PER_STEP:,} new keys:   peak {status_mib(process.pid, 'VmHWM'):7.1f} MiB")
            with open(log, "ab") as handle:
                chunk = b"x" * (1 << 20)
                handle.write(b'{"step": 0, "data": {"x": "')
                for _ in range(300):
                    handle.write(chunk)
                    handle.flush()
                handle.write(b'"}}\n')
                handle.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
                handle.write(json.dumps({"step": FLOOD_STEPS + 1, "data": {"actor/ppo_kl": 0.5}}).encode() + b"\n")
            took = wait_for(port, 'verl_actor_ppo_kl{experiment="bench",project="runs"} 0.5')
            print(f"300 MB line + deep nesting:  peak {status_mib(process.pid, 'VmHWM'):7.1f} MiB "
                  f"(final step served {took:.1f} s after the writes)")
            print([row for row in scrape(port).splitlines() if row.startswith("verl_exporter_")
                   and "_total" in row and not row.startswith("#")])
        finally:
            process.terminate()
            process.wait(timeout=30)


def first_scrape(lines: Iterator[str], newest: str) -> tuple[float, float]:
    """(seconds from start to a scrape serving `newest`, peak MiB then) of an exporter started on `lines`."""
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        log = Path(tmp) / "runs" / "bench.jsonl"
        log.parent.mkdir()
        with open(log, "w") as handle:
            handle.writelines(lines)
        port = free_port()
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "dashgen", "export", "--jsonl", str(log),
                                    "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
        try:
            wait_for(port, newest)
            return time.perf_counter() - started, status_mib(process.pid, "VmHWM")
        finally:
            process.terminate()
            process.wait(timeout=30)


def repeated_step() -> None:
    def line(step: int) -> str:
        return json.dumps({"step": step, "data": {"actor/ppo_kl": 0.5, "actor/entropy": 0.4,
                                                 "timing_s/step": 60.0}}) + "\n"

    served = 'verl_training_global_step{experiment="bench",project="runs"} '
    took, peak = first_scrape((line(7) for _ in range(REPEATED_LINES)), served + "7.0")
    print(f"{REPEATED_LINES:,} lines of one step:      first scrape {took:5.2f} s, peak {peak:6.1f} MiB")
    took, peak = first_scrape((line(step) for step in range(1, REPEATED_LINES + 1)),
                              served + f"{float(REPEATED_LINES)}")
    print(f"{REPEATED_LINES:,} lines of distinct steps: first scrape {took:5.2f} s, peak {peak:6.1f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", nargs="?", choices=("flood", "repeated-step"))
    phase = parser.parse_args().phase
    if phase in (None, "flood"):
        flood()
    if phase in (None, "repeated-step"):
        repeated_step()
