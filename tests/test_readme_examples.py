"""The README's backtest and backfill examples run as written, on the shipped sample run."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

COMMAND = re.compile(r"^(dashgen (?:backtest|backfill) examples/\S+.*?)(?:\s+#.*)?$", re.MULTILINE)
EXAMPLES = COMMAND.findall((REPO / "README.md").read_text())


def test_the_readme_shows_examples_on_the_sample_run():
    assert len(EXAMPLES) >= 5 and all("examples/runs/gsm8k/ppo-qwen-7b.jsonl" in e for e in EXAMPLES)


@pytest.mark.parametrize("command", EXAMPLES)
def test_readme_example_runs(project: Path, command: str):
    shutil.copytree(REPO / "examples", project / "examples")
    argv = shlex.split(command)
    if "--tsdb" in argv:  # the README's folder, moved into the test's own temporary one
        argv[argv.index("--tsdb") + 1] = str(project / "tsdb")
    dashgen = str(Path(sys.executable).with_name("dashgen"))
    result = subprocess.run([dashgen, *argv[1:]], cwd=project, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "MPLBACKEND": "Agg"})
    assert result.returncode == 0, result.stdout + result.stderr
    if "--tsdb" in argv:
        assert any((project / "tsdb").iterdir())
    if "--plot" in argv:
        assert (project / argv[argv.index("--plot") + 1]).stat().st_size > 0
    if argv[1] == "backtest" and "--format" not in argv and "--rules" not in argv:
        assert re.search(r"VerlTrainingDivergence\s+critical\s+1\s", result.stdout), result.stdout
