"""Realistic synthetic verl runs with ground truth, for benchmarks, tests and examples.

A healthy run has what real PPO/GRPO logs have: a warm-up, noise with heavy tails and
single-step spikes, a slow natural KL drift and entropy decline, a rising reward with
plateaus (optionally a signed reward that sits near 0), validation and checkpoint steps
that take longer, and sometimes a restart from a checkpoint (the step goes back). Faults
are laid over it from a step on, until a step or the run's end (`Fault.until`), and each
names the alerts that must catch it and those it may also raise (`FAULT_ALERTS`), and the
step from which it is measurable (`Fault.measurable_from`). Runs can also have the shapes
that defeat alerts tuned on one model: an entropy level far from the usual (low and flat, or
high), a warm-up with high KL or noisy first steps, and a log that holds only every Nth step.

Everything is drawn from `random.Random(seed)`: the same spec writes the same file.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import field
from pathlib import Path

from dashgen.catalog import CATALOG
from dashgen.records import record

# The one place that names the alerts each fault is judged on; rename an alert here.
# fault kind -> (alerts that must fire, alerts it may also raise)
FAULT_ALERTS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "divergence": (frozenset({"VerlTrainingDivergence"}),
                   frozenset({"VerlKLSpike", "VerlEntropyCollapse", "VerlRewardCliff", "VerlRewardStagnation",
                              "VerlResponseTruncation", "VerlBatchTokenRunaway"})),
    "kl_spike": (frozenset({"VerlKLSpike"}), frozenset()),
    "entropy_collapse": (frozenset({"VerlEntropyCollapse"}), frozenset({"VerlRewardStagnation"})),
    "reward_cliff": (frozenset({"VerlRewardCliff"}), frozenset({"VerlRewardStagnation"})),
    "reward_hacking": (frozenset({"VerlBatchTokenRunaway"}), frozenset({"VerlResponseTruncation"})),
    "truncation": (frozenset({"VerlResponseTruncation"}), frozenset()),
    # The held last step is a flat reward; Alertmanager inhibits the stagnation it causes.
    "stall": (frozenset({"VerlTrainingStalled"}), frozenset({"VerlRewardStagnation"})),
    "crash": (frozenset({"VerlRunCrashed"}), frozenset()),
    "nan": (frozenset({"VerlNaNMetrics"}), frozenset({"VerlNonFiniteStep", "VerlRunCrashed"})),
    "memory_pressure": (frozenset({"VerlGPUMemoryPressure"}), frozenset()),
    "token_runaway": (frozenset({"VerlBatchTokenRunaway"}), frozenset({"VerlResponseTruncation"})),
    "rollout_aborts": (frozenset({"VerlRolloutAborts"}), frozenset()),
    # Entropy rising several-fold within a few steps, responses running to the length cap.
    "entropy_explosion": (frozenset({"VerlEntropyExplosion"}),
                          frozenset({"VerlResponseTruncation", "VerlRewardCliff", "VerlRewardStagnation",
                                     "VerlBatchTokenRunaway"})),
    # Responses shrink to a few tokens while the reward stays up (hacked by minimal answers).
    "length_collapse": (frozenset({"VerlResponseLengthCollapse"}),
                        frozenset({"VerlEntropyCollapse", "VerlRewardStagnation", "VerlNoLearningSignal"})),
    # Every GRPO group's rewards are identical: no advantage, grad norm and policy loss exactly 0.
    "no_learning_signal": (frozenset({"VerlNoLearningSignal"}), frozenset({"VerlRewardStagnation"})),
    # Skipped updates (non-finite grad norm) every REPEATED_SKIP_EVERY steps, never two in a row.
    "repeated_skips": (frozenset({"VerlNonFiniteSteps"}), frozenset({"VerlNonFiniteStep"})),
    # Reserved memory near the card's capacity with little of it unallocated (no fragmentation).
    "memory_near_capacity": (frozenset({"VerlGPUMemoryPressure"}), frozenset()),
    # Not faults: events of a healthy run that an alert may or should report.
    "plateau": (frozenset({"VerlRewardStagnation"}), frozenset()),
    "nan_skip": (frozenset(), frozenset({"VerlNonFiniteStep"})),
    # Entropy falling 10x per `speed` steps. Issue 20 took it for a fault; real healthy runs fall so
    # (40x over 300 steps; verl's DeepSeek-7B GRPO baseline 7x in its first 55, bench/realruns/).
    "entropy_decay": (frozenset(), frozenset({"VerlRewardStagnation"})),
}
# Alerts FAULT_ALERTS expects that the rules do not define yet, with the severity they are to have.
PLANNED_ALERTS: dict[str, str] = {}
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


@record(frozen=False)
class _Noise:
    rng: random.Random

    def heavy(self, scale: float) -> float:
        """Student-t-like noise (3 degrees of freedom): mostly small, now and then large."""
        normal = self.rng.gauss(0.0, 1.0)
        chi = sum(self.rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3
        return scale * normal / math.sqrt(max(chi, 1e-6)) / 1.7

    def lognormal(self, sigma: float) -> float:
        return math.exp(self.rng.gauss(0.0, sigma))


def neutral_value(key: str) -> float:
    """A plausible value, in verl's units, for a key a simulated step has no model for."""
    if key.startswith("timing_s/"):
        return 5.0
    if key.startswith("timing_per_token_ms/"):
        return 0.05
    if key.endswith("_gb"):
        return 40.0
    return 0.5


# Keys of other trainers that verl does not log (TRL's), which the simulated verl runs leave out.
_NOT_VERL = frozenset({"frac_reward_zero_std", "critic/score/std"})
_BASE = {metric.verl_keys[0]: neutral_value(metric.verl_keys[0]) for metric in CATALOG.values()
         if metric.verl_keys and metric.verl_keys[0] not in _NOT_VERL}
VALIDATION_EVERY = 50
CHECKPOINT_EVERY = 100
WARMUP_KL_STEPS = 10.0  # e-folding of the warm-up's extra KL
REPEATED_SKIP_EVERY = 12
COLLAPSED_LENGTH_SHARE = 0.05  # length collapse: 53 -> 2.6 tokens in a public GRPO run
ENTROPY_DECAY_FLOOR = 0.02  # entropy_decay stops at this share of the healthy level
NEAR_CAPACITY_RESERVED_GB, NEAR_CAPACITY_ALLOCATED_GB = 79.0, 74.0


@record(frozen=False)
class _Reward:
    """The healthy reward curve: saturating growth that pauses on plateaus."""

    spec: RunSpec
    level: float = 0.0
    levels: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        start, top = (-0.15, 0.35) if self.spec.signed_reward else (0.2, 0.85)
        level, rate = start, 3.0 / self.spec.steps
        for step in range(1, self.spec.steps + 1):
            if not any(a <= step < b for a, b in self.spec.plateaus):
                level += rate * (top - level)
            self.levels[step] = level


def healthy_entropy(spec: RunSpec, step: int) -> float:
    """The run's entropy at `step` without noise or faults."""
    return spec.entropy_level - spec.entropy_level * spec.entropy_decline * (step / spec.steps)


def noise_free_entropy(spec: RunSpec, fault: Fault, step: int) -> float:
    """Entropy at `step` under `fault` (an entropy fault: it only touches entropy), without noise."""
    data = {"actor/entropy": healthy_entropy(spec, step)}
    if step >= fault.at and (fault.until is None or step < fault.until):
        _apply(fault, step, data, spec)
    return data["actor/entropy"]


def step_data(spec: RunSpec, step: int, rng: random.Random, reward: _Reward) -> dict:
    noise = _Noise(rng)
    progress = step / spec.steps
    warmup = max(0.0, 1 - step / 30)
    data: dict = dict(_BASE)
    kl = 0.004 * (1 + 0.6 * progress) * (0.3 + 0.7 * (1 - warmup)) * noise.lognormal(0.25)
    grad_norm = 0.5 * (1 + 1.5 * warmup) * noise.lognormal(0.15)
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
    step_seconds = spec.step_seconds * noise.lognormal(0.05) * (1 + 0.5 * length / 600 - 0.5)
    data.update({
        "training/global_step": step,
        "actor/ppo_kl": kl,
        "actor/grad_norm": grad_norm,
        "actor/entropy": entropy,
        "actor/pg_loss": noise.heavy(0.02),
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
    if step % VALIDATION_EVERY == 0:
        data["timing_s/testing"] = 90.0 * noise.lognormal(0.1)
        data["timing_s/step"] += data["timing_s/testing"]
        data["val-core/openai/gsm8k/reward/mean@1"] = reward.levels[step] + noise.heavy(0.01)
    if step % CHECKPOINT_EVERY == 0:
        data["timing_s/save_checkpoint"] = 60.0 * noise.lognormal(0.1)
        data["timing_s/step"] += data["timing_s/save_checkpoint"]
    if step in spec.isolated_nan_steps:
        data["actor/grad_norm"] = None  # verl's file logger writes NaN as null
    for fault in spec.faults:
        if step >= fault.at and (fault.until is None or step < fault.until):
            _apply(fault, step, data, spec)
    if not spec.timed:
        del data["timing_s/step"]
    return data


def _apply(fault: Fault, step: int, data: dict, spec: RunSpec) -> None:
    ramp = min(1.0, (step - fault.at + 1) / fault.speed)

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
        for key in ("actor/grad_norm", "actor/pg_loss", "actor/ppo_kl", "actor/pg_clipfrac"):
            data[key] = 0.0
    elif kind == "repeated_skips":
        if (step - fault.at) % REPEATED_SKIP_EVERY == 0:
            data["actor/grad_norm"] = None
    elif kind == "memory_near_capacity":
        data["perf/max_memory_reserved_gb"] = 62.0 + (NEAR_CAPACITY_RESERVED_GB - 62.0) * ramp
        data["perf/max_memory_allocated_gb"] = 50.0 + (NEAR_CAPACITY_ALLOCATED_GB - 50.0) * ramp


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
