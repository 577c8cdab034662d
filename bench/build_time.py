"""Wall time of `dashgen build` and `dashgen --help` against the floor: importing the four
libraries a build needs, `python -c 'import grafanalib.core, jinja2, yaml, click'`.

    .venv/bin/python bench/build_time.py

The floor imports grafanalib.core (its attrs classes, about 115 ms), not grafanalib, whose
__init__ is a docstring. The three commands run in turn (floor, build, help, floor, ...), so a
machine that slows down mid-way slows all three; each ratio is the median of the per-round
ratios. Goals (issue 19): build at most 1.5x the floor, --help under 0.6x.

dashgen runs as `make build` leaves it: installed editable, its modules, its Jinja templates and
the definition modules of panels/ and alerts/ (in the package as dashgen_panels, dashgen_alerts)
compiled; a Python started with PYTHONDONTWRITEBYTECODE would otherwise compile them again on
every run.
The project built is a copy of panels/, alerts/ and rendered/.
"""

from __future__ import annotations

import compileall
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dashgen.compiler.output.rendering import compile_templates

REPO = Path(__file__).resolve().parent.parent
ROUNDS = 11
FLOOR_IMPORTS = "import grafanalib.core, jinja2, yaml, click"
BUILD_GOAL = 1.5
HELP_GOAL = 0.6


def wall(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    dashgen = str(Path(sys.executable).with_name("dashgen"))
    for folder in ("dashgen", "panels", "alerts"):  # as `make build` does
        compileall.compile_dir(REPO / folder, quiet=1)
    compile_templates()
    commands = {"floor": [sys.executable, "-c", FLOOR_IMPORTS], "build": [dashgen, "build"],
                "help": [dashgen, "--help"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory(prefix="dashgen-bench-build-") as tmp:
        project = Path(tmp)
        for folder in ("panels", "alerts", "rendered"):
            shutil.copytree(REPO / folder, project / folder)  # with the .pyc, still valid: mtimes are kept
        for name, command in commands.items():  # warm-up: file cache, rendered/ up to date
            wall(command, project)
        for _ in range(ROUNDS):
            for name, command in commands.items():
                times[name].append(wall(command, project))
    floor = statistics.median(times["floor"])
    build_ratio = statistics.median(b / f for b, f in zip(times["build"], times["floor"]))
    help_ratio = statistics.median(h / f for h, f in zip(times["help"], times["floor"]))
    print(f"median of {ROUNDS} rounds on this machine (floor, build, help in turn)")
    print(f"floor: python -c '{FLOOR_IMPORTS}': {floor * 1000:.0f} ms")
    print(f"dashgen build:  {statistics.median(times['build']) * 1000:.0f} ms, "
          f"{build_ratio:.2f}x the floor (goal: at most {BUILD_GOAL}x)")
    print(f"dashgen --help: {statistics.median(times['help']) * 1000:.0f} ms, "
          f"{help_ratio:.2f}x the floor (goal: under {HELP_GOAL}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
