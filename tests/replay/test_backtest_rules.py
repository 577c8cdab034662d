"""`dashgen backtest --rules FILE`: any Prometheus rule files, on the shipped sample run."""

import json
from pathlib import Path

import pytest

from conftest import REPO, run

pytestmark = pytest.mark.live

SAMPLE = REPO / "examples" / "runs" / "gsm8k" / "ppo-qwen-7b.jsonl"
TEAM_RULES = """groups:
  - name: team
    interval: 1m
    rules:
      - record: team:kl:max5m
        expr: max_over_time(verl_actor_ppo_kl[5m])
      - alert: TeamKLHigh
        expr: team:kl:max5m > 0.1
        for: 2m
        labels: {severity: warning}
"""


def test_a_teams_rule_file_is_backtested_on_the_sample_run(tmp_path: Path):
    rules = tmp_path / "team.rules.yml"
    rules.write_text(TEAM_RULES)
    result = run("backtest", str(SAMPLE), "--rules", str(rules), "--format", "json", "--root", str(tmp_path))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [a["alertname"] for a in report["alerts"]] == ["TeamKLHigh"]
    firing = report["alerts"][0]["firing"]
    # The sample's KL breaks away at step 75; the 2m `for` holds it a few steps.
    assert len(firing) == 1 and 75 <= firing[0]["start_step"] <= 80


def test_a_broken_rule_file_is_refused_by_promtool(tmp_path: Path):
    rules = tmp_path / "broken.yml"
    rules.write_text("groups:\n  - name: x\n    rules:\n      - alert: Bad\n        expr: rate(\n")
    result = run("backtest", str(SAMPLE), "--rules", str(rules), "--root", str(tmp_path))
    assert result.exit_code == 1
    assert "--rules: promtool check rules refused them" in result.output and "Traceback" not in result.output


def test_the_sample_run_makes_the_default_alerts_fire():
    result = run("backtest", str(SAMPLE), "--format", "json", "--root", str(REPO))
    assert result.exit_code == 0, result.output
    fired = {a["alertname"] for a in json.loads(result.stdout)["alerts"] if a["firing"]}
    assert "VerlTrainingDivergence" in fired
