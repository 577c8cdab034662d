"""Benchmark: backtest every alert on a 10,000-step run (about a week at 60 s a step).

Run from the repository root: .venv/bin/python bench/backtest_10k.py
The goal (issue 19) is at most 10 s on a 2-core machine: the wall time of the whole backtest
(backfill, recording rules, alert evaluation, server start-ups) is printed against it, with the
processor time it took here and in its children (promtool, prometheus): on a machine others are
using, wall time grows with their load, processor time far less.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

from dashgen.config import Config
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import backtest, format_table
from dashgen.evaluation.synthetic_runs import write_run

REPO = Path(__file__).resolve().parent.parent

STEPS = 10_000
DIVERGES_AT = 5_000
GOAL_SECONDS = 10.0


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-") as tmp:
        log = write_run(Path(tmp) / "bench" / "diverging-10k.jsonl", "diverging", STEPS, event_at=DIVERGES_AT)
        began, cpu_began = time.perf_counter(), _cpu_seconds()
        outcomes = backtest([log], REPO, Config(), Timing())
        seconds, cpu = time.perf_counter() - began, _cpu_seconds() - cpu_began
    table = format_table(outcomes)
    print("\n".join(line for line in table.splitlines() if "VerlTrainingDivergence" in line or "ALERT" in line))
    print(f"backtest of {STEPS} steps: {seconds:.1f} s (goal: at most {GOAL_SECONDS:.0f} s); "
          f"processor time {cpu:.1f} s (this process and its children)")
    return 0 if seconds <= GOAL_SECONDS else 1


def _cpu_seconds() -> float:
    """User and system time of this process and of its children that have ended."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
