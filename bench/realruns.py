"""The alerts on real public runs (bench/realruns/): per run what fired and when, then healthy
runs clean, failures caught (latency in logged steps) and runs paged falsely.

Run from the repository root: .venv/bin/python bench/realruns.py [--root PROJECT] [--json]

What it models: each run's step log as `dashgen export` would have served it, scraped every
15 s, from a fixed start; steps without timing_s/step take the run's default_step_seconds
(run.yaml). What it leaves out: GPU, Ray and rollout-engine metrics (no public log has them),
and the run's real wall clock where the log has none.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from dashgen.replay.corpus import format_report, judge, load_corpus

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "bench" / "realruns"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the project whose alerts are judged")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    args = parser.parse_args()
    runs = load_corpus(CORPUS)
    began = time.perf_counter()
    judged = judge(runs, args.root)
    seconds = time.perf_counter() - began
    if args.json:
        print(json.dumps([{"run": j.run.name, "verdict": j.run.verdict, "onset_step": j.run.onset_step,
                           "caught_by": j.caught_by.alertname if j.caught_by else None,
                           "latency_steps": j.latency_steps,
                           "fired": [[f.alertname, f.severity, f.start_step, f.end_step] for f in j.fired]}
                          for j in judged], indent=1))
    else:
        print(format_report(judged), end="")
        print(f"{len(runs)} runs, {sum(len(j.logged_steps) for j in judged)} logged steps, backtested in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
