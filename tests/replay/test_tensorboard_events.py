"""A TensorBoard event file read as a run's step log (issue 55, item 2), with the tensorboard
package's own reader: verl's tags as its keys, transformers' train/ and eval/ tags as TRL's;
recognised by content. The files are written by torch's SummaryWriter, as verl and TRL write them."""

import math
import time
from pathlib import Path

import pytest

from dashgen.errors import BuildError
from dashgen.formats.tensorboard_events import event_files, is_tensorboard_events, step_records
from dashgen.replay.backfill import Timing, read_run

SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter


def _writer_folder(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    writer = SummaryWriter(str(folder))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, step)
    writer.close()


def events(folder: Path, scalars: dict[str, list[tuple[int, float]]]) -> Path:
    _writer_folder(folder, scalars)
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


def test_a_log_directory_reads_its_event_files_in_order(tmp_path: Path):
    """A TRL run's output_dir/runs/<date_host>/ below the folder given; a restarted writer's second file
    carries on (and logs step 2 again, which wins)."""
    run = tmp_path / "output" / "runs" / "Jan01_12-00-00_host"
    _writer_folder(run, {"actor/entropy": [(1, 0.5), (2, 0.25)]})
    time.sleep(1.1)  # the file's name holds the second it was opened
    _writer_folder(run, {"actor/entropy": [(2, 0.125), (3, 0.0625)]})
    assert len(event_files(tmp_path / "output")) == 2
    assert is_tensorboard_events(tmp_path / "output") and not is_tensorboard_events(tmp_path / "nothing")
    assert step_records(tmp_path / "output") == [(1, {"actor/entropy": 0.5}), (2, {"actor/entropy": 0.125}),
                                                (3, {"actor/entropy": 0.0625})]
    read = read_run(tmp_path / "output", {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                    Timing(start=1_735_689_600.0, default_step_seconds=60.0))
    assert read.steps == [1, 2, 3]


def test_a_directory_of_several_runs_is_one_error_naming_them(tmp_path: Path):
    _writer_folder(tmp_path / "runs" / "a", {"actor/entropy": [(1, 0.5)]})
    _writer_folder(tmp_path / "runs" / "b", {"actor/entropy": [(1, 0.5)]})
    with pytest.raises(ValueError, match=r"2 folders \(runs/a, runs/b\).*give one run's folder"):
        event_files(tmp_path)
    with pytest.raises(BuildError, match="several runs"):
        read_run(tmp_path, {"job": "verl", "instance": "i", "project": "p", "experiment": "e"}, Timing())
    assert step_records(tmp_path / "runs" / "b") == [(1, {"actor/entropy": 0.5})]
