"""Processes and requests the tests of `dashgen act` share: the dummy trainer, `dashgen act`
itself (each a real process, stopped by PID), and Alertmanager-shaped notifications."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from conftest import wait_until
from dashgen.replay.prometheus_server import PrometheusServer, stop_process

TESTS = Path(__file__).resolve().parent
TOKEN = "dashgen-test-token-0123456789abcdef"



@dataclass
class Trainer:
    process: subprocess.Popen
    pid_file: Path
    stopped_file: Path

    def stopped_at(self) -> float | None:
        return float(self.stopped_file.read_text()) if self.stopped_file.exists() else None


def start_trainer(folder: Path, *args: str, supervisor: list[str] | None = None) -> Trainer:
    """tests/dummy_trainer.py, once its PID file is written; stop it with stop_process(trainer.process).

    With `supervisor` (the start of a `dashgen export ... --` command line), the exporter runs the
    trainer and writes the PID file; `process` is then the exporter."""
    folder.mkdir(parents=True, exist_ok=True)
    pid_file, stopped_file = folder / "trainer.pid", folder / "trainer.stopped"
    trainer = [sys.executable, str(TESTS / "dummy_trainer.py"), "--stopped-file", str(stopped_file), *args]
    if supervisor is None:
        command = [*trainer, "--pid-file", str(pid_file)]
    else:
        command = [*supervisor, "--pid-file", str(pid_file), "--", *trainer]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    try:
        wait_until(pid_file.exists, 30, "the dummy trainer's pid file")
    except BaseException:
        stop_process(process)
        raise
    return Trainer(process, pid_file, stopped_file)


class ActProcess(PrometheusServer):
    """`dashgen act` on 127.0.0.1 and a free port, with a config built from `fields`; started and
    stopped as the Prometheus servers are (ready at /-/ready, stopped by PID)."""

    binary = "dashgen-act"

    def __init__(self, folder: Path, fields: dict, *args: str, env: dict | None = None, token: str | None = TOKEN,
                 port: int | None = None):
        folder.mkdir(parents=True, exist_ok=True)
        super().__init__(folder / "act.yaml", folder / "act", extra_args=args, ready_timeout=30, port=port)
        self.config_file.write_text(yaml.safe_dump(
            {**fields, "act": {"project": "gsm8k", "experiment": "ppo", **fields.get("act", {})}}))
        self.audit_log = folder / "audit.jsonl"
        self.env = env
        self.token_args: list[str] = []
        if token is not None:
            (folder / "token").write_text(token + "\n")
            self.token_args = ["--token-file", str(folder / "token")]

    def command(self) -> list[str]:
        return [sys.executable, "-m", "dashgen", "act", "--config", str(self.config_file), "--listen",
                f"127.0.0.1:{self.port}", "--audit-log", str(self.audit_log), *self.token_args, *self.extra_args]

    def post(self, payload, token: str | None = TOKEN, headers: dict | None = None) -> tuple[int, dict]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        request = urllib.request.Request(f"{self.url}/alerts", data=body, method="POST",
                                         headers={"Content-Type": "application/json", **(headers or {})})
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)

    def audit(self) -> list[dict]:
        if not self.audit_log.exists():
            return []
        # A line still being written (no newline yet) is left for the next read.
        complete = self.audit_log.read_text().rpartition("\n")[0]
        return [json.loads(line) for line in complete.splitlines()]


def alert(alertname: str = "VerlTrainingDivergence", status: str = "firing", project: str | None = "gsm8k",
          experiment: str | None = "ppo", fingerprint: str = "5a1b2c3d4e5f6a7b",
          starts_at: str = "2026-05-01T12:00:00.000Z") -> dict:
    labels = {"alertname": alertname, "severity": "critical", "job": "verl", "instance": "127.0.0.1:9464"}
    labels.update({k: v for k, v in (("project", project), ("experiment", experiment)) if v is not None})
    return {"status": status, "labels": labels, "annotations": {"summary": "test"}, "startsAt": starts_at,
            "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": fingerprint}


def notification(*alerts: dict) -> dict:
    """A webhook notification as Alertmanager 0.25 sends it (version 4)."""
    return {"version": "4", "groupKey": "{}/{}:{}", "truncatedAlerts": 0, "receiver": "dashgen-act",
            "status": "resolved" if all(a["status"] == "resolved" for a in alerts) else "firing",
            "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {}, "externalURL": "", "alerts": list(alerts)}
