"""A transformers `TrainerCallback` that writes a TRL run's logs as verl's step log, so `dashgen
export` follows a TRL or Unsloth run as it follows a verl one.

    from dashgen.formats.trl_callback import StepLogCallback
    trainer = GRPOTrainer(..., callbacks=[StepLogCallback("logs/my-project/grpo-qwen.jsonl")])

Each `on_log` becomes one line `{"step": N, "data": {...}}` with TRL's keys mapped by meaning
(dashgen/formats/trl.py), `training/global_step`, and `timing_s/step`: the wall time since the
last logged step over the steps between, since TRL logs no per-step time. Only the main process
writes. Requires `transformers` (importing this module imports it).

A monitoring hook is never the reason a run dies: no hook raises into the trainer. A line that
cannot be written (a read-only or full disk, a path naming a folder) is dropped and counted
(`dropped_lines`); the first failure of an outage is logged as a warning naming the path and the
error, and every later step tries again (a removed folder is made again). Once lines were dropped,
each training line carries the count so far as `trl_callback/dropped_lines`, which `dashgen export`
serves as the gauge `verl_trl_callback_dropped_lines`.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from transformers import TrainerCallback

from dashgen.formats.trl import SUMMARY_KEYS, step_data

# The key each training line carries once lines were dropped: the number dropped so far.
DROPPED_LINES_KEY = "trl_callback/dropped_lines"

_log = logging.getLogger(__name__)


class StepLogCallback(TrainerCallback):
    """Appends verl step-log lines to `path` (its folder and file name are the run's project and
    experiment labels for `dashgen export`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.dropped_lines = 0  # lines not written (the disk, the path, or what was logged)
        self._failing = False  # within an outage: said once, quiet until a line is written again
        self._last_time: float | None = None
        self._last_step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        try:
            self._last_time, self._last_step = time.monotonic(), state.global_step
            if state.is_world_process_zero:
                self.path.parent.mkdir(parents=True, exist_ok=True)
        except Exception as exc:  # said now; each log tries again
            self._fail(f"cannot make the folder of {self.path} ({type(exc).__name__}: {exc})")

    def on_log(self, args, state, control, logs=None, **kwargs):
        try:
            line = self._line(state, logs)
            if line is None:
                return
            try:
                self._append(line)
            except FileNotFoundError:  # its folder was removed (a cleaner): made again
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._append(line)
        except OSError as exc:
            self._drop(f"cannot write to {self.path} ({exc}); dropping step-log lines until it can")
        except Exception as exc:  # what was logged, not the disk: this line is lost, the run goes on
            self._drop(f"cannot make a step-log line for {self.path} of what step "
                       f"{getattr(state, 'global_step', '?')} logged ({type(exc).__name__}: {exc})")
        else:
            if self._failing:
                self._failing = False
                _log.warning("dashgen: writing %s again; %d step-log line(s) dropped so far", self.path,
                             self.dropped_lines)

    def _line(self, state, logs) -> str | None:
        """The step-log line of one log entry; None for an entry that is none (a summary, another rank)."""
        if not state.is_world_process_zero or not logs or SUMMARY_KEYS & logs.keys():
            return None
        step = state.global_step
        data = step_data(logs)
        data["training/global_step"] = step
        now = time.monotonic()
        training = not _only_eval(logs)
        if self._last_time is not None and step > self._last_step and training:
            data["timing_s/step"] = (now - self._last_time) / (step - self._last_step)
            self._last_time, self._last_step = now, step
        if self.dropped_lines and training:  # an eval line keeps the training values: it gets no key
            data[DROPPED_LINES_KEY] = self.dropped_lines
        return json.dumps({"step": step, "data": data}, sort_keys=True) + "\n"

    def _append(self, line: str) -> None:
        with open(self.path, "ab+") as log:
            if self._failing:  # a write cut short by a full disk leaves a torn last line: end it
                end = log.seek(0, 2)
                if end:
                    log.seek(end - 1)
                    if log.read(1) != b"\n":
                        log.write(b"\n")
            log.write(line.encode())

    def _drop(self, message: str) -> None:
        self.dropped_lines += 1
        self._fail(message)

    def _fail(self, message: str) -> None:
        if not self._failing:
            self._failing = True
            _log.warning("dashgen: %s; training goes on", message)


def _only_eval(logs: dict) -> bool:
    """An evaluation's entry: it measures no training step, so it moves no step time."""
    return all(isinstance(key, str) and (key.startswith("eval_") or key in ("epoch", "step")) for key in logs)
