"""The tunables of VerlRewardHacking (alerts/validation.py) and of truncation judged as a change
(alerts/rollout.py): each reaches the condition it tunes, and a value out of range is refused
naming its field. What the rules do on series is in tests/rules/{validation,rollout}-test.yaml."""

import pytest

from dashgen.conditions import Shift, Steps, comparisons
from dashgen.config import ConfigError, config_from
from dashgen_alerts import rollout, validation


def _alert(module, config, name):
    groups = module.rules(config)
    groups = groups if isinstance(groups, list) else [groups]
    return next(rule for group in groups for rule in group.rules if getattr(rule, "name", "") == name)


def test_reward_hacking_compares_validation_with_its_level_and_the_reward_with_its_own_past():
    hacking = _alert(validation, config_from({}), "VerlRewardHacking")
    fall, fall_to_near_zero, near_zero, rise = comparisons(hacking.condition)
    # Validation first: the alert carries its data_source, variable and metric labels.
    assert fall.signal.ref == "verl_val_core" and fall.op == "<"
    # Every validation point of the last 80 steps below the highest 100-step median of the last 300.
    assert fall.signal.reduction == "max" and fall.signal.window == Steps(80)
    assert fall.baseline.window == Steps(100) and fall.baseline.over == Steps(300)
    assert (fall.fraction, fall.at_least, fall.beyond_noise) == (0.25, 0.1, 0.0)
    # Or the same fall by the fraction alone, to below 0.01: a score near 0 has no 0.1 to lose (issue 52).
    assert (fall_to_near_zero.signal, fall_to_near_zero.baseline) == (fall.signal, fall.baseline)
    assert (fall_to_near_zero.fraction, fall_to_near_zero.at_least) == (0.25, 0.0)
    assert near_zero.signal == fall.signal and (near_zero.op, near_zero.value) == ("<", 0.01)
    assert rise.signal.ref == "critic/score/mean" and rise.op == ">" and not rise.negated
    # The reward against its median from before the validation window: both over the same span.
    assert rise.signal.window == Steps(20) and rise.baseline.window == Steps(50) and rise.baseline.ending == Steps(80)
    assert (rise.fraction, rise.beyond_noise) == (0.05, 3.0)
    (sustain,) = comparisons(hacking.keep_firing_while)
    assert sustain.signal == fall.signal and sustain.baseline == fall.baseline
    assert (sustain.fraction, sustain.at_least) == (0.125, 0.05)
    assert hacking.severity.value == "warning" and hacking.for_ == "0s"


def test_a_team_tunes_reward_hacking_in_its_validation_section():
    config = config_from({"validation": {"hacking_validation_steps": 40, "hacking_validation_level_median_steps": 50,
                                         "hacking_validation_level_steps": 200, "hacking_validation_fall_fraction": 0.5,
                                         "hacking_reward_noise_z": 5, "hacking_validation_near_zero": 0.02}})
    hacking = _alert(validation, config, "VerlRewardHacking")
    fall, fall_to_near_zero, near_zero, rise = comparisons(hacking.condition)
    assert fall.signal.window == Steps(40) and fall.baseline.window == Steps(50) and fall.baseline.over == Steps(200)
    assert fall.fraction == fall_to_near_zero.fraction == 0.5 and near_zero.value == 0.02
    assert rise.beyond_noise == 5.0 and rise.baseline.ending == Steps(40)
    assert ("more than 50% (and at least 0.1, or to below 0.02) below its highest median of 50 steps within the last "
            "200 steps") in hacking.description


def test_truncation_warns_on_a_rise_from_the_runs_level_and_reports_a_high_share_as_an_info():
    config = config_from({})
    warning = _alert(rollout, config, "VerlResponseTruncation")
    assert isinstance(warning.condition, Shift) and warning.condition.op == ">"
    assert warning.condition.signal.window == Steps(5)
    assert warning.condition.baseline.window == Steps(20) and warning.condition.baseline.over == Steps(1000)
    assert (warning.condition.fraction, warning.condition.at_least, warning.condition.beyond_noise) == (1.0, 0.03, 5.0)
    info = _alert(rollout, config, "VerlResponseTruncationHigh")
    assert info.severity.value == "info" and info.condition.baseline is None and info.condition.value == 0.1
    assert info.keep_firing_while.value == 0.05  # reported once while the share wavers around 10%


def test_a_team_tunes_truncation_in_its_rollout_section():
    config = config_from({"rollout": {"truncation_rise_factor": 3, "truncation_rise_floor": 0.1,
                                      "truncation_level_steps": 200, "truncation_threshold": 0.4}})
    warning = _alert(rollout, config, "VerlResponseTruncation")
    assert (warning.condition.fraction, warning.condition.at_least) == (2.0, 0.1)
    assert warning.condition.baseline.over == Steps(200)
    assert _alert(rollout, config, "VerlResponseTruncationHigh").condition.value == 0.4


@pytest.mark.parametrize("area, field, value, expected", [
    ("validation", "hacking_validation_fall_fraction", 1.5, "must be at most 1"),
    ("validation", "hacking_validation_steps", 0, "validation.hacking_validation_steps"),
    ("validation", "hacking_reward_noise_z", -1, "validation.hacking_reward_noise_z"),
    ("validation", "hacking_for", "soon", "is not a Prometheus duration"),
    ("rollout", "truncation_rise_floor", 2, "must be at most 1"),
    ("rollout", "truncation_steps", 2.5, "rollout.truncation_steps"),
])
def test_an_out_of_range_tunable_is_refused_naming_its_field(area, field, value, expected):
    section = {"validation": validation.ValidationConfig, "rollout": rollout.RolloutConfig}[area]
    with pytest.raises(ConfigError, match=expected):  # checked where the area's module reads its section
        config_from({area: {field: value}}).area(section)
