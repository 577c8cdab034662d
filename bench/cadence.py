"""The alerts on the corpus' tune runs logged less often: each run that logs every step, resampled
to every Nth step at every phase, judged as the holdout is (a failure within 10 logged steps of its
onset, latest_step dropped). How rules take a coarser logging cadence, told without the holdout.

Run from the repository root: .venv/bin/python bench/cadence.py [--every 5 10] [--root PROJECT]

Why: the corpus' holdout has runs logged every 5th step and its tune split nearly none, so a rule
tuned on tune alone can fail there for a reason the tune runs never show (a median of 10 steps
holding 2 values). Resampling a tune run keeps its labels true: a healthy run stays healthy when
fewer of its lines are read. A failure whose onset falls before the first kept line of its phase
is left out: that cadence cannot see its start.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import yaml

from dashgen.review.comparison import judge
from dashgen.review.corpus import public_corpus
from dashgen.review.report import scores_by_split
from dashgen.review.runs import find_runs

REPO = Path(__file__).resolve().parent.parent


def resample(corpus: Path, every: int, phase: int, into: Path) -> int:
    """Write each tune run that logs every step, keeping steps with step % every == phase; how many."""
    written = 0
    for folder in sorted(p for p in corpus.iterdir() if (p / "run.yaml").is_file() and (p / "steps.jsonl").is_file()):
        meta = yaml.safe_load((folder / "run.yaml").read_text())
        if meta.get("split") != "tune" or meta.get("logged_every", 1) != 1:
            continue
        lines = [line for line in (folder / "steps.jsonl").read_text().splitlines() if line.strip()]
        kept = [line for line in lines if json.loads(line).get("step", 0) % every == phase]
        onset = meta.get("onset_step")
        if len(kept) < 3 or (onset is not None and json.loads(kept[0])["step"] > onset + every):
            continue
        meta.update(logged_every=every, latest_step=None)
        run = into / f"{folder.name}-every{every}-phase{phase}"
        run.mkdir()
        (run / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        (run / "steps.jsonl").write_text("\n".join(kept) + "\n")
        written += 1
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, nargs="+", default=[5, 10], help="cadences to resample to")
    parser.add_argument("--root", type=Path, default=REPO, help="the project whose alerts are judged")
    args = parser.parse_args()
    corpus = public_corpus()
    for every in args.every:
        with tempfile.TemporaryDirectory(prefix=f"dashgen-cadence-{every}-") as tmp:
            for phase in range(every):
                resample(corpus, every, phase, Path(tmp))
            judged = judge(find_runs([Path(tmp)]), args.root)
        score = scores_by_split(judged)["tune"]
        print(f"every {every} steps, {every} phases: healthy clean {score.healthy_clean}/{score.healthy}, "
              f"failures caught {score.failures_caught}/{score.failures}, "
              f"false critical pages {score.false_critical_pages}")
        for one in judged:
            if one.result not in ("clean",) and not one.result.startswith("caught"):
                fired = ", ".join(f"{f.alertname}@{f.start_step}" for f in one.fired if f.severity != "info")
                print(f"  {one.run.name}: {one.result} ({fired or 'nothing fired'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
