"""The TRL callback, driven through transformers' own callback API, writes a step log that
`dashgen export`'s follower serves as it serves a verl run."""

import errno
import json
import logging
import os
import shutil
from decimal import Decimal

import pytest

from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower

# Heavy: every test imports torch and transformers (2 s of processor in each worker that runs one)
# and most train a model with transformers' Trainer.
pytestmark = pytest.mark.heavy


@pytest.fixture(autouse=True, scope="module")
def transformers_api():
    """transformers, torch and the callback (which imports transformers), imported when this module's
    tests run, not when pytest collects it: 2 s of processor in every pytest worker, of which one runs them."""
    global torch, trl_callback, StepLogCallback, DROPPED_LINES_KEY
    global TrainerCallback, TrainerControl, TrainerState, TrainingArguments, CallbackHandler
    import torch
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
    from transformers.trainer_callback import CallbackHandler

    from dashgen.formats import trl_callback
    from dashgen.formats.trl_callback import DROPPED_LINES_KEY, StepLogCallback


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


def test_the_callback_is_still_importable_from_where_the_docs_written_before_dashgen_formats_put_it():
    from dashgen.sources.trl_callback import StepLogCallback as written_before

    assert written_before is StepLogCallback


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


# A monitoring hook is never the reason a run dies: a real transformers Trainer (what TRL's
# trainers are) trains a tiny model on the CPU to its last step whatever happens to the log.
MAX_STEPS = 6


def _regression():
    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 1)

        def forward(self, x, labels=None):
            return {"loss": ((self.linear(x).squeeze(-1) - labels) ** 2).mean()}

    return Regression()


def _at_steps(actions):
    """A callback that does `actions[step](logs)` on the log of each step it names, before the step log is written."""
    class AtSteps(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.global_step in actions:
                actions[state.global_step](logs)

    return AtSteps()


def _train_tiny(tmp_path, callback, *before):
    from transformers import Trainer

    torch.manual_seed(0)
    dataset = [{"x": torch.randn(2), "labels": torch.tensor(1.0)} for _ in range(4 * MAX_STEPS)]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=MAX_STEPS, logging_steps=1,
                             per_device_train_batch_size=4, report_to=[], use_cpu=True, save_strategy="no",
                             disable_tqdm=True)
    trainer = Trainer(model=_regression(), args=args, train_dataset=dataset, callbacks=[*before, callback])
    trainer.train()
    assert trainer.state.global_step == MAX_STEPS  # trained to its end
    return trainer


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == trl_callback.__name__ and r.levelno == logging.WARNING]


def _log_path(tmp_path):
    return tmp_path / "logs" / "proj" / "run.jsonl"


def test_a_path_naming_a_folder_drops_every_line_counted_and_says_so_once(tmp_path, caplog):
    folder = _log_path(tmp_path)
    folder.mkdir(parents=True)
    callback = StepLogCallback(folder)
    _train_tiny(tmp_path, callback)
    assert callback.dropped_lines == MAX_STEPS
    said = _warnings(caplog)
    assert len(said) == 1 and str(folder) in said[0] and "Is a directory" in said[0]


def test_a_log_folder_removed_mid_run_is_made_again(tmp_path, caplog):
    log = _log_path(tmp_path)
    callback = StepLogCallback(log)
    _train_tiny(tmp_path, callback, _at_steps({4: lambda logs: shutil.rmtree(log.parent)}))
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [4, 5, 6]
    assert callback.dropped_lines == 0 and _warnings(caplog) == []


class _FullDisk:
    """A file whose write stores half of what it is given, then fails as a full disk does."""

    def __init__(self, path, mode):
        self._file = open(path, mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def seek(self, *args):
        return self._file.seek(*args)

    def read(self, *args):
        return self._file.read(*args)

    def write(self, data):
        self._file.write(data[:len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("error", [None, errno.EACCES, errno.EROFS], ids=["full disk", "read-only", "read-only fs"])
def test_a_disk_that_cannot_be_written_drops_lines_counted_then_writing_resumes(tmp_path, caplog, monkeypatch, error):
    log = _log_path(tmp_path)
    callback = StepLogCallback(log)

    def failing_open(path, mode):
        if error is None:
            return _FullDisk(path, mode)
        raise OSError(error, os.strerror(error), str(path))

    def disk(full):
        if full:
            monkeypatch.setattr(trl_callback, "open", failing_open, raising=False)
        else:
            monkeypatch.delattr(trl_callback, "open", raising=False)

    _train_tiny(tmp_path, callback, _at_steps({2: lambda logs: disk(True), 4: lambda logs: disk(False)}))
    assert callback.dropped_lines == 2
    said = _warnings(caplog)
    assert len(said) == 2 and str(log) in said[0] and os.strerror(error or errno.ENOSPC) in said[0]
    assert "again" in said[1] and "2 step-log line(s) dropped" in said[1]

    # Every line written after is whole: the one the disk cut short is ended there, one parse error.
    state = RunState("proj", "run")
    LogFollower(log, state, start_at_tail=False).poll()
    assert state.last_step == MAX_STEPS and state.steps_total == 4
    assert state.parse_errors_total == (1 if error is None else 0)
    assert state._values["verl_trl_callback_dropped_lines"] == 2


def test_values_json_and_floats_cannot_take_are_no_value_and_never_stop_training(tmp_path, caplog):
    log = _log_path(tmp_path)
    callback = StepLogCallback(log)
    hostile = {"huge": 10 ** 400, "negative_huge": -(10 ** 400), 7: 1.0, "nan": float("nan"), "text": "x"}
    _train_tiny(tmp_path, callback, _at_steps({3: lambda logs: logs.update(hostile)}))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["step"] for line in lines] == list(range(1, MAX_STEPS + 1))
    third = lines[2]["data"]
    assert third["huge"] is None and third["negative_huge"] is None and third["nan"] is None
    assert "text" not in third and callback.dropped_lines == 0 and _warnings(caplog) == []


def _handler(log):
    """The callback alone, called as transformers' Trainer calls its callbacks."""
    callback = StepLogCallback(log)
    handler = CallbackHandler([callback], model=None, processing_class=None, optimizer=None, lr_scheduler=None)
    return callback, handler, TrainingArguments(output_dir=str(log.parent / "out"), report_to=[]), TrainerState(), \
        TrainerControl()


def test_deep_nesting_is_skipped_and_a_step_json_cannot_take_is_a_dropped_line(tmp_path, caplog):
    log = tmp_path / "proj" / "run.jsonl"
    callback, handler, args, state, control = _handler(log)
    deep: list = []
    for _ in range(100_000):  # deeper than json or repr can go
        deep = [deep]
    handler.on_train_begin(args, state, control)
    for step, logs in ((2, {"loss": 0.6, "deep": deep}), (Decimal(3), {"loss": 0.5}), (4, {"loss": 0.4})):
        state.global_step = step
        handler.on_log(args, state, control, logs=logs)
    lines = [json.loads(line)["data"] for line in log.read_text().splitlines()]
    assert "deep" not in lines[0] and lines[1][DROPPED_LINES_KEY] == 1 and callback.dropped_lines == 1
    said = _warnings(caplog)
    assert len(said) == 2 and str(log) in said[0] and "Decimal" in said[0]
