"""The docs' examples run as written: backtest and backfill on the shipped sample run, and the team's alert
and panel of docs/add-an-alert.md and docs/add-a-panel.md."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.live, pytest.mark.heavy]

COMMAND = re.compile(r"^(dashgen (?:backtest|backfill) examples/\S+.*?)(?:\s+#.*)?$", re.MULTILINE)
EXAMPLES = COMMAND.findall((REPO / "docs" / "backtest-and-preview.md").read_text())


def test_the_docs_show_examples_on_the_sample_run():
    assert len(EXAMPLES) >= 5 and all("examples/runs/gsm8k/ppo-qwen-7b.jsonl" in e for e in EXAMPLES)


@pytest.mark.parametrize("command", EXAMPLES)
def test_docs_example_runs(project: Path, command: str):
    shutil.copytree(REPO / "examples", project / "examples")
    argv = shlex.split(command)
    if "--tsdb" in argv:  # the docs' folder, moved into the test's own temporary one
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


def _code_block(page: str, first_line: str) -> str:
    """The code block of docs/`page` whose first line is `first_line`."""
    blocks = re.findall(r"```(?:python|yaml)\n(.*?)```", (REPO / "docs" / page).read_text(), re.DOTALL)
    return next(block for block in blocks if block.startswith(first_line))


def test_the_docs_team_alert_and_panel_build_and_their_generated_tests_pass(tmp_path):
    """'Add an alert' and 'Add a panel' as written, in a project made by `dashgen init`."""
    dashgen = str(Path(sys.executable).with_name("dashgen"))
    project = tmp_path / "team"
    subprocess.run([dashgen, "init", str(project)], check=True, capture_output=True)
    (project / "alerts" / "team.py").write_text(_code_block("add-an-alert.md", "# alerts/team.py"))
    panels = project / "panels" / "verl_training.py"
    text = panels.read_text()
    start, end = text.index("TEAM_ROWS: tuple[Row, ...] = ("), text.index("\n)\n", text.index("TEAM_ROWS")) + 3
    panels.write_text(text[:start] + _code_block("add-a-panel.md", "# panels/verl_training.py") + text[end:])
    with open(project / "dashgen.yaml", "a") as config:
        config.write(_code_block("add-an-alert.md", "team:"))

    def dashgen_run(*args):
        return subprocess.run([dashgen, *args, "--root", str(project)], capture_output=True, text=True, timeout=300)

    built = dashgen_run("build")
    assert built.returncode == 0, built.stdout + built.stderr
    rules = (project / "rendered" / "rules" / "team.yaml").read_text()
    assert "< 0.4 * verl:critic_score_mean:baseline_median" in rules  # the dashgen.yaml override
    model = json.loads((project / "rendered" / "dashboards" / "verl-training.json").read_text())
    panel = next(p for p in model["panels"] if p.get("title") == "Truncated responses")
    assert panel["links"][0]["url"].endswith("#verlresponsetruncationhigh")
    assert panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 0.1  # the alert's threshold
    tested = dashgen_run("test", "team")  # the team's tests; the shipped ones run in tests/compiler/test_rules.py
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "team-TeamRewardDrop-generated-test.yaml\n  SUCCESS" in tested.stdout
    described = dashgen_run("config", "--describe")
    assert "reward_drop_factor: a number (>= 0 and <= 1), default 0.5\n      TeamRewardDrop fires" in described.stdout
