"""bench/realruns/convert.py's parsers on small inputs: what each reads from a raw log and how its
columns become verl keys."""

import importlib.util

from conftest import REPO

_spec = importlib.util.spec_from_file_location("realruns_convert", REPO / "bench/realruns/convert.py")
convert = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(convert)

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
