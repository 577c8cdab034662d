"""Benchmark: do the alerts catch real faults, stay quiet on healthy runs, fire once per
episode, cover a lasting fault and end cleanly with the run?

Generates 25 realistic verl runs with ground truth (dashgen/simulate.py: heavy-tailed
noise, single-step spikes, warm-up, KL drift, entropy decline, reward plateaus, signed
rewards, validation and checkpoint steps, a restart; and every fault kind), backtests them
all with Prometheus' own engine, and prints per alert: episodes, detections, latency, false
firings, firings per episode, coverage of lasting faults and resolution after a recovery.

Run from the repository root: .venv/bin/python bench/alert_lifecycle.py
Targets (issue 8): critical+warning precision >= 0.9, recall >= 0.95; no false critical
page on healthy steps; coverage >= 0.9; one firing per episode; no critical at a normal end.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from dashgen.backfill import Timing
from dashgen.backtest import backtest
from dashgen.config import Config
from dashgen.scoring import format_score, score
from dashgen.simulate import Fault, RunSpec, write_run

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


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        paths = [write_run(spec, Path(tmp) / "bench" / f"{spec.name}.jsonl") for spec in RUNS]
        timings = {path: Timing(start=1_700_000_000.0, end=spec.end,
                                hold_seconds=HUNG_HOLD_SECONDS if spec.end == "hung" else GRACE_SECONDS)
                   for path, spec in zip(paths, RUNS)}
        began = time.perf_counter()
        outcomes = backtest(paths, REPO, Config(), Timing(), timings=timings)
        seconds = time.perf_counter() - began
    result = score(outcomes, list(RUNS))
    steps = sum(len(outcome.run.steps) for outcome in outcomes)
    print(format_score(result), end="")
    print(f"{len(RUNS)} runs, {steps} steps, backtested in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
