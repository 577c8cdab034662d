"""`dashgen export` follows a console log and a TensorBoard log directory that grow while it runs, and
serves what it serves for the same run's step log (issue 55): three real exporter processes, one
per record, the run written to all three a step at a time, each step's scrapes compared."""

from __future__ import annotations

import json
import math

import pytest

from dashgen.catalog import LAST_STEP_METRIC
from support import console_lines, run_steps, wait_until

pytestmark = pytest.mark.live
SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter
STEPS = 12


def _comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {name: value for name, value in metrics.items() if not name.startswith(LAST_STEP_METRIC)}


def _at_step(exporter, step: int) -> dict[str, float] | None:
    metrics = exporter.metrics()
    served = [value for name, value in metrics.items() if name.startswith("verl_training_global_step{")]
    return _comparable(metrics) if served == [step] else None


def test_export_follows_a_growing_console_log_and_event_directory_as_it_does_the_step_log(tmp_path, exporters):
    jsonl, console, events = tmp_path / "run.jsonl", tmp_path / "output.log", tmp_path / "tensorboard"
    jsonl.touch()
    console.write_text("2025-01-01 12:00:00 INFO Ray starting\n")
    names = ("--project", "p", "--experiment", "e")
    step_log, from_console, from_events = (exporters(path, *names) for path in (jsonl, console, events))
    for exporter in (step_log, from_console, from_events):
        exporter.scrape()  # each answers before the run starts writing
    writer = SummaryWriter(str(events))
    try:
        for step, data in run_steps(STEPS):
            with open(jsonl, "a") as log:
                log.write(json.dumps({"step": step, "data": data}) + "\n")
            with open(console, "a") as log:
                log.write(console_lines(step, data))
            for key, value in data.items():
                writer.add_scalar(key, value, step)
            writer.flush()
            theirs = wait_until(lambda: _at_step(step_log, step), 30, f"the step log's exporter at step {step}")
            for exporter in (from_console, from_events):
                mine = wait_until(lambda: _at_step(exporter, step), 30, f"{exporter.port} at step {step}")
                assert mine.keys() == theirs.keys(), (step, mine.keys() ^ theirs.keys())
                assert all((math.isnan(mine[name]) and math.isnan(theirs[name])) or mine[name] == theirs[name]
                           for name in mine), step
    finally:
        writer.close()
