"""What a simulated step's batch of completions logs (dashgen/evaluation/simulate.py draws the rest).

One or a few prompt groups a step (small-batch GRPO): each completion's reward, the step's mean and
spread, a gradient only where some group's completions differ, and the share cut at the length cap.
A large batch's share cut at the cap drawn over its BATCH_RESPONSES responses.
"""

from __future__ import annotations

import math
import random
import statistics

from dashgen.records import record

# What a policy update logs: all exactly 0 when no group has an advantage.
UPDATE_KEYS = ("actor/grad_norm", "actor/pg_loss", "actor/ppo_kl", "actor/pg_clipfrac")
RESPONSE_CAP = 2048.0  # tokens
BATCH_RESPONSES = 512  # a large batch's responses a step (perf/total_num_tokens counts 512 of them)


@record
class SmallBatch:
    """One or a few prompts a step (GRPO): each step's `completions` each score one of `rewards`,
    a higher one the further the healthy reward curve has risen; on `zero_std_share` of the steps
    they all score alike, so the reward std, the advantages and the grad norm are exactly 0."""

    rewards: tuple[float, ...]  # the values one completion can score, lowest first
    zero_std_share: float
    completions: int = 8
    grad_norm: float = 0.0004  # typical grad norm of a step with a signal
    entropy_range: tuple[float, float] = (0.001, 1.0)  # each step's entropy, log-uniform within it
    response_tokens: float = 40.0
    # Logs TRL's frac_reward_zero_std: the share of the step's groups whose completions all scored
    # alike (0 or 1 for one group a step).
    logs_zero_std_share: bool = False
    # Prompt groups a step, each of `completions`; each group's completions all score alike on
    # `zero_std_share` of the steps, so only a step whose every group is alike has no update.
    prompts: int = 1
    # With more than one prompt: the share of completions cut at `length_cap`, for a typical
    # prompt; a prompt's own share is log-normal about it (a hard prompt has many cut, most none).
    truncated_share: float = 0.0
    length_cap: float = 2048.0  # tokens: the simulated verl runs' RESPONSE_CAP unless the run sets a shorter one


@record(frozen=False)
class Noise:
    rng: random.Random

    def heavy(self, scale: float) -> float:
        """Student-t-like noise (3 degrees of freedom): mostly small, now and then large."""
        normal = self.rng.gauss(0.0, 1.0)
        chi = sum(self.rng.gauss(0.0, 1.0) ** 2 for _ in range(3)) / 3
        return scale * normal / math.sqrt(max(chi, 1e-6)) / 1.7

    def lognormal(self, sigma: float) -> float:
        return math.exp(self.rng.gauss(0.0, sigma))


def draw_small_batch(shape: SmallBatch, data: dict, noise: Noise, level: float) -> None:
    """A step of one or a few prompts: its completions' rewards, and what follows from them."""
    rng = noise.rng

    def one() -> float:  # a higher reward the further the run has learned (`level`, 0 to 1)
        upper = shape.rewards[len(shape.rewards) // 2:]
        return rng.choice(upper) if rng.random() < level else rng.choice(shape.rewards)

    if rng.random() < shape.zero_std_share:
        scores = [one()] * shape.completions
    else:
        scores = [one() for _ in range(shape.completions)]
        if len(set(scores)) == 1:
            scores[0] = rng.choice([value for value in shape.rewards if value != scores[0]])
    set_scores(data, scores)
    if data["critic/score/std"] > 0:
        data["actor/grad_norm"] = shape.grad_norm * noise.lognormal(0.5)
    else:  # no advantage: GRPO's update is exactly 0
        data.update(dict.fromkeys(UPDATE_KEYS, 0.0))
    low, high = shape.entropy_range
    data["actor/entropy"] = math.exp(rng.uniform(math.log(low), math.log(high)))
    length = shape.response_tokens * noise.lognormal(0.3)
    data["response_length/mean"] = length
    data["response_length/max"] = min(RESPONSE_CAP, length * 3)
    data["perf/total_num_tokens"] = shape.completions * (200 + length)


def draw_grouped_batch(shape: SmallBatch, data: dict, noise: Noise, level: float) -> None:
    """A step of a few prompt groups (TRL's 4 prompts x 4 generations): each group alike or not on
    its own, its completions cut at the cap as hard as its prompt is; what follows from them."""
    rng = noise.rng
    upper = shape.rewards[len(shape.rewards) // 2:]

    def one() -> float:  # a higher reward the further the run has learned (`level`, 0 to 1)
        return rng.choice(upper) if rng.random() < level else rng.choice(shape.rewards)

    scores, alike, cut = [], 0, 0
    for _ in range(shape.prompts):
        if rng.random() < shape.zero_std_share:
            group = [one()] * shape.completions
            alike += 1
        else:
            group = [one() for _ in range(shape.completions)]
            if len(set(group)) == 1:
                group[0] = rng.choice([value for value in shape.rewards if value != group[0]])
        scores += group
        cut_share = min(1.0, shape.truncated_share * noise.lognormal(1.0))
        cut += sum(rng.random() < cut_share for _ in range(shape.completions))
    set_scores(data, scores)
    if alike < shape.prompts:
        data["actor/grad_norm"] = shape.grad_norm * noise.lognormal(0.5)
    else:  # no group has an advantage: the update is exactly 0
        data.update(dict.fromkeys(UPDATE_KEYS, 0.0))
    if shape.logs_zero_std_share:
        data["frac_reward_zero_std"] = alike / shape.prompts
    low, high = shape.entropy_range
    data["actor/entropy"] = math.exp(rng.uniform(math.log(low), math.log(high)))
    clipped = cut / len(scores)
    uncut = min(shape.length_cap, shape.response_tokens * noise.lognormal(0.3))
    length = (1 - clipped) * uncut + clipped * shape.length_cap
    data["response_length/clip_ratio"] = clipped
    data["response_length/mean"] = length
    data["response_length/max"] = shape.length_cap if cut else min(shape.length_cap, length * 3)
    data["perf/total_num_tokens"] = len(scores) * (200 + length)


def draw_truncation(seed: int, step: int, data: dict) -> None:
    """The step's share of responses cut at the cap, drawn over BATCH_RESPONSES from the share its
    clip ratio holds (the run's level, raised by a fault), from a generator of its own so the other
    keys draw what they drew without it; the mean length follows: the cut ones at the cap."""
    rng = random.Random(seed * 1_000_037 + step)
    expected = data["response_length/clip_ratio"]
    cut = sum(rng.random() < expected for _ in range(BATCH_RESPONSES)) / BATCH_RESPONSES
    length = cut * RESPONSE_CAP + (1 - cut) * data["response_length/mean"]
    data.update({"response_length/clip_ratio": cut, "response_length/mean": length,
                 "response_length/max": RESPONSE_CAP, "perf/total_num_tokens": BATCH_RESPONSES * (200 + length)})


def set_scores(data: dict, scores: list[float]) -> None:
    """The step's reward statistics from its completions' scores."""
    data["critic/score/mean"] = data["critic/rewards/mean"] = statistics.fmean(scores)
    data["critic/score/std"] = statistics.pstdev(scores)
    data["critic/score/min"], data["critic/score/max"] = min(scores), max(scores)
