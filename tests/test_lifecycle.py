"""A run's life as the exporter publishes it: supervised trainer, sidecar --total-steps, NaN streaks."""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import wait_until
from dashgen.exporter import LogFollower, RunState
from dashgen.lifecycle import RunPhase
from dashgen.prometheus_server import free_port

TRAINER = """
import json, signal, sys, time
log, steps, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(log, "a") as handle:
    step = 0
    while steps < 0 or step < steps:  # steps < 0: until killed
        step += 1
        handle.write(json.dumps({"step": step, "data": {"actor/ppo_kl": 0.01 * step}}) + "\\n")
        handle.flush()
        time.sleep(0.05)
sys.exit(code)
"""


def samples(text: str) -> dict[str, float]:
    """Metric lines of an exposition, `name{labels}` -> value."""
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def scrape(port: int) -> dict[str, float] | None:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return samples(response.read().decode())
    except OSError:
        return None



def state_of(metrics: dict[str, float] | None) -> str | None:
    if not metrics:
        return None
    ones = [key for key, value in metrics.items() if key.startswith("verl_run_state{") and value == 1]
    return ones[0].split('state="')[1].split('"')[0] if len(ones) == 1 else None


@pytest.fixture
def supervised(tmp_path: Path):
    """Start `dashgen export ... -- python trainer.py LOG STEPS CODE`; always stopped afterwards."""
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    started: list[subprocess.Popen] = []

    def start(steps: int, code: int, *options: str) -> tuple[subprocess.Popen, int, Path]:
        log = tmp_path / "proj" / "exp.jsonl"
        log.parent.mkdir(exist_ok=True)
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "dashgen", "export", "--jsonl", str(log), "--listen", f"127.0.0.1:{port}",
             "--poll-interval", "0.05", *options, "--", sys.executable, str(script), str(log), str(steps),
             str(code)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(process)
        return process, port, log

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


@pytest.mark.parametrize("code, phase", [(0, "finished"), (3, "crashed")])
def test_a_supervised_trainer_s_end_and_exit_code_are_served_through_the_grace_period(supervised, code, phase):
    process, port, _ = supervised(5, code, "--grace", "30s")
    metrics = wait_until(lambda: (m := scrape(port)) and state_of(m) == phase and m, 20, f"state {phase}")
    labels = '{experiment="exp",project="proj"}'
    assert metrics[f"verl_run_exit_code{labels}"] == code
    assert metrics[f"verl_exporter_steps_total{labels}"] == 5  # the last lines were read after the exit
    assert metrics[f"verl_actor_ppo_kl{labels}"] == pytest.approx(0.05)
    assert process.poll() is None  # still serving: the grace period is 30 s
    process.send_signal(signal.SIGTERM)  # a signal during the grace period ends it at once
    assert process.wait(timeout=10) == code


def test_a_stop_forwarded_to_the_trainer_is_stopped_not_crashed(supervised, tmp_path: Path):
    pid_file = tmp_path / "trainer.pid"
    process, port, _ = supervised(-1, 0, "--grace", "1s", "--pid-file", str(pid_file))
    wait_until(lambda: state_of(scrape(port)) == "running", 20, "the trainer's first steps")
    trainer_pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 20, "the pid file"))
    process.send_signal(signal.SIGTERM)
    metrics = wait_until(lambda: (m := scrape(port)) and state_of(m) == "stopped" and m, 20, "state stopped")
    assert metrics['verl_run_exit_code{experiment="exp",project="proj"}'] == -signal.SIGTERM
    assert process.wait(timeout=10) == 128 + signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(trainer_pid, 0)
    assert not pid_file.exists()


def test_a_trainer_that_cannot_start_is_one_clear_error(tmp_path: Path):
    result = subprocess.run([sys.executable, "-m", "dashgen", "export", "--jsonl", str(tmp_path / "x.jsonl"),
                             "--listen", f"127.0.0.1:{free_port()}", "--", str(tmp_path / "no-such-trainer")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "cannot start" in result.stderr and "no-such-trainer" in result.stderr
    assert "Traceback" not in result.stderr


def test_grace_without_a_trainer_command_is_refused(tmp_path: Path):
    result = subprocess.run([sys.executable, "-m", "dashgen", "export", "--jsonl", str(tmp_path / "x.jsonl"),
                             "--grace", "1m"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "give its command after `--`" in result.stderr


def _log(path: Path, steps: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"step": n, "data": data}) + "\n" for n, data in enumerate(steps, 1)))
    return path


def test_sidecar_total_steps_marks_the_run_finished_at_its_last_step(tmp_path: Path):
    log = _log(tmp_path / "p" / "e.jsonl", [{"actor/ppo_kl": 0.1}] * 5)
    done, going = RunState("p", "e", total_steps=5), RunState("p", "e", total_steps=6)
    LogFollower(log, done).poll()
    LogFollower(log, going).poll()
    assert (done.phase, going.phase) == (RunPhase.FINISHED, RunPhase.RUNNING)


@pytest.mark.parametrize("grad_norms, streak", [
    ([1.0, None, None, 1.0, None], 1),
    ([1.0, None, float("nan"), float("inf")], 3),
    ([None, None, 1.0], 0),
])
def test_the_non_finite_streak_counts_every_step_even_when_catching_up(tmp_path: Path, grad_norms, streak):
    log = _log(tmp_path / "p" / "e.jsonl", [{"actor/grad_norm": g} for g in grad_norms])
    state = RunState("p", "e")
    LogFollower(log, state).poll()  # one poll: only the last step's values are mapped
    exposed = {s.name: s.value for family in state.collect() for s in family.samples}
    assert exposed["verl_nonfinite_streak_steps"] == streak
    assert exposed["verl_nonfinite_loss_streak_steps"] == 0  # the grad norm is not a loss
    assert math.isfinite(exposed["verl_actor_grad_norm"]) == (grad_norms[-1] is not None
                                                             and math.isfinite(grad_norms[-1]))


@pytest.mark.parametrize("losses, streak", [([0.1, None, None], 2), ([None, float("inf"), 0.1], 0)])
def test_a_non_finite_loss_has_a_streak_of_its_own(tmp_path: Path, losses, streak):
    log = _log(tmp_path / "p" / "e.jsonl", [{"actor/pg_loss": loss} for loss in losses])
    state = RunState("p", "e")
    LogFollower(log, state).poll()
    exposed = {s.name: s.value for family in state.collect() for s in family.samples}
    assert exposed["verl_nonfinite_loss_streak_steps"] == streak


def test_backfill_records_the_loss_streak_as_the_exporter_serves_it(tmp_path: Path):
    from dashgen.backfill import Timing, read_run, run_labels

    log = _log(tmp_path / "p" / "e.jsonl", [{"critic/vf_loss": loss} for loss in (0.1, None, None, 0.2)])
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=1_000_000.0, default_step_seconds=60.0))
    assert [values["verl_nonfinite_loss_streak_steps"] for values in recorded.values] == [0, 1, 2, 0]
