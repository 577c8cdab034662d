"""Wall time of `dashgen preview` on the sample run, as on a fresh clone (the issue's target: < 20 s
on a 2-core machine), and the size of each PNG it draws.

    .venv/bin/python bench/preview_time.py

Each run is a new process into an empty folder: import, build check, backfill (promtool), a
Prometheus started and stopped, every panel's queries, matplotlib drawing both dashboards.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = 3
TARGET_SECONDS = 20.0


def main() -> None:
    dashgen = str(Path(sys.executable).with_name("dashgen"))
    times = []
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-preview-") as tmp:
        out = Path(tmp)
        for _ in range(RUNS):
            start = time.perf_counter()
            subprocess.run([dashgen, "preview", "--out", str(out)], cwd=REPO, check=True, stdout=subprocess.DEVNULL,
                           env={**os.environ, "MPLBACKEND": "Agg"})
            times.append(time.perf_counter() - start)
        sizes = {png.name: png.stat().st_size for png in sorted(out.glob("*.png"))}
    print(f"dashgen preview of examples/runs/gsm8k/ppo-qwen-7b.jsonl, {RUNS} runs on {os.cpu_count()} cores: "
          f"median {statistics.median(times):.1f} s, slowest {max(times):.1f} s (target < {TARGET_SECONDS:.0f} s)")
    for name, size in sizes.items():
        print(f"  {name}: {size:,} B")


if __name__ == "__main__":
    main()
