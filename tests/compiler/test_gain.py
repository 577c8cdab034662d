"""`Signal.gains_less_than`: a signal that has gained less than a level over its baseline, judged
against its own noise (VerlRewardStagnation's question). What the shipped alert does on series is in
tests/rules/rewards-test*.yaml, at 1.5 s, 60 s and 3,600 s a step."""

import pytest
import yaml

from conftest import run
from dashgen.condition_checks import condition_problem
from dashgen.conditions import Baseline, Gain, Signal, steps
from dashgen.config import config_from
from dashgen_alerts import rewards

TEAM_MODULE = '''
from dashgen.conditions import Baseline, Signal, steps
from dashgen.model import Alert, RuleGroup, Severity

REWARD = Signal("critic/score/mean").median_over(steps(20))
BEFORE = {baseline}


def rules(config):
    return RuleGroup("team-reward", (Alert.when(
        "TeamRewardFlat", REWARD.gains_less_than(0.05, of=BEFORE, beyond_noise=2),
        keep_firing_while=REWARD.gains_less_than(0.1, of=BEFORE, within_noise=3),
        severity=Severity.INFO, summary="The reward stopped rising."{untested}),))
'''


def _team(project, baseline="Baseline(steps(20), ending=steps(20))", untested=""):
    (project / "alerts" / "team.py").write_text(TEAM_MODULE.format(baseline=baseline, untested=untested))


def test_the_noise_takes_from_the_gain_at_onset_and_adds_to_it_while_firing(project):
    _team(project, untested=', untested="tests/rules/team-test.yaml"')
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    (rule,) = [rule for group in yaml.safe_load((project / "rendered" / "rules" / "team.yaml").read_text())["groups"]
               for rule in group["rules"] if rule.get("alert") == "TeamRewardFlat"]
    # z * 1.2533 * sqrt(1/20 + 1/20) of the spread over the baseline's 20 steps, ending 20 ago.
    median, before = "verl:critic_score_mean:median_20steps", "verl:critic_score_mean:baseline_median_20steps_ending20"
    spread = "verl:critic_score_mean:spread_20steps_ending20"
    assert f"{median} < ({before} + 0.05 - 0.7927 * {spread})" in rule["expr"]
    assert f"{median} < ({before} + 0.1 + 1.189 * {spread})" in rule["expr"]


@pytest.mark.heavy
def test_a_gain_has_no_generated_test_and_says_to_write_a_fixture(project):
    _team(project)
    assert run("build", "--root", str(project)).exit_code == 0
    result = run("test", "--root", str(project), "team")
    assert result.exit_code != 0
    assert ("alert 'TeamRewardFlat': its generated test cannot show it: it asks whether 'critic/score/mean' gained "
            "less than a level over its baseline, which a signal held at a level always has") in result.output


def test_a_gain_compares_with_a_rolling_baseline(project):
    _team(project, baseline="Baseline.quietest(steps(20), over=steps(100))")
    result = run("build", "--root", str(project))
    assert result.exit_code != 0
    assert "critic/score/mean: gains_less_than compares with a rolling Baseline(...), not a held, quietest or peak one" \
        in result.output


def test_a_gain_needs_finite_numbers_and_noise_counted_from_zero():
    reward = Signal("critic/score/mean").median_over(steps(30))
    before = Baseline(steps(30), ending=steps(30))
    assert condition_problem(reward.gains_less_than(0.01, of=before, beyond_noise=1)) is None
    assert condition_problem(reward.gains_less_than(0.01, of=before, beyond_noise=-1)) == (
        "critic/score/mean: beyond_noise of gains_less_than() is -1; it must be 0 or more")
    assert condition_problem(reward.gains_less_than(float("nan"), of=before)) == (
        "critic/score/mean: the gain of gains_less_than() is nan, not a finite number")
    assert condition_problem(Gain(reward, 0.01, None)) == (
        "critic/score/mean: gains_less_than compares with a Baseline(...) (of=)")


def test_reward_stagnation_compares_its_last_steps_with_those_before_in_steps_and_noise():
    stagnation = next(rule for rule in rewards.rules(config_from({})).rules
                      if getattr(rule, "name", "") == "VerlRewardStagnation")
    onset, keep = stagnation.condition, stagnation.keep_firing_while
    assert isinstance(onset, Gain) and isinstance(keep, Gain)
    assert onset.signal == Signal("critic/score/mean").median_over(steps(30))
    assert onset.baseline == Baseline(steps(30), ending=steps(30)) == keep.baseline
    assert (onset.gain, onset.beyond_noise, onset.within_noise) == (0.015, 1.75, 0.0)
    assert (keep.gain, keep.beyond_noise, keep.within_noise) == (0.02, 0.0, 2.0)
    # Nothing in wall time: the same at 1.5 s and at an hour a step.
    assert stagnation.for_ == "0s" and stagnation.keep_firing_for == "0s"
    assert stagnation.severity.value == "info"


def test_a_team_tunes_reward_stagnation_in_its_rewards_section():
    config = config_from({"rewards": {"reward_stagnation_steps": 50, "reward_stagnation_min_gain": 0.02,
                                      "reward_stagnation_noise_z": 2, "reward_stagnation_sustain_gain": 0.06}})
    stagnation = next(rule for rule in rewards.rules(config).rules if getattr(rule, "name", "") == "VerlRewardStagnation")
    assert stagnation.condition.signal.window == steps(50) and stagnation.condition.baseline.ending == steps(50)
    assert (stagnation.condition.gain, stagnation.condition.beyond_noise) == (0.02, 2.0)
    assert stagnation.keep_firing_while.gain == 0.06
    assert "less than 0.02 above its median of the 50 steps before, by more than 2 standard errors" in \
        stagnation.description
