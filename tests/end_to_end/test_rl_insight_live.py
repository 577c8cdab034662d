"""End to end on the real rl-insight: verl's gauges -> RL-Insight's hub -> Prometheus -> dashgen's rules.

A healthy and a diverging run are published through rl-insight (PyPI, pinned in the `test`
extra) as verl's RLInsightLogger does, on a one-CPU local Ray, its hub registering with
rl-insight's own server; Prometheus (127.0.0.1, free port, temporary storage) scrapes the hub
with the scrape config and rules that `dashgen build` renders for `source: rl_insight`, with
windows a few seconds long. The diverging run pages, the healthy one stays quiet.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from conftest import run
from dashgen.replay.prometheus_server import PrometheusServer, free_port
from support import wait_on_progress

rl_insight = pytest.importorskip("rl_insight", reason="rl-insight (the test extra) is not installed")

pytestmark = [pytest.mark.live, pytest.mark.slow]

HERE = Path(__file__).parent
# Two steps a second: the hub applies one Ray call per logged key, ~80 keys a run.
STEP_SECONDS = 0.5
SHORT_WINDOWS = {
    "source": "rl_insight",
    "scrape_interval": "500ms",
    "rule_interval": "500ms",
    "signal_smoothing_window": "2500ms",
    "stability": {"divergence_baseline_steps": 32, "divergence_recent_steps": 6, "divergence_smoothing_steps": 5,
                  "divergence_for": "1500ms"},
    "step_window_floor": "3s",
    "rhythm_window": "60s",
    "rewards": {"reward_cliff_baseline_steps": 32, "reward_cliff_recent_steps": 6, "reward_cliff_smoothing_steps": 6,
                "reward_cliff_for": "1500ms"},
    "progress": {"stall_min_silence": "10s", "stall_step_time_window": "30s", "stall_for": "1s"},
}
DIVERGENCE_AT_STEP = 45  # 22.5 s: longer than the baseline and recent windows together


def started(command: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    """A process in a session of its own (Ray's processes are its children), output to `log`."""
    with open(log, "w") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **(env or {})})


def stopped(process: subprocess.Popen) -> None:
    """The process and its session's processes (Ray's raylet, GCS and workers) stopped."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def live(project, tmp_path):
    hub, server, prometheus_port = free_port(), free_port(), free_port()
    config = tmp_path / "short-windows.yaml"
    config.write_text(yaml.safe_dump({**SHORT_WINDOWS, "exporter_address": f"127.0.0.1:{hub}"}))
    result = run("build", "--root", str(project), "--config", str(config))
    assert result.exit_code == 0, result.output

    server_config = tmp_path / "rl-insight.yaml"
    server_config.write_text(yaml.safe_dump({
        "server": {"port": server, "data_dir": str(tmp_path / "rl-insight" / "data"),
                   "runtime_dir": str(tmp_path / "rl-insight" / "runtime")},
        "prometheus": {"prometheus_port": prometheus_port}, "tempo": {"enable": False}}))
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    pythonpath = os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])
    processes = [started([sys.executable, str(HERE / "rl_insight_server.py"), str(server_config), str(server)],
                         tmp_path / "server.log")]
    try:
        processes.append(started([sys.executable, str(HERE / "rl_insight_publisher.py"), f"http://127.0.0.1:{server}",
                                  str(hub), str(STEP_SECONDS), str(DIVERGENCE_AT_STEP), ray_dir],
                                 tmp_path / "publisher.log", {"PYTHONPATH": pythonpath}))
        prometheus_yml = project / "rendered" / "prometheus" / "prometheus.yml"
        with PrometheusServer(prometheus_yml, tmp_path / "tsdb") as prometheus:
            yield prometheus, tmp_path
    finally:
        for process in reversed(processes):
            stopped(process)
        subprocess.run(["rm", "-rf", ray_dir], check=False)


def test_rl_insight_run_pages_on_divergence_and_the_healthy_one_stays_quiet(live):
    prometheus, tmp_path = live
    started_at, began = time.monotonic(), time.time()

    # Both runs arrive as RL-Insight's gauges, labelled project and experiment_name.
    def runs():
        found = prometheus.api("query", query="rl_insight_monitor_training_global_step")["result"]
        return {s["metric"]["experiment_name"] for s in found}

    def starting() -> tuple[int, int]:
        """What the server and the publisher have written: Ray and the hub come up in seconds to minutes."""
        return tuple(path.stat().st_size if path.exists() else 0
                     for path in (tmp_path / "server.log", tmp_path / "publisher.log"))

    try:
        # Ray's start writes nothing for a while on a loaded machine: a longer stall than the steps'.
        wait_on_progress(lambda: runs() == {"diverging", "healthy"}, starting, "both runs scraped from the hub",
                         stall=120, interval=STEP_SECONDS, longest=600)
    except AssertionError as timed_out:
        # Once in a loaded CI run the hub never listened (every scrape of it refused): say what each side saw.
        up = [s["value"][1] for s in prometheus.api("query", query='up{job="verl"}')["result"]]
        hub = [line for line in (tmp_path / "publisher.log").read_text(errors="replace").splitlines()
               if line.startswith("hub:")]
        server = (tmp_path / "server.log").read_text(errors="replace")[-600:]
        raise AssertionError(f"{timed_out}; up{{job=\"verl\"}} is {up}; the publisher's {hub or 'no hub line'}; "
                             f"the server's log ends {server!r}") from None
    # The hub registered itself with rl-insight's server, which keeps the scrape targets in a file_sd file.
    targets = (tmp_path / "rl-insight" / "data" / "targets" / "prometheus-targets.yml")
    assert "127.0.0.1" in targets.read_text()

    # The divergence (from step 45) fired, in the diverging run only. Read from the ALERTS series over
    # the whole test, not from what fires now: the step change it pages on is taken into the baseline
    # 32 steps (16 s) later, which a loaded machine's slower polling can miss. Waited on while the runs
    # still step.
    def steps_served() -> float:
        return sum(float(series["value"][1]) for series in prometheus.api(
            "query", query="rl_insight_monitor_training_global_step")["result"])

    def divergence_fired() -> list[dict]:
        return [series["metric"] for series in prometheus.api(
            "query", query='last_over_time(ALERTS{alertname="VerlTrainingDivergence", alertstate="firing"}[10m])',
        )["result"]]

    try:
        alerts = wait_on_progress(divergence_fired, steps_served, "VerlTrainingDivergence firing",
                                  interval=STEP_SECONDS, longest=600)
    except AssertionError as error:
        seen = {(series["metric"]["alertname"], series["metric"]["alertstate"]) for series in prometheus.api(
            "query", query="last_over_time(ALERTS[10m])")["result"]}
        raise AssertionError(f"{error}; steps served {steps_served():.0f}; alerts seen: {sorted(seen)}") from None
    assert {a["experiment_name"] for a in alerts} == {"diverging"}
    assert {a["severity"] for a in alerts} == {"critical"}

    # Over the whole test the healthy run never had a critical or warning alert firing.
    end = time.time()
    history = prometheus.api("query_range", query='ALERTS{alertstate="firing", severity=~"critical|warning"}',
                             start=str(began), end=str(end), step=str(STEP_SECONDS))["result"]
    assert [s["metric"] for s in history if s["metric"].get("experiment_name") == "healthy"] == []
    print(f"divergence paged {time.monotonic() - started_at:.0f} s after Prometheus started")
