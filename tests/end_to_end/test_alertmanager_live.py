"""From alert to action, live: trainer -> exporter -> Prometheus -> Alertmanager -> receivers.

A dummy trainer (tests/dummy_trainer.py, standing in for verl) writes a run that diverges at
step DIVERGES_AT, four steps a second. `dashgen export -- CMD` supervises it (and writes its PID
file) and serves the log;
Prometheus and Alertmanager run the files `dashgen build` renders (from a config with
windows a few seconds long, webhook receivers and a stop action); `dashgen act` receives the
`dashgen-act` route; a small HTTP server in this test receives `page` and `channel`. All on
127.0.0.1, free ports, temporary storage, every process stopped by PID.

It shows: the divergence produces one notification; the KL spike and entropy collapse it
causes fire in Prometheus but are inhibited in Alertmanager; `dashgen act` stops the trainer
within one evaluation interval of the alert firing, through its exporter, so the run ends as
stopped and no crash pages.
"""

import json
import re
import threading
import time
from contextlib import ExitStack
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from act_support import TOKEN, ActProcess, start_trainer, stop_process
from conftest import run
from dashgen.replay.prometheus_server import AlertmanagerServer, PrometheusServer, free_port
from support import export_command, firing, wait_on_progress, wait_until

pytestmark = pytest.mark.live

STEP_SECONDS = 0.25
EVALUATION_INTERVAL = 2  # seconds; the stop must follow the firing within one
DIVERGES_AT = 40  # step (10 s): after the baseline (32 steps) and recent (6 steps) windows are covered
GROUP_WAIT, GROUP_INTERVAL = 0.5, 1.0  # Alertmanager's, in seconds
# VerlKLSpike is left out: it counts logged steps (16 high ones of kl_spike_steps), and the divergence
# stops the trainer a few steps after its onset; with fewer steps it fires before the divergence and
# reaches the channel uninhibited. Its inhibition is the same Alertmanager rule as the collapse's.
SYMPTOMS = ("VerlEntropyCollapse",)


def chain_config(ports: dict, token_file) -> dict:
    hooks = f"http://127.0.0.1:{ports['hooks']}"
    return {
        "scrape_interval": "250ms",  # every step
        "rule_interval": f"{EVALUATION_INTERVAL}s",
        "stability": {
            "divergence_baseline_steps": 32,
            "divergence_recent_steps": 6,
            "divergence_smoothing_steps": 5,
            # Entropy must still be falling when the others break, which holds for a few steps: here over 16
            # steps against the 5 before them, 10 of the trainer's steps (2.5 s), longer than an evaluation
            # (its log says a minute a step, so the exporter's windows are its steps, and it writes four a
            # second). From the first evaluation that sees it, as by default.
            "divergence_entropy_fall_steps": 16,
            "divergence_for": "0s",
            # The symptoms fire one evaluation after the divergence, as with the default windows.
            "kl_spike_steps": 30,
            "entropy_collapse_fraction": 0.5,  # the synthetic divergence takes entropy to ~0.17
            "entropy_collapse_for": "3s",
            # Whatever the synthetic reward does over the few steps the test has: the collapse is the
            # symptom to inhibit here, not the judgement of the run.
            "entropy_collapse_noise_z": 0,
            "entropy_reward_rise_fraction": 1.0,
            "entropy_reward_noise_z": 0,
        },
        "baseline_hold_step": f"{EVALUATION_INTERVAL}s",  # the held baseline must exist while the divergence fires
        "signal_smoothing_window": "1250ms",
        # Step windows as the run's four steps a second give them, not stretched to the default minute.
        "step_window_floor": "1500ms",
        "progress": {"stall_min_silence": "10m"},  # the stopped trainer must not page as stalled during the test
        "exporter_address": f"127.0.0.1:{ports['exporter']}",
        "alertmanager": {
            "address": f"127.0.0.1:{ports['alertmanager']}",
            "group_wait": f"{GROUP_WAIT * 1000:.0f}ms",
            "group_interval": f"{GROUP_INTERVAL * 1000:.0f}ms",
            "repeat_interval": "1h",
            "page": {"webhook_configs": [{"url": f"{hooks}/page"}]},
            "channel": {"webhook_configs": [{"url": f"{hooks}/channel"}]},
        },
        "act": {
            "address": f"127.0.0.1:{ports['act']}",
            "token_file": str(token_file),
            "actions": {"VerlTrainingDivergence": "stop"},
            "project": "gsm8k",
            "experiment": "diverging",
        },
    }


class Receivers(BaseHTTPRequestHandler):
    """The `page` and `channel` receivers: keeps each notification with the path it came to."""

    received: list = []
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def rfc3339_seconds(text: str) -> float:
    """Alertmanager's timestamps carry nanoseconds; datetime takes microseconds."""
    match = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    base, fraction, zone = match.groups()
    moment = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone)).astimezone(timezone.utc)
    return moment.timestamp() + float(f"0.{fraction or 0}")


@pytest.fixture
def chain(project, tmp_path):
    ports = {name: free_port() for name in ("hooks", "exporter", "act")}
    with ExitStack() as stack:
        Receivers.received = []
        hooks = ThreadingHTTPServer(("127.0.0.1", ports["hooks"]), Receivers)
        threading.Thread(target=hooks.serve_forever, daemon=True).start()
        stack.callback(hooks.server_close)
        stack.callback(hooks.shutdown)

        # Alertmanager's port must be in the rendered prometheus.yml, so it is chosen first.
        token_file = tmp_path / "act-token"
        token_file.write_text(TOKEN + "\n")
        ports["alertmanager"] = free_port()
        config = chain_config(ports, token_file)
        (tmp_path / "chain.yaml").write_text(yaml.safe_dump(config))
        result = run("build", "--root", str(project), "--config", str(tmp_path / "chain.yaml"))
        assert result.exit_code == 0, result.output

        alertmanager = stack.enter_context(AlertmanagerServer(
            project / "rendered" / "alertmanager" / "alertmanager.yml", tmp_path / "alertmanager",
            port=ports["alertmanager"]))
        # The trainer starts last; its exporter writes the PID file where act will read it.
        act = stack.enter_context(ActProcess(tmp_path / "act", config, "--pid-file",
                                             str(tmp_path / "trainer" / "trainer.pid"), port=ports["act"]))
        prometheus = stack.enter_context(PrometheusServer(project / "rendered" / "prometheus" / "prometheus.yml",
                                                          tmp_path / "tsdb"))
        log = tmp_path / "logs" / "gsm8k" / "diverging.jsonl"
        log.parent.mkdir(parents=True)
        # The step windows this project's rules read (rendered/exporter/step-statistics.yaml).
        exporter = export_command(log, ports["exporter"], "--root", str(project))
        trainer = start_trainer(tmp_path / "trainer", "--log", str(log), "--kind", "diverging",
                                "--event-at", str(DIVERGES_AT), "--step-seconds", str(STEP_SECONDS),
                                supervisor=exporter)
        stack.callback(stop_process, trainer.process)
        yield prometheus, alertmanager, act, trainer, log


def received() -> list[tuple[str, dict]]:
    """The notifications the page and channel receivers have had so far, with the path each came to."""
    with Receivers.lock:
        return list(Receivers.received)


def test_a_divergence_notifies_once_inhibits_its_symptoms_and_stops_the_trainer(chain):
    prometheus, alertmanager, act, trainer, log = chain

    # The trainer is stopped by `dashgen act`, on the notification Alertmanager routed to it: waited on
    # while the trainer still writes steps (a loaded machine is slower, not stuck), not for a fixed time.
    wait_on_progress(trainer.stopped_at, lambda: log.stat().st_size if log.exists() else 0,
                     "dashgen act to stop the trainer", interval=0.1, longest=600)
    # act writes its audit line after the signal, so the stop can be seen a moment before the line.
    [acted] = wait_until(lambda: [r for r in act.audit() if r["decision"] == "acted"], 10,
                         "dashgen act's audit line of the stop", interval=0.1)
    assert (acted["alertname"], acted["project"], acted["experiment"]) == ("VerlTrainingDivergence", "gsm8k",
                                                                           "diverging")
    # startsAt is when Prometheus' rule evaluation found the alert firing.
    latency = trainer.stopped_at() - rfc3339_seconds(acted["startsAt"])
    assert 0 < latency < EVALUATION_INTERVAL, f"stopped {latency:.2f} s after the alert fired"

    # Its exporter saw it end as stopped, not crashed.
    wait_until(lambda: prometheus.api("query", query='verl_run_state{state="stopped"} == 1')["result"], 10,
               "the run's state 'stopped' in Prometheus", interval=0.1)

    # The symptoms fire in Prometheus for the same run ...
    for name in SYMPTOMS:
        alerts = wait_until(lambda: firing(prometheus, name), 30, f"{name} firing in Prometheus", interval=0.1)
        assert {a["labels"]["experiment"] for a in alerts} == {"diverging"}
    # ... and Alertmanager holds them back, naming the divergence as the reason.
    divergence = wait_until(lambda: alertmanager.api("alerts", filter='alertname="VerlTrainingDivergence"'), 10,
                            "the divergence in Alertmanager")
    for name in SYMPTOMS:
        [held] = wait_until(lambda: alertmanager.api("alerts", filter=f'alertname="{name}"'), 10,
                            f"{name} in Alertmanager")
        assert held["status"]["state"] == "suppressed"
        assert held["status"]["inhibitedBy"] == [divergence[0]["fingerprint"]]
    symptoms_held = time.monotonic()
    wait_until(received, 10, "the page")
    # Any notification still to come has been sent once the symptoms' group has flushed after they
    # came: group_wait, then group_interval, and one second more for delivery.
    time.sleep(max(0.0, symptoms_held + GROUP_WAIT + GROUP_INTERVAL + 1 - time.monotonic()))

    notifications = received()
    assert [path for path, _ in notifications] == ["/page"], notifications
    [(_, page)] = notifications
    assert [(a["labels"]["alertname"], a["status"]) for a in page["alerts"]] == [("VerlTrainingDivergence", "firing")]
    assert page["groupLabels"] == {"project": "gsm8k", "experiment": "diverging"}
    assert [r["alertname"] for r in act.audit()] == ["VerlTrainingDivergence"]
