"""A run in MLflow's file store read as its step log (issue 55, item 4): one file per key under the
run's metrics/ folder (a key's / makes folders), `<timestamp> <value> <step>` lines; the commands
take the run's folder."""

import math
from pathlib import Path

import pytest

from conftest import run
from dashgen.formats.mlflow_store import is_mlflow_run, step_records
from dashgen.replay.backfill import Timing, read_run


def mlflow_run(root: Path, metrics: dict[str, list[tuple[int, float]]]) -> Path:
    folder = root / "mlruns" / "0" / "3f2a9c"
    for key, points in metrics.items():
        path = folder / "metrics" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{1_735_689_600_000 + 60_000 * step} {value} {step}\n" for step, value in points))
    (folder / "meta.yaml").write_text("run_id: 3f2a9c\n")
    return folder


def test_each_keys_file_is_read_by_step(tmp_path: Path):
    folder = mlflow_run(tmp_path, {"actor/entropy": [(1, 0.5), (2, 0.25)], "critic/score/mean": [(2, 0.75)],
                                   "actor/grad_norm": [(2, math.nan)]})
    assert is_mlflow_run(folder) and is_mlflow_run(folder / "metrics") and not is_mlflow_run(tmp_path)
    records = step_records(folder)
    assert records[0] == (1, {"actor/entropy": 0.5})
    assert records[1][1]["critic/score/mean"] == 0.75 and math.isnan(records[1][1]["actor/grad_norm"])


def test_a_line_that_is_no_metric_line_is_named(tmp_path: Path):
    folder = mlflow_run(tmp_path, {"actor/entropy": [(1, 0.5)]})
    with open(folder / "metrics" / "actor" / "entropy", "a") as handle:
        handle.write("not a metric\n")
    with pytest.raises(ValueError, match=r"metrics/actor/entropy: line 2 is not '<timestamp> <value> <step>'"):
        step_records(folder)


def test_the_run_folder_backtests(tmp_path: Path):
    folder = mlflow_run(tmp_path, {"actor/entropy": [(step, 0.5) for step in range(1, 31)],
                                   "critic/score/mean": [(step, 0.1 * step) for step in range(1, 31)]})
    recorded = read_run(folder, {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                        Timing(start=1_735_689_600.0, default_step_seconds=60.0))
    assert recorded.steps == list(range(1, 31)) and recorded.values[2]["verl_critic_score_mean"] == pytest.approx(0.3)
    plain = tmp_path / "plain"
    plain.mkdir()
    result = run("backfill", str(plain), "--tsdb", str(tmp_path / "tsdb"))
    assert result.exit_code == 1 and "not a regular file" in result.output and "Traceback" not in result.output
