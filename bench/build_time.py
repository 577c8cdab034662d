"""Wall time of `dashgen build` against importing its four libraries (the issue asks for both).

    .venv/bin/python bench/build_time.py
"""

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = 7


def wall(command: list[str], cwd: Path) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    dashgen = str(Path(sys.executable).with_name("dashgen"))
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        for folder in ("panels", "alerts", "rendered"):
            shutil.copytree(REPO / folder, project / folder)
        build = wall([dashgen, "build"], project)
        imports = wall([sys.executable, "-c", "import grafanalib, jinja2, yaml, click"], project)
    print(f"median of {RUNS} runs on this machine")
    print(f"dashgen build:                                  {build * 1000:.0f} ms")
    print(f"python -c 'import grafanalib, jinja2, yaml, click': {imports * 1000:.0f} ms")
    print(f"ratio build / imports: {build / imports:.1f}")


if __name__ == "__main__":
    main()
