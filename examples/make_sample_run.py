"""Regenerate examples/runs/gsm8k/ppo-qwen-7b.jsonl, the sample run of the README's backtest and
backfill examples: 100 one-minute steps of a PPO run whose KL, grad norm and entropy break away
at step 75 (dashgen/synthetic_runs.py's "diverging" kind), validated every 5 steps.

    .venv/bin/python examples/make_sample_run.py
"""

import json
from pathlib import Path

from dashgen.synthetic_runs import step_data

HERE = Path(__file__).resolve().parent

STEPS, DIVERGES_AT = 100, 75
# The keys the default dashboards and alerts read, so the sample stays small.
KEYS = ("training/global_step", "actor/ppo_kl", "actor/grad_norm", "actor/entropy", "actor/pg_loss",
        "critic/score/mean", "critic/score/min", "critic/score/max", "response_length/mean",
        "response_length/clip_ratio", "response/aborted_ratio", "timing_s/step", "timing_s/gen",
        "perf/total_num_tokens", "perf/throughput", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb",
        "global_seqlen/max", "global_seqlen/mean", "global_seqlen/min")


def main() -> None:
    path = HERE / "runs" / "gsm8k" / "ppo-qwen-7b.jsonl"
    with open(path, "w") as handle:
        for step in range(1, STEPS + 1):
            data = step_data(step, "diverging", DIVERGES_AT)
            kept = {key: value for key, value in data.items() if key in KEYS or key.startswith("val-")}
            rounded = {key: round(value, 6) if isinstance(value, float) else value for key, value in kept.items()}
            handle.write(json.dumps({"step": step, "data": rounded}) + "\n")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
