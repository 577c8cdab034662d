"""transformers' printed log dicts read as a TRL run's step log (issue 55, item 5): each training dict
a logged step in order, an evaluation dict joining the step before it, TRL's keys read as verl's."""

import math
from pathlib import Path

from dashgen.formats.trl_console import is_trl_console, step_records
from dashgen.replay.backfill import Timing, read_run

NOTEBOOK_OUTPUT = """\
  0%|          | 0/250 [00:00<?, ?it/s]
{'loss': 0.0, 'grad_norm': 0.31, 'learning_rate': 5e-06, 'reward': 0.125, 'reward_std': 0.2, 'kl': 0.0, 'epoch': 0.01}
{'loss': 0.0012, 'grad_norm': nan, 'learning_rate': 5e-06, 'reward': 0.5, 'reward_std': 0.4, 'kl': 0.03, 'epoch': 0.02}
{'eval_loss': 0.2, 'eval_runtime': 3.2, 'epoch': 0.02}
{'train_runtime': 900.0, 'train_loss': 0.001, 'epoch': 1.0}
"""


def test_each_training_dict_is_a_logged_step_and_an_evaluation_joins_it(tmp_path: Path):
    records = step_records(NOTEBOOK_OUTPUT)
    assert [step for step, _ in records] == [1, 2]
    first, second = records[0][1], records[1][1]
    assert first["critic/score/mean"] == 0.125 and first["actor/kl_loss"] == 0.0 and first["actor/lr"] == 5e-06
    assert second["actor/grad_norm"] is None or math.isnan(second["actor/grad_norm"])
    assert second["val-aux/loss"] == 0.2


def test_a_notebook_output_is_known_by_its_content_and_backtests(tmp_path: Path):
    path = tmp_path / "cell-13.txt"
    path.write_text(NOTEBOOK_OUTPUT)
    assert is_trl_console(path)
    jsonl = tmp_path / "steps.jsonl"
    jsonl.write_text('{"step": 1, "data": {"actor/pg_loss": 0.1}}\n')
    assert not is_trl_console(jsonl)
    run = read_run(path, {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                   Timing(start=1_735_689_600.0, default_step_seconds=60.0))
    assert run.steps == [1, 2] and run.values[1]["verl_critic_score_mean"] == 0.5
