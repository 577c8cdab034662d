"""A run's steps written out in each format dashgen reads a run from (issue 55), for the tests that read
each back as the same run and the benchmark of their readers (bench/read_formats.py).

Each writer takes the steps as (step, {verl key: value}) with NaN for verl's null, and writes what the
tool that produces the format writes: verl's console lines as its console logger prints them
(`concat_dict_to_str`: `step:N - key:value`, each number as pprint formats it) among a trainer's other
output; W&B's history as `run.scan_history()` gives it (every key in every row, None where a row did
not log it, `_step` counting rows) in JSON or as the CSV the UI downloads; MLflow's file store
(`metrics/<key>`, `<timestamp ms> <value> <step>` lines); TensorBoard event records one scalar per
event, as torch's SummaryWriter writes them (its own writer is used where the tests can take its time).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Iterable

from dashgen.formats.tensorboard_events import event_record

Steps = Iterable[tuple[int, dict[str, float]]]
STEP_KEY = "training/global_step"
FIRST_TIMESTAMP_MS = 1_735_689_600_000


def read_steps(steps_jsonl: Path) -> list[tuple[int, dict[str, float]]]:
    """A step log's records, its numbers as floats and a null (verl's NaN) as NaN."""
    out = []
    with open(steps_jsonl) as log:
        for line in log:
            record = json.loads(line)
            out.append((record["step"], {key: math.nan if value is None else float(value)
                                         for key, value in record["data"].items()
                                         if value is None or (isinstance(value, (int, float))
                                                              and not isinstance(value, bool))}))
    return out


def write_console(steps: Steps, path: Path) -> Path:
    with open(path, "w") as log:
        log.write("(TaskRunner pid=1) Training Progress: 0%|          | 0/400\n")
        for step, data in steps:
            log.write(f"(TaskRunner pid=1) step:{step} - " + " - ".join(f"{key}:{value!r}" for key, value in data.items())
                      + "\n(TaskRunner pid=1) validation generation end\n")
    return path


def _rows(steps: Steps) -> tuple[list[str], Iterable[dict]]:
    steps = list(steps)
    keys = sorted({key for _, data in steps for key in data} | {STEP_KEY})
    return keys, ({"_step": index, "_runtime": float(index), **{key: data.get(key) for key in keys}, STEP_KEY: step}
                  for index, (step, data) in enumerate(steps))


def write_wandb_json(steps: Steps, path: Path) -> Path:
    """The rows as `json.dump(list(run.scan_history()), f)` writes them (W&B gives a NaN as the string 'NaN')."""
    _, rows = _rows(steps)
    with open(path, "w") as out:
        out.write("[")
        for index, row in enumerate(rows):
            out.write(("," if index else "") + json.dumps(
                {key: "NaN" if isinstance(value, float) and math.isnan(value) else value for key, value in row.items()}))
        out.write("]")
    return path


def write_wandb_csv(steps: Steps, path: Path) -> Path:
    keys, rows = _rows(steps)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["_step", *keys])
        for row in rows:
            writer.writerow([row["_step"], *("" if row[key] is None else repr(row[key]) for key in keys)])
    return path


def write_mlflow(steps: Steps, run_folder: Path) -> Path:
    """mlruns/<experiment>/<run>/metrics/<key> (a key's / makes folders), one file per key."""
    handles: dict[str, object] = {}
    try:
        for index, (step, data) in enumerate(steps):
            for key, value in data.items():
                if key not in handles:
                    path = run_folder / "metrics" / key
                    path.parent.mkdir(parents=True, exist_ok=True)
                    handles[key] = open(path, "w")
                handles[key].write(f"{FIRST_TIMESTAMP_MS + index} {value!r} {step}\n")
    finally:
        for handle in handles.values():
            handle.close()
    return run_folder


def write_events(steps: Steps, folder: Path) -> Path:
    """An event file in `folder` as torch's SummaryWriter writes one: the version event, then one event
    per scalar (wall time, step, a simple_value summary), in TFRecord frames."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "events.out.tfevents.1735689600.bench.1.0"
    with open(path, "wb") as out:
        out.write(event_record(Event(wall_time=1_735_689_600.0, file_version="brain.Event:2").SerializeToString()))
        for index, (step, data) in enumerate(steps):
            for key, value in data.items():
                event = Event(wall_time=1_735_689_600.0 + index, step=step,
                              summary=Summary(value=[Summary.Value(tag=key, simple_value=value)]))
                out.write(event_record(event.SerializeToString()))
    return folder
