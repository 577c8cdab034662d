"""Signal.quantile_over: a quantile of a window in whole percents, compiled to PromQL's
quantile_over_time over a duration and to the exporter's statistic over logged steps."""

import pytest

from dashgen.catalog import CATALOG
from dashgen.compiler.rules.condition_compiler import ConditionCompiler
from dashgen.compiler.rules.rule_files import baseline_defaults
from dashgen.condition_checks import condition_problem
from dashgen.conditions import Signal, steps
from dashgen.config import Config


@pytest.mark.parametrize("fraction", [0, 1, 0.805, -0.5, 1.5, True, "0.8", float("nan"), float("inf")])
def test_a_quantile_outside_whole_percents_is_refused_naming_the_call(fraction):
    with pytest.raises(ValueError, match=r"quantile_over\(.*whole percents"):
        Signal("critic/score/std").quantile_over(fraction, steps(10))


def _compiled(signal: Signal) -> tuple[str, ConditionCompiler]:
    compiler = ConditionCompiler(CATALOG, baseline_defaults(Config()), exporter_statistics=True)
    expr, _ = compiler.signal(signal, "TeamAlert")
    return expr, compiler


def test_a_quantile_over_a_duration_is_quantile_over_time():
    signal = Signal("critic/score/std").quantile_over(0.8, "10m")
    assert condition_problem(signal.below(1e-9)) is None
    assert signal.describe() == "the 0.8 quantile of critic/score/std over 10m"
    assert _compiled(signal)[0] == 'quantile_over_time(0.8, verl_critic_score_std{verl}[10m])'


def test_a_quantile_over_logged_steps_is_the_exporters_statistic():
    expr, compiler = _compiled(Signal("critic/score/std").quantile_over(0.8, steps(10)).after_half_window())
    assert expr == "verl:critic_score_std:p80_10steps_half_logged"
    assert [stat.name for stat in compiler.step_statistics] == ["p80_10steps_half_logged"]
    recorded = {recording.record: recording.expr for recording in compiler.recordings.rolling}
    assert 'statistic="p80_10steps_half_logged"' in recorded[expr]
