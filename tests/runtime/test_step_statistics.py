"""Statistics over a run's last logged steps, as the exporter and the backfill compute them."""

import random
from pathlib import Path
from statistics import median as statistics_median

import pytest
import yaml

from prometheus_client import CollectorRegistry, generate_latest

from dashgen.errors import BuildError
from dashgen.runtime.exporter import RunState
from dashgen.promtool import run_promtool
from dashgen.sources.statistics_file import dump_statistics, load_statistics
from dashgen.sources.step_reductions import quantile, step_to_step_spread
from dashgen.sources.step_statistics import ServedStatistics, StepStatistic, StepStatistics, parse_name, statistics_in

from conftest import REPO

KL = "verl_actor_kl_loss"


def fed(wanted: list[StepStatistic], lines: list[tuple[int, dict]]) -> dict[str, float]:
    statistics = StepStatistics(wanted)
    for step, logged in lines:
        statistics.observe(step, logged)
    return {stat.name: value for (stat, _), value in statistics.values().items()}


def test_a_window_counts_steps_not_lines_and_a_missing_key_is_no_value():
    median = StepStatistic(KL, "median", 3)
    lines = [(1, {KL: 1.0}), (2, {KL: 100.0}), (3, {}), (4, {KL: 9.0}), (5, {KL: 10.0})]
    # Steps 3..5 hold two values (step 3 logged no KL, which is no 0): the window reads back to a third.
    assert fed([median], lines) == {"median_3steps": 10.0}
    assert fed([median], lines[:3] + [(6, {})]) == {}  # nothing logged within the last 3 steps


def test_a_window_of_a_run_that_logs_rarely_reads_back_to_enough_values():
    """Logged every 20 steps (TRL's logging_steps): 30 steps hold 1 or 2 values, too few for a
    median; the window reads back to the last 10 (min(30, MIN_WINDOW_VALUES)), never to fewer."""
    median = StepStatistic(KL, "median", 30)
    lines = [(step, {KL: float(step)}) for step in range(20, 301, 20)]
    assert fed([median], lines) == {"median_30steps": 210.0}  # steps 120..300, not 280 and 300 alone
    assert fed([median], lines[:2]) == {"median_30steps": 30.0}  # what there is: steps 20 and 40
    assert fed([median], lines + [(240, {})]) == {}  # no value within its own 30 steps: none
    # A baseline that exists once half its window is logged waits for half the values it is to hold.
    young = StepStatistic(KL, "median", 30, half_logged=True)
    assert fed([young], lines[:4]) == {}  # steps 20..80: past half of 30 steps, but 4 values of 10
    assert fed([young], lines[:5]) == {"median_30steps_half_logged": 60.0}
    # A run that logs every step is read over its 30 steps exactly.
    every_step = [(step, {KL: float(step)}) for step in range(1, 101)]
    assert fed([median], every_step) == {"median_30steps": 85.5}


def test_a_baseline_exists_once_half_its_window_is_logged():
    baseline = StepStatistic(KL, "median", 10, ending=4, half_logged=True)
    lines = [(step, {KL: float(step)}) for step in range(1, 9)]
    assert fed([baseline], lines) == {}  # window ends at step 4: it needs a value from step -1 or before
    lines += [(step, {KL: float(step)}) for step in range(9, 16)]
    assert fed([baseline], lines) == {"median_10steps_ending4_half_logged": 6.5}  # steps 2..11


def test_a_condition_held_over_steps_exists_once_every_step_of_its_window_is_logged():
    """for_=steps(5) on a logged series: the lowest of its last 5 values, never of a young run's first few."""
    held = StepStatistic(KL, "min", 5, fully_logged=True)
    lines = [(step, {KL: float(10 - step)}) for step in range(1, 5)]
    assert fed([held], lines) == {}  # steps 1..4: four of the five
    assert fed([held], lines + [(5, {KL: 5.0})]) == {"min_5steps_fully_logged": 5.0}
    assert fed([held], lines + [(5, {})]) == {}  # step 5 logged no value: four values of five
    assert fed([held], lines + [(5, {KL: 7.0}), (6, {KL: 8.0})]) == {"min_5steps_fully_logged": 6.0}  # steps 2..6
    with pytest.raises(ValueError, match="half_logged or fully_logged, not both"):
        StepStatistic(KL, "min", 5, half_logged=True, fully_logged=True)


def test_the_peak_of_a_median_reads_the_median_at_each_step():
    peak = StepStatistic(KL, "max", 5, of_median=3)
    values = [1.0, 1.0, 100.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # one spike: no median of 3 steps reaches it
    lines = [(step, {KL: value}) for step, value in enumerate(values, start=1)]
    assert fed([peak], lines) == {"max_5steps_of_median_3steps": 1.0}
    assert fed([StepStatistic(KL, "max", 5)], lines) == {"max_5steps": 1.0}  # the spike is 6 steps old
    assert fed([StepStatistic(KL, "max", 6)], lines) == {"max_6steps": 100.0}


def test_the_peak_of_a_median_is_never_a_runs_first_value_alone():
    """A run logged every 5th step: its first 5-step median would be its first value alone (a
    window at a run's start has nothing to read back to), and a peak of 490 tokens from one line
    made 144 tokens at step 47 a collapse to under 0.3 of it."""
    peak = StepStatistic(KL, "max", 60, of_median=5)
    lines = [(2, {KL: 490.0}), (7, {KL: 200.0}), (12, {KL: 150.0}), (17, {KL: 160.0})]
    assert fed([peak], lines) == {"max_60steps_of_median_5steps": 345.0}  # median of 490 and 200
    assert fed([peak], lines[:1]) == {}
    every_step = [(step, {KL: 490.0 if step == 1 else 150.0}) for step in range(1, 9)]
    assert fed([peak], every_step) == {"max_60steps_of_median_5steps": 150.0}  # from step 3: 490, 150, 150


def test_no_window_or_ending_is_shorter_than_the_floor_of_the_logs_own_clock():
    """At 2 s a step, 30 steps pass between two evaluations: a peak ending 10 steps ago would
    already hold a fault the evaluation before did not see."""
    peak = StepStatistic(KL, "max", 20, ending=10)
    statistics = StepStatistics([peak, StepStatistic(KL, "median", 3)], floor_seconds=60.0)
    for step in range(1, 101):
        statistics.observe(step, {KL: 1.0 if step <= 70 else 50.0}, 2.0)
    values = {stat.name: value for (stat, _), value in statistics.values().items()}
    # Ending 30 steps back (60 s), the peak holds steps up to 70 only; the median reads the last 60 s.
    assert values == {"max_20steps_ending10": 1.0, "median_3steps": 50.0}
    statistics.observe(101, {KL: 50.0}, 2.0)  # step 71 is now 60 s old: the ending moves with the clock
    assert statistics.values()[(peak, ())] == 50.0
    untimed = StepStatistics([peak], floor_seconds=60.0)  # 60 s a step without timing_s/step: steps rule
    for step in range(1, 101):
        untimed.observe(step, {KL: 1.0 if step <= 90 else 50.0})
    assert untimed.values()[(peak, ())] == 1.0


@pytest.mark.parametrize("huge", [1e303, 1e200, 2 * 86_400.0])
def test_an_implausible_step_time_is_no_reading_of_the_clock(huge):
    """Issue 38: a timing_s/step of 1e303 ended the exporter (OverflowError); one of 1e200 moved the
    clock so far that the floor of every window held no step before it. Either counts as untimed."""
    median = StepStatistic(KL, "median", 3)
    statistics = StepStatistics([median], floor_seconds=60.0, untimed_step_seconds=2.0)
    for step in range(1, 101):
        statistics.observe(step, {KL: 1.0 if step <= 90 else 50.0}, huge if step == 95 else 2.0)
    assert statistics.values() == {(median, ()): 1.0}  # the last 60 s: steps 71..100, 20 of them at 1.0


def test_a_restart_starts_the_windows_again_and_nan_is_no_value():
    median = StepStatistic(KL, "median", 10)
    lines = [(1, {KL: 5.0}), (2, {KL: 5.0}), (3, {KL: float("nan")}), (2, {KL: 1.0})]
    assert fed([median], lines) == {"median_10steps": 1.0}
    assert fed([median], lines[:3]) == {"median_10steps": 5.0}


def test_names_read_back_and_the_rendered_list_round_trips(tmp_path: Path):
    wanted = [StepStatistic(KL, "min", 200, ending=10, of_median=10), StepStatistic(KL, "median", 100, 30, 0, True),
              StepStatistic(KL, "max", 5, fully_logged=True)]
    for stat in wanted:
        assert parse_name(stat.series, stat.name) == stat
    path = tmp_path / "step-statistics.yaml"
    path.write_text(dump_statistics(ServedStatistics(tuple(wanted), 60.0)))
    assert load_statistics(path) == ServedStatistics(tuple(wanted), 60.0)
    assert statistics_in([f'max without(series, statistic) (verl_step_statistic{{job="verl", series="{KL}", '
                          f'statistic="{wanted[0].name}"}})']) == {wanted[0]}


def test_the_rendered_list_is_the_one_the_rules_read():
    rules = "\n".join(path.read_text() for path in sorted((REPO / "rendered" / "rules").glob("*.yaml")))
    listed = set(load_statistics(REPO / "rendered" / "exporter" / "step-statistics.yaml").statistics)
    assert listed and statistics_in([rules]) == listed


@pytest.mark.parametrize("content, problem", [
    ("statistics: [{series: x, reduction: mean, steps: 3}]", "entry 1: .*reduction 'mean'"),
    ("statistics: [{series: x, reduction: max}]", "entry 1: expected series, reduction, steps"),
    ("statistics: [{series: x, reduction: max, steps: 0}]", "entry 1: .*steps must be from 1 to 10,000"),
    ("statistics: [{series: x, reduction: max, steps: 3, ending: 1000000000}]", "entry 1: .*from 0 to 10,000"),
    ("statistics: [{series: x, reduction: max, steps: true}]", "entry 1: .*steps True is not a whole number"),
    ("statistics: [" + ", ".join(["{series: x, reduction: max, steps: 3}"] * 1001) + "]", "1,001 statistics; at most"),
    ("[1, 2]", "expected a mapping with a list under 'statistics'"),
    # A name of the wrong type: a TypeError traceback in the exporter and the backfill before.
    ("statistics: [{series: [x], reduction: max, steps: 3}]", r"entry 1: series \['x'\]: expected a series' name, not a list"),
    ("statistics: [{series: {a: 1}, reduction: max, steps: 3}]", "entry 1: series .*: expected a series' name, not a mapping"),
    ("statistics: [{series: 7, reduction: max, steps: 3}]", "entry 1: series 7: expected a series' name, not a number"),
    ("statistics: [{series: x, reduction: [max], steps: 3}]", r"entry 1: .*reduction \['max'\]: expected a name"),
    ("statistics: [{series: x, reduction: 50, steps: 3}]", "entry 1: .*reduction 50: expected a name"),
    ("statistics: [{series: x, reduction: max, steps: 3, half_logged: 'no'}]",
     "entry 1: .*half_logged 'no': expected true or false, not a text"),
    # Refused before it is parsed (70,000 entries took 12 s and 400 MiB to count).
    ("statistics: [" + ", ".join(["{series: x, reduction: max, steps: 3}"] * 70_000) + "]",
     "the step statistics list is larger than 1,024,000 bytes"),
    ("statistics: " + "[" * 100_000 + "]" * 100_000, "cannot read the step statistics: nested deeper than the parser"),
    ("statistics: [{series: x, reduction: max, steps: " + "9" * 5000 + "}]",
     "cannot read the step statistics: holds an integer of more than 4,300 digits"),
])
def test_a_malformed_list_is_refused_naming_the_file_and_entry(tmp_path: Path, content: str, problem: str):
    path = tmp_path / "step-statistics.yaml"
    path.write_text(content)
    with pytest.raises(BuildError, match=f"{path}: (statistics )?{problem}"):
        load_statistics(path)


def test_the_exporter_serves_each_statistic_as_a_series_of_the_run():
    state = RunState("p", "e", step_statistics=ServedStatistics((StepStatistic(KL, "median", 3),)))
    for step, kl in ((1, 0.1), (2, 0.3), (3, 0.2)):
        state.record(step, {"actor/kl_loss": kl})
    state.record(4, {"val-core/openai/gsm8k/reward/mean@1": 0.5})  # a validation line moves the step only
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for family in state.collect() for s in family.samples
               if s.name == "verl_step_statistic"}
    assert samples == {("verl_step_statistic", (("experiment", "e"), ("project", "p"), ("series", KL),
                                                ("statistic", "median_3steps"))): 0.2}  # steps 1..3: 2..4 hold 2 values


def test_a_share_that_takes_few_values_has_a_noise_even_when_most_neighbours_are_equal():
    # The truncation share of two completions a step (a tune run of the corpus): 0 on most steps,
    # 0.5 now and then. Two of every five neighbours differ, so the median difference is 0.
    share = [0.0, 0.0, 0.5, 0.0, 0.0] * 4
    assert step_to_step_spread(share) == pytest.approx(0.5 * 8 / 19)
    # A signal whose values all differ keeps the median: one outlier moves it little.
    assert step_to_step_spread([1.0, 1.1] * 6 + [9.0] + [1.1, 1.0] * 6) == pytest.approx(0.1)
    assert step_to_step_spread([0.3] * 10) == 0


def test_the_noise_of_a_steady_rise_is_its_noise_in_a_log_of_every_step_and_of_every_5th():
    # A share rising 0.01 a step with noise of standard deviation 0.01. Each difference holds one
    # step of the rise in a log of every step and five (0.05) in a log of every 5th: the rise itself
    # would be read as noise (issue 35) if the differences' median were not taken out.
    noise = random.Random(35)
    rise = [0.01 * step + noise.gauss(0, 0.01) for step in range(400)]
    assert step_to_step_spread(rise) == pytest.approx(0.0095, rel=0.2)
    assert step_to_step_spread(rise[::5]) == pytest.approx(0.0095, rel=0.2)


def test_a_drift_is_taken_out_only_where_the_differences_and_the_levels_both_show_it():
    # A reward alternating between -0.1 and 0.1, rising 0.0005 a step: the median difference falls
    # on one of its two jumps (0.2 or -0.2), which, taken out, would leave a noise of 0 or 0.4.
    alternating = [(0.1 if step % 2 else -0.1) + 0.0005 * step for step in range(62)]
    assert step_to_step_spread(alternating) == pytest.approx(0.2, rel=0.05)
    # A share of few values that steps up once: its later half's median is a whole level above its
    # earlier half's, but its median difference is 0, so no drift: the mean difference.
    stepped = [0.0] * 10 + [0.5] * 10
    assert step_to_step_spread(stepped) == pytest.approx(0.5 / 19)


# Ten logged values of a score std (0: every group's rewards equal): one step with a spread, then two.
ONE_SPREAD = [0.0] * 9 + [10.25]
TWO_SPREADS = [0.0] * 8 + [4.0, 10.25]


def test_a_quantile_of_ten_values_is_0_where_nine_are_and_interpolates_between_ranks():
    lines = [(step, {KL: value}) for step, value in enumerate(ONE_SPREAD, start=1)]
    p80 = StepStatistic(KL, "p80", 10, half_logged=True)
    assert p80.name == "p80_10steps_half_logged" and parse_name(KL, p80.name) == p80
    assert fed([p80], lines) == {"p80_10steps_half_logged": 0.0}
    assert fed([p80], lines[:4]) == {}  # 4 values: not half of the 10 the window is to hold
    # Two of ten: rank 0.8 * 9 = 7.2, a fifth of the way from the 8th value (0) to the 9th (4).
    two = [(step, {KL: value}) for step, value in enumerate(TWO_SPREADS, start=1)]
    assert fed([p80], two) == {"p80_10steps_half_logged": pytest.approx(0.8)}
    assert quantile([3.0, 1.0, 2.0], 0.5) == statistics_median([3.0, 1.0, 2.0])


@pytest.mark.parametrize("reduction", ["p0", "p100", "p05", "q80", "p8.5", 80])
def test_a_quantile_outside_whole_percents_1_to_99_is_refused(reduction):
    with pytest.raises(ValueError, match="p1 to p99"):
        StepStatistic(KL, reduction, 10)


@pytest.mark.heavy
def test_the_exporters_quantile_is_prometheus_quantile_over_time(tmp_path: Path):
    """The same values, one a minute, read by quantile_over_time in promtool: a step window in
    PromQL (a series the exporter does not compute) and the exporter's statistic agree."""
    cases = [(values, fraction) for values in (ONE_SPREAD, TWO_SPREADS, [5.0, -7.5, 13.0, -7.5, 2.75, -2.375])
             for fraction in (0.2, 0.5, 0.8, 0.95)]
    tests = []
    for index, (values, fraction) in enumerate(cases):
        series = f'v{{case="{index}"}}'
        tests.append({"interval": "1m",
                      "input_series": [{"series": series, "values": " ".join(f"{v:g}" for v in values)}],
                      "promql_expr_test": [{"expr": f"quantile_over_time({fraction}, {series}[{len(values)}m])",
                                            "eval_time": f"{len(values) - 1}m",
                                            "exp_samples": [{"labels": f'{{case="{index}"}}',
                                                             "value": quantile(values, fraction)}]}]})
    fixture = tmp_path / "quantile-test.yaml"
    fixture.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": tests}))
    result = run_promtool(["test", "rules", str(fixture)])
    assert result.returncode == 0, result.stdout + result.stderr


GSM8K, MATH = "val-core/openai/gsm8k/reward/mean@1", "val-core/math/acc/mean@1"


def test_a_family_members_statistics_weigh_each_validation_result_by_the_steps_it_held():
    """The exporter holds a test step's results until the next: at steps 1..4 gsm8k reads 0.5 0.5
    0.1 0.1 and math 0.2 0.2 0.4 0.4, whether or not a step logs them; a scrape serves each member's
    statistics with its labels."""
    peak, median = StepStatistic("verl_val_core", "max", 3), StepStatistic("verl_val_core", "median", 3)
    state = RunState("p", "e", step_statistics=ServedStatistics((peak, median)))
    state.record(1, {"actor/kl_loss": 0.1, GSM8K: 0.5, MATH: 0.2})
    state.record(2, {"actor/kl_loss": 0.1})
    state.record(3, {"actor/kl_loss": 0.1, GSM8K: 0.1, MATH: 0.4})
    state.record(4, {"actor/kl_loss": 0.1})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    served = {line.split(" ")[0]: float(line.split(" ")[1]) for line in generate_latest(registry).decode().splitlines()
              if line.startswith("verl_step_statistic{")}

    def selector(source: str, variable: str, statistic: str) -> str:
        labels = {"data_source": source, "experiment": "e", "metric": "mean@1", "project": "p",
                  "series": "verl_val_core", "statistic": statistic, "variable": variable}
        return "verl_step_statistic{" + ",".join(f'{name}="{value}"' for name, value in labels.items()) + "}"

    assert served == {  # the window of steps 2..4
        selector("openai/gsm8k", "reward", "max_3steps"): 0.5, selector("openai/gsm8k", "reward", "median_3steps"): 0.1,
        selector("math", "acc", "max_3steps"): 0.4, selector("math", "acc", "median_3steps"): 0.4}
    state.record(5, {"actor/kl_loss": 0.1, MATH: 0.0})  # a test step without gsm8k: its result is gone
    state.record(6, {"actor/kl_loss": 0.1})
    state.record(7, {"actor/kl_loss": 0.1})
    values = {(stat.name, dict(member)["data_source"]): value for (stat, member), value in state._statistics.values().items()}
    assert values == {("max_3steps", "math"): 0.0, ("median_3steps", "math"): 0.0}
