"""Each corpus run of a sample, written back out in each format dashgen reads (issue 55), gives the same
`dashgen backtest --format json` result as its steps.jsonl: verl's console lines as its console logger
prints them, an event file through TensorBoard's writer (and the log directory holding it), W&B's JSON
rows and CSV, MLflow's file store. One backtest per run takes all its records side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run
from support import backtest_result
from dashgen.evaluation.run_records import (read_steps, write_console, write_events, write_mlflow, write_wandb_csv,
                                             write_wandb_json)
from dashgen.review.corpus import public_corpus

pytestmark = [pytest.mark.live, pytest.mark.heavy]
SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter
SAMPLE = ("verl-qwen25-7b-gsm8k-ppo-dstack", "trl-qwen25-7b-gsm8k-grpo-rho010-reward-collapse",
          "custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200-gradnorm-blowup")
START = "2025-01-01T00:00:00Z"


def _events(steps, folder: Path) -> Path:
    """Through torch's SummaryWriter, as verl's tensorboard logger writes them."""
    writer = SummaryWriter(str(folder))
    for step, data in steps:
        for key, value in data.items():
            writer.add_scalar(key, value, step)
    writer.close()
    return folder


FORMATS = {"console": lambda steps, at: write_console(steps, at / "output.log"),
           "event file": lambda steps, at: next(_events(steps, at / "tb").iterdir()),
           "event directory": lambda steps, at: _events(steps, at / "tensorboard"),
           "W&B JSON": lambda steps, at: write_wandb_json(steps, at / "history.json"),
           "W&B CSV": lambda steps, at: write_wandb_csv(steps, at / "history.csv"),
           "MLflow": lambda steps, at: write_mlflow(steps, at / "mlruns" / "0" / "run"),
           "event records framed by the benchmark's writer": lambda steps, at: write_events(steps, at / "framed")}


@pytest.mark.parametrize("run_name", SAMPLE)
def test_a_corpus_run_in_each_format_backtests_as_its_step_log(tmp_path: Path, run_name: str):
    steps = read_steps(public_corpus() / run_name / "steps.jsonl")
    records = {"steps.jsonl": public_corpus() / run_name / "steps.jsonl"}
    for name, write in FORMATS.items():
        folder = tmp_path / name.replace(" ", "-").replace("&", "")
        folder.mkdir()
        records[name] = write(steps, folder)
    result = run("backtest", "--format", "json", "--start", START, *map(str, records.values()))
    assert result.exit_code == 0, result.output
    backtest = json.loads(result.stdout)
    theirs = backtest_result(backtest, records["steps.jsonl"])
    assert any(theirs["alerts"].values())  # the comparison has firings to compare
    for name, path in records.items():
        mine = backtest_result(backtest, path)
        assert mine == theirs, (name, {key: (value, theirs["alerts"].get(key)) for key, value in mine["alerts"].items()
                                       if value != theirs["alerts"].get(key)})
