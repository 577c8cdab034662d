"""The alerts on real public runs (bench/realruns/): per run what fired and when, then per split
and over all runs: healthy runs clean, failures caught, false critical pages.

Run from the repository root: .venv/bin/python bench/realruns.py [--root PROJECT] [--json] [--holdout-runs]

A thin call of dashgen/review (what `dashgen review` judges with). What it models: each run's
step log as `dashgen export` would have served it, scraped every 15 s, from a fixed start; steps
without timing_s/step take the run's default_step_seconds (run.yaml). What it leaves out: GPU,
Ray and rollout-engine metrics (no public log has them), and the run's real wall clock where
the log has none.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from dashgen.config.loading import load_config
from dashgen.review.comparison import judge
from dashgen.review.corpus import public_corpus
from dashgen.review.report import format_score, scores_by_split
from dashgen.review.runs import find_runs

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the project whose alerts are judged")
    parser.add_argument("--config", type=Path, help="a YAML file overriding fields of the config, as dashgen's "
                        "--config (default: the built-in config, whatever dashgen.yaml the project has)")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--holdout-runs", action="store_true",
                        help="also list the holdout split run by run (by default only its totals: it is never tuned on, "
                             "and a list of what fired on each of its runs is what tuning on it starts from)")
    args = parser.parse_args()
    runs = find_runs([public_corpus()])
    began = time.perf_counter()
    judged = judge(runs, args.root, load_config(args.config, args.root) if args.config else None)
    seconds = time.perf_counter() - began

    def listed(one) -> bool:
        return args.holdout_runs or one.run.split != "holdout"

    if args.json:
        print(json.dumps({"runs": [{"run": j.run.name, "split": j.run.split,
                                    "verdict": j.run.verdict.value if j.run.verdict else None,
                                    "onset_step": j.run.onset_step, "result": j.result,
                                    "caught_by": j.caught_by.alertname if j.caught_by else None,
                                    "latency_steps": j.latency_steps,
                                    "fired": [dataclasses.asdict(f) for f in j.fired]}
                                   for j in filter(listed, judged)],
                          "scores": {split: dataclasses.asdict(score)
                                     for split, score in scores_by_split(judged).items()}}, indent=1))
    else:
        print(format_score(judged, listed), end="")
        if not args.holdout_runs:
            print("(holdout runs listed only with --holdout-runs: that split is judged in totals, never tuned on)")
        print(f"{len(runs)} runs, {sum(len(j.logged_steps) for j in judged)} logged steps, backtested in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
