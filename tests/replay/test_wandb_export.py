"""A run's W&B history export read as its step log (issue 55, item 3): the JSON rows the API gives
and a CSV download, placed at the training step (not W&B's _step, which counts evaluation rows),
TRL's train/ and eval/ keys read as TRL's; recognised by content by every command reading a run."""

import json
import math
from pathlib import Path

from dashgen.formats.wandb_export import is_wandb_export, step_log_lines
from dashgen.replay.backfill import Timing, read_run
from dashgen.review.corpus import public_corpus


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in step_log_lines(path)]


def test_verl_rows_are_placed_at_the_training_step(tmp_path: Path):
    rows = [{"_step": 0, "_runtime": 3.1, "val-core/openai/gsm8k/reward/mean@1": 0.2, "training/global_step": None},
            {"_step": 1, "training/global_step": 1, "actor/entropy": 0.5, "actor/grad_norm": "NaN"},
            {"_step": 2, "training/global_step": 2, "actor/entropy": 0.4, "critic/score/mean": None},
            {"_step": 3, "training/global_step": 2, "val-core/openai/gsm8k/reward/mean@1": 0.3}]
    path = tmp_path / "history.json"
    path.write_text(json.dumps(rows))
    assert is_wandb_export(path)
    got = lines(path)
    assert [line["step"] for line in got] == [1, 2]
    assert math.isnan(got[0]["data"]["actor/grad_norm"])
    assert got[1]["data"] == {"actor/entropy": 0.4, "val-core/openai/gsm8k/reward/mean@1": 0.3,
                              "training/global_step": 2.0}


def test_trl_rows_read_as_trls_keys(tmp_path: Path):
    rows = [{"_step": 0, "train/global_step": 5, "train/loss": 0.01, "train/reward": 0.5, "train/kl": 0.002,
             "train/completions/clipped_ratio": 0.25},
            {"_step": 1, "train/global_step": 5, "eval/loss": 0.3}]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert lines(path) == [{"step": 5, "data": {"actor/pg_loss": 0.01, "critic/score/mean": 0.5,
                                                "actor/kl_loss": 0.002, "response_length/clip_ratio": 0.25,
                                                "val-aux/loss": 0.3}}]


def test_a_panel_csv_keeps_the_values_and_leaves_the_extremes_out(tmp_path: Path):
    path = tmp_path / "wandb_export_2025-01-01.csv"
    path.write_text('"Step","run-7 - actor/entropy","run-7 - actor/entropy__MIN","run-7 - actor/entropy__MAX"\n'
                    '"1","0.5","0.4","0.6"\n"2","0.45","",""\n')
    assert is_wandb_export(path)
    assert lines(path) == [{"step": 1, "data": {"actor/entropy": 0.5}}, {"step": 2, "data": {"actor/entropy": 0.45}}]


def test_a_history_csv_of_a_corpus_run_reads_as_the_same_run(tmp_path: Path):
    steps = public_corpus() / "verl-qwen25-7b-gsm8k-ppo-dstack" / "steps.jsonl"
    records = [json.loads(line) for line in steps.read_text().splitlines()]
    keys = sorted({key for record in records for key in record["data"]})
    assert "training/global_step" in keys  # verl logs it: the export's step column, and a logged value
    csv_lines = [",".join(["_step", *keys])]
    for n, record in enumerate(records):
        values = ["" if record["data"].get(key) is None else repr(record["data"][key]) for key in keys]
        csv_lines.append(",".join([str(n), *values]))
    exported = tmp_path / "history.csv"
    exported.write_text("\n".join(csv_lines) + "\n")
    labels = {"job": "verl", "instance": "i", "project": "p", "experiment": "e"}
    timing = Timing(start=1_735_689_600.0, default_step_seconds=60.0)
    mine, theirs = read_run(exported, labels, timing), read_run(steps, labels, timing)
    assert mine.steps == theirs.steps and mine.values == theirs.values
    assert not is_wandb_export(steps)
