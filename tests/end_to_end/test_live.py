"""End to end on a real Prometheus: exporter -> scrape -> rules -> alerts; exporter -> panel queries.

Two runs are written step by step, four steps a second, while `dashgen export` follows each
log: a healthy one and one that diverges. Prometheus (127.0.0.1, free port, temporary storage)
loads the prometheus.yml and rule files that `dashgen build` renders from a config whose windows
are a few seconds long and whose scrapes and evaluations come every step, which is also what
proves that the config parametrises the rules. A window holds as many steps as a default one
holds one-minute steps in a run an hour long, to within a factor of two.
"""

import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import run
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.replay.prometheus_server import PrometheusServer, free_port
from dashgen.evaluation.synthetic_runs import step_line
from support import wait_on_progress, wait_until

pytestmark = pytest.mark.live

STEP_SECONDS = 0.25
SHORT_WINDOWS = {
    "scrape_interval": "250ms",
    "rule_interval": "250ms",
    "signal_smoothing_window": "1250ms",
    "stability": {"divergence_baseline_steps": 32, "divergence_recent_steps": 6, "divergence_smoothing_steps": 5,
                  "divergence_for": "750ms"},
    # Windows in steps: a step is 250 ms here, below every band, so they take the floor.
    "step_window_floor": "1500ms",
    "rhythm_window": "30s",
    "rewards": {"reward_cliff_baseline_steps": 32, "reward_cliff_recent_steps": 6, "reward_cliff_smoothing_steps": 6,
                "reward_cliff_for": "750ms"},
    "progress": {"stall_min_silence": "5s", "stall_step_time_window": "15s", "stall_for": "500ms"},
}
HEALTHY_STEPS_BEFORE_DIVERGENCE = 45  # 11.25 s: longer than the baseline and recent windows together


class StepWriter(threading.Thread):
    """Appends one step every STEP_SECONDS to each log, as verl's file logger does at the end of a step."""

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
            self.stop.wait(STEP_SECONDS)


@pytest.fixture
def live(project, tmp_path, exporters):
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
    for kind, port in ports.items():
        # The step windows this project's rules read (rendered/exporter/step-statistics.yaml).
        exporters(logs[kind][0], "--root", str(project), port=port, stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)
    writer = StepWriter(logs)
    try:
        with PrometheusServer(prometheus_yml, tmp_path / "tsdb") as prometheus:
            writer.start()
            yield prometheus, project
    finally:
        writer.stop.set()


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


def test_live_chain_from_verl_log_to_panels_and_alerts(live):
    prometheus, project = live

    # (a) No verl panel reads "No data": every query of every verl panel returns series.
    queries = verl_panel_queries(project)
    assert len(queries) > 30
    wait_until(lambda: len(prometheus.api("query", query="verl_exporter_steps_total")["result"]) == 2, 30,
               "both exporters scraped", interval=STEP_SECONDS)
    # A series appears with the first scrape after the first line that logs it: on a loaded machine
    # that can be many scrapes after the exporters' first. Waited on while the runs still step.
    def empty() -> list[tuple[str, str]]:
        return [(title, expr) for title, expr in queries if not prometheus.api("query", query=expr)["result"]]

    def steps_served() -> float:
        return sum(float(series["value"][1])
                   for series in prometheus.api("query", query="verl_exporter_steps_total")["result"])

    try:
        wait_on_progress(lambda: not empty(), steps_served, "every verl panel with data", interval=STEP_SECONDS,
                         longest=300)
    except AssertionError as error:
        raise AssertionError(f"{error}; panels with no data: {empty()}") from None

    # (b) The divergence (injected at step 45) fired, in the diverging run only. Read from the ALERTS
    # series over the whole test and not from what fires now: the step change it pages on is taken
    # into the baseline 32 steps (8 s) later, and on a loaded machine the wait for the panels above
    # can outlast that.
    def divergence_fired() -> list[dict]:
        return [series["metric"] for series in prometheus.api(
            "query", query='last_over_time(ALERTS{alertname="VerlTrainingDivergence", alertstate="firing"}[10m])',
        )["result"]]

    alerts = wait_on_progress(divergence_fired, steps_served, "VerlTrainingDivergence firing",
                              interval=STEP_SECONDS, longest=300)
    assert {a["experiment"] for a in alerts} == {"diverging"}
    assert {a["severity"] for a in alerts} == {"critical"}

    # ... and over the whole test the healthy run never had a critical alert firing.
    end = time.time()
    history = prometheus.api("query_range", query='ALERTS{alertstate="firing", severity="critical"}',
                             start=str(end - 300), end=str(end), step=str(STEP_SECONDS))["result"]
    assert [s["metric"] for s in history if s["metric"].get("experiment") == "healthy"] == []
    assert {s["metric"]["alertname"] for s in history} >= {"VerlTrainingDivergence"}
