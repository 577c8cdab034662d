"""Regenerate examples/runs/gsm8k/ppo-qwen-7b.jsonl, the sample run of the backtest,
backfill and preview examples in docs/backtest-and-preview.md: 100 one-minute steps of a PPO run whose KL, grad norm and
entropy break away at step 75 (dashgen/evaluation/synthetic_runs.py's "diverging" kind), validated every
5 steps and checkpointed every 25.

It logs every key verl's PPO trainer logs that the catalog knows (not timing_s/gen_max, which
only REMAX logs), so `dashgen preview` shows every verl panel with data. The step time and the
score are synthetic_runs' own, so the alerts judge the run as before; the stages split the step
time in fixed shares, the batch statistics follow the score.

    .venv/bin/python examples/make_sample_run.py
"""

import json
import random
from pathlib import Path

from dashgen.evaluation.synthetic_runs import TEST_FREQ, step_data

HERE = Path(__file__).resolve().parent

STEPS, DIVERGES_AT = 100, 75
CHECKPOINT_FREQ = 25
# verl's stages, each one's share of a step's time (validation and checkpoint steps add their own).
STAGE_SHARES = {"gen": 0.46, "reward": 0.04, "old_log_prob": 0.08, "ref": 0.07, "values": 0.06, "adv": 0.01,
                "update_critic": 0.10, "update_actor": 0.15, "update_weights": 0.03}
TESTING_SHARE, CHECKPOINT_SHARE = 0.12, 0.08
PER_TOKEN_STAGES = ("gen", "ref", "values", "adv", "update_critic", "update_actor")
NOT_LOGGED = ("timing_s/gen_max", "timing_s/testing", "timing_s/save_checkpoint")


def sample_step(step: int) -> dict:
    rng = random.Random(step)
    data = {key: value for key, value in step_data(step, "diverging", DIVERGES_AT).items() if key not in NOT_LOGGED}
    step_seconds = data["timing_s/step"]
    extra = {"testing": TESTING_SHARE if step % TEST_FREQ == 0 else 0.0,
             "save_checkpoint": CHECKPOINT_SHARE if step % CHECKPOINT_FREQ == 0 else 0.0}
    training = 1.0 - sum(extra.values())
    for stage, share in STAGE_SHARES.items():
        data[f"timing_s/{stage}"] = step_seconds * training * share * (1 + 0.05 * rng.uniform(-1, 1))
    for stage, share in extra.items():
        if share:
            data[f"timing_s/{stage}"] = step_seconds * share
    tokens = data["perf/total_num_tokens"]
    for stage in PER_TOKEN_STAGES:
        data[f"timing_per_token_ms/{stage}"] = data[f"timing_s/{stage}"] * 1000 / tokens
    score = data["critic/score/mean"]
    data.update({
        "training/epoch": (step - 1) // 50,
        "critic/rewards/mean": score - 0.01, "critic/rewards/max": 0.99, "critic/rewards/min": -0.01,
        "critic/advantages/mean": 0.02 * rng.uniform(-1, 1), "critic/advantages/max": 2.5 + 0.3 * rng.random(),
        "critic/advantages/min": -2.5 - 0.3 * rng.random(),
        "critic/returns/mean": score - 0.01, "critic/returns/max": 1.0, "critic/returns/min": 0.0,
        "critic/values/mean": score - 0.05 * rng.random(), "critic/values/max": 0.9, "critic/values/min": 0.05,
        "critic/vpred_mean": score - 0.04,
        "critic/vf_loss": 0.05 + 0.02 * rng.random(), "critic/vf_clipfrac": 0.01 + 0.01 * rng.random(),
        "critic/vf_explained_var": 0.3 + 0.5 * step / STEPS, "critic/grad_norm": 2.0 + 0.5 * rng.random(),
        "actor/lr": 1e-6, "critic/lr": 1e-5, "actor/kl_coef": 0.001, "actor/kl_loss": data["actor/ppo_kl"] * 0.5,
        "actor/pg_clipfrac": 0.002 + 0.002 * rng.random(), "actor/pg_clipfrac_lower": 0.0,
        "prompt_length/mean": 110 + 10 * rng.uniform(-1, 1), "prompt_length/max": 240.0, "prompt_length/min": 38.0,
        "prompt_length/clip_ratio": 0.0,
        "response_length/max": 1024.0, "response_length/min": 42.0,
        "perf/throughput": tokens / step_seconds / 8, "perf/mfu/actor": 0.38, "perf/mfu/critic": 0.31,
        "perf/cpu_memory_used_gb": 210.0,
        "global_seqlen/min": tokens / 8 * 0.9, "global_seqlen/max": tokens / 8 * 1.1, "global_seqlen/mean": tokens / 8,
        "global_seqlen/minmax_diff": tokens / 8 * 0.2, "global_seqlen/balanced_min": tokens / 8 * 0.99,
        "global_seqlen/balanced_max": tokens / 8 * 1.01,
    })
    data["perf/time_per_step"] = step_seconds
    # The train/rollout gap of a bf16 stack (rollout.calculate_log_probs, on by default), with verl's
    # rollout correction on (rollout_corr/*).
    gap = 0.0025 * (1 + 0.1 * rng.uniform(-1, 1))
    data.update({
        "training/rollout_probs_diff_mean": gap, "training/rollout_probs_diff_std": 6 * gap,
        "training/rollout_probs_diff_max": 0.5 + 0.2 * rng.random(),
        "rollout_corr/kl": 0.0004 * (1 + 0.2 * rng.uniform(-1, 1)),
        "rollout_corr/log_ppl_abs_diff": 0.004 * (1 + 0.2 * rng.uniform(-1, 1)),
        "rollout_corr/chi2_token": 0.002 * (1 + 0.2 * rng.uniform(-1, 1)),
    })
    return data


def main() -> None:
    path = HERE / "runs" / "gsm8k" / "ppo-qwen-7b.jsonl"
    with open(path, "w") as handle:
        for step in range(1, STEPS + 1):
            rounded = {key: round(value, 6) if isinstance(value, float) else value
                       for key, value in sample_step(step).items()}
            handle.write(json.dumps({"step": step, "data": rounded}) + "\n")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
