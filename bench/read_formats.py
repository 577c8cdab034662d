"""Benchmark: reading a 100,000-step run from each format dashgen reads, against reading its JSONL step log.

Run from the repository root: .venv/bin/python bench/read_formats.py
The goal (issue 55) is at most 2x the JSONL reader's time for each format. What is timed is the
reader every command uses (dashgen.replay.backfill.read_run: the format's records as step-log lines,
then the same mapping, streaks and clock as the step log's), in a process of its own per format, as
processor time (on a machine others use, wall time grows with their load, processor time far less).
The run is the synthetic healthy run (every catalog key, 92 a step, validation every 5 steps); its
values are held for no metric (`keep`), so what is measured is reading, not holding 9 million values.

    .venv/bin/python bench/read_formats.py write DIR     # write the run in each format into DIR
    .venv/bin/python bench/read_formats.py read PATH     # read one record once (for a paired timing)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dashgen.evaluation.run_records import (read_steps, write_console, write_events, write_mlflow, write_wandb_csv,
                                            write_wandb_json)
from dashgen.evaluation.synthetic_runs import write_run
from dashgen.replay.backfill import Timing, read_run

STEPS = 100_000
GOAL_RATIO = 2.0
RECORDS = {"JSONL step log": "bench/run.jsonl", "verl console log": "console.log",
           "TensorBoard log directory": "tensorboard", "W&B JSON rows": "history.json",
           "W&B CSV": "history.csv", "MLflow run folder": "mlruns/0/run"}


def write(folder: Path) -> None:
    jsonl = write_run(folder / RECORDS["JSONL step log"], "healthy", STEPS)
    steps = read_steps(jsonl)
    write_console(steps, folder / RECORDS["verl console log"])
    write_events(steps, folder / RECORDS["TensorBoard log directory"])
    write_wandb_json(steps, folder / RECORDS["W&B JSON rows"])
    write_wandb_csv(steps, folder / RECORDS["W&B CSV"])
    write_mlflow(steps, folder / RECORDS["MLflow run folder"])


def read(path: Path) -> float:
    """Processor seconds to read the record at `path` as a run."""
    began = time.process_time()
    run = read_run(path, {"job": "verl", "instance": "bench", "project": "bench", "experiment": "run"},
                   Timing(start=1_735_689_600.0), keep=set())
    seconds = time.process_time() - began
    assert len(run.steps) == STEPS, (path, len(run.steps))
    return seconds


def main() -> int:
    if sys.argv[1:2] == ["write"]:
        write(Path(sys.argv[2]))
        return 0
    if sys.argv[1:2] == ["read"]:
        print(f"{read(Path(sys.argv[2])):.2f}")
        return 0
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        folder = Path(tmp)
        began = time.perf_counter()
        write(folder)
        print(f"wrote {STEPS:,} steps in {len(RECORDS)} formats in {time.perf_counter() - began:.0f} s")
        seconds = {}
        for name, relative in RECORDS.items():
            out = subprocess.run([sys.executable, __file__, "read", str(folder / relative)], check=True,
                                 capture_output=True, text=True).stdout
            seconds[name] = float(out)
    failed = False
    for name, cpu in seconds.items():
        ratio = cpu / seconds["JSONL step log"]
        failed |= ratio > GOAL_RATIO
        print(f"{name:28} {cpu:7.1f} s processor time   {ratio:4.2f}x the JSONL reader's (goal: at most {GOAL_RATIO:g}x)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
