"""End to end on a real Prometheus: exporter -> scrape -> rules -> alerts; exporter -> panel queries.

Two runs are written step by step while `dashgen export` follows each log: a healthy one and
one that diverges. Prometheus (127.0.0.1, free port, temporary storage) loads the
prometheus.yml and rule files that `dashgen build` renders from a config whose windows are
seconds long, which is also what proves that the config parametrises the rules.
"""

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import run, wait_until
from dashgen.dashboards import iter_panels
from dashgen.prometheus_server import PrometheusServer, free_port
from dashgen.synthetic_runs import step_line

SHORT_WINDOWS = {
    "scrape_interval": "1s",
    "rule_interval": "1s",
    "stability": {"divergence_baseline_window": "30s", "divergence_recent_window": "5s", "divergence_for": "3s",
                  "divergence_min_history": "10s", "divergence_hold_min_history": "20s"},
    "rewards": {"reward_cliff_baseline_window": "30s", "reward_cliff_recent_window": "5s", "reward_cliff_for": "3s"},
    "progress": {"stall_min_silence": "20s", "stall_step_time_window": "1m", "stall_for": "2s"},
}
HEALTHY_STEPS_BEFORE_DIVERGENCE = 45  # one step a second: > baseline + recent window


class StepWriter(threading.Thread):
    """Appends one step a second to each log, as verl's file logger does at the end of a step."""

    def __init__(self, logs: dict[str, tuple[Path, str]]):
        super().__init__(daemon=True)
        self.logs = logs
        self.stop = threading.Event()
        self.step = 0

    def run(self) -> None:
        while not self.stop.is_set():
            self.step += 1
            for path, kind in self.logs.values():
                with open(path, "a") as log:
                    log.write(step_line(self.step, kind, event_at=HEALTHY_STEPS_BEFORE_DIVERGENCE))
            self.stop.wait(1.0)



@pytest.fixture
def live(project, tmp_path):
    ports = {"diverging": free_port(), "healthy": free_port()}
    config = tmp_path / "short-windows.yaml"
    config.write_text(yaml.safe_dump({**SHORT_WINDOWS, "exporter_address": f"127.0.0.1:{ports['diverging']}"}))
    result = run("build", "--root", str(project), "--config", str(config))
    assert result.exit_code == 0, result.output
    prometheus_yml = project / "rendered" / "prometheus" / "prometheus.yml"
    scrape = yaml.safe_load(prometheus_yml.read_text())
    # The rendered config scrapes one exporter; this test runs two, one per run.
    scrape["scrape_configs"][0]["static_configs"][0]["targets"].append(f"127.0.0.1:{ports['healthy']}")
    prometheus_yml.write_text(yaml.safe_dump(scrape))

    logs = {kind: (tmp_path / "logs" / "gsm8k" / f"{kind}.jsonl", kind) for kind in ports}
    (tmp_path / "logs" / "gsm8k").mkdir(parents=True)
    exporters = [subprocess.Popen([sys.executable, "-m", "dashgen", "export", "--jsonl", str(logs[kind][0]),
                                   "--listen", f"127.0.0.1:{port}", "--poll-interval", "0.2"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for kind, port in ports.items()]
    writer = StepWriter(logs)
    try:
        with PrometheusServer(prometheus_yml, tmp_path / "tsdb") as prometheus:
            writer.start()
            yield prometheus, project
    finally:
        writer.stop.set()
        for process in exporters:
            process.terminate()
        for process in exporters:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def verl_panel_queries(project: Path) -> list[tuple[str, str]]:
    model = json.loads((project / "rendered" / "dashboards" / "verl-training.json").read_text())
    queries = []
    for panel in iter_panels(model):
        for target in panel.get("targets", []):
            names = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?=\{)", target["expr"]))
            if names and all(name.startswith("verl_") for name in names):
                # Grafana's variables, as with "All" selected.
                expr = re.sub(r"\$(job|project|experiment)\b", ".*", target["expr"])
                queries.append((panel["title"], expr.replace("$__rate_interval", "1m")))
    return queries


def firing(prometheus, alertname: str) -> list[dict]:
    return [a for a in prometheus.api("alerts")["alerts"]
            if a["labels"]["alertname"] == alertname and a["state"] == "firing"]


def test_live_chain_from_verl_log_to_panels_and_alerts(live):
    prometheus, project = live

    # (a) No verl panel reads "No data": every query of every verl panel returns series.
    queries = verl_panel_queries(project)
    assert len(queries) > 30
    wait_until(lambda: prometheus.api("query", query="verl_exporter_steps_total")["result"], 30, "first scrape",
               interval=1.0)
    empty = [(title, expr) for title, expr in queries if not prometheus.api("query", query=expr)["result"]]
    assert empty == [], f"panels with no data: {empty}"

    # (b) The divergence (injected at step 45) fires, in the diverging run only.
    alerts = wait_until(lambda: firing(prometheus, "VerlTrainingDivergence"), 120, "VerlTrainingDivergence firing",
                        interval=1.0)
    assert {a["labels"]["experiment"] for a in alerts} == {"diverging"}
    assert alerts[0]["labels"]["severity"] == "critical"

    # ... and over the whole test the healthy run never had a critical alert firing.
    end = time.time()
    history = prometheus.api("query_range", query='ALERTS{alertstate="firing", severity="critical"}',
                             start=str(end - 300), end=str(end), step="1")["result"]
    assert [s["metric"] for s in history if s["metric"].get("experiment") == "healthy"] == []
    assert {s["metric"]["alertname"] for s in history} >= {"VerlTrainingDivergence"}
