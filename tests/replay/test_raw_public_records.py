"""Raw public records of a run read as they were published, with no conversion (issue 55): the corpus
run verl-qwen25-3b-retool-opd-length-collapse as verl's console log (wandb's files/output.log of the
run) and as W&B's own transaction log of it (run-gjvwlq13.wandb, read with the wandb package), both
from jianghoucheng/Agent_On_Policy_Distillation (Apache-2.0; sources in the run's run.yaml), each
backtested beside the run's steps.jsonl."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import run
from dashgen.review.corpus import public_corpus
from support import backtest_result

pytestmark = [pytest.mark.live, pytest.mark.heavy]
RUN = "verl-qwen25-3b-retool-opd-length-collapse"
PAGING = ("warning", "critical")


def _caught(backtest: dict, path, onset: int, latest: int) -> set[str]:
    """The warnings and criticals that start firing within [onset, latest] on the record at `path`."""
    labels = next(entry["labels"] for entry in backtest["runs"] if entry["path"] == str(path))
    return {alert["alertname"] for alert in backtest["alerts"]
            if alert["severity"] in PAGING and all(alert["labels"].get(k) == v for k, v in labels.items())
            and any(onset <= firing["start_step"] <= latest for firing in alert["firing"])}


def test_the_published_console_log_and_wandb_log_backtest_as_the_labelled_run():
    pytest.importorskip("wandb")
    folder = public_corpus() / RUN
    meta = yaml.safe_load((folder / "run.yaml").read_text())
    [wandb_record] = [entry for entry in meta["other_records"] if entry["file"].endswith(".wandb")]
    steps, console, wandb_log = folder / "steps.jsonl", folder / meta["conversion"]["raw"], folder / wandb_record["file"]
    assert wandb_log.stat().st_size == wandb_record["bytes"]
    result = run("backtest", "--format", "json", "--start", "2025-11-30T14:48:22Z",
                 str(steps), str(console), str(wandb_log))
    assert result.exit_code == 0, result.output
    backtest = json.loads(result.stdout)
    # The console log is what steps.jsonl was converted from: read as it is, the same backtest.
    assert backtest_result(backtest, console) == backtest_result(backtest, steps)
    # W&B's record of the run (steps 1-58, validation rows uncut) catches the labelled failure too.
    onset, latest = meta["onset_step"], meta["latest_step"]
    assert _caught(backtest, steps, onset, latest)
    assert _caught(backtest, wandb_log, onset, latest)
