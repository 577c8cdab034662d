"""verl's validation results (val-core/..., val-aux/..., test steps only) keep their structure as
labels and are held between test steps, by the exporter and by backfill alike."""

import math
from pathlib import Path

from dashgen.evaluation.synthetic_runs import DATA_SOURCE, TEST_FREQ, step_data, write_run

from conftest import run
from dashgen.replay.backtest import serve_tsdb
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower
from dashgen.formats.verl_log import MAX_VALIDATION_SERIES, StepMapper, validation_series

START = 1_700_000_000


def served(state: RunState) -> dict[tuple, float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in state.collect() for sample in family.samples}


def validation_values(state: RunState) -> dict[tuple, float]:
    return {key: value for key, value in served(state).items() if key[0].startswith("verl_val_")}


def test_keys_split_into_data_source_variable_and_metric():
    assert validation_series("val-core/openai/gsm8k/reward/mean@16") == (
        "verl_val_core", "openai/gsm8k", "reward", "mean@16")
    assert validation_series("val-aux/gsm8k/acc/maj@8/std") == ("verl_val_aux", "gsm8k", "acc", "maj@8/std")
    assert validation_series("val-aux/num_turns/max") == ("verl_val_aux", "", "num_turns", "max")
    assert validation_series("actor/ppo_kl") is None and validation_series("val-core/") is None
    # verl before 0.3 logged one mean score per data source.
    assert validation_series("val/test_score/openai/gsm8k") == ("verl_val_core", "openai/gsm8k", "reward", "mean")
    assert validation_series("val/test_score/") is None and validation_series("val/other") is None


def test_an_old_verl_validation_key_is_held_as_the_core_result():
    state = RunState("gsm8k", "ppo")
    state.record(5, {"actor/ppo_kl": 0.1, "val/test_score/openai/gsm8k": 0.41})
    state.record(6, {"actor/ppo_kl": 0.1})
    core = ("verl_val_core", (("data_source", "openai/gsm8k"), ("experiment", "ppo"), ("metric", "mean"),
                              ("project", "gsm8k"), ("variable", "reward")))
    assert validation_values(state) == {core: 0.41}


def test_exporter_holds_the_last_test_step_until_the_next_or_a_restart():
    state = RunState("gsm8k", "ppo")
    state.record(5, {"actor/ppo_kl": 0.1, "val-core/openai/gsm8k/reward/mean@4": 0.5,
                     "val-aux/openai/gsm8k/reward/std@4": 0.2})
    state.record(6, {"actor/ppo_kl": 0.1})
    held = validation_values(state)
    core = ("verl_val_core", (("data_source", "openai/gsm8k"), ("experiment", "ppo"), ("metric", "mean@4"),
                              ("project", "gsm8k"), ("variable", "reward")))
    assert held[core] == 0.5 and len(held) == 2
    # No per-dataset metric names from the naming rule.
    assert not any(name.startswith("verl_val_core_") for name, _ in served(state))
    state.record(10, {"val-core/openai/gsm8k/reward/mean@4": 0.7})  # the next test step replaces all
    assert validation_values(state) == {core: 0.7}
    state.record(1, {"actor/ppo_kl": 0.1})  # step went back: a restarted run
    assert validation_values(state) == {}


def test_held_validation_is_bounded():
    mapper = StepMapper()
    data = {f"val-aux/ds{i}/reward/mean@1": 0.1 for i in range(MAX_VALIDATION_SERIES + 50)}
    assert len(mapper.validation(data)) == MAX_VALIDATION_SERIES
    assert mapper.counts.dropped_keys == 50


def test_a_follower_catching_up_keeps_the_last_test_step(tmp_path: Path):
    log = write_run(tmp_path / "gsm8k" / "ppo.jsonl", "healthy", steps=TEST_FREQ + 2)
    state = RunState("gsm8k", "ppo")
    LogFollower(log, state).poll()  # reads all lines at once; only the last step is recorded
    held = validation_values(state)
    assert len(held) == 3
    expected = step_data(TEST_FREQ)[f"val-core/{DATA_SOURCE}/reward/mean@4"]
    assert [v for (name, _), v in held.items() if name == "verl_val_core"] == [expected]


def test_backfill_serves_the_validation_series_the_exporter_serves(tmp_path: Path):
    log = write_run(tmp_path / "gsm8k" / "ppo.jsonl", "healthy", steps=TEST_FREQ + 2)
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", str(START))
    assert result.exit_code == 0, result.output
    state = RunState("gsm8k", "ppo")
    LogFollower(log, state).poll()
    exporter = validation_values(state)
    times = [START]
    for step in range(1, TEST_FREQ + 3):
        times.append(times[-1] + step_data(step)["timing_s/step"])
    with serve_tsdb(tmp_path) as server:
        def at(when: float) -> dict[tuple, float]:
            result = server.api("query", query='{__name__=~"verl_val_.*"}', time=f"{when:.3f}")["result"]
            return {(s["metric"]["__name__"], tuple(sorted((k, v) for k, v in s["metric"].items()
                                                         if k not in ("__name__", "job", "instance")))):
                    float(s["value"][1]) for s in result}
        before_test_step = at(times[TEST_FREQ - 1])
        last_step = at(times[TEST_FREQ + 1])
    assert before_test_step == {}
    assert last_step.keys() == exporter.keys()
    assert all(math.isclose(last_step[key], value) for key, value in exporter.items())
