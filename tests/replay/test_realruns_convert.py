"""bench/realruns/convert.py's parsers on small inputs: what each reads from a raw log and how its
columns become verl keys."""

import importlib.util
import json

import pytest

from conftest import REPO

_spec = importlib.util.spec_from_file_location("realruns_convert", REPO / "bench/realruns/convert.py")
convert = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(convert)

# verl console lines as a collecting script kept them (records of step, line number and text,
# ANSI colour codes included) and as a notebook cell printed them: verl's 3-decimal values
# (grad norm 0.003, lr 0.000) and 'nan' are read as printed.
VERL_LINE = ("\x1b[36m(TaskRunner pid=3230286)\x1b[0m step:{} - actor/entropy_loss:{} - actor/ppo_kl:{} - "
             "actor/grad_norm:{} - actor/lr:0.000 - critic/score/mean:{} - timing_s/step:2499.446")


def test_json_records_of_verl_console_lines_read_as_the_console_log():
    records = [{"step": 82, "line": 15254, "text": VERL_LINE.format(82, 2.398, 0.000, 0.002, 0.141)},
               {"step": 83, "line": 15856, "text": VERL_LINE.format(83, 2.369, 0.452, "nan", 0.195)},
               {"note": "a record without a console line"}]
    rows = convert.parse_json_records_verl_console(json.dumps(records, indent=2), {})
    assert sorted(rows) == [82, 83]
    assert rows[82] == {"actor/entropy_loss": 2.398, "actor/ppo_kl": 0.0, "actor/grad_norm": 0.002,
                        "actor/lr": 0.0, "critic/score/mean": 0.141, "timing_s/step": 2499.446}
    assert rows[83]["actor/ppo_kl"] == 0.452
    assert '"actor/grad_norm": null' in convert.render(rows).splitlines()[1]


def test_verl_console_lines_in_a_notebook_cell_output_are_read_from_its_text():
    output = {"name": "stdout", "output_type": "stream",
              "text": ["\x1b[36m(main_task pid=28294)\x1b[0m validation generation end\n",
                       "\x1b[36m(main_task pid=28294)\x1b[0m step:0 - critic/vf_loss:10.488 - actor/pg_loss:0.001 - "
                       "timing/gen:24.928\n",
                       "\x1b[36m(main_task pid=28294)\x1b[0m step:1 - critic/vf_loss:10.038 - actor/pg_loss:-0.002 - "
                       "timing/gen:24.277\n", "^C\n"]}
    rows = convert.parse_ipynb_verl_console(json.dumps(output), {})
    assert rows == {0: {"critic/vf_loss": 10.488, "actor/pg_loss": 0.001, "timing/gen": 24.928},
                    1: {"critic/vf_loss": 10.038, "actor/pg_loss": -0.002, "timing/gen": 24.277}}
    notebook = {"cells": [{"cell_type": "code", "outputs": []}, {"cell_type": "code", "outputs": [output]}]}
    assert convert.parse_ipynb_verl_console(json.dumps(notebook), {"cell": 1}) == rows
    assert convert.parse_ipynb_verl_console(json.dumps(notebook), {"cell": 0}) == {}


# A verl metrics table as two authors exported it: verl's own keys as column titles (with a
# monitor's row counter), and verl's keys written with '_' for '/'.
VERL_CSV = (
    "_seq,step,actor/entropy,actor/grad_norm,critic/score/mean,timing_s/step,timing_s/save_checkpoint\n"
    "1,1,0.1806672066450119,1.921875,1.8989202976226807,103.13942807726562,\n"
    "2,2,0.1982424557209015,1.7421875,-1.6801116466522217,119.210643209517,5.5\n"
)
UNDERSCORED_CSV = (
    "step,actor_use_cached_prefix_old_logprob,actor_entropy,actor_prefix_loss,critic_score_mean,"
    "response_length_clip_ratio,val-core_textcraft_acc_mean@1\n"
    "1,True,0.079725481569767,-0.0194,0.4296875,0.09375,\n"
    "500,True,0.0617,-0.0051,0.8125,0.0,0.7932\n"
)


def test_a_verl_metrics_csv_keeps_verl_keys_and_drops_the_listed_columns():
    rows = convert.parse_verl_metrics_csv(VERL_CSV, {"step_column": "step", "drop": ["_seq"]})
    assert rows == {
        1: {"actor/entropy": 0.1806672066450119, "actor/grad_norm": 1.921875,
            "critic/score/mean": 1.8989202976226807, "timing_s/step": 103.13942807726562},
        2: {"actor/entropy": 0.1982424557209015, "actor/grad_norm": 1.7421875,
            "critic/score/mean": -1.6801116466522217, "timing_s/step": 119.210643209517,
            "timing_s/save_checkpoint": 5.5},
    }


def test_a_verl_metrics_csv_with_underscored_titles_gets_the_verl_keys_back():
    conv = {"underscored_keys": ["actor/entropy", "critic/score/mean", "response_length/clip_ratio",
                                 "val-core/textcraft/acc/mean@1", "actor/grad_norm"]}
    rows = convert.parse_verl_metrics_csv(UNDERSCORED_CSV, conv)
    assert rows[1] == {"actor/entropy": 0.079725481569767, "actor_prefix_loss": -0.0194,
                       "critic/score/mean": 0.4296875, "response_length/clip_ratio": 0.09375}
    assert rows[500]["val-core/textcraft/acc/mean@1"] == 0.7932
    assert sorted(convert.parse_verl_metrics_csv(UNDERSCORED_CSV, {**conv, "first_kept_step": 2})) == [500]


# A hand-written loop's flat per-step records: the CS336 loop of dequeueing/assignment5-alignment
# (validation placeholders between evaluations) and a KL log counting its first step 0.
FLAT_JSONL = (
    '{"step": 9, "rollout_reward_mean": 0.05, "gradient_norm": 0.22, "val_accuracy": null, '
    '"val_mean_reward": 0.0, "step_elapsed_sec": 30.2}\n'
    '{"step": 10, "rollout_reward_mean": 0.046875, "gradient_norm": 0.259765625, "val_accuracy": 0.28125, '
    '"val_mean_reward": 0.28125, "step_elapsed_sec": 30.4}\n'
)
FLAT_CONV = {"step_key": "step", "prefix": "cs336/",
             "keys": {"rollout_reward_mean": "critic/score/mean", "gradient_norm": "actor/grad_norm",
                      "val_accuracy": "val-core/gsm8k/acc", "step_elapsed_sec": "timing_s/step"},
             "eval_key": "val_accuracy", "eval_fields": ["val_accuracy", "val_mean_reward"]}


def test_flat_step_records_keep_every_field_and_copy_the_verl_ones():
    rows = convert.parse_jsonl_step_records(FLAT_JSONL, FLAT_CONV)
    assert rows[9] == {"cs336/step": 9.0, "cs336/rollout_reward_mean": 0.05, "critic/score/mean": 0.05,
                       "cs336/gradient_norm": 0.22, "actor/grad_norm": 0.22,
                       "cs336/step_elapsed_sec": 30.2, "timing_s/step": 30.2}  # no 0.0 placeholder
    assert rows[10]["val-core/gsm8k/acc"] == 0.28125 and rows[10]["cs336/val_mean_reward"] == 0.28125


def test_flat_step_records_shift_a_zero_based_step_and_negate_an_opposite_sign_kl():
    text = ('{"grpo_step": 0, "micro_step": 128, "kl_divergence": -0.00396728515625}\n'
            '{"grpo_step": 119, "micro_step": 128, "kl_divergence": 0.310546875}\n')
    conv = {"step_key": "grpo_step", "step_offset": 1, "prefix": "cs336/",
            "negated_keys": {"kl_divergence": "actor/ppo_kl"}}
    rows = convert.parse_jsonl_step_records(text, conv)
    assert sorted(rows) == [1, 120]
    assert rows[1] == {"cs336/grpo_step": 0.0, "cs336/micro_step": 128.0,
                       "cs336/kl_divergence": -0.00396728515625, "actor/ppo_kl": 0.00396728515625}
    assert rows[120]["actor/ppo_kl"] == -0.310546875

AUTHORS_CSV = (
    "update,reward_mean,reward_std,loss,entropy,grad_norm,grad_norm_available,kl,kl_reason,"
    "truncation_rate,zero_advantage_fraction\n"
    "1,0.36875,0.43,-0.0306,0.294,0.5547,True,,beta=0.0; no reference model,0.0,0.25\n"
    "2,0.584375,0.47,-0.1859,0.198,nan,True,,beta=0.0; no reference model,0.0625,0.5\n"
    "3,0.4,0.46,0.0169,0.256,0.4521,True,,beta=0.0; no reference model,0.125,0.0\n"
)
RENAMES = {"reward_mean": "reward", "truncation_rate": "completions/clipped_ratio",
           "zero_advantage_fraction": "frac_reward_zero_std"}


def test_an_authors_csv_is_read_per_row_under_the_trl_keys_its_columns_rename_to():
    rows = convert.parse_trl_metrics_csv(AUTHORS_CSV, {"step_column": "update", "columns": RENAMES})
    assert sorted(rows) == [1, 2, 3]
    assert rows[2] == {
        "critic/score/mean": 0.584375, "critic/score/std": 0.47, "actor/pg_loss": -0.1859,
        "actor/entropy": 0.198, "actor/grad_norm": rows[2]["actor/grad_norm"],
        "response_length/clip_ratio": 0.0625, "frac_reward_zero_std": 0.5,
    }
    assert rows[2]["actor/grad_norm"] != rows[2]["actor/grad_norm"]  # nan stays nan until render
    assert '"actor/grad_norm": null' in convert.render(rows).splitlines()[1]


def test_an_authors_csv_keeps_only_the_steps_run_yaml_selects():
    rows = convert.parse_trl_metrics_csv(
        AUTHORS_CSV, {"step_column": "update", "columns": RENAMES, "first_kept_step": 2})
    assert sorted(rows) == [2, 3]
    assert rows[3]["actor/grad_norm"] == 0.4521


def test_trl_ppo_keys_of_verl_meaning_map_and_the_others_keep_their_names():
    # One PPOTrainer log row as trl 0.24.0 writes it (values made up).
    entry = {"loss/policy_avg": 0.01, "loss/value_avg": 4.4, "policy/clipfrac_avg": 0.005,
             "val/clipfrac_avg": 0.02, "objective/scores": 0.24, "lr": 9e-06,
             "policy/approxkl_avg": 0.0006, "policy/entropy_avg": 1.3, "objective/kl": 0.8,
             "objective/entropy": 41.0, "val/ratio": 0.995, "episode": 16, "step": 1}
    assert convert.map_trl(entry) == {
        "actor/pg_loss": 0.01, "critic/vf_loss": 4.4, "actor/pg_clipfrac": 0.005,
        "critic/vf_clipfrac": 0.02, "critic/score/mean": 0.24, "actor/lr": 9e-06,
        "policy/approxkl_avg": 0.0006, "policy/entropy_avg": 1.3, "objective/kl": 0.8,
        "objective/entropy": 41.0, "val/ratio": 0.995, "episode": 16.0,
    }


PPO_CSV = (
    "update,reward_mean,policy_loss,value_loss,total_loss,kl,clip_fraction,policy_entropy_mean,"
    "zero_advantage_fraction\n"
    "1,0.215625,0.0258,5.4048,0.5663,0.000409,0.00518,1.1067,0.0\n"
    "2,0.071875,0.0222,4.0872,0.4309,0.000843,0.00557,1.0901,0.25\n"
)
PPO_RENAMES = {"reward_mean": "reward", "policy_loss": "loss/policy_avg", "value_loss": "loss/value_avg",
               "clip_fraction": "policy/clipfrac_avg", "kl": "policy/approxkl_avg",
               "policy_entropy_mean": "policy/entropy_avg"}


def test_an_authors_ppo_csv_gives_the_value_loss_and_no_reference_kl():
    rows = convert.parse_trl_metrics_csv(PPO_CSV, {"step_column": "update", "columns": PPO_RENAMES})
    assert rows[2] == {
        "critic/score/mean": 0.071875, "actor/pg_loss": 0.0222, "critic/vf_loss": 4.0872,
        "total_loss": 0.4309, "policy/approxkl_avg": 0.000843, "actor/pg_clipfrac": 0.00557,
        "policy/entropy_avg": 1.0901, "zero_advantage_fraction": 0.25,
    }


# A W&B history export: every row holds every key, null where the row did not log it; W&B's _step
# counts the evaluation rows too, so training rows are numbered by idx and an evaluation by the
# training step it followed.
WANDB_ROWS = """[
  {"_step": 1, "_runtime": 1398.6, "idx": 1, "eval/train_step": null, "train/episode": 0,
   "train/kl": 0.0067, "rollout/reward": 0.355, "train/reward": 0.334, "eval/outcome_correct": null},
  {"_step": 2, "_runtime": 2721.9, "idx": 2, "eval/train_step": null, "train/episode": 0,
   "train/kl": 16.37, "rollout/reward": 0.230, "train/reward": 0.266, "eval/outcome_correct": null},
  {"_step": 3, "_runtime": 3452.1, "idx": 1, "eval/train_step": 2, "train/episode": null,
   "train/kl": null, "rollout/reward": null, "train/reward": null, "eval/outcome_correct": 0.395},
  {"_step": 4, "_runtime": 4125.9, "idx": 3, "eval/train_step": null, "train/episode": 0,
   "train/kl": "NaN", "rollout/reward": 0.363, "train/reward": 0.235, "eval/outcome_correct": null}
]"""
WANDB_CONV = {"train_step_key": "idx", "eval_step_key": "eval/train_step",
              "keys": {"train/kl": "actor/kl_loss", "rollout/reward": "critic/score/mean",
                       "eval/outcome_correct": "val-core/math/acc"},
              "drop": ["_step", "_runtime", "train/episode"]}


def test_a_wandb_history_export_is_read_by_training_step_with_evaluations_at_the_step_they_followed():
    rows = convert.parse_wandb_history_rows(WANDB_ROWS, WANDB_CONV)
    assert sorted(rows) == [1, 2, 3]  # not W&B's _step 1-4
    assert rows[2] == {"actor/kl_loss": 16.37, "critic/score/mean": 0.230, "train/reward": 0.266,
                       "val-core/math/acc": 0.395}
    assert rows[1] == {"actor/kl_loss": 0.0067, "critic/score/mean": 0.355, "train/reward": 0.334}
    assert rows[3]["actor/kl_loss"] != rows[3]["actor/kl_loss"]  # W&B's "NaN" stays nan until render
    assert '"actor/kl_loss": null' in convert.render(rows).splitlines()[2]


def test_a_wandb_history_export_keeps_only_the_steps_run_yaml_selects():
    rows = convert.parse_wandb_history_rows(WANDB_ROWS, {**WANDB_CONV, "last_kept_step": 2})
    assert sorted(rows) == [1, 2]


MINIMIND_GRPO_LOG = (
    "Model Params: 30.03M\n"
    "Epoch:[1/1](1/9751), Reward: -2.3041, KL_ref: -0.0010, Adv Std: 0.9258, Adv Mean: -0.0000, "
    "Actor Loss: 0.0000, Avg Response Len: 271.38, Learning Rate: 0.00000030\n"
    "[DEBUG] gen[3] reward=-1.9516\n"
    "Epoch:[1/1](2/9751), Reward: -1.7233, KL_ref: 0.0002, Adv Std: 0.9257, Adv Mean: 0.0000, "
    "Actor Loss: 0.0065, Avg Response Len: 297.00, Learning Rate: 0.00000030\n"
)
MINIMIND_R1_LINE = ("Epoch:[2/2](3/500), Reward: 0.3846, Fmt: 1.00, Correct: 0.12, KL_ref: 0.0000, "
                    "Adv Std: 0.9248, Actor Loss: 0.0005, Avg Len: 129, LR: 0.00000100\n")


def test_minimind_grpo_lines_keep_every_field_and_negate_kl_ref_into_the_reference_kl():
    rows = convert.parse_minimind_console(MINIMIND_GRPO_LOG, {})
    assert sorted(rows) == [1, 2]  # the start-up and debug lines are no steps
    assert rows[1] == {
        "critic/score/mean": -2.3041, "actor/kl_loss": 0.001, "actor/pg_loss": 0.0,
        "response_length/mean": 271.38, "actor/lr": 3e-07,
        "minimind/Reward": -2.3041, "minimind/KL_ref": -0.001, "minimind/Adv_Std": 0.9258,
        "minimind/Adv_Mean": -0.0, "minimind/Actor_Loss": 0.0, "minimind/Avg_Response_Len": 271.38,
        "minimind/Learning_Rate": 3e-07,
    }
    assert rows[2]["actor/kl_loss"] == -0.0002


def test_minimind_r1_lines_give_the_format_share_and_count_steps_over_epochs():
    rows = convert.parse_minimind_console(MINIMIND_R1_LINE, {})
    assert list(rows) == [503]  # epoch 2 of 500 steps each, step 3
    data = rows[503]
    assert (data["critic/format_acc/mean"], data["minimind/Correct"], data["response_length/mean"],
            data["actor/lr"]) == (1.0, 0.12, 129.0, 1e-06)
    assert '"actor/kl_loss": 0.0' in convert.render(rows)  # a printed 0.0000 is no -0.0


def _run_folder(tmp_path, raw_name: str, raw: str | None, parser: str, extra: str = ""):
    folder = tmp_path / "a-run"
    folder.mkdir()
    (folder / "run.yaml").write_text(f"id: a-run\nconversion:\n  raw: {raw_name}\n  parser: {parser}\n{extra}")
    if raw is not None:
        (folder / raw_name).write_text(raw)
    return folder


HISTORY_KEYS = "  eval_step_key: eval_step\n  train_step_key: train_step\n"


@pytest.mark.parametrize("raw_name, raw, parser, extra, message", [
    ("trainer_state.json", '{"log_history": [{"step": 1, "loss": 0.1}, {"st', "trl_trainer_state", "",
     "trainer_state.json: not valid JSON"),
    ("history_rows.json", '{"train_step": 1, "reward": 0.5}', "wandb_history_rows", HISTORY_KEYS,
     "history_rows.json: expected a list of history rows, found a JSON dict"),
    ("history_rows.json", '[{"train_step": 1, "reward": 0.5}, {"reward": 0.6}]', "wandb_history_rows", HISTORY_KEYS,
     "history_rows.json: row 2 (train_step): no step (None)"),
    ("log_history.json", '[{"step": "ten", "loss": 0.1}]', "trl_log_history", "",
     "log_history.json: log entry 1: step 'ten' is not a number"),
    ("metrics.jsonl", '{"type": "rollout", "grpo_step": null}\n', "cs336_metrics", "",
     "metrics.jsonl: record 'rollout' (grpo_step): no step (None)"),
    ("console.log", "step:1 - actor/pg_loss:0.1\n", "no_such_parser", "",
     "conversion.parser: 'no_such_parser' is no parser of convert.py"),
    ("console.log", None, "verl_console", "", "console.log: cannot be read (No such file or directory)"),
])
def test_a_malformed_input_is_one_error_naming_the_file(tmp_path, raw_name, raw, parser, extra, message):
    folder = _run_folder(tmp_path, raw_name, raw, parser, extra)
    with pytest.raises(convert.ConversionError) as error:
        convert.convert(folder)
    assert str(folder) in str(error.value) and message in str(error.value), str(error.value)


def test_the_command_says_the_error_and_exits_2(tmp_path, capsys, monkeypatch):
    folder = _run_folder(tmp_path, "trainer_state.json", "[1, 2", "trl_trainer_state")
    monkeypatch.setattr(convert, "HERE", tmp_path)
    assert convert.main([folder.name]) == 2
    assert "trainer_state.json: not valid JSON" in capsys.readouterr().err
