"""How bench/alert_lifecycle.py scores a backtest against a simulated run's ground truth."""

from pathlib import Path

from dashgen.backfill import RecordedRun
from dashgen.backtest import AlertOutcome, Firing, RunOutcome
from dashgen.scoring import score
from dashgen.simulate import Fault, RunSpec

STEP = 60.0


def _outcome(spec: RunSpec, firings: dict[str, tuple[str, list[tuple[int, int | None]]]]) -> RunOutcome:
    """A run of one-minute steps; `firings`: alert -> (severity, [(start step, end step or None)])."""
    steps = list(range(1, spec.last_step + 1))
    times = [1_700_000_000.0 + STEP * step for step in steps]
    run = RecordedRun(Path("run.jsonl"), {"project": "p", "experiment": spec.name}, steps=steps, times=times,
                      served_until=times[-1] + 300, end=times[-1] + 300)

    def at(step: int | None) -> float | None:
        return None if step is None else times[step - 1]

    alerts = [AlertOutcome(name, severity, {}, [Firing(s, e, at(s), at(e)) for s, e in spans])
              for name, (severity, spans) in firings.items()]
    return RunOutcome(run, alerts)


def test_a_refire_within_an_episode_counts_twice_and_coverage_is_the_share_firing():
    spec = RunSpec("kl", 400, 1, faults=(Fault("kl_spike", 100),))
    result = score([_outcome(spec, {"VerlKLSpike": ("warning", [(110, 150), (170, None)])})], [spec])
    kl = result.alerts["VerlKLSpike"]
    assert (kl.episodes, kl.detected, kl.false_firings) == (1, 1, 0)
    assert kl.firings_per_episode == [2]
    assert kl.latencies == [10 * STEP]
    assert 0.8 < kl.coverage[0] < 0.95  # steps 110-150 and 170-400 of 100-400


def test_a_firing_far_from_every_episode_is_false_and_counts_against_precision():
    spec = RunSpec("kl", 400, 1, faults=(Fault("kl_spike", 300, 320),))
    result = score([_outcome(spec, {"VerlKLSpike": ("warning", [(50, 60), (305, 318)]),
                                    "VerlTrainingDivergence": ("critical", [(200, 210)])})], [spec])
    assert result.alerts["VerlKLSpike"].false_firings == 1
    assert result.alerts["VerlTrainingDivergence"].false_firings == 1
    assert result.precision == 1 / 3
    assert result.alerts["VerlKLSpike"].resolve_after_recovery == [0.0]
    # Healthy steps: all but those of the fault (steps 300 to 320, when it is over).
    assert result.healthy_steps == 400 - 21
    assert result.false_critical_per_1000_healthy_steps == 1000 / (400 - 21)


def test_a_firing_begun_well_before_an_episode_detects_it_but_is_not_one_of_its_firings():
    # A reward cliff that recovers, then the run plateaus: stagnation fired for the cliff and again
    # for the plateau; the plateau episode has one firing of its own.
    spec = RunSpec("cliff", 600, 1, plateaus=((300, 601),), faults=(Fault("reward_cliff", 100, 200),))
    result = score([_outcome(spec, {"VerlRewardStagnation": ("info", [(120, 310), (350, None)])})], [spec])
    stagnation = result.alerts["VerlRewardStagnation"]
    assert stagnation.detected == stagnation.episodes
    assert max(stagnation.firings_per_episode) == 1
    assert stagnation.false_firings == 0


def test_a_critical_alert_after_the_last_step_of_a_finished_run_is_a_page_at_the_normal_end():
    spec = RunSpec("healthy", 200, 1)
    outcome = _outcome(spec, {"VerlTrainingStalled": ("critical", [])})
    outcome.alerts[0].firing.append(Firing(200, None, outcome.run.times[-1] + 60, None))
    result = score([outcome], [spec])
    assert result.critical_at_normal_end == ["healthy: VerlTrainingStalled"]
