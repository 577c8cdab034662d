"""The TRL callback, driven through transformers' own callback API, writes a step log that
`dashgen export`'s follower serves as it serves a verl run."""

import json

from transformers import TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler

from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower
from dashgen.sources.trl_callback import StepLogCallback


def _train(tmp_path, entries):
    log = tmp_path / "logs" / "grpo-project" / "qwen-run.jsonl"
    args = TrainingArguments(output_dir=str(tmp_path / "out"), logging_steps=10, report_to=[])
    state, control = TrainerState(), TrainerControl()
    handler = CallbackHandler([StepLogCallback(log)], model=None, processing_class=None, optimizer=None,
                              lr_scheduler=None)
    handler.on_train_begin(args, state, control)
    for step, logs in entries:
        state.global_step = step
        handler.on_log(args, state, control, logs=logs)
    return log


def test_each_log_becomes_a_verl_step_line_with_trls_keys_by_meaning_and_a_step_time(tmp_path):
    log = _train(tmp_path, [
        (10, {"loss": 0.0, "grad_norm": 0.8, "kl": 0.002, "reward": 0.4, "completions/mean_length": 210.0,
              "frac_reward_zero_std": 0.3, "epoch": 0.1}),
        (20, {"loss": 0.01, "grad_norm": 0.7, "kl": 0.004, "reward": 0.5, "completions/mean_length": 190.0}),
        (20, {"eval_reward": 0.55, "epoch": 0.2}),
        (20, {"train_runtime": 12.0, "train_loss": 0.01}),  # TRL's summary at the end: no step
    ])
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == [10, 20, 20]
    first, second, evaluation = (line["data"] for line in lines)
    assert first["actor/kl_loss"] == 0.002 and "actor/ppo_kl" not in first  # TRL's kl is KL to the reference
    assert first["critic/score/mean"] == 0.4 and first["response_length/mean"] == 210.0
    assert first["training/global_step"] == 10 and first["timing_s/step"] >= 0
    assert second["timing_s/step"] >= 0 and "timing_s/step" not in evaluation
    assert evaluation == {"val-aux/reward": 0.55, "training/epoch": 0.2, "training/global_step": 20}

    state = RunState("grpo-project", "qwen-run")
    LogFollower(log, state, start_at_tail=False).poll()
    assert state.last_step == 20
    assert state._values["verl_actor_kl_loss"] == 0.004  # the eval line kept the training values
    assert state._values["verl_critic_score_mean"] == 0.5 and "verl_timing_step_seconds" in state._values
