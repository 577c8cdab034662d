"""The step clock (dashgen/replay/backtest/step_clock.py) against the calendar: which rules may go on
it, and the same alerts, at the same steps, as every rule evaluated at every interval of the span."""

import json

import pytest

from dashgen.compiler.rules.rule_files import compile_rules
from dashgen.config import Config
from dashgen.evaluation.synthetic_runs import write_run
from dashgen.project_metrics import project_catalog
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import RuleSet, backtest_rule_sets
from dashgen.replay.backtest.recordings import constant
from dashgen.replay.backtest.step_clock import per_step
from conftest import REPO

STEP_STATISTIC = 'verl_step_statistic{job="verl", series="verl_actor_entropy", statistic="median_5steps"}'


def test_only_rules_of_the_newest_step_alone_go_on_the_clock():
    for expr in (f"max without(series, statistic) ({STEP_STATISTIC})", "a > on(job, instance) group_left() b",
                 "a and ignoring(series) b", "(a > 0.1) or (b < 2)", "max by (instance, job) (a)", "-a * 3"):
        assert per_step(expr), expr
    for expr in ("max(a)", "a > on(series) b", "a and ignoring(instance) b", "a offset 5m", "max_over_time(a[5m])",
                 "time() - a", "timestamp(a)", "max_over_time((a > 1)[10m:1m])", "a @ 100", "vector(1)",
                 "scalar(a) * b", "absent(a)", 'label_replace(a, "instance", "x", "", "")', "hour(a) > 3"):
        assert not per_step(expr), expr
    assert constant('label_replace(vector(1), "series", "x", "", "")') and not constant("vector(time())")
    assert not constant("a")


def _intervals(outcomes):
    return {outcome.run.name: sorted([alert.alertname, alert.severity, sorted(alert.labels.items()), firing.start_step,
                                      firing.end_step] for alert in outcome.alerts for firing in alert.firing)
            for outcome in outcomes}


def _slower(path, seconds, every=1):
    """The run's lines at `seconds` a step, keeping every `every`th."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({"step": line["step"], "data": {**line["data"], "timing_s/step": seconds}}) + "\n"
                            for line in lines if line["step"] % every == 0))
    return path


@pytest.mark.live
@pytest.mark.heavy
def test_the_clock_reports_what_the_calendar_reports(tmp_path):
    runs = {write_run(tmp_path / "a" / "diverging.jsonl", "diverging", 300, event_at=200): Timing(start=1.7e9),
            _slower(write_run(tmp_path / "a" / "cliff-slow.jsonl", "reward_cliff", 200, event_at=120), 750.0):
                Timing(start=1.7e9, end="crashed"),
            _slower(write_run(tmp_path / "a" / "truncation-every-5.jsonl", "truncation", 400, event_at=250), 90.0, 5):
                Timing(start=1.7e9),
            write_run(tmp_path / "a" / "stalled.jsonl", "stalled", 200, event_at=150):
                Timing(start=1.7e9, end="hung", hold_seconds=7200.0)}
    corpus = REPO / "bench" / "realruns" / "cs336-dequeueing-qwen25math-15b-grpo-clip-e1-200" / "steps.jsonl"
    runs[corpus] = Timing(start=1.7e9, default_step_seconds=300.0)  # validation keys that fade between tests
    catalog, config = project_catalog(REPO), Config()
    compiled = compile_rules(REPO, config, catalog)
    rule_set = RuleSet(compiled.recording_rules, compiled.alert_rules, compiled.step_statistics)
    paths = list(runs)
    [clock] = backtest_rule_sets(paths, [rule_set], catalog, config, Timing(), timings=runs)
    [calendar] = backtest_rule_sets(paths, [rule_set], catalog, config, Timing(), timings=runs, _calendar=True)
    assert _intervals(clock) == _intervals(calendar)
    assert sum(map(len, _intervals(clock).values())) >= 4  # the faults fired
