"""A TensorBoard event file (verl's `tensorboard` logger, TRL's `report_to="tensorboard"`) read as the
run's step log, with the `tensorboard` package's own event reader.

Scalars are read by step, the tags of one step merged. verl's logger writes its keys as tags;
transformers' callback writes `train/<key>` and `eval/<key>`, read as TRL's keys and validation
(formats/trl.py). An event file is known by its first record, TensorBoard's version event
(`brain.Event:2`), not by its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from dashgen.formats.trl import LOGGER_TRAIN, logger_key
from dashgen.formats.records import step_lines

VERSION_MARK = b"brain.Event:"
_HEAD_BYTES = 256
# Tags verl's own logger writes: a run with these is verl's, whatever else it logs.
VERL_SECTIONS = ("actor/", "critic/", "timing_s/", "response_length/")


def is_tensorboard_events(path: Path) -> bool:
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            return VERSION_MARK in handle.read(_HEAD_BYTES)
    except OSError:
        return False


def step_records(path: Path) -> list[tuple[int, dict[str, float]]]:
    """(step, values) per step, in step order."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
        from tensorboard.util.tensor_util import make_ndarray
    except ImportError:
        raise ValueError("reading a TensorBoard event file needs the tensorboard package: install dashgen-rl "
                         "with its extra, pip install 'dashgen-rl[tensorboard]'") from None
    scalars: list[tuple[int, str, float]] = []
    try:
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):  # torch's SummaryWriter, as verl and transformers use it
                    scalars.append((int(event.step), value.tag, float(value.simple_value)))
                elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:  # TF2's scalar summaries
                    number = make_ndarray(value.tensor)
                    if number.dtype.kind in "fiu":
                        scalars.append((int(event.step), value.tag, float(number)))
    except Exception as exc:  # the reader's own errors (a truncated record, a bad checksum) have no common base
        raise ValueError(f"not a TensorBoard event file it can read: {type(exc).__name__}: {exc}") from None
    tags = {tag for _, tag, _ in scalars}
    trl = any(tag.startswith(LOGGER_TRAIN) for tag in tags) and not any(tag.startswith(VERL_SECTIONS) for tag in tags)
    by_step: dict[int, dict[str, float]] = {}
    for step, tag, number in scalars:
        by_step.setdefault(step, {})[logger_key(tag) if trl else tag] = number
    return sorted(by_step.items())


def step_log_lines(path: Path) -> Iterator[bytes]:
    """An event file as verl's step-log lines ({"step": N, "data": {...}}), for the step-log reader."""
    return step_lines(step_records(path), "a TensorBoard event file without any scalar")
