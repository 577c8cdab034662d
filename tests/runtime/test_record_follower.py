"""`dashgen export` follows a run's console log and its TensorBoard event files as they grow (issue 55):
at each step written, the RunState fed from them serves what the one fed from the same run's step
log serves. In process, polled by hand; tests/end_to_end/test_follow_formats.py runs real exporters."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from dashgen.catalog import LAST_STEP_METRIC
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower
from dashgen.runtime.record_follower import ConsoleFollower, EventsFollower, RecordFollower, follower_kind
from support import console_lines, run_steps, samples

SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter


def served(state: RunState) -> dict[str, float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    return {name: value for name, value in samples(generate_latest(registry).decode()).items()
            if not name.startswith(LAST_STEP_METRIC)}


def same(mine: dict[str, float], theirs: dict[str, float]) -> bool:
    return mine.keys() == theirs.keys() and all(
        (math.isnan(mine[key]) and math.isnan(theirs[key])) or mine[key] == theirs[key] for key in mine)


def test_a_growing_console_log_serves_what_the_step_log_serves(tmp_path: Path):
    jsonl, console = tmp_path / "p" / "e.jsonl", tmp_path / "p" / "e.log"
    jsonl.parent.mkdir()
    console.write_text("2025-01-01 12:00:00 INFO Ray starting\n")
    jsonl.touch()
    theirs, mine = RunState("p", "e"), RunState("p", "e")
    step_log, follower = LogFollower(jsonl, theirs, say=lambda _: None), RecordFollower(console, mine, say=print)
    step_log.poll(), follower.poll()
    for step, data in run_steps(30):
        with open(jsonl, "a") as log:
            log.write(json.dumps({"step": step, "data": data}) + "\n")
        text = console_lines(step, data)
        with open(console, "a") as log:
            log.write(text[:100])  # a line written in two pieces: nothing of it is read before its end
        follower.poll()
        with open(console, "a") as log:
            log.write(text[100:])
        step_log.poll(), follower.poll()
        assert same(served(mine), served(theirs)), step
    assert isinstance(follower.following, ConsoleFollower) and mine.parse_errors_total == 0


def test_a_growing_event_file_serves_what_the_step_log_serves(tmp_path: Path):
    jsonl, events = tmp_path / "p" / "e.jsonl", tmp_path / "tensorboard"
    jsonl.parent.mkdir()
    jsonl.touch()
    theirs, mine = RunState("p", "e"), RunState("p", "e")
    step_log, follower = LogFollower(jsonl, theirs, say=lambda _: None), EventsFollower(events, mine, settle_seconds=0)
    assert follower.poll() == 0 and mine.last_step is None  # not there yet
    writer = SummaryWriter(str(events))
    try:
        for step, data in run_steps(30):
            with open(jsonl, "a") as log:
                log.write(json.dumps({"step": step, "data": data}) + "\n")
            for key, value in data.items():
                writer.add_scalar(key, value, step)
            writer.flush()
            step_log.poll(), follower.poll()
            follower.poll()  # nothing more: the step has settled, and is served
            assert same(served(mine), served(theirs)), step
    finally:
        writer.close()
    assert mine.steps_total == theirs.steps_total == 30


def test_a_step_cut_by_a_flush_is_amended_and_counted_once(tmp_path: Path):
    steps = run_steps(3)
    jsonl = tmp_path / "e.jsonl"
    jsonl.write_text("".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in steps))
    theirs = RunState("p", "e")
    LogFollower(jsonl, theirs, start_at_tail=False).poll()
    mine = RunState("p", "e")
    follower = EventsFollower(tmp_path / "tb", mine, say=lambda _: None, settle_seconds=0.0)
    writer = SummaryWriter(str(tmp_path / "tb"))
    try:
        for step, data in steps[:2]:
            for key, value in data.items():
                writer.add_scalar(key, value, step)
        step, data = steps[2]
        keys = sorted(data)
        for key in keys[:10]:
            writer.add_scalar(key, data[key], step)
        writer.flush()
        follower.poll()
        follower.poll()  # nothing new: settled, the part of step 3 read is served
        assert mine.last_step == 3 and not same(served(mine), served(theirs))
        for key in keys[10:]:
            writer.add_scalar(key, data[key], step)
        writer.flush()
        follower.poll()
        follower.poll()  # settled again: the rest of step 3 amends it
    finally:
        writer.close()
    assert same(served(mine), served(theirs)) and mine.steps_total == 3


def test_the_follower_is_chosen_by_content_once_it_shows(tmp_path: Path):
    log = tmp_path / "run.log"
    assert follower_kind(log) is None
    log.write_text("Ray is start")  # a first line not yet whole
    assert follower_kind(log) is None
    log.write_text("Ray is starting\n")
    assert follower_kind(log) is ConsoleFollower
    log.write_text('{"step": 1, "data": {}}\n')
    assert follower_kind(log) is LogFollower
    (tmp_path / "tb").mkdir()
    assert follower_kind(tmp_path / "tb") is None
    SummaryWriter(str(tmp_path / "tb")).close()
    assert follower_kind(tmp_path / "tb") is EventsFollower
    [events] = (tmp_path / "tb").iterdir()
    assert follower_kind(events) is EventsFollower
