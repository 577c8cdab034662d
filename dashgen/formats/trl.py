"""TRL's (and Unsloth's) training logs as verl step records: one mapping of TRL's keys onto the
catalog's meanings, for `trainer_state.json` files read by backtest, backfill and preview.

TRL logs every `logging_steps` (10 to 20 is common), an entry per logged step in
`trainer_state.json`'s `log_history`, usually without a per-step time. Its meanings differ where
its names look alike: its `kl` is the KL to the reference policy (verl's `actor/kl_loss`), not to
the old policy (`actor/ppo_kl`), and its `loss` mostly carries the KL term. Keys without a verl
counterpart keep their own name (`frac_reward_zero_std`, `clip_ratio/*`, `rewards/<func>/mean`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterator

from dashgen.bounded_read import parse_nested

# TRL's key -> verl's step-log key of the same meaning.
TRL_KEYS = {
    "loss": "actor/pg_loss",
    "grad_norm": "actor/grad_norm",
    "learning_rate": "actor/lr",
    "epoch": "training/epoch",
    "reward": "critic/score/mean",
    "reward_std": "critic/score/std",
    "kl": "actor/kl_loss",  # KL to the reference policy
    "entropy": "actor/entropy",
    "completion_length": "response_length/mean",  # before TRL 0.18
    "completions/mean_length": "response_length/mean",
    "completions/max_length": "response_length/max",
    "completions/min_length": "response_length/min",
    "completions/clipped_ratio": "response_length/clip_ratio",
    # TRL's PPOTrainer (read in trl 0.24.0's ppo_trainer.py): the same token-masked means as verl's
    # compute_policy_loss / compute_value_loss, averaged over the update's minibatches.
    "loss/policy_avg": "actor/pg_loss",  # masked mean of max(-A*ratio, -A*clip(ratio))
    "loss/value_avg": "critic/vf_loss",  # 0.5 * masked mean of max(unclipped, clipped) squared error
    "policy/clipfrac_avg": "actor/pg_clipfrac",  # masked share of tokens where the clipped term wins
    "val/clipfrac_avg": "critic/vf_clipfrac",  # masked share where the clipped value error wins
    "objective/scores": "critic/score/mean",  # the reward model's score per sequence, batch mean
    "lr": "actor/lr",
    # Left out, meanings differ: policy/approxkl_avg is 0.5*mean(log-ratio^2) over every response
    # position, padding counted as 0 (verl's actor/ppo_kl: masked mean of -log-ratio);
    # policy/entropy_avg averages entropy over padding positions too (actor/entropy is masked);
    # objective/kl and objective/entropy are per-sequence sums, not per-token means.
}
# A key both spellings of a TRL version may log: the newer wins.
_OLDER_SPELLINGS = {"completion_length"}
# Keys of the entry TRL adds when training ends: a summary, not a step.
SUMMARY_KEYS = frozenset({"train_runtime", "train_loss", "train_samples_per_second", "train_steps_per_second"})
EVAL_PREFIX = "eval_"


# transformers' reporting callbacks (W&B, TensorBoard) prefix a training log's keys with train/ and
# an evaluation's with eval/ (eval_loss -> eval/loss).
LOGGER_TRAIN, LOGGER_EVAL = "train/", "eval/"


def logger_key(key: str) -> str:
    """verl's key for a key as transformers' reporting callbacks log it (train/loss, eval/loss)."""
    if key.startswith(LOGGER_EVAL):
        return f"val-aux/{key[len(LOGGER_EVAL):]}"
    if key.startswith(LOGGER_TRAIN):
        key = key[len(LOGGER_TRAIN):]
        return f"val-aux/{key[len(EVAL_PREFIX):]}" if key.startswith(EVAL_PREFIX) else TRL_KEYS.get(key, key)
    return key


def is_trainer_state(path: Path) -> bool:
    """Whether `path` holds a TRL/transformers trainer state: named `trainer_state.json`, or saved
    under another name (renamed to keep two runs apart) and known by its content. A step log's
    first line is a whole object on one line; a trainer state's is a lone `{` (transformers writes
    it indented), or, written on one line, it holds `"log_history"`."""
    if path.name == "trainer_state.json":
        return True
    try:
        if not path.is_file():  # a FIFO is not opened: that would wait for a writer
            return False
        with open(path, "rb") as handle:
            first = handle.read(_HEAD_BYTES).lstrip().split(b"\n", 1)[0]
    except OSError:
        return False  # the reader says why
    return first.rstrip() == b"{" or b'"log_history"' in first


_HEAD_BYTES = 64 << 10


def step_data(entry: dict) -> dict[str, float | None]:
    """verl-named values of one log_history entry; eval metrics become val-aux/ keys (validation)."""
    data: dict[str, float | None] = {}
    for key, raw in entry.items():
        if not isinstance(key, str) or key == "step" or isinstance(raw, bool) or not isinstance(raw, (int, float)):
            continue
        value = _finite(raw)
        if key.startswith(EVAL_PREFIX):
            data[f"val-aux/{key[len(EVAL_PREFIX):]}"] = value
            continue
        target = TRL_KEYS.get(key, key)
        if target in data and key in _OLDER_SPELLINGS:
            continue
        data[target] = value
    return data


def _finite(raw: int | float) -> float | None:
    """A logged number as a float; None (as verl's file logger writes NaN and infinities) for one
    that is not finite, or an integer beyond a float's range."""
    try:
        value = float(raw)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def step_records(state: dict) -> list[tuple[int, dict]]:
    """(step, data) per logged step, in step order; entries of one step (training and eval) merge.

    A log_history whose steps go below 0 (a trainer state edited, or written by a trainer that
    counts from an offset) is read with its steps moved up so the lowest is 0, their order and
    spacing kept: verl's step log, which the readers take, has no negative step."""
    by_step: dict[int, dict] = {}
    for entry in state.get("log_history") or ():
        step = entry.get("step") if isinstance(entry, dict) else None
        if isinstance(step, bool) or not isinstance(step, int) or SUMMARY_KEYS & entry.keys():
            continue
        by_step.setdefault(step, {}).update(step_data(entry))
    offset = -min(by_step) if by_step and min(by_step) < 0 else 0
    return sorted((step + offset, data) for step, data in by_step.items())


def step_log_lines(path: Path) -> Iterator[bytes]:
    """A trainer state as verl's step-log lines ({"step": N, "data": {...}}), for the step-log reader."""
    try:
        state = parse_nested(json.loads, path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a trainer state (JSON): {exc}") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise ValueError("not a trainer state: no log_history list")
    records = step_records(state)
    if not records:
        entries = len(state["log_history"])
        raise ValueError(f"a trainer state that holds no logged step: its log_history has no training or "
                         f"evaluation entry ({entries} entr{'y' if entries == 1 else 'ies'} in all; did the run "
                         f"stop before its first logging_steps?)")
    for step, data in records:
        yield json.dumps({"step": step, "data": data}, sort_keys=True).encode()
