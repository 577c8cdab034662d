"""Benchmark: backtest every alert on a 10,000-step run (about a week at 60 s a step).

Run from the repository root: .venv/bin/python bench/backtest_10k.py
The goal is under 30 s on a 2-core machine; the wall time of the whole backtest (backfill,
recording rules, alert evaluation, server start-ups) is printed at the end.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from dashgen.backfill import Timing
from dashgen.backtest import backtest, format_table
from dashgen.config import Config
from dashgen.synthetic_runs import write_run

REPO = Path(__file__).resolve().parent.parent

STEPS = 10_000
DIVERGES_AT = 5_000
GOAL_SECONDS = 30.0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        log = write_run(Path(tmp) / "bench" / "diverging-10k.jsonl", "diverging", STEPS, event_at=DIVERGES_AT)
        began = time.perf_counter()
        outcomes = backtest([log], REPO, Config(), Timing())
        seconds = time.perf_counter() - began
    table = format_table(outcomes)
    print("\n".join(line for line in table.splitlines() if "VerlTrainingDivergence" in line or "ALERT" in line))
    print(f"backtest of {STEPS} steps: {seconds:.1f} s (goal: under {GOAL_SECONDS:.0f} s)")
    return 0 if seconds < GOAL_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
