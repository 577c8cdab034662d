"""`dashgen act` on hostile input and awkward commands: a status code and an audit line, never a
crash; a command judged by its exit status and ended with its whole process group."""

import time

import pytest

from act_support import ActProcess, alert, notification
from conftest import wait_until
from dashgen.runtime.act import json_depth_exceeds, loggable
from dashgen.runtime.act_actions import ActionFailed, read_pid
from test_supervision import alive

pytestmark = pytest.mark.live


def command_fields(script: str, timeout: str = "20s") -> dict:
    return {"act": {"actions": {"VerlTrainingDivergence": "command"}, "command": ["sh", "-c", script],
                    "command_timeout": timeout}}


def test_a_command_that_backgrounds_a_child_succeeds_by_its_exit_status_and_leaves_no_child(tmp_path):
    child, ran = tmp_path / "child.pid", tmp_path / "ran"
    fields = command_fields(f"sleep 20 & echo $! > {child}; echo x >> {ran}; echo started")
    with ActProcess(tmp_path / "act", fields) as act:
        sent = time.monotonic()
        [decision] = act.post(notification(alert()))[1]["decisions"]
        assert decision["decision"] == "acted", decision
        assert time.monotonic() - sent < 10  # not the 20 s timeout
        wait_until(lambda: not alive(int(child.read_text())), 5, "the command's background child to be ended")
        # Alertmanager resends while the alert fires: it ran once.
        assert act.post(notification(alert()))[1]["decisions"][0]["decision"] == "duplicate"
    assert ran.read_text() == "x\n"


def test_a_command_over_its_timeout_is_killed_with_its_group(tmp_path):
    child = tmp_path / "child.pid"
    with ActProcess(tmp_path / "act", command_fields(f"sleep 60 & echo $! > {child}; sleep 60", "1s")) as act:
        [decision] = act.post(notification(alert()))[1]["decisions"]
    assert decision["decision"] == "failed"
    assert "did not finish within 1 s; killed its process group" in decision["detail"]
    wait_until(lambda: not alive(int(child.read_text())), 5, "the command's group to be killed")


@pytest.mark.parametrize("text", ["²", "12345678901234567890", "１２３４", "99999999", "٣٤٥", "4" * 100])
def test_pid_files_that_are_not_an_ascii_pid_in_range_are_refused(tmp_path, text):
    pid_file = tmp_path / "pid"
    pid_file.write_text(text + "\n")
    with pytest.raises(ActionFailed, match="not the PID of a trainer"):
        read_pid(pid_file)


def test_a_bad_pid_file_is_a_failed_decision_not_a_crashed_handler(tmp_path):
    pid_file = tmp_path / "pid"
    pid_file.write_text("²\n")
    with ActProcess(tmp_path / "act", {"act": {"actions": {"VerlTrainingDivergence": "stop"}}},
                    "--pid-file", str(pid_file)) as act:
        status, answer = act.post(notification(alert()))
        assert status == 200 and answer["decisions"][0]["decision"] == "failed"
        assert [r["decision"] for r in act.audit()] == ["failed"]


def test_a_deeply_nested_body_is_a_400(tmp_path):
    deep = b'{"alerts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with ActProcess(tmp_path / "act", {}) as act:
        status, answer = act.post(deep)
        assert status == 400 and "nests deeper than 32 levels" in answer["error"]
        assert act.post(notification(alert()))[0] == 200  # still serving
        assert act.audit_log.read_text().count("\n") == 1


def test_json_depth_ignores_brackets_in_strings():
    assert not json_depth_exceeds(b'{"a": "[[[[[[[[\\"[[[[["}', 3)
    assert json_depth_exceeds(b'[[[[{}]]]]', 4)


def test_labels_cannot_forge_log_lines_or_reach_the_terminal(tmp_path):
    forged = "VerlTrainingDivergence\ndashgen act: VerlNaNMetrics gsm8k/ppo: acted: forged\x1b[31m"
    with ActProcess(tmp_path / "act", {}) as act:
        assert act.post(notification(alert(alertname=forged)))[0] == 200
    log = act.log_path.read_text()
    assert "\x1b" not in log
    assert not any(line.startswith("dashgen act: VerlNaNMetrics") for line in log.splitlines())
    assert loggable("a\nb\x1b[0m\u2028") == "a\\nb\\x1b[0m\\u2028"


def test_the_once_only_key_cannot_collide(tmp_path):
    # With the old key, fingerprint@startsAt, both were "x@y@z".
    first = alert(fingerprint="x@y", starts_at="z")
    second = alert(fingerprint="x", starts_at="y@z")
    with ActProcess(tmp_path / "act", {}) as act:
        decisions = act.post(notification(first, second))[1]["decisions"]
    assert [d["decision"] for d in decisions] == ["logged", "logged"]


def test_port_0_announces_the_port_it_bound(tmp_path):
    import urllib.request

    from support import announced_port, dashgen_process

    config, token = tmp_path / "act.yaml", tmp_path / "token"
    config.write_text("act: {project: gsm8k, experiment: ppo}\n")
    token.write_text("a-token-of-more-than-16-characters\n")
    process = dashgen_process("act", "--config", str(config), "--listen", "127.0.0.1:0", "--token-file", str(token),
                              "--audit-log", str(tmp_path / "audit.jsonl"))
    try:
        port = announced_port(process)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5) as response:
            assert response.status == 200
    finally:
        process.terminate()
        process.communicate(timeout=30)
