"""Realistic synthetic verl runs with ground truth, for benchmarks, tests and examples.

A healthy run has what real PPO/GRPO logs have: a warm-up, noise with heavy tails and
single-step spikes, a slow natural KL drift and entropy decline, a rising reward with
plateaus (optionally a signed reward that sits near 0), validation and checkpoint steps
that take longer, and sometimes a restart from a checkpoint (the step goes back). Faults
are laid over it from a step on, until a step or the run's end (`Fault.until`), and each
names the alerts that must catch it and those it may also raise (`FAULT_ALERTS`, dashgen/evaluation/fault_alerts.py), and the
step from which it is measurable (`Fault.measurable_from`). Runs can also have the shapes
that defeat alerts tuned on one model: an entropy level far from the usual (low and flat, or
high), a warm-up with high KL or noisy first steps, and a log that holds only every Nth step.
Issues 35 and 40 add what broke on unseen real runs: small-batch GRPO (one or a few prompts a
step: a reward that jumps across its range, zero reward std and grad norm on many steps, an
entropy that swings by orders of magnitude), a console log's rounding, steps of an hour, and
faults present from the first logged line, growing slowly, or after hundreds of quiet steps; and
a small-batch run that learns its data (every completion right, so no gradient on nearly every
step) beside its twin whose completions all fail. Issue 52 adds a batch of a few prompt groups
(each group alike or not on its own, a share of its completions cut at a short cap), a loss of a
level of its own that blows up, a run truncated at a high share from its first step, a log
without some keys, and a run whose policy samples uniformly from its vocabulary.

Everything is drawn from `random.Random(seed)`: the same spec writes the same file.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import field
from pathlib import Path

from dashgen.catalog import CATALOG
from dashgen.evaluation.batches import (BATCH_RESPONSES, RESPONSE_CAP, UPDATE_KEYS, Noise, SmallBatch,
                                        draw_grouped_batch, draw_small_batch, draw_truncation, set_scores)
from dashgen.records import record

# Faults that end the log: the trainer hangs or dies at `at`.
TERMINAL = {"stall": "hung", "crash": "crashed"}


@record
class Fault:
    kind: str
    at: int  # first step showing it
    until: int | None = None  # first step without it; None: to the end of the run
    speed: int = 5  # steps it takes to develop fully (entropy_decay: steps per 10x fall)
    measurable: int | None = None  # first step from which it can be told from noise; None: `at`

    @property
    def measurable_from(self) -> int:
        return self.at if self.measurable is None else self.measurable


@record
class RunSpec:
    name: str
    steps: int
    seed: int
    step_seconds: float = 60.0
    faults: tuple[Fault, ...] = ()
    signed_reward: bool = False  # a +-1 reward whose batch mean sits near 0
    plateaus: tuple[tuple[int, int], ...] = ()  # [from, to) steps at which the reward stops rising
    restart_at: int | None = None  # the run resumes here from `restart_from`
    restart_from: int = 0
    isolated_nan_steps: tuple[int, ...] = ()  # verl skips these steps' updates
    entropy_level: float = 0.9  # healthy entropy at the start
    entropy_decline: float = 0.5  # share of its level the healthy entropy loses by the run's end
    warmup_kl: float = 0.0  # extra KL at step 1, fading over WARMUP_KL_STEPS (GRPO with small groups)
    noisy_first_steps: int = 0  # steps at the start with much noisier KL, grad norm and entropy
    log_every: int = 1  # the log holds only the steps that are multiples of this
    timed: bool = True  # False: no timing_s/step in the log (TRL's logs, many custom loops)
    small_batch: SmallBatch | None = None  # None: a batch large enough for a smooth reward
    console_decimals: int | None = None  # every value rounded so, as verl's console log prints it
    reward_range: tuple[float, float] | None = None  # healthy reward (start, top); None: by signed_reward
    grad_norm_level: float = 0.5  # healthy grad norm after the warm-up
    step_time_sigma: float = 0.05  # log-normal spread of the step time
    validation_every: int = 50  # steps between validations
    # Logs training/rollout_probs_diff_* at a healthy bf16 level, as verl does by default since
    # rollout.calculate_log_probs became True; False for a log of another trainer (TRL, Unsloth).
    rollout_gap: bool = True
    loss_level: float = 0.0  # the policy loss's healthy level (a hand-written loop's may sit above 0)
    loss_noise: float = 0.02  # ... and its step-to-step noise
    # None: about 1% of responses cut at the length cap. A share: the run's healthy share from its
    # first step (an agent run's setup), each step's drawn over BATCH_RESPONSES responses.
    clip_ratio_level: float | None = None
    unlogged: tuple[str, ...] = ()  # keys the run's logger does not write (a table without a column)

    @property
    def end(self) -> str:
        """How the run ends: finished, or as its terminal fault says."""
        for fault in self.faults:
            if fault.kind in TERMINAL:
                return TERMINAL[fault.kind]
        return "finished"

    @property
    def last_step(self) -> int:
        for fault in self.faults:
            if fault.kind in TERMINAL:
                return fault.at - 1
        return self.steps

    def episodes(self) -> list[Fault]:
        """Every fault and healthy event with ground truth, as Faults."""
        converged = self.converged_from()
        plateaus = [*self.plateaus, *([(converged, self.last_step + 1)] if converged is not None else [])]
        events = [*self.faults, *(Fault("plateau", start, end) for start, end in plateaus),
                  *(Fault("nan_skip", step, step + 1) for step in self.isolated_nan_steps)]
        return sorted(events, key=lambda fault: fault.at)


    def converged_from(self, min_gain: float = 0.01, window_seconds: float = 1800.0) -> int | None:
        """The step from which the noise-free reward rises by less than `min_gain` per window
        until the end: a run that has converged has plateaued too."""
        levels = _Reward(self).levels
        window = max(1, round(window_seconds / self.step_seconds))
        start = None
        for step in range(self.last_step, window, -1):
            if levels[step] - levels[step - window] >= min_gain:
                break
            start = step - window
        return start


# The mean train/rollout probability gap of a healthy bf16 run (0.002-0.003), and a broken one.
MISMATCH_LEVEL, MISMATCH_GAP = 0.0025, 0.05


def neutral_value(key: str) -> float:
    """A plausible value, in verl's units, for a key a simulated step has no model for."""
    if key.startswith("timing_s/"):
        return 5.0
    if key.startswith("timing_per_token_ms/"):
        return 0.05
    if key.endswith("_gb"):
        return 40.0
    if key.startswith("sampling/importance_sampling_ratio/"):
        return 1.0
    if key.startswith(("training/rollout_probs_diff_", "rollout_corr/", "sampling/")):
        return MISMATCH_LEVEL  # the trainer and the rollout engine agree as a healthy bf16 stack does
    return 0.5


# Keys of other trainers that verl does not log (TRL's, prime-rl's), and verl's rollout correction's and
# KL penalty in the reward's (both off by default), which the simulated verl runs leave out; the
# train/rollout gap is drawn apart (`rollout_gap`, `_mismatch`), from a generator of its own.
_NOT_VERL = frozenset({"frac_reward_zero_std", "critic/score/std"})
_NOT_LOGGED_PREFIXES = ("sampling/", "rollout_corr/", "reward/", "training/rollout_probs_diff_",
                        "actor/reward_kl_penalty")
_BASE = {metric.verl_keys[0]: neutral_value(metric.verl_keys[0]) for metric in CATALOG.values()
         if metric.verl_keys and metric.verl_keys[0] not in _NOT_VERL
         and not metric.verl_keys[0].startswith(_NOT_LOGGED_PREFIXES)}
CHECKPOINT_EVERY = 100
WARMUP_KL_STEPS = 10.0  # e-folding of the warm-up's extra KL
REPEATED_SKIP_EVERY = 12
COLLAPSED_LENGTH_SHARE = 0.05  # length collapse: 53 -> 2.6 tokens in a public GRPO run
ENTROPY_DECAY_FLOOR = 0.02  # entropy_decay stops at this share of the healthy level
NEAR_CAPACITY_RESERVED_GB, NEAR_CAPACITY_ALLOCATED_GB = 79.0, 74.0
VALIDATION_KEY = "val-core/openai/gsm8k/reward/mean@1"
CONVERGENCE_REWARD_GAIN = 0.5  # 0.28 to 0.78 while entropy fell 10x in a public run
IMPLAUSIBLE_REFERENCE_KL, IMPLAUSIBLE_GRAD_NORM = 11_000.0, 420_000.0  # a public run's first line
ENTROPY_GROWTH_MAX = 13.0  # 0.76 to 9.8
SLOW_COLLAPSE_FLOOR = 0.015  # nats
SLOW_COLLAPSE_REWARD_SLIP = 0.1  # over three e-folds
GRAD_EXPLOSION_FIRST, GRAD_EXPLOSION_GROWTH, GRAD_EXPLOSION_MAX = 12.0, 3.0, 120.0
LATE_EXPLOSION_ENTROPY, LATE_EXPLOSION_GRAD_NORM = 28.5, 13.0  # factors: 0.33 -> 9.4 nats, 1 -> 13
LATE_EXPLOSION_CLIPFRAC, LATE_EXPLOSION_TOKENS = 0.7, 4.0
# saturation and reward_floor: the share of steps whose completions all score the top (or the lowest)
# reward once the fault has developed; TRL's frac_reward_zero_std near 1 in runs that learned their data.
# reward_collapse: every step (a public CS336 run of 256 rollouts a step: every one 0 from step 15 on).
ALL_ALIKE_SHARE = 0.95
# loss_explosion: the loss's magnitude from `at` on, on this share of the steps (log-uniform between
# the bounds; the others at its healthy level): a hand-written GRPO loop's loss from a median of 0.18
# to 1e6-4.5e7 while its reward held (issue 52); the CS336 loop's unclipped off-policy run alternates
# so between 1e-3 and 1e2-3e8 (bench/realruns/custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200-gradnorm-blowup).
LOSS_EXPLOSION_LOW, LOSS_EXPLOSION_HIGH, LOSS_EXPLOSION_SHARE = 1e6, 4.5e7, 0.8
# destroyed: entropy rises to the log of Qwen2.5's 151,936-token vocabulary (11.93 nats, a uniform
# policy: issue 52's destroyed run at 11.9), geometrically over `speed` steps; the reward to 0 and
# every response to the length cap.
DESTROYED_VOCABULARY_TOKENS = 151_936


@record(frozen=False)
class _Reward:
    """The healthy reward curve: saturating growth that pauses on plateaus."""

    spec: RunSpec
    level: float = 0.0
    levels: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        start, top = self.spec.reward_range or ((-0.15, 0.35) if self.spec.signed_reward else (0.2, 0.85))
        level, rate = start, 3.0 / self.spec.steps
        convergences = [fault for fault in self.spec.faults if fault.kind == "convergence"]
        for step in range(1, self.spec.steps + 1):
            if not any(a <= step < b for a, b in self.spec.plateaus):
                level += rate * (top - level)
            self.levels[step] = level + sum(CONVERGENCE_REWARD_GAIN * min(1.0, max(0, step - fault.at) / fault.speed)
                                            for fault in convergences)


def healthy_entropy(spec: RunSpec, step: int) -> float:
    """The run's entropy at `step` without noise or faults."""
    return spec.entropy_level - spec.entropy_level * spec.entropy_decline * (step / spec.steps)


def noise_free_entropy(spec: RunSpec, fault: Fault, step: int) -> float:
    """Entropy at `step` under `fault`, without noise (what else the fault touches starts neutral)."""
    data = {**_BASE, "actor/entropy": healthy_entropy(spec, step)}
    if step >= fault.at and (fault.until is None or step < fault.until):
        _apply(fault, step, data, spec)
    return data["actor/entropy"]


def step_data(spec: RunSpec, step: int, rng: random.Random, reward: _Reward) -> dict:
    noise = Noise(rng)
    progress = step / spec.steps
    warmup = max(0.0, 1 - step / 30)
    data: dict = dict(_BASE)
    kl = 0.004 * (1 + 0.6 * progress) * (0.3 + 0.7 * (1 - warmup)) * noise.lognormal(0.25)
    grad_norm = spec.grad_norm_level * (1 + 1.5 * warmup) * noise.lognormal(0.15)
    if rng.random() < 0.01:  # single-step spikes
        kl *= rng.uniform(3, 6)
    if rng.random() < 0.01:
        grad_norm *= rng.uniform(2, 4)
    if spec.warmup_kl:
        kl += spec.warmup_kl * math.exp(-(step - 1) / WARMUP_KL_STEPS)
    entropy = healthy_entropy(spec, step) * (1 + noise.heavy(0.02))
    if step <= spec.noisy_first_steps:
        kl *= noise.lognormal(0.8)
        grad_norm *= noise.lognormal(0.6)
        entropy *= 1 + noise.heavy(0.15)
    score_noise = 0.05 if spec.signed_reward else 0.025
    score = reward.levels[step] + noise.heavy(score_noise)
    length = (350 + 250 * progress) * (1 + noise.heavy(0.03))
    step_seconds = spec.step_seconds * noise.lognormal(spec.step_time_sigma) * (1 + 0.5 * length / 600 - 0.5)
    data.update({
        "training/global_step": step,
        "actor/ppo_kl": kl,
        "actor/grad_norm": grad_norm,
        "actor/entropy": entropy,
        "actor/pg_loss": spec.loss_level + noise.heavy(spec.loss_noise),
        "actor/pg_clipfrac": 0.002 + kl * 0.5,
        "critic/score/mean": score,
        "critic/score/min": -1.0 if spec.signed_reward else 0.0,
        "critic/score/max": 1.0,
        "critic/rewards/mean": score,
        "response_length/mean": length,
        "response_length/max": min(2048.0, length * 3),
        "response_length/clip_ratio": max(0.0, 0.01 + noise.heavy(0.004)),
        "response/aborted_ratio": 0.0 if rng.random() < 0.97 else 0.004,
        "perf/total_num_tokens": 512 * (200 + length),
        "perf/max_memory_allocated_gb": 50.0 + noise.heavy(0.5),
        "perf/max_memory_reserved_gb": 62.0 + noise.heavy(0.3),
        "timing_s/step": step_seconds,
    })
    if spec.rollout_gap:
        data.update(_mismatch(spec, step))
    if step % spec.validation_every == 0:
        data["timing_s/testing"] = 90.0 * noise.lognormal(0.1)
        data["timing_s/step"] += data["timing_s/testing"]
        data[VALIDATION_KEY] = reward.levels[step] + noise.heavy(0.01)
    if step % CHECKPOINT_EVERY == 0:
        data["timing_s/save_checkpoint"] = 60.0 * noise.lognormal(0.1)
        data["timing_s/step"] += data["timing_s/save_checkpoint"]
    if spec.clip_ratio_level is not None:
        data["response_length/clip_ratio"] = spec.clip_ratio_level  # the share expected; drawn below
    if spec.small_batch is not None and spec.small_batch.prompts > 1:
        draw_grouped_batch(spec.small_batch, data, noise, reward.levels[step])
    elif spec.small_batch is not None:
        draw_small_batch(spec.small_batch, data, noise, reward.levels[step])
    if step in spec.isolated_nan_steps:
        data["actor/grad_norm"] = None  # verl's file logger writes NaN as null
    for fault in spec.faults:
        if step >= fault.at and (fault.until is None or step < fault.until):
            _apply(fault, step, data, spec)
    if spec.small_batch is not None and spec.small_batch.logs_zero_std_share and spec.small_batch.prompts == 1:
        data["frac_reward_zero_std"] = float(data["critic/score/std"] == 0)
    if spec.clip_ratio_level is not None:
        draw_truncation(spec.seed, step, data)
    if not spec.timed:
        del data["timing_s/step"]
    for key in spec.unlogged:
        data.pop(key, None)
    if spec.console_decimals is not None:
        data = {key: round(value, spec.console_decimals) if isinstance(value, float) else value
                for key, value in data.items()}
    return data


def _mismatch(spec: RunSpec, step: int) -> dict[str, float]:
    """The step's train/rollout probability gap (training/rollout_probs_diff_*), drawn from a
    generator of its own so that the other keys draw what they drew before verl logged it."""
    rng = random.Random(spec.seed * 1_000_003 + step)
    mean = MISMATCH_LEVEL * math.exp(rng.gauss(0.0, 0.15))
    return {"training/rollout_probs_diff_mean": mean,
            "training/rollout_probs_diff_std": 6 * mean * math.exp(rng.gauss(0.0, 0.1)),
            "training/rollout_probs_diff_max": min(1.0, 0.6 * math.exp(rng.gauss(0.0, 0.2)))}


def _apply(fault: Fault, step: int, data: dict, spec: RunSpec) -> None:
    ramp = min(1.0, (step - fault.at + 1) / fault.speed)
    since = step - fault.at

    def scale(key: str, factor: float) -> None:
        data[key] *= 1 + (factor - 1) * ramp

    kind = fault.kind
    if kind == "divergence":
        scale("actor/ppo_kl", 15)
        scale("actor/grad_norm", 10)
        scale("actor/entropy", 0.2)
        data["critic/score/mean"] -= 0.3 * ramp * min(1.0, (step - fault.at) / 60)
    elif kind == "kl_spike":
        data["actor/ppo_kl"] = 0.15 * ramp * (1 + 0.2 * math.sin(step)) + data["actor/ppo_kl"]
        if (step - fault.at) % 7 == 6:  # a single step back to normal now and then
            data["actor/ppo_kl"] = 0.004
    elif kind == "entropy_collapse":
        data["actor/entropy"] = data["actor/entropy"] * (1 - ramp) + 0.015 * ramp
    elif kind == "reward_cliff":
        magnitude = 0.6 if spec.signed_reward else 0.5
        data["critic/score/mean"] -= magnitude * ramp
    elif kind in ("reward_hacking", "token_runaway"):
        factor = 3.5 if kind == "reward_hacking" else 3.2  # tokens per batch grow about 2.5-3x
        scale("response_length/mean", factor)
        data["perf/total_num_tokens"] = 512 * (200 + data["response_length/mean"])
        data["timing_s/step"] *= 1 + (factor - 1) * ramp * 0.6
        if kind == "reward_hacking":
            data["critic/score/mean"] += 0.15 * ramp
            data["response_length/clip_ratio"] = max(data["response_length/clip_ratio"], 0.06 * ramp)
    elif kind == "truncation":
        data["response_length/clip_ratio"] = 0.01 + 0.24 * ramp
    elif kind == "nan":
        data["actor/grad_norm"] = None
        data["actor/pg_loss"] = None
        data["actor/ppo_kl"] = None
    elif kind == "memory_pressure":
        data["perf/max_memory_reserved_gb"] = 62.0 + (76.5 - 62.0) * ramp
        data["perf/max_memory_allocated_gb"] = 50.0 + (54.0 - 50.0) * ramp
    elif kind == "rollout_aborts":
        data["response/aborted_ratio"] = 0.12 * ramp
    elif kind == "entropy_explosion":  # 0.85 to 6.9 within 5 steps in a public run
        data["actor/entropy"] *= 1 + 7 * ramp
        data["response_length/clip_ratio"] = max(data["response_length/clip_ratio"], 0.9 * ramp)
        data["critic/score/mean"] -= 0.4 * ramp
    elif kind == "entropy_decay":
        data["actor/entropy"] *= max(10 ** (-(step - fault.at) / fault.speed), ENTROPY_DECAY_FLOOR)
    elif kind == "length_collapse":
        share = COLLAPSED_LENGTH_SHARE ** ramp  # a geometric fall
        data["response_length/mean"] *= share
        data["response_length/max"] *= share
        data["response_length/clip_ratio"] = 0.0
        data["perf/total_num_tokens"] = 512 * (200 + data["response_length/mean"])
        data["timing_s/step"] *= 1 - 0.6 * ramp
        data["critic/score/mean"] += 0.05 * ramp
    elif kind == "no_learning_signal":
        data.update(dict.fromkeys(UPDATE_KEYS, 0.0))
    elif kind == "repeated_skips":
        if (step - fault.at) % REPEATED_SKIP_EVERY == 0:
            data["actor/grad_norm"] = None
    elif kind == "memory_near_capacity":
        data["perf/max_memory_reserved_gb"] = 62.0 + (NEAR_CAPACITY_RESERVED_GB - 62.0) * ramp
        data["perf/max_memory_allocated_gb"] = 50.0 + (NEAR_CAPACITY_ALLOCATED_GB - 50.0) * ramp
    elif kind == "convergence":  # its reward gain is part of the healthy curve (_Reward)
        data["actor/entropy"] *= 10 ** -min(1.0, since / fault.speed)
    elif kind == "implausible_start":
        data["actor/kl_loss"] = IMPLAUSIBLE_REFERENCE_KL * (1 + 0.2 * math.sin(step))
        data["actor/grad_norm"] = IMPLAUSIBLE_GRAD_NORM * (1 + 0.2 * math.cos(step))
        if since >= fault.speed:
            data["critic/score/mean"] = data["critic/rewards/mean"] = 0.0
            data["response_length/mean"] = data["response_length/max"] = RESPONSE_CAP
            data["response_length/clip_ratio"] = 1.0
            data["perf/total_num_tokens"] = 512 * (200 + RESPONSE_CAP)
    elif kind == "no_reward":
        if spec.small_batch is None:
            raise ValueError(f"run {spec.name}: a no_reward fault needs a small_batch run")
        lowest, above = spec.small_batch.rewards[:2]
        scores = [lowest] * spec.small_batch.completions
        if data["critic/score/std"] > 0:
            scores[0] = above
        set_scores(data, scores)
    elif kind == "entropy_growth":
        factor = min(2 ** (since / fault.speed), ENTROPY_GROWTH_MAX)
        data["actor/entropy"] *= factor
        data["critic/score/mean"] *= 1 - math.log(factor) / math.log(ENTROPY_GROWTH_MAX)
    elif kind == "entropy_slow_collapse":
        data["actor/entropy"] = max(data["actor/entropy"] * math.exp(-since / fault.speed), SLOW_COLLAPSE_FLOOR)
        data["critic/score/mean"] -= SLOW_COLLAPSE_REWARD_SLIP * min(1.0, since / (3 * fault.speed))
    elif kind == "grad_norm_explosion":
        data["actor/grad_norm"] *= min(GRAD_EXPLOSION_FIRST * GRAD_EXPLOSION_GROWTH ** since, GRAD_EXPLOSION_MAX)
    elif kind == "late_entropy_explosion":
        # A logistic rise centred 0.3 `speed` steps in: about 2x at onset, 27x at `speed`.
        rise = 1 / (1 + math.exp(-(since - 0.3 * fault.speed) / (0.1 * fault.speed)))
        data["actor/entropy"] *= 1 + (LATE_EXPLOSION_ENTROPY - 1) * rise
        data["actor/grad_norm"] *= 1 + (LATE_EXPLOSION_GRAD_NORM - 1) * rise
        data["actor/pg_clipfrac"] = max(data["actor/pg_clipfrac"], LATE_EXPLOSION_CLIPFRAC * rise)
        for key in ("response_length/mean", "response_length/max"):
            data[key] = data[key] * (1 - rise) + LATE_EXPLOSION_TOKENS * rise
        data["response_length/clip_ratio"] *= 1 - rise
        data["perf/total_num_tokens"] = 512 * (200 + data["response_length/mean"])
        data["critic/score/mean"] *= 1 - rise
    elif kind == "train_rollout_mismatch":
        if not spec.rollout_gap:
            raise ValueError(f"run {spec.name}: a train_rollout_mismatch fault needs a run with rollout_gap")
        factor = MISMATCH_GAP / MISMATCH_LEVEL
        for key in ("training/rollout_probs_diff_mean", "training/rollout_probs_diff_std"):
            scale(key, factor)
        data["training/rollout_probs_diff_max"] = min(1.0, data["training/rollout_probs_diff_max"] * (1 + ramp))
    elif kind == "loss_explosion":
        rng = random.Random(spec.seed * 1_000_039 + step)  # its own: the other keys draw as without it
        if rng.random() < LOSS_EXPLOSION_SHARE:
            data["actor/pg_loss"] = math.exp(rng.uniform(math.log(LOSS_EXPLOSION_LOW), math.log(LOSS_EXPLOSION_HIGH)))
    elif kind == "truncation_saturation":  # the share expected; draw_truncation draws the step's
        if spec.clip_ratio_level is None:
            raise ValueError(f"run {spec.name}: a truncation_saturation fault needs a clip_ratio_level")
        level = data["response_length/clip_ratio"]
        data["response_length/clip_ratio"] = level + (1 - level) * ramp
    elif kind == "destroyed":
        uniform = math.log(DESTROYED_VOCABULARY_TOKENS)
        data["actor/entropy"] = min(uniform, data["actor/entropy"] * (uniform / healthy_entropy(spec, step)) ** ramp)
        data["critic/score/mean"] = data["critic/rewards/mean"] = data["critic/score/mean"] * (1 - ramp)
        for key in ("response_length/mean", "response_length/max"):
            data[key] = data[key] * (1 - ramp) + RESPONSE_CAP * ramp
        data["response_length/clip_ratio"] = data["response_length/clip_ratio"] * (1 - ramp) + ramp
        data["perf/total_num_tokens"] = BATCH_RESPONSES * (200 + data["response_length/mean"])
    elif kind == "entropy_unlogged":
        del data["actor/entropy"]
    elif kind == "reward_hacking_validation":
        if VALIDATION_KEY in data:
            data[VALIDATION_KEY] *= 1 - ramp
    elif kind in ("saturation", "reward_floor", "reward_collapse"):
        if spec.small_batch is None:
            raise ValueError(f"run {spec.name}: a {kind} fault needs a small_batch run")
        rewards = spec.small_batch.rewards
        share = ramp if kind == "reward_collapse" else ALL_ALIKE_SHARE * ramp
        _all_alike(spec, step, data, rewards[-1] if kind == "saturation" else rewards[0], share)


def _all_alike(spec: RunSpec, step: int, data: dict, reward: float, share: float) -> None:
    """On `share` of the steps, every completion scores `reward`: no advantage, so no update. Drawn
    from a generator of its own, so the step's other keys draw what they drew without it."""
    if random.Random(spec.seed * 1_000_033 + step).random() >= share:
        return
    set_scores(data, [reward] * spec.small_batch.completions)
    data.update(dict.fromkeys(UPDATE_KEYS, 0.0))


def write_run(spec: RunSpec, path: Path) -> Path:
    """Write the run's step log as verl's file logger does (JSON lines, NaN as null); every step
    is simulated, so a run logged every Nth step is the every-step run with lines left out."""
    rng = random.Random(spec.seed)
    reward = _Reward(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    order = list(range(1, spec.last_step + 1))
    if spec.restart_at is not None and spec.restart_at <= spec.last_step:
        # Crashed at restart_at, resumed from the checkpoint at restart_from: steps repeat.
        order = [*range(1, spec.restart_at), *range(spec.restart_from, spec.last_step + 1)]
    with open(path, "w") as handle:
        for step in order:
            data = step_data(spec, step, rng, reward)
            if step % spec.log_every:
                continue
            handle.write(json.dumps({"step": step, "data": data}, allow_nan=True) + "\n")
    return path
