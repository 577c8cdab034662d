"""A zero gradient from a saturated reward (issue 35, class 3): VerlRewardSaturated's info where the
reward sits at its best, VerlNoLearningSignal's warning where it does not. What the rules do on
series is in tests/rules/rewards-test.yaml; on simulated runs, bench/alert_lifecycle.py."""

import yaml

from conftest import run
from dashgen.conditions import AllOf, AnyOf, Shift, Steps, comparisons
from dashgen.config import config_from
from dashgen_alerts import rewards

TEAM_MODULE = '''
from dashgen.conditions import Baseline, Signal, any_of, steps
from dashgen.model import Alert, RuleGroup, Severity

REWARD = Signal("critic/score/mean").median_over(steps(20))
RANGE = Baseline.quietest(steps(10), over=steps(200))


def rules(config):
    return RuleGroup("team-reward", (Alert.when(
        "TeamRewardAtItsBest", REWARD.does_not_fall_by(0.01, of=RANGE),
        severity=Severity.INFO, summary="The reward is at its best."),
        Alert.when("TeamRewardBelowItsBest", REWARD.falls_by(0.01, of=RANGE),
                   severity=Severity.INFO, summary="The reward is below its best.")))
'''


def _alerts(config):
    group = rewards.rules(config)
    return {rule.name: rule for rule in group.rules if hasattr(rule, "severity")}


def _reward_shifts(condition):
    return [c for c in comparisons(condition) if c.signal.ref == "critic/score/mean" and isinstance(c, Shift)]


def test_the_info_holds_where_the_warnings_long_zero_stretch_does_not_and_the_tunables_reach_both():
    config = config_from({"rewards": {"no_signal_level_steps": 5, "no_signal_range_steps": 400,
                                      "no_signal_level_tolerance": 0.001}})
    alerts = _alerts(config)
    saturated = _reward_shifts(alerts["VerlRewardSaturated"].condition)
    unsaturated = _reward_shifts(alerts["VerlNoLearningSignal"].condition)
    # Each of the warning's reward comparisons is one of the info's, negated: the two split the zeros.
    assert len(saturated) == len(unsaturated) == 2
    assert {(c.op, c.negated) for c in saturated} == {(">", False), ("<", True)}
    assert sorted((c.op, not c.negated) for c in unsaturated) == sorted((c.op, c.negated) for c in saturated)
    for shift in (*saturated, *unsaturated):
        assert shift.signal.window == Steps(20) and shift.signal.reduction == "median"
        assert shift.baseline.window == Steps(5) and shift.baseline.over == Steps(400)
        assert (shift.fraction, shift.at_least, shift.beyond_noise) == (0.001, 0.0, 0.0)
    # The warning reads the reward only in its branch of 20 zeros in a row; its other branches do not.
    branches = alerts["VerlNoLearningSignal"].condition.conditions[-1]
    assert isinstance(branches, AnyOf)
    assert [bool(_reward_shifts(branch)) for branch in branches.conditions] == [False, False, False, True]
    assert isinstance(branches.conditions[-1], AllOf)


def test_a_reward_and_a_gradient_of_exactly_0_warn_within_5_steps_and_20_zeros_need_a_policy_loss_of_0():
    alerts = _alerts(config_from({"rewards": {"no_signal_zero_reward_steps": 4}}))
    zero_reward, _, _, dead = alerts["VerlNoLearningSignal"].condition.conditions[-1].conditions
    # Issue 52: nothing paid and nothing updated, on each of the last steps, judged once half are logged.
    reads = {(c.signal.ref, c.signal.reduction, c.op, c.value) for c in comparisons(zero_reward)}
    assert reads == {("critic/score/mean", "max", "<", 1e-9), ("critic/score/mean", "min", ">", -1e-9),
                     ("actor/grad_norm", "max", "<", 1e-9)}
    assert all(c.signal.window == Steps(4) and c.signal.half_logged for c in comparisons(zero_reward))
    # TRL logging every Nth step: the last step's grad norm of 0 beside a mean loss that moved is no dead gradient.
    losses = {(c.signal.reduction, c.op, c.value) for c in comparisons(dead) if c.signal.ref == "actor/pg_loss"}
    assert losses == {("max", "<", 1e-9), ("min", ">", -1e-9)}


def test_the_info_needs_fewer_zeros_in_a_row_than_the_warning():
    alerts = _alerts(config_from({"rewards": {"saturated_zero_steps": 7}}))
    windows = {c.signal.window for c in comparisons(alerts["VerlRewardSaturated"].condition)
               if c.signal.ref == "actor/grad_norm"}
    assert windows == {Steps(7)}


def test_a_fall_negated_is_the_signal_at_or_above_its_highest_median(project):
    (project / "alerts" / "team.py").write_text(TEAM_MODULE)
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    rules = {rule["alert"]: rule["expr"] for group in
             yaml.safe_load((project / "rendered" / "rules" / "team.yaml").read_text())["groups"]
             for rule in group["rules"] if "alert" in rule}
    median, ceiling = "verl:critic_score_mean:median_20steps", "verl:critic_score_mean:baseline_ceiling_200steps"
    margin = f"clamp_min(0.01 * abs({ceiling}), 0)"
    assert rules["TeamRewardAtItsBest"].strip() == f"{median} >= ({ceiling} - {margin})"
    assert rules["TeamRewardBelowItsBest"].strip() == f"{median} < ({ceiling} - {margin})"
