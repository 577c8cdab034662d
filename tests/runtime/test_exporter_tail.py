"""An exporter started beside a long log serves exactly what reading the whole log would have served."""

import json
import os
import random

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from dashgen.lifecycle import RunPhase
from dashgen.evaluation.synthetic_runs import step_data
from dashgen.runtime.exporter import RunState
import dashgen.runtime.log_follower
from dashgen.runtime.log_follower import LogFollower
import dashgen.runtime.log_tail
from dashgen.runtime.log_tail import lines_backwards, read_tail, recent_records
from dashgen.sources.statistics_file import rendered_statistics
from dashgen.formats.verl_log import MAX_VALIDATION_SERIES

from conftest import REPO

MAX_LINE_BYTES = 4096
STATISTICS = rendered_statistics(REPO)


def record(step: int, **data) -> bytes:
    return (json.dumps({"step": step, "data": data}) + "\n").encode()


def healthy(step: int) -> bytes:
    return (json.dumps({"step": step, "data": step_data(step, "healthy", None, 0)}) + "\n").encode()


def nonfinite(step: int, loss: bool) -> bytes:
    data = step_data(step, "healthy", None, 0) | {"actor/grad_norm": float("nan")}
    if loss:
        data["actor/pg_loss"] = None
    return (json.dumps({"step": step, "data": data}) + "\n").encode()


def test_step(step: int, score: float) -> bytes:
    return record(step, **{"val-core/openai/gsm8k/reward/mean@4": score, "val-aux/num_turns/mean": 2.0,
                           "actor/ppo_kl": 0.01})


test_step.__test__ = False  # a line maker, not a test


# Lines a log may hold, each made from the step it comes at.
LINE_KINDS = {
    "healthy": lambda step, rng: healthy(step),
    "nonfinite": lambda step, rng: nonfinite(step, loss=False),
    "nonfinite loss": lambda step, rng: nonfinite(step, loss=True),
    "test step": lambda step, rng: test_step(step, rng.random()),
    "validation only": lambda step, rng: record(step, **{"val-aux/openai/gsm8k/reward/mean@1": rng.random()}),
    "compact": lambda step, rng: b'{"step":%d,"data":{"actor/ppo_kl":NaN,"critic/vf_loss":null}}\n' % step,
    "garbage": lambda step, rng: b"Traceback (most recent call last):\n",
    "garbage with a step": lambda step, rng: b'{"step": %d, "data": {"actor/ppo_kl": 0.' % (step + 500) + b"\n",
    "blank": lambda step, rng: b"   \n",
    "too long": lambda step, rng: record(step, note="x" * MAX_LINE_BYTES),
    "escaped test key": lambda step, rng: b'{"step": %d, "data": {"val\\u002dcore/math/acc/mean@1": 0.5}}\n' % step,
    "second step key": lambda step, rng: b'{"step": %d, "data": {"actor/ppo_kl": 0.2}, "step": %d}\n' % (
        step, step + 3),
    "global step only": lambda step, rng: record(0, **{"training/global_step": step}).replace(b'"step": 0', b'"step": null'),
    "not a record": lambda step, rng: b"[1, 2, 3]\n",
    # Keys not exported: a name the exporter serves itself, a name the catalog's key already has.
    "reserved key": lambda step, rng: record(step, **{"exporter/steps": 1.0, "actor/ppo_kl": 0.1}),
    "colliding key": lambda step, rng: record(step, **{"actor.ppo_kl": 0.3, "critic/vf_loss": 0.2}),
}
WEIGHTS = {"healthy": 30, "nonfinite": 6, "nonfinite loss": 3, "test step": 4, "compact": 2, "garbage": 1,
           "garbage with a step": 1, "blank": 1, "too long": 1, "escaped test key": 1, "second step key": 1,
           "global step only": 1, "not a record": 1, "reserved key": 1, "colliding key": 1}


def random_lines(rng: random.Random, count: int, first_step: int = 1, gap: int = 1) -> bytes:
    """`count` lines of kinds drawn by WEIGHTS, a restart now and then; steps `gap` apart at most."""
    lines = []
    step = first_step
    for _ in range(count):
        if rng.random() < 0.04:
            step = rng.randint(max(1, step - 3 * gap), max(1, step - 1))  # a restarted run goes back
        kind = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
        lines.append(LINE_KINDS[kind](step, rng))
        step += 1 if gap == 1 else rng.randint(1, gap)
    return b"".join(lines)


def served(state: RunState) -> list[str]:
    """The exposition, but for the time the newest step was read (which is when, not what), and the
    series a run stopped logging or never logged, which an exporter started at the tail counts from
    there on (dashgen/sources/series_arrival.py, expected_keys.py)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    return [row for row in generate_latest(registry).decode().splitlines()
            if not row.startswith("verl_exporter_last_step_timestamp_seconds{")
            and "verl_exporter_series_unlogged_steps" not in row
            and "verl_exporter_series_never_logged_steps" not in row]


def without_counters(rows: list[str]) -> list[str]:
    counters = ("verl_exporter_steps", "verl_exporter_parse_errors", "verl_exporter_dropped",
                "verl_exporter_key_collisions")
    return [row for row in rows if not any(name in row for name in counters)]


class Pair:
    """Two exporters of one log: one started at its tail, one that read it whole."""

    def __init__(self, path, total_steps: int | None = None, max_line_bytes: int = MAX_LINE_BYTES):
        # With the project's statistics over steps: a tail start reads back as far as they reach.
        self.tail_state = RunState("proj", "exp", total_steps=total_steps, step_statistics=STATISTICS)
        self.whole_state = RunState("proj", "exp", total_steps=total_steps, step_statistics=STATISTICS)
        self.tail = LogFollower(path, self.tail_state, say=lambda _: None, max_line_bytes=max_line_bytes)
        self.whole = LogFollower(path, self.whole_state, say=lambda _: None, max_line_bytes=max_line_bytes,
                                 start_at_tail=False)

    def poll(self) -> None:
        self.tail.poll()
        self.whole.poll()
        assert self.tail.wait_for_history(timeout=30)

    def assert_same(self) -> None:
        assert served(self.tail_state) == served(self.whole_state)
        assert self.tail_state.last_step == self.whole_state.last_step

    def stop(self) -> None:
        self.tail.stop()
        self.whole.stop()


def written_log(tmp_path, content: bytes):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    return path


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few lines, so lines and markers straddle block ends."""
    monkeypatch.setattr(dashgen.runtime.log_tail, "BLOCK_BYTES", 97)


@pytest.mark.parametrize("seed", range(60))
def test_a_tail_start_serves_what_a_whole_read_serves(tmp_path, small_blocks, monkeypatch, seed):
    rng = random.Random(seed)
    if seed % 2:
        monkeypatch.setattr(dashgen.runtime.log_follower, "COUNT_HISTORY_AT_ONCE_BYTES", 0)  # counted in the background
    path = written_log(tmp_path, random_lines(rng, rng.randint(0, 120)) + rng.choice([b"", b'{"step": 9999, "data": {"a']))
    pair = Pair(path, total_steps=rng.choice([None, 20, 60]))
    try:
        pair.poll()
        pair.assert_same()
        with open(path, "ab") as log:  # the run goes on, completing the partial line if there was one
            log.write(random_lines(rng, rng.randint(0, 30), first_step=rng.randint(1, 150)))
        pair.poll()
        pair.assert_same()
        if seed % 3 == 0:  # restarted: the log is rewritten from its start
            path.write_bytes(random_lines(rng, rng.randint(0, 20)))
        elif seed % 3 == 1:  # replaced by another file
            (tmp_path / "new.jsonl").write_bytes(random_lines(rng, rng.randint(1, 20)))
            os.replace(tmp_path / "new.jsonl", path)
        pair.poll()
        pair.assert_same()
    finally:
        pair.stop()


@pytest.mark.parametrize("seed", range(40))
def test_a_tail_start_serves_what_a_whole_read_serves_when_steps_have_gaps_or_are_huge(tmp_path, seed):
    """Steps up to 5,000 apart, from step 1 or near 2^53, restarts between: a median's values read
    back past its own reach, validation results held from a test step before the steps read back,
    and a series logged before them, which makes a window half-logged (13 of 35 hostile logs
    served other statistics from the tail before)."""
    rng = random.Random(seed)
    first = rng.choice([1, 10 ** 6, 10 ** 12, 2 ** 53 - 10 ** 7])
    path = written_log(tmp_path, random_lines(rng, rng.randint(1, 400), first, gap=rng.choice([3, 50, 300, 1000, 5000])))
    pair = Pair(path)
    try:
        pair.poll()
        pair.assert_same()
    finally:
        pair.stop()


def test_held_validation_a_restart_and_streaks_from_the_tail(tmp_path, small_blocks):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    cases = {
        # the newest test step's results are held through the steps after it
        "held": [test_step(10, 0.4), *map(healthy, range(11, 30)), test_step(30, 0.7), *map(healthy, range(31, 40))],
        # a restart after the newest test step drops its results
        "restarted": [test_step(10, 0.4), *map(healthy, range(11, 20)), *map(healthy, range(5, 9))],
        # ... unless the restarted run tested again
        "tested again": [test_step(10, 0.4), *map(healthy, range(11, 20)), healthy(5), test_step(6, 0.9)],
        "streak": [*map(healthy, range(1, 10)), nonfinite(10, loss=False), b"garbage\n", b"\n",
                   nonfinite(11, loss=True), nonfinite(12, loss=True)],
    }
    for name, lines in cases.items():
        path.write_bytes(b"".join(lines))
        pair = Pair(path)
        try:
            pair.poll()
            assert served(pair.tail_state) == served(pair.whole_state), name
        finally:
            pair.stop()
    assert pair.tail_state._streak.steps == 3 and pair.tail_state._streak.loss_steps == 2


def test_a_finished_run_is_finished_from_the_tail_and_a_crash_published_after_it(tmp_path):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    # Finished at step 20, then restarted in the same log: finished all the same, as a whole read says.
    path.write_bytes(b"".join([*map(healthy, range(1, 21)), *map(healthy, range(1, 5))]))
    pair = Pair(path, total_steps=20)
    try:
        pair.poll()
        pair.assert_same()
        assert pair.tail_state.phase is RunPhase.FINISHED
        for state in (pair.tail_state, pair.whole_state):
            state.ended(RunPhase.CRASHED, 137)
        pair.assert_same()
    finally:
        pair.stop()


def test_validation_series_over_the_limit_are_counted_from_history(tmp_path):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    crowded = record(5, **{f"val-aux/source{i}/reward/mean@1": 0.5 for i in range(MAX_VALIDATION_SERIES + 7)})
    path.write_bytes(b"".join([*map(healthy, range(1, 5)), crowded, *map(healthy, range(6, 9))]))
    pair = Pair(path, max_line_bytes=1 << 20)
    try:
        pair.poll()
        pair.assert_same()
        assert any(row.endswith(" 7.0") for row in served(pair.tail_state) if "dropped_keys_total{" in row)
    finally:
        pair.stop()


def test_counters_are_withheld_until_the_history_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(dashgen.runtime.log_follower, "COUNT_HISTORY_AT_ONCE_BYTES", 0)
    path = written_log(tmp_path, b"".join(map(healthy, range(1, 2001))) + b"garbage\n")
    pair = Pair(path)
    try:
        pair.tail.poll()
        pair.whole.poll()
        if pair.tail_state.history_pending:
            assert served(pair.tail_state) == without_counters(served(pair.whole_state))
        assert pair.tail.wait_for_history(timeout=30)
        pair.assert_same()
        assert pair.tail_state.steps_total == 2000 and pair.tail_state.parse_errors_total == 1
    finally:
        pair.stop()


def test_stop_ends_the_history_count_and_closes_its_file(tmp_path, monkeypatch):
    monkeypatch.setattr(dashgen.runtime.log_follower, "COUNT_HISTORY_AT_ONCE_BYTES", 0)
    path = written_log(tmp_path, b"".join(map(healthy, range(1, 3001))))
    open_before = set(os.listdir("/proc/self/fd"))
    follower = LogFollower(path, RunState("proj", "exp"), say=lambda _: None)
    follower.poll()
    follower.stop()
    assert not [thread for thread in __import__("threading").enumerate() if thread.name == "log-history"]
    assert set(os.listdir("/proc/self/fd")) <= open_before


def test_the_tail_start_decodes_only_the_lines_that_decide(tmp_path, monkeypatch):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    lines = [test_step(step, 0.5) if step % 100 == 0 else healthy(step) for step in range(1, 5001)]
    path.write_bytes(b"".join([*lines, nonfinite(5001, loss=False), nonfinite(5002, loss=False)]))
    decoded = []
    parse_line = dashgen.runtime.log_tail.parse_line
    monkeypatch.setattr(dashgen.runtime.log_tail, "parse_line", lambda line: decoded.append(line) or parse_line(line))
    with open(path, "rb") as log:
        tail = read_tail(log.fileno(), path.stat().st_size, MAX_LINE_BYTES)
    assert tail.newest[0] == 5002 and tail.nonfinite_steps == 2
    assert tail.validation  # step 5000's results
    assert len(decoded) <= 5  # the two non-finite steps, the finite one before them, the test step
    path.write_bytes(b"".join(record(step, **{"actor/ppo_kl": 0.1}) for step in range(1, 5001)))  # never tested
    decoded.clear()
    with open(path, "rb") as log:
        assert not read_tail(log.fileno(), path.stat().st_size, MAX_LINE_BYTES).validation
    assert len(decoded) == 1


def test_lines_backwards_returns_every_line_newest_first_and_marks_long_ones(tmp_path, small_blocks):
    lines = [b"a" * size for size in (0, 5, 96, 97, 98, 300, 1, 0, 2000, 7)]
    path = tmp_path / "log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with open(path, "rb") as log:
        found = list(lines_backwards(log.fileno(), path.stat().st_size, max_line_bytes=1000))
    assert [line for _, line in found] == [None if len(line) > 1000 else line for line in reversed(lines)]
    assert [start for start, _ in found][-1] == 0


def relogged(step: int, rng: random.Random) -> bytes:
    """One of many lines a trainer writes for one step: some of its series, timed or not, NaN or
    garbage that reads as the step; a copy of the line before it is made by the caller."""
    kind = rng.choice(["subset", "subset", "nan", "untimed", "validation only", "garbage with the step", "escaped",
                       "healthy"])
    if kind == "garbage with the step":
        return b'{"step": %d, "data": {"actor/entropy": 0.' % step + b"\n"
    if kind == "escaped":
        return b'{"step": %d, "data": {"actor\\/entropy": %.3f}}\n' % (step, rng.random())
    if kind == "validation only":
        return record(step, **{"val-aux/openai/gsm8k/reward/mean@1": rng.random()})
    data = step_data(step, "healthy", None, rng.randint(0, 9))
    if kind == "healthy":
        return record(step, **data)
    data = {key: value for key, value in data.items() if rng.random() < 0.3}
    if kind == "nan":
        data["actor/entropy"] = float("nan")
    if kind == "untimed":
        data.pop("timing_s/step", None)
    else:
        data["timing_s/step"] = rng.choice([1.0, 30.0, 90.0])
    return record(step, **data)


# Seed 8 (drawn anew since the catalog's two reward-KL metrics added keys to step_data) logs step 10
# on 20 lines, val-core on two of them and val-aux alone on several after: the whole read serves a
# val_core max_80steps that the tail start does not. Found, not yet analysed: a gap of the tail's skim
# of a step's lines (issue 38) with validation results held and replaced within one step; pinned
# (strict) until it is fixed.
_VALIDATION_REPLACED_WITHIN_A_STEP = pytest.mark.xfail(strict=True, reason="the tail's skim of a step's lines "
                                                       "misses validation results replaced within that step")


@pytest.mark.parametrize("seed", [pytest.param(seed, marks=_VALIDATION_REPLACED_WITHIN_A_STEP) if seed == 8 else seed
                                  for seed in range(30)])
def test_a_step_logged_on_many_lines_serves_from_the_tail_what_a_whole_read_serves(tmp_path, small_blocks, seed):
    """The tail start decodes only the lines of a step that decide its statistics (issue 38)."""
    rng = random.Random(seed)
    lines = []
    step = 1
    for _ in range(rng.randint(1, 40)):
        for _ in range(rng.choice([1, 1, 2, 5, 30])):
            lines.append(lines[-1] if lines and rng.random() < 0.3 else relogged(step, rng))
        step += rng.choice([1, 1, 2, 7])
    pair = Pair(written_log(tmp_path, b"".join(lines)))
    try:
        pair.poll()
        pair.assert_same()
    finally:
        pair.stop()


def test_a_step_logged_again_and_again_is_skimmed_not_decoded(tmp_path, monkeypatch):
    """200,000 lines of one step made the first scrape take 8 s and 140 MiB: each was decoded and observed."""
    timed = [record(300, **{"actor/ppo_kl": 0.5, "actor/entropy": 0.4, "timing_s/step": 60.0 + i}) for i in range(50)]
    path = written_log(tmp_path, b"".join([*map(healthy, range(1, 300)), *[timed[0]] * 5000, *timed * 100]))
    pair = Pair(path, max_line_bytes=1 << 20)
    try:
        pair.poll()
        pair.assert_same()
        decoded = []
        parse_line = dashgen.runtime.log_tail.parse_line
        monkeypatch.setattr(dashgen.runtime.log_tail, "parse_line", lambda line: decoded.append(line) or parse_line(line))
        with open(path, "rb") as log:
            recent = recent_records(log.fileno(), path.stat().st_size, pair.tail_state.statistics_reach, 1 << 20,
                                    pair.tail_state.statistics_input())
    finally:
        pair.stop()
    assert recent[-2:] == [(300, json.loads(timed[0])["data"]), (300, json.loads(timed[-1])["data"])]
    assert len(recent) < 350 and len(decoded) < 350  # the steps before, and of 10,000 lines of step 300 two
