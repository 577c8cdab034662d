"""Benchmark: what a backtest costs as a run grows in steps and in calendar time (issue 56), and the
corpus review of a one-alert change, each as a ratio against another checkout (the issue's starting
commit, in a worktree of its own with its own virtualenv).

Each row is one `dashgen backtest` process timed from outside (wall, processor time of it and its
children, peak memory of the largest process):

  real 435            bench/realruns/verl-qwen25-05b-gsm8k-ppo-r512: a real verl run, 435 steps; its log
                      has no timing_s/step, so 8 s a step (about an hour)
  real 675 @ 750 s    the first 675 lines of bench/realruns/verl-qwen3-4b-promptgen-grpo-748 (a real verl
                      GRPO run) at 750 s a step (the issue's 675-step DAPO run is not in the repository)
  20,000 @ 10 s       those 675 lines repeated to 20,000 steps, 10 s a step (2.3 days)
  20,000 @ 750 s      the same at 749 s a step (173 days; at 750 s it is one scrape too many)
  5,000 @ 750 s       the first 5,000 of them (43 days)
  review              `dashgen review --public-corpus` in a copy of this checkout whose VerlKLSpike
                      threshold is changed (the base revision: the copy's HEAD)

Run from the repository root:
  .venv/bin/python bench/replay_scale.py [--base /work/wt-replay-base] [--rows real-435,review] [--runs N]
With --base, every row runs with both checkouts' `dashgen`, in turn (A B A B ...), and the ratio is
taken pair by pair; the machine's load moves both alike. Processor time is the steadier figure on
a machine others use.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REAL_435 = REPO / "bench" / "realruns" / "verl-qwen25-05b-gsm8k-ppo-r512" / "steps.jsonl"
REAL_748 = REPO / "bench" / "realruns" / "verl-qwen3-4b-promptgen-grpo-748" / "steps.jsonl"
START = "1700000000"
# name -> (steps, seconds a step); None: the real 435-step run as logged
# 20,000 steps at 749 s rather than 750: at 750 s the run and its 5 minute hold take 1,000,020 scrapes
# at 15 s, past the 1,000,000 a backtest allows a run.
ROWS = {"real-435": None, "real-675-750s": (675, 750.0), "20000-10s": (20_000, 10.0),
        "20000-750s": (20_000, 749.0), "5000-750s": (5_000, 750.0), "review": None}
# The "done when" (seconds, MB), where it gives one.
TARGETS = {"real-675-750s": (3.0, None), "20000-750s": (30.0, 500.0), "review": (60.0, None)}
CHANGED_ALERT = ("alerts/stability.py", "kl_spike_threshold: NonNegative = 0.1\n", "kl_spike_threshold: NonNegative = 0.12\n")


def repeated_log(path: Path, steps: int, step_seconds: float) -> Path:
    """REAL_748's lines repeated to `steps` steps, numbered 1.., each taking `step_seconds`."""
    lines = [json.loads(line) for line in REAL_748.read_text().splitlines() if line.strip()][:675]
    with open(path, "w") as out:
        for step in range(steps):
            data = dict(lines[step % len(lines)]["data"])
            data["timing_s/step"] = step_seconds
            out.write(json.dumps({"step": step + 1, "data": data}) + "\n")
    return path


def timed(command: list[str], cwd: Path) -> dict[str, float]:
    """Wall seconds, processor seconds (with children) and peak MB of one run of `command`."""
    result = subprocess.run(["/usr/bin/time", "-f", "TIMED %e %U %S %M", *command], cwd=cwd, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    line = [text for text in result.stderr.splitlines() if text.startswith("TIMED ")][-1].split()
    if result.returncode not in ((0, 1) if command[1] == "review" else (0,)):  # review: 1 is a regression found
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return {"wall": float(line[1]), "cpu": float(line[2]) + float(line[3]), "peak_mb": float(line[4]) / 1024}


def review_copy(checkout: Path, folder: Path) -> Path:
    """A clone of `checkout`'s HEAD with one alert's threshold changed in its working tree."""
    copy = folder / f"review-{checkout.name}"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(checkout), str(copy)], check=True)
    path, old, new = CHANGED_ALERT
    source = (copy / path).read_text()
    if old not in source:
        raise SystemExit(f"{path} has no {old.strip()!r}: pick another alert to change")
    (copy / path).write_text(source.replace(old, new, 1))
    return copy


def commands(row: str, checkout: Path, logs: dict[str, Path], folder: Path) -> tuple[list[str], Path]:
    dashgen = str(checkout / ".venv" / "bin" / "dashgen")
    if row == "review":
        copy = review_copy(checkout, folder)
        return [dashgen, "review", "--public-corpus", "--base", "HEAD", "--json"], copy
    extra = ["--default-step-time", "8s"] if row == "real-435" else []
    return [dashgen, "backtest", "--root", str(checkout), "--start", START, "--format", "json", *extra,
            str(logs[row])], checkout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, help="another checkout with its own .venv, for ratios")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ", ".join(ROWS))
    parser.add_argument("--runs", type=int, default=1, help="runs of each command (median quoted)")
    args = parser.parse_args()
    rows = args.rows.split(",")
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-scale-") as tmp:
        folder = Path(tmp)
        logs = {"real-435": REAL_435}
        for row in rows:
            if ROWS.get(row):
                steps, seconds = ROWS[row]
                logs[row] = repeated_log(folder / f"{row}.jsonl", steps, seconds)
        print(f"{'run':<15} {'wall s':>8} {'cpu s':>8} {'peak MB':>8}" + (
            f" {'base wall':>9} {'base cpu':>8} {'base MB':>8} {'cpu x':>6} {'MB x':>6}" if args.base else ""))
        for row in rows:
            ours, base = [], []
            for _ in range(args.runs):
                command, cwd = commands(row, REPO, logs, folder)
                ours.append(timed(command, cwd))
                if args.base:
                    command, cwd = commands(row, args.base, logs, folder)
                    base.append(timed(command, cwd))
                shutil.rmtree(folder / f"review-{REPO.name}", ignore_errors=True)
                if args.base:
                    shutil.rmtree(folder / f"review-{args.base.name}", ignore_errors=True)
            line = f"{row:<15}" + "".join(f" {statistics.median(r[key] for r in ours):>8.1f}"
                                          for key in ("wall", "cpu", "peak_mb"))
            if args.base:
                line += "".join(f" {statistics.median(r[key] for r in base):>{width}.1f}"
                                for key, width in (("wall", 9), ("cpu", 8), ("peak_mb", 8)))
                line += "".join(f" {statistics.median(b[key] / a[key] for a, b in zip(ours, base)):>6.1f}"
                                for key in ("cpu", "peak_mb"))
            target = TARGETS.get(row)
            if target:
                line += f"   (issue 56: <= {target[0]:g} s" + (f", <= {target[1]:g} MB)" if target[1] else ")")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
