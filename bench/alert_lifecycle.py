"""Benchmark: do the alerts catch real faults, stay quiet on healthy runs, fire once per
episode, cover a lasting fault and end cleanly with the run?

Generates 25 realistic verl runs with ground truth (dashgen/evaluation/simulate.py: heavy-tailed
noise, single-step spikes, warm-up, KL drift, entropy decline, reward plateaus, signed
rewards, validation and checkpoint steps, a restart; and every fault kind), backtests them
all with Prometheus' own engine, and prints per alert: episodes, detections, latency, false
firings, firings per episode, coverage of lasting faults and resolution after a recovery.

Then the same for the extended set of issue 20 (the 25 runs plus ISSUE_20_RUNS: faults in
the first hour, entropy levels of other models, healthy warm-ups, length collapse and a
vanished learning signal, also logged every 10 steps, slow entropy decay, skipped steps,
near-OOM memory, signed rewards on a plateau): latency per alert from the onset and from the
point the fault is measurable, what each episode's expected alerts did, and issue 20's
targets as PASS/FAIL lines.

Then, apart, so the figures above stay comparable, the runs of issues 35 and 40
(ISSUE_35_SCENARIOS): noisy small-batch GRPO, a healthy convergence, failures from the first
logged line, a slow entropy explosion with scattered NaNs at about an hour a step, the slower
collapse, runs at 3,600 s a step, a lone gradient explosion, an explosion after 500 quiet steps
(both also logged every 5th step, the explosion every 10th too) and reward hacking against
validation (each failure with its healthy twin): the same tables, a PASS/FAIL line per
scenario.

Then, apart again, the four runs of issue 52 (ISSUE_52_SCENARIOS): a noisy healthy run of 4
prompts x 4 completions a step, a loss explosion with the reward holding in a log without a grad
norm, truncation saturating from 0.6, and a destroyed run (entropy to the log of the vocabulary):
the same tables and lines; then issue 35's targets over all the runs.

Run from the repository root: .venv/bin/python bench/alert_lifecycle.py
While iterating, --only SUBSTRING backtests and scores only the runs whose name holds it, over
every set, with their scenario lines (issue 20's and 35's targets need every run, so not those).
Targets (issue 8): critical+warning precision >= 0.9, recall >= 0.95; no false critical
page on healthy steps; coverage >= 0.9; one firing per episode; no critical at a normal end.
Targets (issue 20): the PASS/FAIL lines (dashgen/evaluation/scoring.py, issue_20_checks).
Targets (issue 35): precision >= 0.95 and recall 1.0 over all runs, the new ones included; no
false critical page; a first-hour divergence paged within 6 steps (done_when_checks). Issue 52's
"Done when" is the same over all runs, its four included.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from dashgen.config import Config
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import RunOutcome, backtest
from dashgen.evaluation.scoring import (Score, done_when_checks, format_episodes, format_latency, format_score,
                                    issue_20_checks, scenario_checks, score, unknown_expected_alerts)
from dashgen.evaluation.simulate import Fault, RunSpec, SmallBatch, write_run

REPO = Path(__file__).resolve().parent.parent
HUNG_HOLD_SECONDS = 3 * 3600.0  # a hang that nobody fixes overnight
GRACE_SECONDS = 300.0

RUNS = (
    # Healthy runs: plateaus, signed rewards near 0, isolated NaN steps, a restart.
    RunSpec("healthy-plateau", 1500, 1, 60, plateaus=((500, 700),), isolated_nan_steps=(900,)),
    RunSpec("healthy-signed", 1800, 2, 45, signed_reward=True, plateaus=((900, 1100),)),
    RunSpec("healthy-restart", 1300, 3, 70, restart_at=800, restart_from=700),
    RunSpec("healthy-signed-long", 2400, 4, 40, signed_reward=True, isolated_nan_steps=(300, 1500)),
    RunSpec("healthy-two-plateaus", 1600, 5, 55, plateaus=((400, 560), (1000, 1200))),
    # Faults.
    RunSpec("divergence-fast", 1500, 11, 60, faults=(Fault("divergence", 700, speed=3),)),
    RunSpec("divergence-slow", 1500, 12, 50, faults=(Fault("divergence", 600, speed=60),)),
    RunSpec("divergence-early", 1000, 13, 65, faults=(Fault("divergence", 100, speed=5),)),
    RunSpec("divergence-recovers", 1400, 14, 60, faults=(Fault("divergence", 500, 620),)),
    RunSpec("kl-spike", 1200, 15, 45, faults=(Fault("kl_spike", 400, 470),)),
    RunSpec("kl-spike-signed", 1200, 16, 70, signed_reward=True, faults=(Fault("kl_spike", 800, 850),)),
    RunSpec("entropy-collapse", 1300, 17, 60, faults=(Fault("entropy_collapse", 700, speed=30),)),
    RunSpec("reward-cliff", 1300, 18, 50, faults=(Fault("reward_cliff", 800, speed=2),)),
    RunSpec("reward-cliff-signed", 1300, 19, 60, signed_reward=True, faults=(Fault("reward_cliff", 600, speed=2),)),
    RunSpec("reward-cliff-recovers", 1200, 20, 60, faults=(Fault("reward_cliff", 500, 620, speed=2),)),
    RunSpec("reward-hacking", 1300, 21, 60, faults=(Fault("reward_hacking", 700, speed=40),)),
    RunSpec("truncation", 1200, 22, 55, faults=(Fault("truncation", 500, speed=20),)),
    RunSpec("stall", 1000, 23, 60, faults=(Fault("stall", 700),)),
    RunSpec("stall-short-steps", 1000, 24, 40, faults=(Fault("stall", 400),)),
    RunSpec("crash", 1000, 25, 60, faults=(Fault("crash", 650),)),
    RunSpec("crash-short-steps", 800, 26, 45, faults=(Fault("crash", 500),)),
    RunSpec("nan", 1000, 27, 60, faults=(Fault("nan", 600),)),
    RunSpec("memory-pressure", 1200, 28, 60, faults=(Fault("memory_pressure", 600, speed=30),)),
    RunSpec("token-runaway", 1200, 29, 50, faults=(Fault("token_runaway", 700, speed=20),)),
    RunSpec("rollout-aborts", 1000, 30, 60, faults=(Fault("rollout_aborts", 500, 650),)),
)


# Issue 20. Measurable: the first step that tells the fault from noise (see each comment).
ISSUE_20_RUNS = (
    # Healthy runs of other models and warm-ups that must not page.
    RunSpec("healthy-low-entropy", 800, 31, 60, entropy_level=0.027, entropy_decline=0.15),  # 0.027 -> 0.023
    RunSpec("healthy-high-entropy", 800, 32, 50, entropy_level=2.4, entropy_decline=0.4),
    RunSpec("healthy-entropy-halves", 600, 33, 60),  # the healthy decline, over a short run
    RunSpec("healthy-grpo-high-initial-kl", 800, 34, 45, warmup_kl=0.3),  # KL > 0.2 for the first 5 steps
    RunSpec("healthy-noisy-start", 800, 35, 60, noisy_first_steps=30),
    RunSpec("healthy-early-restart", 800, 36, 60, restart_at=75, restart_from=50),  # resumes from step 50
    RunSpec("healthy-isolated-skips", 800, 37, 60, isolated_nan_steps=(150, 640)),
    RunSpec("healthy-signed-plateau", 1200, 38, 45, signed_reward=True, plateaus=((300, 700),)),
    # A learning rate too high: divergence in the first hour, measurable at onset (KL 5.7x at once).
    RunSpec("divergence-first-hour", 600, 41, 60, faults=(Fault("divergence", 30, speed=3),)),
    RunSpec("divergence-first-hour-grpo", 600, 42, 45, warmup_kl=0.3, noisy_first_steps=20,
            faults=(Fault("divergence", 40, speed=5),)),
    # Entropy falling 10x in 130 steps (also on a model whose entropy never nears 0.05): issue 20
    # took it for a fault; issue 27's real runs fall so when healthy, so it is a healthy event now.
    RunSpec("entropy-slow-decay", 900, 43, 60, faults=(Fault("entropy_decay", 500, speed=130, measurable=539),)),
    RunSpec("entropy-slow-decay-high-level", 900, 44, 50, entropy_level=2.4, entropy_decline=0.4,
            faults=(Fault("entropy_decay", 500, speed=130, measurable=539),)),
    # Length collapse to 5% in 20 steps, measurable at a quarter of its level (10 steps in).
    RunSpec("length-collapse", 800, 45, 60, faults=(Fault("length_collapse", 400, speed=20, measurable=409),)),
    RunSpec("length-collapse-every-10", 800, 46, 60, log_every=10,
            faults=(Fault("length_collapse", 400, speed=20, measurable=410),)),
    # Grad norm, policy loss and KL exactly 0, measurable after 5 such steps (2 lines of a sparse log).
    RunSpec("no-learning-signal", 800, 47, 60, faults=(Fault("no_learning_signal", 400, measurable=404),)),
    RunSpec("no-learning-signal-every-10", 800, 48, 60, log_every=10,
            faults=(Fault("no_learning_signal", 405, measurable=420),)),
    # The public GRPO run: length collapse, then no learning signal, logged every 10 steps.
    RunSpec("grpo-collapse-every-10", 1000, 49, 60, log_every=10,
            faults=(Fault("length_collapse", 300, speed=20, measurable=310),
                    Fault("no_learning_signal", 330, measurable=340))),
    # Skips at 600, 612, ..., 648: more than 3 in an hour from the 4th (636). One isolated skip before.
    RunSpec("repeated-skips", 900, 50, 60, isolated_nan_steps=(150,),
            faults=(Fault("repeated_skips", 600, 650, measurable=636),)),
    # Reserved 62 -> 79 of 80 GB, allocated 50 -> 74 GB; measurable once at 79 GB.
    RunSpec("memory-near-capacity", 900, 51, 60,
            faults=(Fault("memory_near_capacity", 500, speed=30, measurable=529),)),
)


# Issue 27: what real runs do that the runs above did not.
ISSUE_27_RUNS = (
    # A healthy GRPO entropy fall of 40x over 300 steps (10x per 187 steps).
    RunSpec("healthy-entropy-40x", 900, 61, 60, faults=(Fault("entropy_decay", 200, speed=187),)),
    # Entropy 0.9 to 7x that within 5 steps, responses to the length cap; measurable in 2 steps.
    RunSpec("entropy-explosion", 800, 62, 60, faults=(Fault("entropy_explosion", 400, speed=5, measurable=402),)),
    # Logged every 20 steps without timing_s/step (TRL's logging_steps), nor verl's train/rollout gap.
    RunSpec("healthy-every-20-untimed", 1000, 63, 60, log_every=20, timed=False, rollout_gap=False),
    # Rhythms far from a minute a step.
    RunSpec("healthy-2s-per-step", 3000, 64, 2),
    RunSpec("entropy-collapse-2s-per-step", 3000, 65, 2, faults=(Fault("entropy_collapse", 2000, speed=10),)),
    RunSpec("healthy-900s-per-step", 300, 66, 900),
    RunSpec("reward-cliff-900s-per-step", 300, 67, 900, faults=(Fault("reward_cliff", 200, speed=2),)),
)


# Issues 35 and 40: what broke on real runs nobody had tuned the alerts on. Each scenario is
# judged on its own PASS/FAIL line (dashgen/evaluation/scoring.py, scenario_checks).
SMALL_BATCH_DISCRETE = SmallBatch(rewards=(0.0, 0.5, 2.0), zero_std_share=0.6)  # grad norm ~0.0004
SMALL_BATCH_SIGNED = SmallBatch(rewards=tuple(float(value) for value in range(-10, 12)), zero_std_share=0.3,
                                completions=4, grad_norm=0.05)
SMALL_BATCH_FEW_PROMPTS = SmallBatch(rewards=(0.0, 1.0), zero_std_share=0.45, completions=16, grad_norm=0.3,
                                     entropy_range=(0.05, 1.0))
# One prompt a step, logged as TRL logs it (frac_reward_zero_std, no step time, no train/rollout gap).
SMALL_BATCH_TRL = SmallBatch(rewards=(0.0, 1.0), zero_std_share=0.45, grad_norm=0.3, entropy_range=(0.05, 1.0),
                             logs_zero_std_share=True)
# A large batch drawn the same way: 256 rollouts, none of its steps with every one alike.
SMALL_BATCH_LARGE = SmallBatch(rewards=(0.0, 1.0), zero_std_share=0.0, completions=256, grad_norm=0.3,
                               entropy_range=(0.25, 0.3), response_tokens=300.0)
ISSUE_35_SCENARIOS: tuple[tuple[str, tuple[RunSpec, ...]], ...] = (
    ("noisy small-batch GRPO (reward across its range, 30-60% zero-std steps, entropy 0.001-1.0)", (
        # A console log: every value to 3 decimals, so a healthy grad norm of 0.0004 reads 0.000.
        RunSpec("healthy-small-batch-console", 400, 71, 30, small_batch=SMALL_BATCH_DISCRETE, console_decimals=3),
        RunSpec("healthy-small-batch-signed", 400, 72, 20, small_batch=SMALL_BATCH_SIGNED),
        RunSpec("healthy-few-prompts-untimed", 400, 73, 25, small_batch=SMALL_BATCH_FEW_PROMPTS, timed=False,
                rollout_gap=False),
    )),
    ("convergence (entropy 10x down in 50 steps, reward 0.28 to 0.78)", (
        RunSpec("healthy-convergence", 300, 74, 60, reward_range=(0.28, 0.3),
                faults=(Fault("convergence", 100, speed=50),)),
    )),
    ("failures from the first logged line", (
        # Reference KL ~11,000 and grad norm ~420,000 in the first line of a log of every 10th step.
        RunSpec("implausible-first-line-every-10", 300, 75, 60, log_every=10,
                faults=(Fault("implausible_start", 1, speed=10, measurable=10),)),
        # A reward exactly 0 with zero std on ~97% of steps from step 1.
        RunSpec("zero-reward-from-start", 250, 76, 30, small_batch=SmallBatch((0.0, 1.0), zero_std_share=0.97),
                faults=(Fault("no_reward", 1, measurable=10),)),
        # A reward never positive, zero std on ~86% of steps, grad norm ~1e-4.
        RunSpec("never-positive-reward", 120, 77, 40,
                small_batch=SmallBatch((-1.0, 0.0), zero_std_share=0.86, grad_norm=1e-4),
                faults=(Fault("no_reward", 1, measurable=10),)),
    )),
    ("slow entropy explosion with scattered NaNs at 2,400-4,800 s a step", (
        # Entropy doubling every 12 steps from 0.76 (to 9.8 at step 84), the reward 0.5 to 0.
        RunSpec("entropy-doubling-hourly-steps", 100, 78, 3600, step_time_sigma=0.2, entropy_level=0.76,
                entropy_decline=0.0, reward_range=(0.5, 0.5), isolated_nan_steps=(83, 85),
                faults=(Fault("entropy_growth", 40, speed=12, measurable=52),)),
    )),
    ("slower collapse (entropy down by e every 50 steps from step 1,000)", (
        RunSpec("entropy-slow-collapse", 1200, 79, 30, entropy_level=0.5, entropy_decline=0.0,
                faults=(Fault("entropy_slow_collapse", 1000, speed=50, measurable=1050),)),
    )),
    ("3,600 s a step", (
        RunSpec("healthy-3600s-per-step", 120, 80, 3600),
        RunSpec("divergence-3600s-per-step", 120, 81, 3600, faults=(Fault("divergence", 70, speed=3),)),
        # Skips every 12 steps: one each 12 hours, never "more than 3 in an hour".
        RunSpec("repeated-skips-3600s-per-step", 120, 82, 3600,
                faults=(Fault("repeated_skips", 40, 90, measurable=76),)),
    )),
    ("lone gradient explosion (issue 40) and its healthy twin", (
        RunSpec("grad-norm-explosion", 300, 83, 60, grad_norm_level=2.5,
                faults=(Fault("grad_norm_explosion", 200),)),
        RunSpec("healthy-grad-norm-twin", 300, 83, 60, grad_norm_level=2.5),
    )),
    ("entropy explosion after 500 quiet steps (issue 40) and its healthy twin", (
        RunSpec("late-entropy-explosion", 600, 84, 111, entropy_level=0.33, entropy_decline=0.0, grad_norm_level=1.0,
                faults=(Fault("late_entropy_explosion", 500, speed=50),)),
        RunSpec("healthy-late-twin", 600, 84, 111, entropy_level=0.33, entropy_decline=0.0, grad_norm_level=1.0),
    )),
    ("the late entropy explosion logged every 5 or 10 steps (issue 40) and its healthy twins", (
        # The run above with lines left out; the onset off the cadence, measurable at the first line after it.
        RunSpec("late-entropy-explosion-every-5", 600, 84, 111, log_every=5, entropy_level=0.33, entropy_decline=0.0,
                grad_norm_level=1.0, faults=(Fault("late_entropy_explosion", 503, speed=50, measurable=505),)),
        RunSpec("healthy-late-twin-every-5", 600, 84, 111, log_every=5, entropy_level=0.33, entropy_decline=0.0,
                grad_norm_level=1.0),
        RunSpec("late-entropy-explosion-every-10", 600, 84, 111, log_every=10, entropy_level=0.33,
                entropy_decline=0.0, grad_norm_level=1.0,
                faults=(Fault("late_entropy_explosion", 503, speed=50, measurable=510),)),
        RunSpec("healthy-late-twin-every-10", 600, 84, 111, log_every=10, entropy_level=0.33, entropy_decline=0.0,
                grad_norm_level=1.0),
    )),
    ("lone gradient explosion logged every 5 steps (issue 40) and its healthy twin", (
        RunSpec("grad-norm-explosion-every-5", 300, 83, 60, log_every=5, grad_norm_level=2.5,
                faults=(Fault("grad_norm_explosion", 203, measurable=205),)),
        RunSpec("healthy-grad-norm-twin-every-5", 300, 83, 60, log_every=5, grad_norm_level=2.5),
    )),
    ("reward hacking against validation (issue 40) and its healthy twin", (
        # Training reward 0.08 to 0.76; validation every 10 steps falls to 0 from step 100.
        RunSpec("reward-hacking-validation", 300, 85, 60, reward_range=(0.08, 0.8), validation_every=10,
                faults=(Fault("reward_hacking_validation", 100, speed=100, measurable=120),)),
        RunSpec("healthy-validation-twin", 300, 85, 60, reward_range=(0.08, 0.8), validation_every=10),
    )),
    ("train/rollout mismatch (issue 39) and its healthy twin", (
        # The mean probability gap 0.0025 to 0.05 within 3 steps from step 200, and staying.
        RunSpec("train-rollout-mismatch", 300, 86, 60,
                faults=(Fault("train_rollout_mismatch", 200, speed=3),)),
        RunSpec("healthy-mismatch-twin", 300, 86, 60),
        # A small-batch console log: the gap printed to 3 decimals (0.002 or 0.003), the rest noisy.
        RunSpec("healthy-mismatch-small-batch-console", 400, 89, 30,
                small_batch=SMALL_BATCH_DISCRETE, console_decimals=3),
    )),
    ("a signal that stops arriving (issue 39): actor/entropy unlogged from step 200, steps going on", (
        RunSpec("entropy-unlogged", 300, 87, 60, faults=(Fault("entropy_unlogged", 200),)),
        RunSpec("entropy-unlogged-every-10", 600, 88, 30, log_every=10, faults=(Fault("entropy_unlogged", 300),)),
    )),
    ("a reward saturated at its ceiling (issue 35, class 3): grad norm 0 on ~95% of steps, every completion right; "
     "and its failing twins, every completion wrong", (
        RunSpec("healthy-saturated-trl", 400, 90, 25, small_batch=SMALL_BATCH_TRL, timed=False, rollout_gap=False,
                faults=(Fault("saturation", 150, speed=50),)),
        RunSpec("healthy-saturated-trl-every-5", 1000, 91, 20, log_every=5, small_batch=SMALL_BATCH_TRL, timed=False,
                rollout_gap=False, faults=(Fault("saturation", 300, speed=100),)),
        RunSpec("healthy-saturated-small-batch", 400, 92, 60, small_batch=SMALL_BATCH_DISCRETE,
                faults=(Fault("saturation", 150, speed=50),)),
        # Every completion wrong from step 20 on: the reward at its floor almost from the start.
        RunSpec("reward-floor-early-trl", 400, 93, 25, small_batch=SMALL_BATCH_TRL, timed=False, rollout_gap=False,
                faults=(Fault("reward_floor", 20, speed=10, measurable=30),)),
        # The reward climbs, then falls to its floor.
        RunSpec("reward-falls-to-floor-trl-every-5", 1000, 94, 20, log_every=5, small_batch=SMALL_BATCH_TRL,
                timed=False, rollout_gap=False, faults=(Fault("reward_floor", 500, speed=50, measurable=550),)),
        RunSpec("reward-falls-to-floor-small-batch", 400, 95, 60, small_batch=SMALL_BATCH_DISCRETE,
                faults=(Fault("reward_floor", 200, speed=20, measurable=220),)),
    )),
    ("a short run whose reward collapses to exactly 0 after 12 healthy steps (issues 35/40) and its small-batch "
     "twins, whose completions all score 0 on many healthy steps", (
        # 32 prompts x 8 rollouts a step, as the public CS336 runs: a smooth reward that logs its std.
        RunSpec("reward-collapse-short", 41, 96, 60, small_batch=SMALL_BATCH_LARGE,
                faults=(Fault("reward_collapse", 12, speed=3),)),
        RunSpec("healthy-short-small-batch", 41, 97, 60, small_batch=SMALL_BATCH_DISCRETE),
        RunSpec("healthy-short-few-prompts", 41, 98, 60, small_batch=SMALL_BATCH_FEW_PROMPTS),
        RunSpec("healthy-short-trl", 41, 99, 25, small_batch=SMALL_BATCH_TRL, timed=False, rollout_gap=False),
    )),
)
ISSUE_35_RUNS = tuple(spec for _, specs in ISSUE_35_SCENARIOS for spec in specs)


# Issue 52: four shapes of unseen runs the alerts missed or warned on. Like the runs of the public
# 4 x 4 TRL study in the corpus (bench/realruns/trl-qwen25-15b-math-grpo-*): 16 completions a step in
# 4 groups, a shaped reward in [0, 1] with a group spread of about 0.38, a quarter of the groups alike
# (a median frac_reward_zero_std of 0.25), grad norm 0.2-0.8 (median 0.4, now and then 4x), entropy
# 0.18-0.41, 65-190 tokens a completion under a cap of 256 that cuts 0-7 of the 16 (a median of 0).
SMALL_BATCH_FOUR_PROMPTS = SmallBatch(rewards=(0.0, 0.1, 0.5, 1.0), zero_std_share=0.25, completions=4, prompts=4,
                                      grad_norm=0.4, entropy_range=(0.18, 0.41), response_tokens=100.0,
                                      logs_zero_std_share=True, truncated_share=0.03, length_cap=256.0)
ISSUE_52_SCENARIOS: tuple[tuple[str, tuple[RunSpec, ...]], ...] = (
    ("a noisy healthy run of 4 prompts x 4 completions a step (TRL)", (
        RunSpec("healthy-four-prompts-trl", 300, 100, 8, small_batch=SMALL_BATCH_FOUR_PROMPTS, reward_range=(0.0, 0.15),
                timed=False, rollout_gap=False, loss_noise=0.07),
    )),
    ("a loss explosion with the reward holding (a hand-written loop's loss 0.18 to 1e6-4.5e7; no grad norm logged)", (
        RunSpec("loss-explosion-reward-holding", 400, 101, 60, loss_level=0.18, loss_noise=0.05,
                unlogged=("actor/grad_norm",), faults=(Fault("loss_explosion", 200),)),
    )),
    ("truncation saturating from 0.6 (an agent run cut at the cap from step 1, then 1.0 for 200 steps)", (
        # The share 0.6 to 1.0 over 50 steps from step 150, the reward flat from then; measurable
        # once the share's rise (0.69 at step 160) is 4 standard deviations of its noise over 512 responses.
        RunSpec("truncation-saturates-from-0.6", 400, 102, 120, clip_ratio_level=0.6, plateaus=((150, 401),),
                faults=(Fault("truncation_saturation", 150, speed=50, measurable=160),)),
    )),
    ("a destroyed run (entropy to the log of a 151,936-token vocabulary in 5 steps, reward 0, every response cut)", (
        # Entropy 0.6 to 1.1, 1.9, 3.5 and 6.6 nats on steps 200-203, then 11.9: measurable at 201 (3x its level).
        RunSpec("destroyed-entropy-to-vocabulary-log", 300, 103, 60,
                faults=(Fault("destroyed", 200, speed=5, measurable=201),)),
    )),
)
ISSUE_52_RUNS = tuple(spec for _, specs in ISSUE_52_SCENARIOS for spec in specs)


def _backtest(runs: tuple[RunSpec, ...], folder: Path, calendar: bool = False) -> list[RunOutcome]:
    paths = [write_run(spec, folder / f"{spec.name}.jsonl") for spec in runs]
    timings = {path: Timing(start=1_700_000_000.0, end=spec.end,
                            hold_seconds=HUNG_HOLD_SECONDS if spec.end == "hung" else GRACE_SECONDS)
               for path, spec in zip(paths, runs)}
    return backtest(paths, REPO, Config(), Timing(), timings=timings, _calendar=calendar)


def _print_set(title: str, result: Score) -> None:
    """A set's score per alert, its latency per alert and what each episode's expected alerts did."""
    print(f"\n== {title} ==")
    print(format_score(result), end="")
    print("\nLatency per alert (steps are steps of the run, minutes of wall time)")
    print(format_latency(result), end="")
    print("\nEpisodes (plateaus left out)")
    print(format_episodes(result), end="")


def _only(substring: str) -> int:
    """Backtest and score only the runs whose name holds `substring`; their scenario lines too."""
    runs = tuple(spec for spec in (*RUNS, *ISSUE_20_RUNS, *ISSUE_27_RUNS, *ISSUE_35_RUNS, *ISSUE_52_RUNS)
                 if substring in spec.name)
    if not runs:
        print(f"no run's name holds {substring!r}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        began = time.perf_counter()
        outcomes = _backtest(runs, Path(tmp))
        seconds = time.perf_counter() - began
    result = score(outcomes, list(runs))
    _print_set(f"The {len(runs)} run(s) whose name holds {substring!r}", result)
    scenarios = tuple((label, tuple(spec for spec in specs if spec in runs))
                      for label, specs in (*ISSUE_35_SCENARIOS, *ISSUE_52_SCENARIOS))
    lines = [check.line() for check in scenario_checks(result, tuple((label, specs) for label, specs in scenarios
                                                                      if specs))]
    if lines:
        print("\nScenarios of issues 35, 40 and 52 (their runs named so)")
        print("\n".join(lines))
    print(f"{len(runs)} runs, {sum(len(outcome.run.steps) for outcome in outcomes)} steps, backtested in {seconds:.0f} s")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="SUBSTRING",
                        help="backtest and score only the runs whose name holds SUBSTRING")
    only = parser.parse_args().only
    if only is not None:
        return _only(only)
    runs = (*RUNS, *ISSUE_20_RUNS, *ISSUE_27_RUNS)
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        began = time.perf_counter()
        # A backtest per set: each alert's queries read every run of a backtest, so one of all
        # runs would take about twice as long.
        issue_8 = _backtest(RUNS, Path(tmp) / "bench")
        outcomes = [*issue_8, *_backtest(ISSUE_20_RUNS, Path(tmp) / "issue-20"),
                    *_backtest(ISSUE_27_RUNS, Path(tmp) / "issue-27")]
        seconds = time.perf_counter() - began
        issue_35 = _backtest(ISSUE_35_RUNS, Path(tmp) / "issue-35")
        issue_35_seconds = time.perf_counter() - began - seconds
        issue_52 = _backtest(ISSUE_52_RUNS, Path(tmp) / "issue-52")
        issue_52_seconds = time.perf_counter() - began - seconds - issue_35_seconds
    unknown = unknown_expected_alerts([*outcomes, *issue_35, *issue_52])
    if unknown:
        print(f"FAULT_ALERTS expects {', '.join(unknown)}, which no rule defines and PLANNED_ALERTS does not plan "
              f"(dashgen/evaluation/simulate.py)", file=sys.stderr)
        return 1
    print(format_score(score(issue_8, list(RUNS))), end="")
    print(f"{len(RUNS)} runs, {sum(len(outcome.run.steps) for outcome in issue_8)} steps")
    extended = score(outcomes, list(runs))
    _print_set(f"Issues 20 and 27: the extended set ({len(RUNS)} + {len(ISSUE_20_RUNS)} + {len(ISSUE_27_RUNS)} runs)",
               extended)
    print("\nTargets of issue 20")
    print("\n".join(check.line() for check in issue_20_checks(extended)))
    steps = sum(len(outcome.run.steps) for outcome in outcomes)
    print(f"{len(runs)} runs, {steps} steps, backtested in {seconds:.0f} s")
    new = score(issue_35, list(ISSUE_35_RUNS))
    _print_set(f"Issues 35 and 40: runs like those nobody tuned the alerts on ({len(ISSUE_35_RUNS)} runs)", new)
    print("\nScenarios of issues 35 and 40")
    print("\n".join(check.line() for check in scenario_checks(new, ISSUE_35_SCENARIOS)))
    new_steps = sum(len(outcome.run.steps) for outcome in issue_35)
    print(f"{len(ISSUE_35_RUNS)} runs, {new_steps} steps, backtested in {issue_35_seconds:.0f} s")
    latest = score(issue_52, list(ISSUE_52_RUNS))
    _print_set(f"Issue 52: a noisy 4-prompt run, a loss explosion, saturating truncation, a destroyed run "
               f"({len(ISSUE_52_RUNS)} runs)", latest)
    print("\nScenarios of issue 52")
    print("\n".join(check.line() for check in scenario_checks(latest, ISSUE_52_SCENARIOS)))
    latest_steps = sum(len(outcome.run.steps) for outcome in issue_52)
    print(f"{len(ISSUE_52_RUNS)} runs, {latest_steps} steps, backtested in {issue_52_seconds:.0f} s")
    before_52 = (*runs, *ISSUE_35_RUNS)
    print(f"\nTargets of issue 35 (the {len(before_52)} runs before issue 52's)")
    print("\n".join(check.line() for check in done_when_checks(score([*outcomes, *issue_35], list(before_52)))))
    every = (*before_52, *ISSUE_52_RUNS)
    print(f"\nTargets of issues 35 and 52 (all {len(every)} runs)")
    everything = score([*outcomes, *issue_35, *issue_52], list(every))
    print("\n".join(check.line() for check in done_when_checks(everything)))
    print(f"all {len(every)} runs backtested in {seconds + issue_35_seconds + issue_52_seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
