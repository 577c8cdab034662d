"""The alerts on the corpus' tune runs logged less often: each run that logs every step, resampled
to every Nth step at every phase, judged as the holdout is (a failure within 10 logged steps of its
onset, latest_step dropped). How rules take a coarser logging cadence, told without the holdout.

Run from the repository root: .venv/bin/python bench/cadence.py [--every 5 10] [--root PROJECT]

Why: the corpus' holdout has runs logged every 5th step and its tune split nearly none, so a rule
tuned on tune alone can fail there for a reason the tune runs never show (a median of 10 steps
holding 2 values). Resampling a tune run keeps its labels true: a healthy run stays healthy when
fewer of its lines are read. A failure whose onset falls before the first kept line of its phase
is left out: that cadence cannot see its start. So is a phase whose kept lines the source itself
cut short (some public logs keep only the validation and actor keys on their validation steps, every
10th): a real log at that cadence carries whole lines, so judging those would judge the source.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
import tempfile
from pathlib import Path

import yaml

from dashgen.review.comparison import judge
from dashgen.review.corpus import public_corpus
from dashgen.review.report import scores_by_split
from dashgen.review.runs import find_runs

REPO = Path(__file__).resolve().parent.parent


# A key is on a log's whole lines when it is on this share of them; a phase is cut short when more
# than half of its kept lines lack one of those keys.
WHOLE_LINE_SHARE = 0.9


def cut_short(rows: list[dict], kept: list[dict]) -> bool:
    """Whether most of the `kept` lines lack keys that the log's whole lines carry."""
    counts = Counter(key for row in rows for key in row.get("data", {}))
    whole = {key for key, count in counts.items() if count >= WHOLE_LINE_SHARE * len(rows)}
    return sum(not whole <= set(row.get("data", {})) for row in kept) > len(kept) / 2


def resample(corpus: Path, every: int, phase: int, into: Path) -> tuple[int, list[str]]:
    """Write each tune run that logs every step, keeping steps with step % every == phase; how many,
    and the runs left out because the source cut those lines short."""
    written, cut = 0, []
    for folder in sorted(p for p in corpus.iterdir() if (p / "run.yaml").is_file() and (p / "steps.jsonl").is_file()):
        meta = yaml.safe_load((folder / "run.yaml").read_text())
        if meta.get("split") != "tune" or meta.get("logged_every", 1) != 1:
            continue
        lines = [line for line in (folder / "steps.jsonl").read_text().splitlines() if line.strip()]
        rows = [json.loads(line) for line in lines]
        kept = [line for line, row in zip(lines, rows) if row.get("step", 0) % every == phase]
        onset = meta.get("onset_step")
        if len(kept) < 3 or (onset is not None and json.loads(kept[0])["step"] > onset + every):
            continue
        if cut_short(rows, [json.loads(line) for line in kept]):
            cut.append(folder.name)
            continue
        meta.update(logged_every=every, latest_step=None)
        run = into / f"{folder.name}-every{every}-phase{phase}"
        run.mkdir()
        (run / "run.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
        (run / "steps.jsonl").write_text("\n".join(kept) + "\n")
        written += 1
    return written, cut


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, nargs="+", default=[5, 10], help="cadences to resample to")
    parser.add_argument("--root", type=Path, default=REPO, help="the project whose alerts are judged")
    args = parser.parse_args()
    corpus = public_corpus()
    for every in args.every:
        with tempfile.TemporaryDirectory(prefix=f"dashgen-cadence-{every}-") as tmp:
            cut = [f"{name} phase {phase}" for phase in range(every)
                   for name in resample(corpus, every, phase, Path(tmp))[1]]
            judged = judge(find_runs([Path(tmp)]), args.root)
        score = scores_by_split(judged)["tune"]
        print(f"every {every} steps, {every} phases: healthy clean {score.healthy_clean}/{score.healthy}, "
              f"failures caught {score.failures_caught}/{score.failures}, "
              f"false critical pages {score.false_critical_pages}")
        if cut:
            print(f"  left out, the source's lines at those steps cut short: {', '.join(cut)}")
        for one in judged:
            if one.result not in ("clean",) and not one.result.startswith("caught"):
                fired = ", ".join(f"{f.alertname}@{f.start_step}" for f in one.fired if f.severity != "info")
                print(f"  {one.run.name}: {one.result} ({fired or 'nothing fired'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
