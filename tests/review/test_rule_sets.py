"""Two rule sets in one backtest pass: what is the same is evaluated once, what differs side by side."""

import pytest

from dashgen.compiler.compiled import AlertRule, RecordingRule
from dashgen.errors import BuildError
from dashgen.replay.backtest.rule_sets import RuleSet, merge, renamed

BASELINE = RecordingRule("verl:reward:baseline", "min_over_time(verl_reward[1h])", 60_000)
MEDIAN = RecordingRule("verl:reward:median", "quantile_over_time(0.5, verl_reward[10m])", 60_000)


def cliff(expr: str) -> AlertRule:
    return AlertRule("Cliff", expr, 60_000, 60_000, (("severity", "critical"),))


STAGNATION = AlertRule("Stagnation", "verl:reward:median < 0.1", 60_000, 0, (("severity", "info"),))


def test_identical_sets_share_every_rule():
    rules = RuleSet([BASELINE, MEDIAN], [cliff("verl:reward:median < 0.5 * verl:reward:baseline"), STAGNATION])
    merged = merge([rules, RuleSet(list(rules.recordings), list(rules.alerts))])
    assert merged.recordings == [BASELINE, MEDIAN]
    assert merged.alerts_of == [[0, 1], [0, 1]]


def test_a_changed_recording_is_renamed_with_every_rule_that_reads_it():
    before = RuleSet([BASELINE, MEDIAN], [cliff("verl:reward:median < 0.5 * verl:reward:baseline"), STAGNATION])
    changed_baseline = RecordingRule(BASELINE.record, "min_over_time(verl_reward[2h])", 60_000)
    after = RuleSet([changed_baseline, MEDIAN], list(before.alerts))
    merged = merge([before, after])
    assert merged.recordings == [BASELINE, MEDIAN, RecordingRule("verl:reward:baseline:set2",
                                                                 "min_over_time(verl_reward[2h])", 60_000)]
    assert merged.alerts[merged.alerts_of[1][0]].expr == "verl:reward:median < 0.5 * verl:reward:baseline:set2"
    assert merged.alerts_of[1][1] == merged.alerts_of[0][1]  # Stagnation reads only the unchanged median


def test_a_changed_alert_is_evaluated_beside_the_old_one():
    merged = merge([RuleSet([MEDIAN], [cliff("verl:reward:median < 0.5")]),
                    RuleSet([MEDIAN], [cliff("verl:reward:median < 0.95")])])
    assert [alert.expr for alert in merged.alerts] == ["verl:reward:median < 0.5", "verl:reward:median < 0.95"]
    assert merged.alerts_of == [[0], [1]]


def test_a_rename_leaves_string_literals_and_longer_names_alone():
    expr = 'verl:a + verl:a_x + on() label_replace(verl:a, "x", "verl:a", "", "")'
    assert renamed(expr, {"verl:a": "verl:a:set2"}) == (
        'verl:a:set2 + verl:a_x + on() label_replace(verl:a:set2, "x", "verl:a", "", "")')


def test_a_renamed_name_that_is_already_taken_is_refused():
    taken = RecordingRule("verl:reward:median:set2", "verl_reward", 60_000)
    with pytest.raises(BuildError, match="already named verl:reward:median:set2"):
        merge([RuleSet([MEDIAN, taken], []),
               RuleSet([RecordingRule(MEDIAN.record, "verl_reward * 2", 60_000)], [])])
