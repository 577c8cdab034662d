"""A TRL trainer_state.json is read as a verl step log: every logged step, TRL's keys by meaning."""

import json
import math

import pytest

from conftest import REPO
from dashgen.errors import BuildError
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.formats.trl import is_trainer_state, step_log_lines, step_records
from dashgen.formats.verl_log import LineError, parse_line

REAL_STATE = REPO / "bench/realruns/unsloth-llama31-8b-gsm8k-trainer-state/trainer_state.json"


def test_trls_keys_map_by_meaning_and_eval_entries_join_their_step():
    state = {"log_history": [
        {"step": 10, "loss": 0.0, "grad_norm": 0.4, "kl": 0.02, "reward": 0.5, "completion_length": 120.0,
         "completions/mean_length": 118.0, "frac_reward_zero_std": 0.25, "epoch": 0.1},
        {"step": 10, "eval_loss": 1.5},
        {"step": 20, "grad_norm": float("nan"), "kl": 0.03},
        {"step": 20, "train_runtime": 100.0, "train_loss": 0.1},  # the summary TRL appends
    ]}
    records = dict(step_records(state))
    assert sorted(records) == [10, 20]
    assert records[10]["actor/kl_loss"] == 0.02 and "actor/ppo_kl" not in records[10]  # KL to the reference
    assert records[10]["response_length/mean"] == 118.0  # the newer spelling wins
    assert records[10]["frac_reward_zero_std"] == 0.25 and records[10]["val-aux/loss"] == 1.5
    assert records[20]["actor/grad_norm"] is None  # NaN, as verl's file logger writes it
    assert "train_runtime" not in records[20]


def test_a_real_trainer_state_is_read_step_for_step_as_its_converted_log():
    timing = Timing(start=1_735_689_600.0, default_step_seconds=55.0)
    from_state = read_run(REAL_STATE, run_labels(REAL_STATE, "verl"), timing)
    converted = REAL_STATE.with_name("steps.jsonl")
    from_log = read_run(converted, run_labels(converted, "verl"), timing)
    assert len(from_state.steps) == 250 and from_state.steps == from_log.steps
    for ours, theirs in zip(from_state.values, from_log.values):
        assert ours.keys() == theirs.keys()
        assert all(math.isclose(ours[k], theirs[k], rel_tol=1e-12) or (math.isnan(ours[k]) and math.isnan(theirs[k]))
                   for k in ours)


def test_a_file_named_trainer_state_that_is_not_one_is_one_clear_error(tmp_path):
    bad = tmp_path / "run" / "trainer_state.json"
    bad.parent.mkdir()
    bad.write_text('{"global_step": 3}')
    with pytest.raises(BuildError, match="trainer_state.json: not a trainer state: no log_history list"):
        read_run(bad, run_labels(bad, "verl"), Timing(start=1_735_689_600.0))


def test_a_trainer_state_nested_deeper_than_json_goes_is_one_clear_error(tmp_path):
    deep = tmp_path / "run" / "trainer_state.json"
    deep.parent.mkdir()
    deep.write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(BuildError, match="trainer_state.json: not a trainer state \\(JSON\\): nested deeper than"):
        read_run(deep, run_labels(deep, "verl"), Timing(start=1_735_689_600.0))


def test_numbers_beyond_a_float_in_a_trainer_state_are_no_value_and_no_step(tmp_path):
    state = tmp_path / "run" / "trainer_state.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"log_history": [
        {"step": 1, "loss": 0.5, "reward": 10 ** 400, "kl": -(10 ** 400)},
        {"step": 10 ** 400, "loss": 0.4}]}))
    lines = [json.loads(line) for line in step_log_lines(state)]
    assert lines[0]["data"]["critic/score/mean"] is None and lines[0]["data"]["actor/kl_loss"] is None
    with pytest.raises(LineError):  # a step of 400 digits: the step-log reader's parse error
        parse_line(json.dumps(lines[1]))


@pytest.mark.parametrize("name, indent", [("run_trainer_state.json", 2), ("renamed-run-a.json", None)],
                         ids=["another name, as transformers writes it", "renamed, on one line"])
def test_a_trainer_state_under_another_name_is_known_by_its_content(tmp_path, name, indent):
    state = json.loads(REAL_STATE.read_text())
    renamed = tmp_path / "run" / name
    renamed.parent.mkdir()
    renamed.write_text(json.dumps(state, indent=indent))
    assert is_trainer_state(renamed) and not is_trainer_state(REPO / "examples/runs/gsm8k/ppo-qwen-7b.jsonl")
    run = read_run(renamed, run_labels(renamed, "verl"), Timing(start=1_735_689_600.0))
    assert run.steps == [step for step, _ in step_records(state)] and run.parse_errors == 0


@pytest.mark.parametrize("first", [-20, -5])
def test_a_trainer_state_with_negative_steps_is_read_from_step_0(tmp_path, first):
    """Refused before, as lines without a step (all of them when every step was negative)."""
    state = tmp_path / "run" / "trainer_state.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"log_history": [{"step": step, "loss": 0.5, "grad_norm": 1.0}
                                                 for step in range(first, 10, 5) if step < 0 or first == -5]},
                                indent=2))
    run = read_run(state, run_labels(state, "verl"), Timing(start=1_735_689_600.0))
    assert run.steps[0] == 0 and run.parse_errors == 0
    assert run.steps == [step - first for step in range(first, 10, 5) if step < 0 or first == -5]


def test_a_trainer_state_with_no_logged_step_says_so(tmp_path):
    empty = tmp_path / "run" / "trainer_state.json"
    empty.parent.mkdir()
    empty.write_text(json.dumps({"global_step": 0, "log_history": [{"train_runtime": 1.0}]}, indent=2))
    with pytest.raises(BuildError, match="trainer_state.json: a trainer state that holds no logged step: its "
                                         "log_history has no training or evaluation entry \\(1 entry in all"):
        read_run(empty, run_labels(empty, "verl"), Timing(start=1_735_689_600.0))


def test_a_ppo_trainer_entry_reads_as_verls_keys():
    from dashgen.formats.trl import step_data

    entry = {"step": 4, "loss/policy_avg": -0.02, "loss/value_avg": 3.1, "policy/clipfrac_avg": 0.05,
             "objective/scores": 0.4, "lr": 1e-6, "policy/approxkl_avg": 0.001}
    assert step_data(entry) == {"actor/pg_loss": -0.02, "critic/vf_loss": 3.1, "actor/pg_clipfrac": 0.05,
                                "critic/score/mean": 0.4, "actor/lr": 1e-6, "policy/approxkl_avg": 0.001}
