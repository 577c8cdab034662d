"""A transformers `TrainerCallback` that writes a TRL run's logs as verl's step log, so `dashgen
export` follows a TRL or Unsloth run as it follows a verl one.

    from dashgen.sources.trl_callback import StepLogCallback
    trainer = GRPOTrainer(..., callbacks=[StepLogCallback("logs/my-project/grpo-qwen.jsonl")])

Each `on_log` becomes one line `{"step": N, "data": {...}}` with TRL's keys mapped by meaning
(dashgen/sources/trl.py), `training/global_step`, and `timing_s/step`: the wall time since the
last logged step over the steps between, since TRL logs no per-step time. Only the main process
writes. Requires `transformers` (importing this module imports it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from transformers import TrainerCallback

from dashgen.sources.trl import SUMMARY_KEYS, step_data


class StepLogCallback(TrainerCallback):
    """Appends verl step-log lines to `path` (its folder and file name are the run's project and
    experiment labels for `dashgen export`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._last_time: float | None = None
        self._last_step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self._last_time, self._last_step = time.monotonic(), state.global_step
        if state.is_world_process_zero:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or SUMMARY_KEYS & logs.keys():
            return
        step = state.global_step
        data = step_data(logs)
        data["training/global_step"] = step
        now = time.monotonic()
        if self._last_time is not None and step > self._last_step and not _only_eval(logs):
            data["timing_s/step"] = (now - self._last_time) / (step - self._last_step)
            self._last_time, self._last_step = now, step
        with open(self.path, "a") as log:
            log.write(json.dumps({"step": step, "data": data}, sort_keys=True) + "\n")


def _only_eval(logs: dict) -> bool:
    """An evaluation's entry: it measures no training step, so it moves no step time."""
    return all(key.startswith("eval_") or key in ("epoch", "step") for key in logs)
