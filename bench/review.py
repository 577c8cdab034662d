"""`dashgen review` against one backtest pass, on the public corpus (bench/realruns/): the ratio.

Run from the repository root: .venv/bin/python bench/review.py [--scenario NAME] [--repeat N]

The project reviewed is a committed copy of this repository's definitions (alerts/, panels/) in a
temporary git checkout, with a change to its dashgen.yaml left uncommitted:
- none: no change (every rule the same at HEAD and in the working tree);
- reward-cliff: VerlRewardCliff on a 5% dip (one alert area's rules differ);
- every-rule: rule_interval 30s (every recording and alert differs: the worst case).
One pass is `bench/realruns.py`'s: the working tree's rules backtested on every run. One review
is what `dashgen review --base HEAD --public-corpus` does: the rules at HEAD and in the working tree
compiled (a process each, side by side), then both backtested in one pass and judged. The goal
(issue 36): a review takes at most 1.5 times one pass. The median of --repeat runs of each,
taken in turn, is quoted.

`--only pass|review --project DIR` does one of the two once on a project made before with
`--make-project DIR`, so that each can be timed as a whole process from outside.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dashgen.compiler.sections import load_config
from dashgen.review.comparison import judge, review
from dashgen.review.corpus import public_corpus
from dashgen.review.revisions import compared_rules
from dashgen.review.runs import find_runs

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = {
    "none": "",
    "reward-cliff": "rewards:\n  reward_cliff_drop_fraction: 0.05\n  reward_cliff_min_drop: 0\n  reward_cliff_noise_z: 0\n",
    "every-rule": "rule_interval: 30s\n",
}
GOAL = 1.5


def make_project(folder: Path, scenario: str) -> Path:
    """A committed copy of this repository's definitions, with the scenario's change uncommitted."""
    for part in ("alerts", "panels"):
        shutil.copytree(REPO / part, folder / part, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("metrics.yaml", "dashgen.yaml"):
        if (REPO / name).is_file():
            shutil.copy(REPO / name, folder / name)
    (folder / "dashgen.yaml").touch()
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=folder, check=True)
    subprocess.run([*git, "add", "-A"], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=folder, check=True)
    with open(folder / "dashgen.yaml", "a") as config:
        config.write(SCENARIOS[scenario])
    return folder


def one_pass(project: Path) -> float:
    began = time.perf_counter()
    judge(find_runs([public_corpus()]), project, load_config(None, project).with_source("exporter"))
    return time.perf_counter() - began


def one_review(project: Path) -> tuple[float, int]:
    """Seconds, and how many runs got worse."""
    began = time.perf_counter()
    runs = find_runs([public_corpus()])
    rules = compared_rules(project, "HEAD")
    result = review(runs, rules.base, rules.head, project, load_config(None, project).with_source("exporter"),
                    rules.base_name, rules.head_name)
    return time.perf_counter() - began, len(result.regressions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, in turn; the median is quoted")
    parser.add_argument("--make-project", type=Path, help="only make the scenario's project in this new folder")
    parser.add_argument("--only", choices=["pass", "review"], help="only one pass or one review, once")
    parser.add_argument("--project", type=Path, help="the project --only works on")
    args = parser.parse_args()
    if args.make_project:
        args.make_project.mkdir(parents=True)
        make_project(args.make_project, "none" if args.scenario == "all" else args.scenario)
        return 0
    if args.only:
        seconds = one_pass(args.project) if args.only == "pass" else one_review(args.project)[0]
        print(f"{args.only}: {seconds:.2f} s")
        return 0
    for scenario in SCENARIOS if args.scenario == "all" else [args.scenario]:
        with tempfile.TemporaryDirectory(prefix="dashgen-bench-review-") as tmp:
            project = make_project(Path(tmp), scenario)
            passes, reviews, worse = [], [], 0
            for _ in range(args.repeat):
                passes.append(one_pass(project))
                seconds, worse = one_review(project)
                reviews.append(seconds)
        ratio = statistics.median(reviews) / statistics.median(passes)
        print(f"{scenario:<13} one pass {statistics.median(passes):5.2f} s (of {', '.join(f'{s:.2f}' for s in passes)}), "
              f"one review {statistics.median(reviews):5.2f} s (of {', '.join(f'{s:.2f}' for s in reviews)}): "
              f"{ratio:.2f}x (goal at most {GOAL}x); {worse} runs got worse")
    return 0


if __name__ == "__main__":
    sys.exit(main())
