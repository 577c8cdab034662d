"""A TensorBoard event file read as a run's step log (issue 55, item 2), with the tensorboard
package's own reader: verl's tags as its keys, transformers' train/ and eval/ tags as TRL's;
recognised by content. The files are written by torch's SummaryWriter, as verl and TRL write them."""

import math
from pathlib import Path

import pytest

from dashgen.formats.tensorboard_events import is_tensorboard_events, step_records
from dashgen.replay.backfill import Timing, read_run

SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter


def events(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> Path:
    writer = SummaryWriter(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()
    [path] = folder.glob("events.out.tfevents.*")
    renamed = folder / "run.bin"  # known by content, not by name
    path.rename(renamed)
    return renamed


def test_verls_tags_are_its_keys_by_step(tmp_path: Path):
    path = events(tmp_path, {"actor/entropy": [(1, 0.5), (2, 0.25)], "critic/score/mean": [(2, 0.75)],
                             "actor/grad_norm": [(2, math.nan)]})
    assert is_tensorboard_events(path)
    records = step_records(path)
    assert [step for step, _ in records] == [1, 2]
    assert records[0][1] == {"actor/entropy": 0.5}
    assert records[1][1]["critic/score/mean"] == 0.75 and math.isnan(records[1][1]["actor/grad_norm"])


def test_a_trl_runs_tags_read_as_trls_keys_and_the_run_backtests(tmp_path: Path):
    path = events(tmp_path, {"train/loss": [(5, 0.01), (10, 0.02)], "train/reward": [(5, 0.5), (10, 0.6)],
                             "train/kl": [(5, 0.001), (10, 0.002)], "eval/loss": [(10, 0.3)]})
    step, values = step_records(path)[1]  # TensorBoard keeps float32
    assert step == 10 and values == pytest.approx({"actor/pg_loss": 0.02, "critic/score/mean": 0.6,
                                                   "actor/kl_loss": 0.002, "val-aux/loss": 0.3}, rel=1e-6)
    run = read_run(path, {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                   Timing(start=1_735_689_600.0, default_step_seconds=60.0))
    assert run.steps == [5, 10] and run.values[0]["verl_critic_score_mean"] == 0.5


def test_a_step_log_is_no_event_file(tmp_path: Path):
    log = tmp_path / "events.out.tfevents.1"  # named like one
    log.write_text('{"step": 1, "data": {"actor/pg_loss": 0.1}}\n')
    assert not is_tensorboard_events(log) and not is_tensorboard_events(tmp_path)
