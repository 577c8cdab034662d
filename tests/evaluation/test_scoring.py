"""How bench/alert_lifecycle.py scores a backtest against a simulated run's ground truth."""

from pathlib import Path

import pytest

from dashgen.evaluation import scoring

from dashgen.replay.backfill import RecordedRun
from dashgen.replay.backtest import AlertOutcome, Firing, RunOutcome
from dashgen.evaluation.scoring import entropy_fifth_step, issue_20_checks, score, unknown_expected_alerts
from dashgen.evaluation.simulate import Fault, RunSpec, noise_free_entropy

STEP = 60.0


def _outcome(spec: RunSpec, firings: dict[str, tuple[str, list[tuple[int, int | None]]]]) -> RunOutcome:
    """A run of one-minute steps, logged every `spec.log_every`; `firings`: alert -> (severity,
    [(start step, end step or None)])."""
    steps = list(range(spec.log_every, spec.last_step + 1, spec.log_every))
    times = [1_700_000_000.0 + STEP * step for step in steps]
    run = RecordedRun(Path("run.jsonl"), {"project": "p", "experiment": spec.name}, steps=steps, times=times,
                      served_until=times[-1] + 300, end=times[-1] + 300)

    def at(step: int | None) -> float | None:
        return None if step is None else times[steps.index(step)]

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


def _check(result, target_start: str):
    return next(check for check in issue_20_checks(result) if check.target.startswith(target_start))


def test_latency_counts_from_onset_and_from_measurable_in_steps_and_seconds():
    spec = RunSpec("len", 400, 1, faults=(Fault("length_collapse", 100, measurable=110),))
    result = score([_outcome(spec, {"VerlResponseLengthCollapse": ("warning", [(125, None)])})], [spec])
    entry = result.alerts["VerlResponseLengthCollapse"]
    assert (entry.latency_steps, entry.latencies) == ([25], [25 * STEP])
    assert (entry.measurable_latency_steps, entry.measurable_latencies) == ([15], [15 * STEP])


def test_on_a_log_of_every_tenth_step_an_onset_between_lines_is_placed_between_them():
    spec = RunSpec("sparse", 400, 1, log_every=10, faults=(Fault("no_learning_signal", 105, measurable=120),))
    result = score([_outcome(spec, {"VerlNoLearningSignal": ("warning", [(130, None)])})], [spec])
    entry = result.alerts["VerlNoLearningSignal"]
    assert entry.latency_steps == [25]
    assert entry.latencies == [pytest.approx(25 * STEP)]  # the line of step 110 stands for steps 101-110
    assert entry.measurable_latencies == [10 * STEP]


def test_an_expected_alert_no_rule_defines_yet_is_missed_at_its_planned_severity(monkeypatch):
    monkeypatch.setattr(scoring, "PLANNED_ALERTS", {"VerlResponseLengthCollapse": "warning"})
    spec = RunSpec("len", 400, 1, faults=(Fault("length_collapse", 100),))
    result = score([_outcome(spec, {"VerlEntropyCollapse": ("warning", []), "VerlRewardStagnation": ("info", [])})],
                   [spec])
    planned = result.alerts["VerlResponseLengthCollapse"]
    assert (planned.severity, planned.episodes, planned.detected) == ("warning", 1, 0)
    assert result.recall == 0.0
    assert "VerlResponseLengthCollapse" in _check(result, "critical+warning recall").detail


def test_an_expected_alert_neither_defined_nor_planned_is_reported_as_unknown(monkeypatch):
    monkeypatch.setattr(scoring, "PLANNED_ALERTS", {"VerlNoLearningSignal": "warning"})
    spec = RunSpec("kl", 400, 1)
    unknown = unknown_expected_alerts([_outcome(spec, {"VerlKLSpike": ("warning", [])})])
    assert "VerlTrainingDivergence" in unknown
    assert "VerlKLSpike" not in unknown and "VerlNoLearningSignal" not in unknown


def test_the_fifth_of_entropy_is_reached_where_the_decay_crosses_a_fifth_of_the_held_level():
    # Flat entropy: the held level is the level at onset; 10x per 100 steps reaches a fifth after 70 steps.
    spec = RunSpec("decay", 600, 1, entropy_level=1.0, entropy_decline=0.0,
                   faults=(Fault("entropy_decay", 200, speed=100),))
    assert entropy_fifth_step(spec, spec.faults[0]) == 270
    # Declining entropy: the held level is the day before's highest, so a fifth comes sooner than
    # a fifth of the level at onset would.
    declining = RunSpec("decay", 600, 1, faults=(Fault("entropy_decay", 400, speed=100),))
    fifth = entropy_fifth_step(declining, declining.faults[0])
    onset_level = noise_free_entropy(declining, declining.faults[0], 399)
    assert noise_free_entropy(declining, declining.faults[0], fifth) > onset_level / 5


def test_first_hour_divergence_must_be_paged_within_six_steps():
    spec = RunSpec("early", 400, 1, faults=(Fault("divergence", 30),))
    for fired_at, passed in ((36, True), (37, False)):
        result = score([_outcome(spec, {"VerlTrainingDivergence": ("critical", [(fired_at, None)])})], [spec])
        assert _check(result, "first-hour divergence").passed is passed
    late = RunSpec("late", 400, 1, faults=(Fault("divergence", 90),))  # not in the first hour: not judged
    result = score([_outcome(spec, {"VerlTrainingDivergence": ("critical", [(36, None)])}),
                    _outcome(late, {"VerlTrainingDivergence": ("critical", [(120, None)])})], [spec, late])
    assert _check(result, "first-hour divergence").passed


def test_entropy_warnings_on_a_low_flat_run_and_warnings_on_isolated_skips_fail_their_checks():
    low = RunSpec("low", 400, 1, entropy_level=0.025, entropy_decline=0.0, isolated_nan_steps=(200,))
    quiet = score([_outcome(low, {"VerlEntropyCollapse": ("warning", []), "VerlNonFiniteStep": ("warning", [])})],
                  [low])
    assert _check(quiet, "no entropy warning").passed and _check(quiet, "no warning for isolated").passed
    noisy = score([_outcome(low, {"VerlEntropyCollapse": ("warning", [(150, None)]),
                                  "VerlNonFiniteStep": ("warning", [(200, 201)])})], [low])
    assert not _check(noisy, "no entropy warning").passed
    assert not _check(noisy, "no warning for isolated").passed


def test_a_warning_on_a_healthy_warm_up_fails_its_check():
    warm_up = RunSpec("grpo", 400, 1, warmup_kl=0.3)
    result = score([_outcome(warm_up, {"VerlKLSpike": ("warning", [(3, 12)])})], [warm_up])
    check = _check(result, "no critical or warning on a healthy warm-up")
    assert not check.passed and "grpo: VerlKLSpike" in check.detail
    result = score([_outcome(warm_up, {"VerlKLSpike": ("warning", [])})], [warm_up])
    assert _check(result, "no critical or warning on a healthy warm-up").passed


def test_a_hang_is_measurable_once_the_silence_outlasts_the_longest_step():
    spec = RunSpec("hang", 400, 1, faults=(Fault("stall", 300),))
    outcome = _outcome(spec, {"VerlTrainingStalled": ("critical", [])})
    times = outcome.run.times
    times[100:] = [when + 200 for when in times[100:]]  # one long step (a validation): 260 s, not 60
    outcome.run.served_until = outcome.run.end = outcome.run.times[-1] + 3600
    outcome.alerts[0].firing.append(Firing(299, None, outcome.run.times[-1] + 900, None))
    stalled = score([outcome], [spec]).alerts["VerlTrainingStalled"]
    assert stalled.latencies == [900]
    assert stalled.measurable_latencies == [900 - 260]


def test_a_scenario_passes_when_its_faults_are_caught_and_its_healthy_twin_stays_quiet():
    faulty = RunSpec("grad", 400, 1, faults=(Fault("grad_norm_explosion", 200),))
    twin = RunSpec("twin", 400, 1)
    scenarios = (("lone gradient explosion", (faulty, twin)),)
    caught = score([_outcome(faulty, {"VerlGradNormExplosion": ("warning", [(203, None)])}),
                    _outcome(twin, {"VerlGradNormExplosion": ("warning", [])})], [faulty, twin])
    assert [check.passed for check in scoring.scenario_checks(caught, scenarios)] == [True, True]
    assert "grad@200 VerlGradNormExplosion +3 steps" in scoring.scenario_checks(caught, scenarios)[1].detail
    missed = score([_outcome(faulty, {"VerlGradNormExplosion": ("warning", []),
                                      "VerlTrainingDivergence": ("critical", [(205, None)])}),
                    _outcome(twin, {"VerlGradNormExplosion": ("warning", [(100, 120)])})], [faulty, twin])
    quiet, found = scoring.scenario_checks(missed, scenarios)
    assert not quiet.passed and "twin: VerlGradNormExplosion" in quiet.detail
    assert not found.passed and "VerlGradNormExplosion missed" in found.detail
