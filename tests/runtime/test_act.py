"""`dashgen act` as a real process on loopback: what it does for each alert, what it refuses.

The trainer it stops is tests/dummy_trainer.py, which writes its own PID file as
`dashgen export --pid-file` does for the trainer it supervises. Notifications here are shaped
like Alertmanager's; tests/end_to_end/test_alertmanager_live.py gets them from a real Alertmanager.
"""

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from act_support import TOKEN, ActProcess, alert, notification, start_trainer, stop_process
from conftest import run, wait_until
from dashgen.replay.prometheus_server import free_port
from dashgen.runtime.act_actions import ActionFailed, read_pid, stop_pid_file
from support import export_command, run_state, samples, scrape

pytestmark = pytest.mark.live

STOP_DIVERGENCE = {"act": {"actions": {"VerlTrainingDivergence": "stop"}}}


@pytest.fixture
def trainer(tmp_path):
    trainer = start_trainer(tmp_path / "trainer")
    yield trainer
    stop_process(trainer.process)


def test_stop_sends_sigterm_to_the_supervised_trainer(tmp_path, trainer):
    with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file)) as act:
        sent = time.time()
        status, answer = act.post(notification(alert()))
        assert status == 200
        assert [d["decision"] for d in answer["decisions"]] == ["acted"]
        assert trainer.process.wait(timeout=10) == 128 + 15
        assert sent <= trainer.stopped_at() <= sent + 5
        [record] = act.audit()
        assert record["decision"] == "acted" and record["action"] == "stop"
        assert record["detail"] == f"sent SIGTERM to pid {trainer.process.pid} (from {trainer.pid_file})"
        assert (record["alertname"], record["project"], record["experiment"]) == ("VerlTrainingDivergence", "gsm8k",
                                                                                  "ppo")


def test_stop_goes_through_the_supervising_exporter_so_the_run_ends_as_stopped_not_crashed(tmp_path):
    port = free_port()
    log = tmp_path / "logs" / "gsm8k" / "ppo.jsonl"
    log.parent.mkdir(parents=True)
    exporter = export_command(log, port, "--grace", "1m")
    trainer = start_trainer(tmp_path / "trainer", "--log", str(log), supervisor=exporter)
    try:
        with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file)) as act:
            [decision] = act.post(notification(alert()))[1]["decisions"]
        assert decision["decision"] == "acted"
        assert decision["detail"].startswith(f"sent SIGTERM to dashgen export (pid {trainer.process.pid}), which "
                                             f"stops its trainer")
        wait_until(trainer.stopped_at, 10, "the supervised trainer to stop")

        def state() -> str | None:
            return run_state(samples(scrape(port) or ""))

        assert wait_until(lambda: state() not in (None, "running") and state(), 10, "the run's end") == "stopped"
        assert trainer.process.poll() is None  # serving the final state for the grace period
    finally:
        stop_process(trainer.process)


# A trainer that saves a checkpoint on SIGTERM and counts the SIGTERMs it gets (argv: pid file, count file).
COUNTING_TRAINER = """
import os, signal, sys, time
pid_file, count = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGTERM, lambda *_: open(count, "a").write("TERM\\n"))
open(pid_file + ".tmp", "w").write(f"{os.getpid()}\\n")
os.replace(pid_file + ".tmp", pid_file)
while True:
    time.sleep(0.05)
"""


def test_a_stop_is_sent_once_however_many_alerts_ask_for_it(tmp_path):
    pid_file, count = tmp_path / "trainer.pid", tmp_path / "sigterms"
    trainer = subprocess.Popen([sys.executable, "-c", COUNTING_TRAINER, str(pid_file), str(count)])
    try:
        wait_until(pid_file.exists, 30, "the trainer's pid file")
        fields = {"act": {"actions": {"VerlTrainingDivergence": "stop", "VerlNaNMetrics": "stop"}}}
        with ActProcess(tmp_path / "act", fields, "--pid-file", str(pid_file)) as act:
            together = notification(alert(), alert("VerlNaNMetrics", fingerprint="0f0f0f0f0f0f0f0f"))
            first, second = act.post(together)[1]["decisions"]
            # Re-notified as a new occurrence (it resolved and fired again).
            [third] = act.post(notification(alert(starts_at="2026-05-01T15:00:00.000Z")))[1]["decisions"]
        assert first["detail"] == f"sent SIGTERM to pid {trainer.pid} (from {pid_file})"
        for later in (second, third):
            assert later["decision"] == "acted" and later["detail"].startswith("already stopping: sent SIGTERM")
        wait_until(count.exists, 10, "the trainer's SIGTERM")
        time.sleep(0.3)
        assert count.read_text() == "TERM\n"
    finally:
        stop_process(trainer)


def test_dry_run_records_what_it_would_do_and_does_nothing(tmp_path, trainer):
    with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file), "--dry-run") as act:
        status, answer = act.post(notification(alert()))
        assert status == 200
        [decision] = answer["decisions"]
        assert decision["decision"] == "would-act"
        assert decision["detail"].startswith(
            f"dry run: would send SIGTERM to the trainer whose PID is in {trainer.pid_file}")
        time.sleep(1.0)
        assert trainer.process.poll() is None and trainer.stopped_at() is None
        [record] = act.audit()
        assert record["decision"] == "would-act" and record["detail"] == decision["detail"]


def test_log_is_the_default_action_and_only_records(tmp_path, trainer):
    with ActProcess(tmp_path / "act", {}, "--pid-file", str(trainer.pid_file)) as act:
        status, answer = act.post(notification(alert(), alert("VerlNaNMetrics", fingerprint="99")))
        assert status == 200
        assert [(d["alertname"], d["action"], d["decision"]) for d in answer["decisions"]] == [
            ("VerlTrainingDivergence", "log", "logged"), ("VerlNaNMetrics", "log", "logged")]
        time.sleep(0.5)
        assert trainer.process.poll() is None
        assert len(act.audit()) == 2


def test_never_acts_on_resolved_alerts_or_other_runs(tmp_path, trainer):
    with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file)) as act:
        status, answer = act.post(notification(
            alert(status="resolved"),
            alert(project="math", fingerprint="1"),
            alert(experiment="ppo-other", fingerprint="2"),
            alert(project=None, experiment=None, fingerprint="3"),  # e.g. VerlMetricsAbsent: exporter labels only
        ))
        assert status == 200
        assert [d["decision"] for d in answer["decisions"]] == [
            "ignored-resolved", "ignored-other-run", "ignored-other-run", "ignored-other-run"]
        time.sleep(1.0)
        assert trainer.process.poll() is None
        assert [r["decision"] for r in act.audit()] == [d["decision"] for d in answer["decisions"]]


COUNTING_COMMAND = ("import os, sys; open(sys.argv[1], 'a').write(' '.join(os.environ[k] for k in "
                    "('DASHGEN_ALERT_NAME', 'DASHGEN_ALERT_PROJECT', 'DASHGEN_ALERT_EXPERIMENT', "
                    "'DASHGEN_ALERT_STARTS_AT')) + chr(10))")


def test_a_repeated_notification_acts_once_also_after_a_restart(tmp_path):
    ran = tmp_path / "command-ran"
    fields = {"act": {"actions": {"VerlTrainingDivergence": "command"},
                      "command": [sys.executable, "-c", COUNTING_COMMAND, str(ran)]}}
    with ActProcess(tmp_path / "act", fields) as act:
        assert act.post(notification(alert()))[1]["decisions"][0]["decision"] == "acted"
        # Alertmanager repeats a notification every repeat_interval, and after a failed delivery.
        assert act.post(notification(alert()))[1]["decisions"][0]["decision"] == "duplicate"
    assert ran.read_text() == "VerlTrainingDivergence gsm8k ppo 2026-05-01T12:00:00.000Z\n"

    with ActProcess(tmp_path / "act", fields) as act:  # same audit log: it remembers
        assert act.post(notification(alert()))[1]["decisions"][0]["decision"] == "duplicate"
        # The same alert firing again later is a new occurrence.
        again = alert(starts_at="2026-05-01T15:00:00.000Z")
        assert act.post(notification(again))[1]["decisions"][0]["decision"] == "acted"
        assert [r["decision"] for r in act.audit()] == ["acted", "duplicate", "duplicate", "acted"]
    assert ran.read_text().count("\n") == 2


def test_a_failing_command_is_recorded_as_failed_and_retried_on_the_next_notification(tmp_path):
    fields = {"act": {"actions": {"VerlTrainingDivergence": "command"},
                      "command": [sys.executable, "-c", "import sys; sys.exit('no pager configured')"]}}
    with ActProcess(tmp_path / "act", fields) as act:
        for _ in range(2):
            [decision] = act.post(notification(alert()))[1]["decisions"]
            assert decision["decision"] == "failed"
            assert "exited with status 1: no pager configured" in decision["detail"]


def _raw_request(port: int, head: str) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.connect()
        connection.sock.sendall(head.encode())
        response = http.client.HTTPResponse(connection.sock, method="POST")
        response.begin()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


VALID = json.dumps(notification(alert())).encode()
BAD_REQUESTS = {
    "no token": (lambda act: act.post(VALID, token=None), 401, "missing bearer token"),
    "wrong token": (lambda act: act.post(VALID, token="x" * len(TOKEN)), 401, "wrong bearer token"),
    "basic auth instead of a bearer token": (
        lambda act: act.post(VALID, token=None, headers={"Authorization": f"Basic {TOKEN}"}), 401, "wrong bearer"),
    "malformed JSON": (lambda act: act.post(VALID[:-7], token=TOKEN), 400, "body is not JSON"),
    "not UTF-8": (lambda act: act.post(b'{"alerts": ["\xff"]}', token=TOKEN), 400, "body is not JSON"),
    "JSON that is not a notification": (
        lambda act: act.post({"alerts": [{"labels": {"alertname": "VerlTrainingDivergence"}}]}, token=TOKEN),
        400, "alerts[0].status is missing"),
    "huge body": (lambda act: _raw_request(act.port, f"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                                                     f"{TOKEN}\r\nContent-Length: {50 * 2**20}\r\n\r\n"),
                  413, "over the limit of 1048576"),
    "no Content-Length (chunked)": (
        lambda act: _raw_request(act.port, f"POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
                                           f"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 411, "Content-Length"),
    "another path": (lambda act: _raw_request(act.port, f"POST /stop HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                                                        f"{TOKEN}\r\nContent-Length: 0\r\n\r\n"), 404, "not found"),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
def test_bad_requests_get_4xx_and_change_nothing(tmp_path, trainer, case):
    send, expected_status, expected_error = BAD_REQUESTS[case]
    with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file)) as act:
        status, answer = send(act)
        assert status == expected_status
        assert expected_error in answer["error"]
        time.sleep(0.5)
        assert trainer.process.poll() is None
        assert act.audit_log.read_text() == ""
        # ... and the receiver still works.
        assert act.post(VALID)[1]["decisions"][0]["decision"] == "acted"
        assert trainer.process.wait(timeout=10) == 128 + 15


def test_token_from_the_environment(tmp_path, trainer):
    env = {**os.environ, "DASHGEN_ACT_TOKEN": TOKEN}
    with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file), env=env,
                    token=None) as act:
        assert act.post(VALID, token="y" * 40)[0] == 401
        assert act.post(VALID)[1]["decisions"][0]["decision"] == "acted"


@pytest.mark.parametrize("fields, args, expected", [
    ({"act": {"token_file": "/nonexistent/act-token"}}, [], "cannot read the act token from /nonexistent/act-token"),
    ({"act": {"audit_log": "/nonexistent/audit.jsonl"}}, [], "/nonexistent/audit.jsonl: cannot append to the audit log"),
    ({}, ["--token-file", "SHORT"], "must be at least 16 characters"),
    ({"act": {"project": ""}}, [], "dashgen act guards one run: give --project and --experiment"),
    (STOP_DIVERGENCE, [], "act.actions has 'stop', but nothing says how: give --pid-file"),
    ({"act": {"actions": {"VerlTrainingDivergence": "reboot"}}}, [], "'reboot' is not one of 'log', 'stop', 'command'"),
    ({"act": {"actions": {"VerlTrainingDivergence": "command"}}}, [], "act.command is not a list of arguments"),
    ({"act": {"actions": {"VerlTrainingDivergence": "command"}, "command": "/usr/bin/notify --urgent"}}, [],
     "act.command: expected a list, got the string"),
    ({"act": {"actions": ["VerlTrainingDivergence"]}}, [], "act.actions: expected a mapping"),
    ({"act": {**STOP_DIVERGENCE["act"], "ray_dashboard_url": "http://127.0.0.1:8265"}}, [],
     "needs both act.ray_dashboard_url and act.ray_submission_id"),
])
def test_start_up_errors_name_what_to_fix(tmp_path, monkeypatch, fields, args, expected):
    monkeypatch.delenv("DASHGEN_ACT_TOKEN", raising=False)
    (tmp_path / "SHORT").write_text("tooshort\n")
    (tmp_path / "token").write_text(TOKEN)
    config = tmp_path / "act.yaml"
    config.write_text(yaml.safe_dump({**fields, "act": {"project": "gsm8k", "experiment": "ppo",
                                                        "token_file": str(tmp_path / "token"), **fields.get("act", {})}}))
    monkeypatch.chdir(tmp_path)
    result = run("act", "--config", str(config), "--listen", f"127.0.0.1:{free_port()}", *args)
    assert result.exit_code == 1
    assert result.output.count("Error:") == 1 and expected in result.output


def test_pid_files_that_could_signal_the_wrong_process_are_refused(tmp_path, trainer):
    pid_file = tmp_path / "pid"
    for text in ("0", "1", "-1", "", "12abc", "1e3"):
        pid_file.write_text(text)
        with pytest.raises(ActionFailed, match="not the PID of a trainer"):
            read_pid(pid_file)
    # A PID file older than the process it names: the trainer ended and its PID went to another process.
    pid_file.write_text(f"{trainer.process.pid}\n")
    old = time.time() - 3600
    os.utime(pid_file, (old, old))
    with pytest.raises(ActionFailed, match="PID was reused; not signalling it"):
        stop_pid_file(pid_file)
    assert trainer.process.poll() is None
    stop_process(trainer.process)
    with pytest.raises(ActionFailed, match="the trainer has already ended"):
        stop_pid_file(trainer.pid_file)


class _RayDashboardStandIn(BaseHTTPRequestHandler):
    requests: list = []

    def do_POST(self):
        self.requests.append((self.command, self.path))
        body = b'{"stopped": true}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_ray_stop_sends_the_jobs_api_request(tmp_path):
    """Only what act sends is checked here: the request Ray's Jobs REST API documents for stopping a
    job. No Ray runs in these tests (it cannot be installed offline), so this is not proof against Ray."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RayDashboardStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        fields = {"act": {**STOP_DIVERGENCE["act"], "ray_dashboard_url": f"http://127.0.0.1:{server.server_port}",
                          "ray_submission_id": "raysubmit_WcuXGn6b"}}
        with ActProcess(tmp_path / "act", fields) as act:
            [decision] = act.post(notification(alert()))[1]["decisions"]
        assert decision["decision"] == "acted"
        assert decision["detail"].startswith("Ray job raysubmit_WcuXGn6b: stop requested")
        assert _RayDashboardStandIn.requests == [("POST", "/api/jobs/raysubmit_WcuXGn6b/stop")]
    finally:
        server.shutdown()
        server.server_close()


def test_audit_log_lines_are_json_with_the_decision(tmp_path, trainer):
    with ActProcess(tmp_path / "act", STOP_DIVERGENCE, "--pid-file", str(trainer.pid_file)) as act:
        act.post(notification(alert(status="resolved"), alert(fingerprint="2")))
        wait_until(lambda: trainer.process.poll() is not None, 10, "the trainer to stop")
        records = act.audit()
    assert [set(r) for r in records] == [{"time", "alertname", "status", "project", "experiment", "fingerprint",
                                          "startsAt", "action", "decision", "detail"}] * 2
    assert [(r["status"], r["fingerprint"], r["decision"]) for r in records] == [
        ("resolved", "5a1b2c3d4e5f6a7b", "ignored-resolved"), ("firing", "2", "acted")]
