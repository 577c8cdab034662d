"""Each corpus run of a sample, written back out in each format dashgen reads (issue 55), gives the same
`dashgen backtest --format json` result as its steps.jsonl: verl's console lines as its console logger
prints them, an event file through TensorBoard's writer (and the log directory holding it), W&B's JSON
rows and CSV, MLflow's file store. One backtest per run takes all its records side by side."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from conftest import run
from dashgen.review.corpus import public_corpus

pytestmark = [pytest.mark.live, pytest.mark.heavy]
SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter
SAMPLE = ("verl-qwen25-7b-gsm8k-ppo-dstack", "trl-qwen25-7b-gsm8k-grpo-rho010-reward-collapse",
          "custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200-gradnorm-blowup")
START = "2025-01-01T00:00:00Z"
RUN_LABELS = ("job", "instance", "project", "experiment")


def _steps(run_name: str) -> list[tuple[int, dict[str, float]]]:
    """The run's steps, a null (verl's NaN) as NaN."""
    records = [json.loads(line) for line in (public_corpus() / run_name / "steps.jsonl").read_text().splitlines()]
    return [(record["step"], {key: math.nan if value is None else float(value) for key, value in record["data"].items()
                              if value is None or isinstance(value, (int, float)) and not isinstance(value, bool)})
            for record in records]


def _console(steps, path: Path) -> Path:
    """As verl's console logger prints a step (`concat_dict_to_str`: pprint.pformat of each number),
    among a trainer's other output."""
    with open(path, "w") as log:
        log.write("(TaskRunner pid=1) Training Progress: 0%|          | 0/400\n")
        for step, data in steps:
            log.write(f"(TaskRunner pid=1) step:{step} - " + " - ".join(f"{key}:{value!r}" for key, value in data.items())
                      + "\n(TaskRunner pid=1) validation generation end\n")
    return path


def _events(steps, folder: Path) -> Path:
    writer = SummaryWriter(str(folder))
    for step, data in steps:
        for key, value in data.items():
            writer.add_scalar(key, value, step)
    writer.close()
    return folder


def _rows(steps) -> tuple[list[str], list[dict]]:
    """W&B's history: every key in every row, None where the step did not log it; _step counts rows."""
    keys = sorted({key for _, data in steps for key in data} | {"training/global_step"})
    return keys, [{"_step": index, "_runtime": float(index), **{key: data.get(key) for key in keys},
                   "training/global_step": step} for index, (step, data) in enumerate(steps)]


def _wandb_json(steps, path: Path) -> Path:
    _, rows = _rows(steps)
    path.write_text(json.dumps([{key: ("NaN" if isinstance(value, float) and math.isnan(value) else value)
                                 for key, value in row.items()} for row in rows]))
    return path


def _wandb_csv(steps, path: Path) -> Path:
    keys, rows = _rows(steps)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["_step", *keys])
        for row in rows:
            writer.writerow([row["_step"], *("" if row[key] is None else repr(row[key]) for key in keys)])
    return path


def _mlflow(steps, folder: Path) -> Path:
    """mlruns/<experiment>/<run>/metrics/<key>: '<timestamp ms> <value> <step>' lines (a key's / a folder)."""
    lines: dict[str, list[str]] = {}
    for index, (step, data) in enumerate(steps):
        for key, value in data.items():
            lines.setdefault(key, []).append(f"{1_735_689_600_000 + index} {value!r} {step}")
    for key, written in lines.items():
        path = folder / "metrics" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(written) + "\n")
    return folder


FORMATS = {"console": lambda steps, at: _console(steps, at / "output.log"),
           "event file": lambda steps, at: next(_events(steps, at / "tb").iterdir()),
           "event directory": lambda steps, at: _events(steps, at / "tensorboard"),
           "W&B JSON": lambda steps, at: _wandb_json(steps, at / "history.json"),
           "W&B CSV": lambda steps, at: _wandb_csv(steps, at / "history.csv"),
           "MLflow": lambda steps, at: _mlflow(steps, at / "mlruns" / "0" / "run")}


def _result(backtest: dict, path: Path) -> dict:
    """A run's part of a backtest, without what names the run: its steps, and each alert's firings in steps."""
    [described] = [entry for entry in backtest["runs"] if entry["path"] == str(path)]
    labels = described["labels"]
    alerts = {}
    for alert in backtest["alerts"]:
        if all(alert["labels"].get(label) == labels[label] for label in RUN_LABELS):
            key = (alert["alertname"], tuple(sorted((name, value) for name, value in alert["labels"].items()
                                                    if name not in RUN_LABELS)))
            alerts[key] = [(firing["start_step"], firing["end_step"]) for firing in alert["firing"]]
    return {"steps": (described["first_step"], described["last_step"], described["steps"]),
            "unparseable": described["unparseable_lines"], "alerts": alerts}


@pytest.mark.parametrize("run_name", SAMPLE)
def test_a_corpus_run_in_each_format_backtests_as_its_step_log(tmp_path: Path, run_name: str):
    steps = _steps(run_name)
    records = {"steps.jsonl": public_corpus() / run_name / "steps.jsonl"}
    for name, write in FORMATS.items():
        folder = tmp_path / name.replace(" ", "-").replace("&", "")
        folder.mkdir()
        records[name] = write(steps, folder)
    result = run("backtest", "--format", "json", "--start", START, *map(str, records.values()))
    assert result.exit_code == 0, result.output
    backtest = json.loads(result.stdout)
    theirs = _result(backtest, records["steps.jsonl"])
    assert any(theirs["alerts"].values())  # the comparison has firings to compare
    for name, path in records.items():
        mine = _result(backtest, path)
        assert mine == theirs, (name, {key: (value, theirs["alerts"].get(key)) for key, value in mine["alerts"].items()
                                       if value != theirs["alerts"].get(key)})
