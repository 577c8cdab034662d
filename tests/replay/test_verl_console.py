"""verl's console log read as its step log (issue 55, item 1): step lines among everything else a
training log holds, values as verl prints them, recognised by content by every command that reads
a run (they all read it through the backfill's reader)."""

import json
import math
from pathlib import Path

import pytest

from dashgen.formats.verl_console import console_line, console_records, is_console_log
from dashgen.replay.backfill import Timing, read_run
from dashgen.review.corpus import public_corpus

RAY = "\x1b[36m(TaskRunner pid=3230286)\x1b[0m "


def test_a_step_line_is_read_as_verl_prints_it():
    line = (RAY + "step:83 - actor/entropy:2.369 - actor/grad_norm:nan - actor/ppo_kl:np.float64(0.452) - "
            "timing_s/step:2499.446 - training/global_step:83 - note:text")
    step, values = console_line(line)
    assert step == 83 and values["actor/entropy"] == 2.369 and values["actor/ppo_kl"] == 0.452
    assert math.isnan(values["actor/grad_norm"]) and "note" not in values
    for other in ("Training Progress:  12%|█▏        | 12/100 [10:01<1:13:30, 50.12s/it]",
                  "Traceback (most recent call last):", "WARN: rank 1 grad_norm is not finite",
                  "(TaskRunner pid=1) validation generation end", ""):
        assert console_line(other) is None


def test_the_lines_of_one_step_merge_and_steps_come_in_order():
    lines = [RAY + "step:2 - actor/pg_loss:0.1", "step:1 - actor/pg_loss:0.3",
             "(WorkerDict pid=7) step:2 - critic/score/mean:0.5", "step:2 - val-core/openai/gsm8k/reward/mean@1:0.4"]
    assert console_records(lines) == [(1, {"actor/pg_loss": 0.3}),
                                      (2, {"actor/pg_loss": 0.1, "critic/score/mean": 0.5,
                                           "val-core/openai/gsm8k/reward/mean@1": 0.4})]


def test_a_console_log_is_known_by_its_content(tmp_path: Path):
    console = tmp_path / "train.log"
    console.write_text("2025-01-01 12:00:00 INFO starting\n" + RAY + "step:1 - actor/pg_loss:0.1\n")
    jsonl = tmp_path / "console.log"  # named like a console log, holding verl's JSONL
    jsonl.write_text('{"step": 1, "data": {"actor/pg_loss": 0.1}}\n')
    state = tmp_path / "state.log"
    state.write_text('{\n  "log_history": []\n}\n')
    assert is_console_log(console) and not is_console_log(jsonl) and not is_console_log(state)
    assert not is_console_log(tmp_path)


def _console_from(steps_jsonl: Path, out: Path) -> None:
    """A console log of a run: Ray's prefix and colours, a progress bar and a warning between steps,
    each step's values split over two lines, printed as Python prints floats."""
    lines = []
    for record in map(json.loads, steps_jsonl.read_text().splitlines()):
        items = [f"{key}:{'nan' if value is None else value!r}" for key, value in sorted(record["data"].items())]
        half = len(items) // 2
        lines += [f"{RAY}step:{record['step']} - " + " - ".join(items[:half]),
                  f"Training Progress:  {record['step']}it [00:10, 10.0s/it]",
                  f"{RAY}step:{record['step']} - " + " - ".join(items[half:]),
                  "WARNING: something a trainer says"]
    out.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("run", ["verl-qwen25-7b-gsm8k-ppo-dstack", "trl-qwen25-7b-gsm8k-grpo-rho010-reward-collapse"])
def test_a_console_log_reads_as_the_same_run_as_its_step_log(tmp_path: Path, run: str):
    steps = public_corpus() / run / "steps.jsonl"
    console = tmp_path / "output.log"
    _console_from(steps, console)
    labels = {"job": "verl", "instance": "i", "project": "p", "experiment": "e"}
    timing = Timing(start=1_735_689_600.0, default_step_seconds=60.0)
    from_jsonl, from_console = read_run(steps, labels, timing), read_run(console, labels, timing)
    assert from_console.steps == from_jsonl.steps and len(from_console.steps) >= 40

    def same(a: float, b: float) -> bool:
        return (math.isnan(a) and math.isnan(b)) or a == b

    for mine, theirs in zip(from_console.values, from_jsonl.values):
        assert mine.keys() == theirs.keys() and all(same(mine[key], theirs[key]) for key in mine)
