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


WINDOWS = {"of 5,000 digits": "9" * 5000, "beyond the steps a window may hold": "99999999", "of no step": "0"}


@pytest.mark.parametrize("steps", WINDOWS.values(), ids=WINDOWS.keys())
def test_a_step_window_out_of_range_is_refused_naming_the_file_and_rule(tmp_path: Path, steps):
    rules = tmp_path / "team.rules.yml"
    rules.write_text(TEAM_RULES + "      - alert: TeamEntropyLow\n        expr: verl_step_statistic{series="
                     f'"verl_actor_entropy", statistic="median_{steps}steps"}} < 0.1\n')
    result = run("backtest", str(SAMPLE), "--rules", str(rules), "--root", str(tmp_path))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: --rules {rules}: alert TeamEntropyLow: step statistic of "
                                    "verl_actor_entropy: steps must be from 1 to 10,000"), result.output
