"""A run's life as the exporter publishes it: supervised trainer, sidecar --total-steps, NaN streaks."""

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dashgen.runtime.exporter import RunState

from dashgen.lifecycle import RunPhase, phase_after_exit
from dashgen.replay.prometheus_server import free_port
from dashgen.runtime.log_follower import LogFollower
from support import Exporter, dashgen_command, export_command, run_state, wait_until

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


@pytest.fixture
def supervised(tmp_path: Path, exporters):
    """Start `dashgen export ... -- python trainer.py LOG STEPS CODE`; killed after the test."""
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)

    def start(steps: int, code: int, *options: str) -> Exporter:
        log = tmp_path / "proj" / "exp.jsonl"
        log.parent.mkdir(exist_ok=True)
        return exporters(log, *options, "--", sys.executable, str(script), str(log), str(steps), str(code))

    return start


@pytest.mark.live
@pytest.mark.parametrize("code, phase", [(0, "finished"), (3, "crashed")])
def test_a_supervised_trainer_s_end_and_exit_code_are_served_through_the_grace_period(supervised, code, phase):
    exporter = supervised(5, code, "--grace", "30s")
    metrics = wait_until(lambda: (m := exporter.metrics()) and run_state(m) == phase and m, 20, f"state {phase}")
    labels = '{experiment="exp",project="proj"}'
    assert metrics[f"verl_run_exit_code{labels}"] == code
    assert metrics[f"verl_exporter_steps_total{labels}"] == 5  # the last lines were read after the exit
    assert metrics[f"verl_actor_ppo_kl{labels}"] == pytest.approx(0.05)
    assert exporter.process.poll() is None  # still serving: the grace period is 30 s
    exporter.process.send_signal(signal.SIGTERM)  # a signal during the grace period ends it at once
    assert exporter.process.wait(timeout=10) == code


@pytest.mark.live
def test_a_trainer_that_exits_0_without_a_step_is_not_published_finished(supervised):
    """Exit 0 with an empty log: nothing was trained (or the log is elsewhere), which `finished`
    would hide; the exporter publishes its own state and says why in its log."""
    exporter = supervised(0, 0, "--grace", "30s")
    state = RunPhase.EXITED_WITHOUT_STEPS.value
    metrics = wait_until(lambda: (m := exporter.metrics()) and run_state(m) == state and m, 20, f"state {state}")
    labels = '{experiment="exp",project="proj"}'
    assert metrics[f"verl_run_exit_code{labels}"] == 0
    assert metrics['verl_run_state{experiment="exp",project="proj",state="finished"}'] == 0
    exporter.process.send_signal(signal.SIGTERM)
    out, err = exporter.process.communicate(timeout=10)
    assert exporter.process.returncode == 0
    assert "the trainer exited with 0 but wrote no step to " in out + err
    assert "published as exited_without_steps, not finished" in out + err


@pytest.mark.parametrize("code, stop, steps, phase", [
    (0, False, True, RunPhase.FINISHED), (0, False, False, RunPhase.EXITED_WITHOUT_STEPS),
    (1, False, False, RunPhase.CRASHED), (0, True, False, RunPhase.STOPPED), (-15, True, True, RunPhase.STOPPED)])
def test_the_phase_after_an_exit(code, stop, steps, phase):
    assert phase_after_exit(code, stop, steps) is phase


@pytest.mark.live
def test_a_stop_forwarded_to_the_trainer_is_stopped_not_crashed(supervised, tmp_path: Path):
    pid_file = tmp_path / "trainer.pid"
    exporter = supervised(-1, 0, "--grace", "1s", "--pid-file", str(pid_file))
    wait_until(lambda: exporter.run_state() == "running", 20, "the trainer's first steps")
    trainer_pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 20, "the pid file"))
    exporter.process.send_signal(signal.SIGTERM)
    metrics = wait_until(lambda: (m := exporter.metrics()) and run_state(m) == "stopped" and m, 20, "state stopped")
    assert metrics['verl_run_exit_code{experiment="exp",project="proj"}'] == -signal.SIGTERM
    assert exporter.process.wait(timeout=10) == 128 + signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(trainer_pid, 0)
    assert not pid_file.exists()


@pytest.mark.live
def test_a_trainer_that_cannot_start_is_one_clear_error(tmp_path: Path):
    result = subprocess.run(export_command(tmp_path / "x.jsonl", free_port(), "--", str(tmp_path / "no-such-trainer")),
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "cannot start" in result.stderr and "no-such-trainer" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.live
def test_grace_without_a_trainer_command_is_refused(tmp_path: Path):
    result = subprocess.run(dashgen_command("export", "--jsonl", str(tmp_path / "x.jsonl"), "--grace", "1m"),
                            capture_output=True, text=True, timeout=30)
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
    from dashgen.replay.backfill import Timing, read_run, run_labels

    log = _log(tmp_path / "p" / "e.jsonl", [{"critic/vf_loss": loss} for loss in (0.1, None, None, 0.2)])
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=1_000_000.0, default_step_seconds=60.0))
    assert [values["verl_nonfinite_loss_streak_steps"] for values in recorded.values] == [0, 1, 2, 0]
