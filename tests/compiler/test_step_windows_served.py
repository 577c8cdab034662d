"""VerlStepWindowsNotServed: a run whose exporter computes other step windows than the rules read
(another build's, or none) warns; one that serves these rules' digest does not. In promtool, with
the digest of this repository's build."""

import pytest
import yaml

from conftest import REPO
from dashgen.promtool import run_promtool
from dashgen.sources.statistics_file import load_statistics
from dashgen.sources.step_statistics import ServedStatistics

pytestmark = pytest.mark.heavy


def _run(experiment: str, digest: str | None) -> list[dict]:
    labels = f'job="verl",instance="t:9464",project="gsm8k",experiment="{experiment}"'
    series = [{"series": f"verl_exporter_last_step_timestamp_seconds{{{labels}}}", "values": "0+60x40"}]
    if digest is not None:
        series.append({"series": f'verl_exporter_step_windows_info{{{labels},digest="{digest}"}}', "values": "1x40"})
    return series


def test_an_exporter_of_other_step_windows_warns_and_one_of_these_does_not(tmp_path):
    built = load_statistics(REPO / "rendered" / "exporter" / "step-statistics.yaml")
    assert built.statistics, "the shipped rules read step windows"
    other = ServedStatistics(built.statistics[1:], built.floor_seconds).digest
    firing = 'count by (experiment) (ALERTS{alertname="VerlStepWindowsNotServed", alertstate="firing"})'
    fixture = {
        "rule_files": [str(REPO / "rendered" / "rules" / "progress.yaml")],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [*_run("served", built.digest), *_run("other-build", other), *_run("no-list", "none"),
                             *_run("old-exporter", None)],
            "promql_expr_test": [
                {"expr": firing, "eval_time": "14m", "exp_samples": []},  # for: 15m
                {"expr": firing, "eval_time": "20m", "exp_samples": [
                    {"labels": f'{{experiment="{name}"}}', "value": 1}
                    for name in ("other-build", "no-list", "old-exporter")]},
            ],
        }],
    }
    path = tmp_path / "served-test.yaml"
    path.write_text(yaml.safe_dump(fixture, sort_keys=False))
    result = run_promtool(["test", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
