"""A recorded run is replayed as dashgen's exporter serves it, whatever source the project reads live:
with `source: rl_insight`, backtest still judges the sample run by the exporter-named rules."""

import pytest

from conftest import REPO, run

SAMPLE_RUN = REPO / "examples" / "runs" / "gsm8k" / "ppo-qwen-7b.jsonl"


@pytest.mark.live  # a backtest: promtool and a Prometheus
def test_backtest_of_an_rl_insight_project_replays_the_run_as_the_exporter_serves_it(project):
    (project / "dashgen.yaml").write_text("source: rl_insight\n")
    result = run("backtest", str(SAMPLE_RUN), "--root", str(project))
    assert result.exit_code == 0, result.output
    assert "the run is replayed as dashgen's exporter serves it" in result.output
    divergence = next(line for line in result.output.splitlines() if line.strip().startswith("VerlTrainingDivergence"))
    assert divergence.split()[:3] == ["VerlTrainingDivergence", "critical", "1"]
