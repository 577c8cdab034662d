"""What the tests do again and again, in one place: poll until something holds, run `dashgen` as a
process, start `dashgen export` on a free port, scrape it, and ask a server which alerts fire.

The `exporters` fixture (conftest.py) starts exporters through `start_exporter` and stops each one
after its test; a test that must watch the process end itself uses `start_exporter` directly.
"""

from __future__ import annotations

import math
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from dashgen.replay.prometheus_server import free_port
from dashgen.evaluation.synthetic_runs import step_data

# The exporter's poll of its log in tests: short, so a step written is served at once.
POLL_INTERVAL = "0.05"


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    """Poll `condition` until it returns something true, and return that; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def wait_on_progress(condition, progress, what: str, stall: float = 30.0, interval: float = 0.5,
                     longest: float = 900.0):
    """Poll `condition` until it returns something true, and return that. Fail naming `what` only once
    `progress()` (a count of the steps served, of the panels with data) has not changed for `stall`
    seconds, or after `longest`: a loaded machine is slower, not stuck, and a fixed deadline read its
    slowness as a failure."""
    started = last_change = time.monotonic()
    seen = progress()
    while True:
        result = condition()
        if result:
            return result
        now = time.monotonic()
        if now - last_change > stall or now - started > longest:
            raise AssertionError(f"no progress for {now - last_change:.0f} s ({now - started:.0f} s in all) "
                                 f"waiting for {what}")
        time.sleep(interval)
        current = progress()
        if current != seen:
            seen, last_change = current, time.monotonic()


def dashgen_command(*args: str) -> list[str]:
    """The command line of `dashgen ARGS`, run by this Python."""
    return [sys.executable, "-m", "dashgen", *args]


def dashgen_process(*args: str, **popen) -> subprocess.Popen:
    """`dashgen ARGS` as a process; its stdout and stderr piped as text unless `popen` says otherwise."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, "stdin": subprocess.DEVNULL}
    return subprocess.Popen(dashgen_command(*args), **{**options, **popen})


def announced_port(process: subprocess.Popen, host: str = "127.0.0.1") -> int:
    """The port a server started with `--listen HOST:0` says, in its first line on stderr, it bound."""
    announced = process.stderr.readline()
    assert f"on http://{host}:" in announced, announced
    port = int(announced.split(f"on http://{host}:", 1)[1].split("/")[0])
    assert port != 0, announced
    return port


def export_command(log: Path, port: int, *options: str, poll_interval: str = POLL_INTERVAL) -> list[str]:
    """`dashgen export` following `log` and serving on 127.0.0.1:`port`, then `options` (which may
    end in `--` and a trainer's command line)."""
    return dashgen_command("export", "--jsonl", str(log), "--listen", f"127.0.0.1:{port}",
                           "--poll-interval", poll_interval, *options)


@dataclass
class Exporter:
    """A `dashgen export` process and the port it serves on."""

    process: subprocess.Popen
    port: int

    def scrape(self, timeout: float = 20) -> str:
        """Its /metrics, once it answers; fails if it exits first or has not answered within `timeout` s."""
        def answer() -> str | None:
            if self.process.poll() is not None:
                raise AssertionError(f"dashgen export exited with status {self.process.returncode}")
            return scrape(self.port)
        return wait_until(answer, timeout, f"dashgen export on port {self.port} to answer")

    def metrics(self) -> dict[str, float]:
        return samples(self.scrape())

    def run_state(self) -> str | None:
        return run_state(self.metrics())

    def kill(self) -> None:
        """SIGKILL, as an exporter's end after its test: a supervised trainer dies with it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate(timeout=10)


def start_exporter(log: Path, *options: str, port: int | None = None, poll_interval: str = POLL_INTERVAL,
                   **popen) -> Exporter:
    """`dashgen export --jsonl LOG --listen 127.0.0.1:PORT OPTIONS` on a free port unless `port` is
    given; its output piped as text unless `popen` says otherwise. Not waited for: poll `scrape`."""
    port = free_port() if port is None else port
    return Exporter(subprocess.Popen(export_command(log, port, *options, poll_interval=poll_interval),
                                     **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True,
                                        "stdin": subprocess.DEVNULL, **popen}), port)


def scrape(port: int, path: str = "/metrics") -> str | None:
    """One GET of 127.0.0.1:`port``path`: the body, or None while nothing answers there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.read().decode()
    except OSError:
        return None


def samples(text: str) -> dict[str, float]:
    """The metric lines of an exposition, `name{labels}` -> value."""
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def run_state(metrics: dict[str, float] | None) -> str | None:
    """The one `verl_run_state` an exporter publishes as 1 (running, finished, crashed, stopped)."""
    if not metrics:
        return None
    ones = [key for key, value in metrics.items() if key.startswith("verl_run_state{") and value == 1]
    return ones[0].split('state="')[1].split('"')[0] if len(ones) == 1 else None


RUN_LABELS = ("job", "instance", "project", "experiment")


def backtest_result(backtest: dict, path: Path) -> dict:
    """A run's part of a backtest, without what names the run: its steps, and each alert's firings in steps."""
    [described] = [entry for entry in backtest["runs"] if entry["path"] == str(path)]
    labels = described["labels"]
    alerts = {}
    for alert in backtest["alerts"]:
        if all(alert["labels"].get(label) == labels[label] for label in RUN_LABELS):
            key = (alert["alertname"], tuple(sorted((name, value) for name, value in alert["labels"].items()
                                                    if name not in RUN_LABELS)))
            alerts[key] = [(firing["start_step"], firing["end_step"]) for firing in alert["firing"]]
    return {"steps": (described["first_step"], described["last_step"], described["steps"]),
            "unparseable": described["unparseable_lines"], "alerts": alerts}


def firing(prometheus, alertname: str) -> list[dict]:
    """The alerts named `alertname` that a Prometheus server (its /api/v1/alerts) has firing."""
    return [a for a in prometheus.api("alerts")["alerts"]
            if a["labels"]["alertname"] == alertname and a["state"] == "firing"]


# --- One run, written as several records (tests of the formats a run is followed from) -----------

RAY = "\x1b[36m(TaskRunner pid=3230286)\x1b[0m "


def run_steps(count: int, kind: str = "diverging") -> list[tuple[int, dict]]:
    """A run's steps, each value one a float32 holds (TensorBoard keeps float32), a NaN among them."""
    steps = []
    for step in range(1, count + 1):
        data = {key: _float32(value) for key, value in step_data(step, kind, event_at=20).items()}
        if step % 7 == 0:
            data["actor/grad_norm"] = math.nan
        if step % 5 == 0:
            data["val-core/openai/gsm8k/reward/mean@1"] = _float32(0.01 * step)
        steps.append((step, data))
    return steps


def _float32(value: float) -> float:
    """`value` as TensorBoard keeps it and dashgen reads it back: the shortest decimal of its 32-bit float."""
    import numpy

    return float(str(numpy.float32(value)))


def console_lines(step: int, data: dict) -> str:
    """verl's console line for a step, cut in two (as two ranks print), with a progress bar and a
    warning between steps."""
    items = [f"{key}:{'nan' if math.isnan(value) else repr(value)}" for key, value in data.items()]
    half = len(items) // 2
    return (f"{RAY}step:{step} - " + " - ".join(items[:half]) + "\n"
            + f"{RAY}step:{step} - " + " - ".join(items[half:]) + "\n"
            + f"Training Progress:  {step}it [00:10, 10.0s/it]\rWARNING: a trainer says something\n")
