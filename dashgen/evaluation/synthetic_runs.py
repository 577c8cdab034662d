"""Synthetic verl step logs (the JSONL of verl's file logger) for tests and benchmarks.

A run is healthy until `event_at`, then shows its kind's failure:
- healthy:      no event
- diverging:    KL x10, grad norm x8 and entropy x0.2 from `event_at` on
- reward_cliff: the reward drops to a fifth from `event_at` on
- truncation:   30% of responses hit the length limit from `event_at` on
- stalled:      the log simply ends at `event_at` (the trainer hangs)
Every key of the catalog is logged (in verl's own units), so every panel has data.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from dashgen.catalog import CATALOG
from dashgen.evaluation.simulate import neutral_value

KINDS = ("healthy", "diverging", "reward_cliff", "truncation", "stalled")
STEP_SECONDS = 60.0


# Validation every TEST_FREQ steps on one data source (verl's key: section/data_source/variable/metric).
TEST_FREQ = 5
DATA_SOURCE = "openai/gsm8k"


def step_data(step: int, kind: str = "healthy", event_at: int | None = None, seed: int = 0) -> dict:
    rng = random.Random(seed * 1_000_003 + step)
    broken = event_at is not None and step >= event_at
    data = {metric.verl_keys[0]: neutral_value(metric.verl_keys[0]) for metric in CATALOG.values() if metric.verl_keys}
    progress = 1 - math.exp(-step / 400)
    data.update({
        "training/global_step": step,
        "actor/ppo_kl": 0.02 * (1 + 0.3 * rng.uniform(-1, 1)),
        "actor/grad_norm": 1.0 * (1 + 0.2 * rng.uniform(-1, 1)),
        # A slow, healthy decline of entropy over the run.
        "actor/entropy": 0.9 - 0.4 * progress + 0.02 * rng.uniform(-1, 1),
        "critic/score/mean": 0.2 + 0.6 * progress + 0.03 * rng.uniform(-1, 1),
        "critic/score/min": 0.0,
        "critic/score/max": 1.0,
        "response_length/mean": 300 + 50 * rng.uniform(-1, 1),
        "response_length/clip_ratio": 0.01 + 0.01 * rng.random(),
        "response/aborted_ratio": 0.0,
        "timing_s/step": STEP_SECONDS * (1 + 0.05 * rng.uniform(-1, 1)),
        "perf/total_num_tokens": 1_000_000 * (1 + 0.05 * rng.uniform(-1, 1)),
        "perf/max_memory_allocated_gb": 50.0,
        "perf/max_memory_reserved_gb": 60.0,
    })
    if broken and kind == "diverging":
        data["actor/ppo_kl"] *= 10
        data["actor/grad_norm"] *= 8
        data["actor/entropy"] *= 0.2
    elif broken and kind == "reward_cliff":
        data["critic/score/mean"] *= 0.2
    elif broken and kind == "truncation":
        data["response_length/clip_ratio"] = 0.3
    if step % TEST_FREQ == 0:  # a test step, as trainer.test_freq makes verl log them
        data.update({f"val-core/{DATA_SOURCE}/reward/mean@4": data["critic/score/mean"] - 0.05,
                     f"val-aux/{DATA_SOURCE}/reward/std@4": 0.1,
                     f"val-aux/{DATA_SOURCE}/reward/best@4/mean": min(1.0, data["critic/score/mean"] + 0.1)})
    return data


def step_line(step: int, kind: str = "healthy", event_at: int | None = None, seed: int = 0) -> str:
    return json.dumps({"step": step, "data": step_data(step, kind, event_at, seed)}) + "\n"


def write_run(path: Path, kind: str, steps: int, event_at: int | None = None, seed: int = 0) -> Path:
    """A whole run at once (as verl leaves it); a stalled run ends at `event_at`."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {KINDS}")
    last = min(steps, event_at) if kind == "stalled" and event_at is not None else steps
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for step in range(1, last + 1):
            handle.write(step_line(step, kind, event_at, seed))
    return path
