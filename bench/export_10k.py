"""Benchmark `dashgen export` on a 10,000-step verl log (issue: serve the last step within 2 s).

Measures, on this machine: the time from starting the exporter to /metrics serving step
10,000; its resident memory then; and again after 10,000 more steps are appended (flat
memory means the second figure is about the first).

    .venv/bin/python bench/export_10k.py
"""

import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from dashgen.replay.prometheus_server import free_port
from dashgen.evaluation.synthetic_runs import step_line

from _process_memory import status_mib  # bench/, first on sys.path when a bench runs

STEPS = 10_000


def wait_for_step(port: int, step: int, timeout: float = 60) -> float:
    wanted = f"verl_training_global_step{{experiment=\"bench\",project=\"runs\"}} {float(step)}"
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
                if wanted in response.read().decode():
                    return time.perf_counter()
        except OSError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"step {step} not served within {timeout} s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "runs" / "bench.jsonl"
        log.parent.mkdir()
        with open(log, "w") as handle:
            handle.writelines(step_line(step) for step in range(1, STEPS + 1))
        size_mb = log.stat().st_size / 1e6
        port = free_port()
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "dashgen", "export", "--jsonl", str(log),
                                    "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
        try:
            served = wait_for_step(port, STEPS)
            rss_first = status_mib(process.pid, "VmRSS")
            with open(log, "a") as handle:
                handle.writelines(step_line(step) for step in range(STEPS + 1, 2 * STEPS + 1))
            wait_for_step(port, 2 * STEPS)
            rss_second = status_mib(process.pid, "VmRSS")
        finally:
            process.terminate()
            process.wait(timeout=10)
    print(f"log: {STEPS} steps, {size_mb:.1f} MB")
    print(f"start -> last step served: {served - started:.2f} s (goal < 2 s)")
    print(f"resident memory after {STEPS} steps: {rss_first:.1f} MiB; after {2 * STEPS}: {rss_second:.1f} MiB "
          f"(ratio {rss_second / rss_first:.2f})")


if __name__ == "__main__":
    main()
