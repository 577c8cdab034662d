"""`dashgen test` gives hand-written fixtures the exporter's statistics over steps of the series they log."""

from pathlib import Path

import pytest
import yaml

from dashgen.compiler.rule_tests.fixture_statistics import expand_values, statistics_per_sample, with_statistics
from dashgen.errors import BuildError
from dashgen.sources.step_statistics import ServedStatistics, StepStatistic

ENTROPY = "verl_actor_entropy"
MEDIAN = StepStatistic(ENTROPY, "median", 3)
SERVED = ServedStatistics((MEDIAN,), 0.0)
RUN = 'job="verl",instance="t:9464",project="p",experiment="e"'


def test_promtools_expanding_notation_reads_back():
    assert expand_values("1+1x3 _ 0.5x2 _x2 stale -2-2x1 NaN", "f") == [
        1.0, 2.0, 3.0, 4.0, None, 0.5, 0.5, 0.5, None, None, None, -2.0, -4.0, pytest.approx(float("nan"), nan_ok=True)]
    with pytest.raises(BuildError, match="f: cannot read the value 'oops'"):
        expand_values("1 oops", "f")


def test_steps_between_two_samples_carry_the_value_before():
    # Two samples, 10 steps apart: steps 2..10 were logged while the series read 1, step 11 reads 9.
    per_sample = statistics_per_sample([1.0, 9.0], [1, 11], SERVED, ENTROPY, 60.0)
    assert per_sample[MEDIAN] == [1.0, 1.0]
    per_sample = statistics_per_sample([1.0, 9.0, 9.0, 9.0], [1, 2, 3, 4], SERVED, ENTROPY, 60.0)
    assert per_sample[MEDIAN] == [1.0, 5.0, 9.0, 9.0]


def _fixture(tmp_path: Path, series: list[dict]) -> Path:
    path = tmp_path / "tests" / "rules" / "stability-test.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"rule_files": ["../../rendered/rules/stability.yaml"], "evaluation_interval": "1m",
                                    "tests": [{"interval": "1m", "input_series": series}]}))
    return path


def test_a_fixture_gets_the_statistics_of_the_series_it_logs(tmp_path: Path):
    path = _fixture(tmp_path, [{"series": f"{ENTROPY}{{{RUN}}}", "values": "1 1 9 9"},
                               {"series": f"verl_training_global_step{{{RUN}}}", "values": "1+1x3"}])
    content = with_statistics(path, SERVED, "1m")
    assert content["rule_files"] == [str((tmp_path / "rendered" / "rules" / "stability.yaml").resolve())]
    added = content["tests"][0]["input_series"][2]
    assert added == {"series": 'verl_step_statistic{job="verl", instance="t:9464", project="p", experiment="e", '
                               'series="verl_actor_entropy", statistic="median_3steps"}', "values": "1.0 1.0 1.0 9.0"}


def test_a_fixture_that_gives_the_statistics_itself_is_left_alone(tmp_path: Path):
    given = {"series": f'verl_step_statistic{{{RUN},series="{ENTROPY}",statistic="median_3steps"}}', "values": "5x3"}
    path = _fixture(tmp_path, [{"series": f"{ENTROPY}{{{RUN}}}", "values": "1 1 9 9"}, given])
    assert with_statistics(path, SERVED, "1m") is None


def test_a_family_members_statistics_carry_its_labels(tmp_path: Path):
    """Each validation series (a member of the family verl_val_core) gets its own statistics,
    selected with its data_source, variable and metric, as the exporter serves them."""
    peak = StepStatistic("verl_val_core", "max", 2)
    members = {"openai/gsm8k": "0.5 0.1 0.1 0.1", "math": "0.2 0.2 0.4 0.4"}
    path = _fixture(tmp_path, [{"series": f'verl_val_core{{{RUN},data_source="{source}",variable="reward",'
                                          f'metric="mean@1"}}', "values": values}
                               for source, values in members.items()])
    added = with_statistics(path, ServedStatistics((peak,), 0.0), "1m")["tests"][0]["input_series"][2:]
    assert added == [
        {"series": f'verl_step_statistic{{{RUN.replace(",", ", ")}, data_source="{source}", variable="reward", '
                   f'metric="mean@1", series="verl_val_core", statistic="max_2steps"}}', "values": values}
        for source, values in (("openai/gsm8k", "0.5 0.5 0.1 0.1"), ("math", "0.2 0.2 0.4 0.4"))]
