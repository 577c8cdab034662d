"""What `backtest --plot` draws, as data: a lane per alert with its own signals, by severity, zoomed to
the onset, and an end caused by the run's end told apart from a recovery."""

from pathlib import Path

import pytest

from dashgen.compiler.compiled import RecordingRule
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.backtest.engine import raw_reads
from dashgen.replay.backtest.evaluation import AlertOutcome, Firing, RunOutcome
from dashgen.replay.backtest.plot import (MIN_CONTEXT_STEPS, QUIET_SIGNALS, RECOVERED, RUN_ENDED, Band, plot,
                                          run_plot)

STEPS = 500


def long_run() -> RecordedRun:
    """500 one-minute steps whose response length collapses over the last 12."""
    steps = list(range(1, STEPS + 1))
    values = [{"verl_response_length_mean": 600.0 if step < 488 else 600.0 / (step - 486),
               "verl_actor_ppo_kl": 0.01, "verl_actor_grad_norm": 1.0, "verl_critic_score_mean": 0.3,
               "verl_actor_entropy": 0.8, "verl_training_global_step": float(step)} for step in steps]
    return RecordedRun(Path("run.jsonl"), {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                       steps=steps, times=[60.0 * step for step in steps], values=values)


def firing(run: RecordedRun, start_step: int, end_step: int | None, end: float | None = None) -> Firing:
    start = run.times[start_step - 1]
    if end is None and end_step is not None:
        end = run.times[end_step - 1]
    return Firing(start_step, end_step, start, end)


def alert(name: str, severity: str, signals: tuple[str, ...], *firings: Firing) -> AlertOutcome:
    return AlertOutcome(name, severity, {}, list(firings), signals=signals)


def test_lanes_hold_each_alerts_own_signals_most_severe_first():
    run = long_run()
    outcome = RunOutcome(run, [
        alert("VerlRewardStagnation", "info", ("verl_critic_score_mean",), firing(run, 470, None)),
        alert("VerlResponseLengthCollapse", "warning", ("verl_response_length_mean", "verl_training_global_step"),
              firing(run, 490, None)),
        alert("VerlTrainingDivergence", "critical", ("verl_actor_grad_norm", "verl_actor_ppo_kl", "verl_gpu_thing"),
              firing(run, 495, None)),
        alert("VerlKLSpike", "warning", ("verl_actor_ppo_kl",), firing(run, 480, 485)),
        alert("VerlNaNMetrics", "critical", ("verl_actor_ppo_kl",)),  # did not fire: no lane
    ])
    shown = run_plot(outcome)
    assert [lane.title for lane in shown.lanes] == ["VerlTrainingDivergence", "VerlKLSpike",
                                                    "VerlResponseLengthCollapse", "VerlRewardStagnation"]
    signals = {lane.title: lane.signals for lane in shown.lanes}
    # The signal that failed is drawn; a series the step log does not hold and the step counter are not.
    assert signals["VerlResponseLengthCollapse"] == ("verl_response_length_mean",)
    assert signals["VerlTrainingDivergence"] == ("verl_actor_grad_norm", "verl_actor_ppo_kl")


def test_a_short_collapse_at_the_end_of_a_long_run_fills_half_the_axis():
    run = long_run()
    collapse = alert("VerlResponseLengthCollapse", "warning", ("verl_response_length_mean",), firing(run, 488, None))
    first, last = run_plot(RunOutcome(run, [collapse])).steps
    assert (first, last) == (476, 500)
    assert (last - 488) / (last - first) == pytest.approx(0.5)
    # A short alert that recovered mid-run: context of at least MIN_CONTEXT_STEPS on both sides.
    spike = alert("VerlKLSpike", "warning", ("verl_actor_ppo_kl",), firing(run, 200, 203))
    assert run_plot(RunOutcome(run, [spike])).steps == (200 - MIN_CONTEXT_STEPS, 203 + MIN_CONTEXT_STEPS)
    # An alert that fired early and held on: the whole run.
    stagnation = alert("VerlRewardStagnation", "info", ("verl_critic_score_mean",), firing(run, 5, None))
    assert run_plot(RunOutcome(run, [stagnation])).steps == (1, STEPS)


def test_an_end_by_the_run_ending_is_not_a_recovery():
    run = long_run()
    last_step_time = run.times[-1]
    outcome = RunOutcome(run, [
        alert("VerlKLSpike", "warning", ("verl_actor_ppo_kl",), firing(run, 300, 310)),  # recovered mid-run
        alert("VerlTrainingDivergence", "critical", ("verl_actor_ppo_kl",), firing(run, 490, None)),  # still firing
        # Resolved five minutes after the last step, when the finished run's exporter went away.
        alert("VerlEntropyCollapse", "warning", ("verl_actor_entropy",),
              firing(run, 495, STEPS, end=last_step_time + 300)),
    ])
    bands = {lane.title: lane.bands for lane in run_plot(outcome).lanes}
    assert bands["VerlKLSpike"] == (Band(300, 310, RECOVERED),)
    assert bands["VerlTrainingDivergence"] == (Band(490, STEPS, RUN_ENDED),)
    assert bands["VerlEntropyCollapse"] == (Band(495, STEPS, RUN_ENDED),)


def test_a_run_without_alerts_shows_its_key_signals_whole():
    run = long_run()
    shown = run_plot(RunOutcome(run, [alert("VerlKLSpike", "warning", ("verl_actor_ppo_kl",))]))
    assert [lane.signals for lane in shown.lanes] == [QUIET_SIGNALS]
    assert shown.steps == (1, STEPS)


def test_an_alerts_signals_are_read_through_its_recordings():
    median = "verl:critic_score_mean:median_10steps"
    recordings = [RecordingRule(median, "quantile_over_time(0.5, verl_critic_score_mean[10m])", 60_000),
                  RecordingRule("verl:critic_score_mean:baseline", f"max_over_time({median}[1h])", 60_000)]
    reads = {"verl:critic_score_mean:baseline", "verl_training_global_step", "ALERTS"}
    assert raw_reads(reads, recordings) == {"verl_critic_score_mean", "verl_training_global_step"}


@pytest.mark.heavy
def test_the_plot_draws_the_lanes(tmp_path: Path):
    pytest.importorskip("matplotlib")
    run = long_run()
    out = tmp_path / "plot.png"
    plot([RunOutcome(run, [alert("VerlResponseLengthCollapse", "warning", ("verl_response_length_mean",),
                                 firing(run, 488, None))])], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.live
@pytest.mark.parametrize("run_name", ["custom-qwen25math-15b-grpo-e16-entropy-blowup",
                                      "trl-qwen25-7b-gsm8k-grpo-rho010-reward-collapse"])
def test_on_a_real_run_every_firing_alerts_lane_draws_the_series_it_reads(run_name):
    """The alerts judge in steps (they read the exporter's step windows, not the raw series): their
    lanes draw the logged series those windows are computed from, with data in the steps shown."""
    from dashgen.config import Config
    from dashgen.replay.backtest import backtest
    from dashgen.review.comparison import START, run_timings
    from dashgen.review.corpus import public_corpus
    from dashgen.review.runs import read_run_folder
    from dashgen.replay.backfill import Timing
    from conftest import REPO

    labelled = read_run_folder(public_corpus() / run_name)
    [outcome] = backtest([labelled.steps_path], REPO, Config(), Timing(start=START), timings=run_timings([labelled]))
    shown = run_plot(outcome)
    firing_alerts = {alert.alertname for alert in outcome.alerts if alert.firing}
    assert firing_alerts and {lane.title for lane in shown.lanes} == firing_alerts
    first, last = shown.steps
    for lane in shown.lanes:
        assert lane.signals, f"{lane.title}: no series drawn"
        for signal in lane.signals:
            points = [values[signal] for step, values in zip(outcome.run.steps, outcome.run.values)
                      if signal in values and first <= step <= last]
            assert points, f"{lane.title}: {signal} has no value within steps {first}-{last}"
