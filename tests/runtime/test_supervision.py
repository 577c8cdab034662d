"""`dashgen export -- TRAINER` supervises as systemd would: options checked before the trainer
starts, a stop reaches the trainer's whole process group and ends in SIGKILL after the kill
timeout, and a killed exporter takes its trainer with it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from act_support import ActProcess, alert, notification
from dashgen.replay.prometheus_server import free_port
from support import Exporter, dashgen_command, wait_until

pytestmark = pytest.mark.live

# argv: pid-file-of-its-own, on-SIGTERM (ignore | exit0 | checkpoint: save for 1.5 s, then exit 0;
# exit: no SIGTERM handler, exits once started), and "child" to start a grandchild ignoring SIGTERM
# ("daemon": the same grandchild in a session and process group of its own, as a daemon makes itself).
TRAINER = """
import os, signal, subprocess, sys, time
pids, on_term = sys.argv[1], sys.argv[2]

def checkpoint(*_):
    time.sleep(1.5)
    open(pids + ".saved", "w").close()
    sys.exit(0)

if on_term == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif on_term == "checkpoint":
    signal.signal(signal.SIGTERM, checkpoint)
elif on_term == "exit0":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)"], start_new_session="daemon" in sys.argv[3:]) \
    if {"child", "daemon"} & set(sys.argv[3:]) else None
with open(pids + ".tmp", "w") as handle:
    handle.write(f"{os.getpid()} {child.pid if child else ''}")
os.replace(pids + ".tmp", pids)
while on_term != "exit":
    time.sleep(0.05)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by whoever inherited it) is gone for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_end(exporter: Exporter) -> str:
    """The state the exporter publishes once its run is no longer running."""
    return wait_until(lambda: (state := exporter.run_state()) not in (None, "running") and state, 20, "the run's end")


@pytest.fixture
def supervising(tmp_path: Path, exporters):
    """Start `dashgen export ... -- python trainer.py PIDS ON_TERM [child]`; everything killed afterwards."""
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    started: list[tuple[Exporter, Path]] = []

    def start(on_term: str, *options: str, child: bool | str = False) -> tuple[Exporter, list[int]]:
        log = tmp_path / "proj" / "exp.jsonl"
        log.parent.mkdir(exist_ok=True)
        pids = tmp_path / f"pids-{len(started)}"
        exporter = exporters(log, *options, "--", sys.executable, str(script), str(pids), on_term,
                             *([child if isinstance(child, str) else "child"] if child else []))
        started.append((exporter, pids))
        text = wait_until(lambda: pids.exists() and pids.read_text(), 30, "the trainer's start")
        return exporter, [int(pid) for pid in text.split()]

    yield start
    for exporter, pids in started:  # its processes first: one left behind holds the exporter's output open
        for pid in (pids.read_text().split() if pids.exists() else []):
            if alive(int(pid)):
                os.kill(int(pid), signal.SIGKILL)
        exporter.kill()


def test_a_trainer_ignoring_sigterm_is_killed_with_its_group_after_the_kill_timeout(supervising):
    exporter, (trainer, grandchild) = supervising("ignore", "--kill-timeout", "1s", "--grace", "30s", child=True)
    wait_until(lambda: exporter.run_state() == "running", 20, "the run to be served")
    exporter.process.send_signal(signal.SIGTERM)
    wait_until(lambda: not alive(trainer) and not alive(grandchild), 1 + 5, "the trainer's group to be killed")
    assert run_end(exporter) == "stopped"
    exporter.process.send_signal(signal.SIGTERM)  # in the grace period: leave at once
    assert exporter.process.wait(timeout=10) == 128 + signal.SIGKILL


def test_an_act_stop_ends_a_trainer_that_ignores_sigterm(supervising, tmp_path):
    pid_file = tmp_path / "trainer.pid"
    exporter, (trainer,) = supervising("ignore", "--kill-timeout", "1s", "--grace", "30s", "--pid-file",
                                       str(pid_file))
    with ActProcess(tmp_path / "act", {"act": {"actions": {"VerlTrainingDivergence": "stop"}}}, "--pid-file",
                    str(pid_file)) as act:
        [decision] = act.post(notification(alert()))[1]["decisions"]
    assert decision["decision"] == "acted" and "dashgen export" in decision["detail"]
    wait_until(lambda: not alive(trainer), 1 + 5, "the trainer to be killed after the kill timeout")
    assert run_end(exporter) == "stopped"


def test_a_repeated_stop_request_leaves_the_kill_timeout_to_run(supervising, tmp_path):
    """Two alerts set to stop, or a human's second Ctrl-C: the trainer still saves its checkpoint."""
    exporter, (trainer,) = supervising("checkpoint", "--kill-timeout", "30s", "--grace", "30s")
    wait_until(lambda: exporter.run_state() == "running", 20, "the run to be served")
    for signum in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT):
        exporter.process.send_signal(signum)
        time.sleep(0.1)
    assert run_end(exporter) == "stopped"
    assert (tmp_path / "pids-0.saved").exists()  # the save was not killed half-way


def test_what_a_trainer_leaves_in_its_group_is_stopped_after_it_exits(supervising):
    exporter, (trainer, grandchild) = supervising("exit", "--kill-timeout", "1s", "--grace", "30s", child=True)
    wait_until(lambda: not alive(trainer), 10, "the trainer to exit")
    wait_until(lambda: not alive(grandchild), 1 + 5, "the process it left behind to be killed")
    # It exited 0 on its own, having written no step: an end, not a crash or a stop.
    assert run_end(exporter) == "exited_without_steps"
    assert exporter.process.poll() is None  # serving the final state for the grace period


@pytest.mark.parametrize("trainer_exit", ["exit", "exit0"])
def test_what_a_trainer_daemonised_is_stopped_after_it_exits(supervising, trainer_exit):
    """A daemon leaves the trainer's process group and session: it is found as a process the trainer
    left to the exporter (its subreaper), whether the trainer ends on its own or by a stop."""
    exporter, (trainer, daemon) = supervising(trainer_exit, "--kill-timeout", "1s", "--grace", "30s",
                                              child="daemon")
    assert os.getpgid(daemon) == daemon  # a group of its own
    if trainer_exit == "exit0":
        wait_until(lambda: exporter.run_state() == "running", 20, "the run to be served")
        exporter.process.send_signal(signal.SIGTERM)
    wait_until(lambda: not alive(trainer), 10, "the trainer to exit")
    wait_until(lambda: not alive(daemon), 1 + 5, "the process it daemonised to be killed")
    assert run_end(exporter) in ("exited_without_steps", "stopped")
    assert exporter.process.poll() is None


def test_a_trainer_that_exits_0_after_a_stop_is_published_stopped(supervising, tmp_path):
    pid_file = tmp_path / "trainer.pid"
    exporter, (trainer,) = supervising("exit0", "--grace", "30s", "--pid-file", str(pid_file))
    # The file is made before the trainer starts (a bad path fails first) and holds its PID once it has one.
    assert int(wait_until(lambda: pid_file.read_text().strip(), 10, "the trainer's PID in its file")) == trainer
    exporter.process.send_signal(signal.SIGTERM)
    assert run_end(exporter) == "stopped"
    assert not pid_file.exists()  # removed when the trainer exited, not at the end of the grace period
    assert exporter.process.poll() is None


def test_a_killed_exporter_takes_its_trainer_with_it(supervising):
    exporter, (trainer,) = supervising("ignore")
    exporter.kill()
    wait_until(lambda: not alive(trainer), 10, "the trainer to die with its exporter")


def _export(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    marker = tmp_path / "trainer-started"
    return subprocess.run(dashgen_command("export", "--jsonl", str(tmp_path / "p" / "e.jsonl"), "--listen",
                                          f"127.0.0.1:{free_port()}", *args, "--", sys.executable, "-c",
                                          f"open({str(marker)!r}, 'w').close()"),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, expected", [
    (["--pid-file", "/proc/x/y"], "--pid-file /proc/x/y: cannot write it"),
    (["--grace", "99999999999y"], "--grace 99999999999y: at most 24h"),
    (["--kill-timeout", "0s"], "--kill-timeout 0s: must be longer than 0s"),
    (["--kill-timeout", "soon"], "--kill-timeout 'soon' is not a Prometheus duration"),
    (["--poll-interval", "nan"], "nan is not a finite number of seconds"),
])
def test_bad_options_are_refused_before_the_trainer_starts(tmp_path, args, expected):
    result = _export(tmp_path, *args)
    assert result.returncode != 0
    assert expected in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("Error:") == 1
    assert not (tmp_path / "trainer-started").exists()
