"""Step windows of slow runs read near-band copies (dashgen/compiler/rules/step_windows.py): a run whose
rhythm moves to the next band keeps its window's history, in the real promtool."""

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dashgen.compiler.rule_tests.promtool_files import rules_read_by
from dashgen.compiler.rules.rule_files import compile_rules
from dashgen.compiler.output.targets.prometheus import rule_file_texts
from dashgen.compiler.rules.step_windows import band_of
from dashgen.config import Config
from dashgen.project_metrics import project_catalog
from dashgen.promtool import run_promtool

pytestmark = pytest.mark.heavy

SAMPLE = 300  # seconds between input samples
RHYTHM_WINDOW = 6 * 3600
RUN = 'job="verl",instance="t:9464",project="gsm8k",experiment="slow"'


def slow_run(slow_from: int, entropy_falls_at: int, hours: int) -> tuple[list[float], list[float], list[float]]:
    """Step timestamps, steps and entropy sampled every SAMPLE s: a step every 300 s, then every
    900 s from `slow_from`; entropy 1 until `entropy_falls_at`, then 0.5."""
    timestamps, steps, entropy = [], [], []
    step, last = 0, 0.0
    for t in range(0, hours * 3600 + 1, SAMPLE):
        if t < slow_from or (t - slow_from) % 900 == 0:
            step, last = step + 1, float(t)
        timestamps.append(last)
        steps.append(float(step))
        entropy.append(1.0 if t < entropy_falls_at else 0.5)
    return timestamps, steps, entropy


def band_at(index: int, timestamps: list[float], steps: list[float]) -> int | None:
    """verl:run:step_band at sample `index`, as the recording computes it over RHYTHM_WINDOW
    (Prometheus 2's ranges hold both ends)."""
    first = max(0, index - RHYTHM_WINDOW // SAMPLE)
    window_t, window_s = timestamps[first:index + 1], steps[first:index + 1]
    if max(window_s) == min(window_s):
        return None
    return band_of((max(window_t) - min(window_t)) / (max(window_s) - min(window_s)))


def promql_step_window_rules(folder, reads: str) -> list[str]:
    """The project's rules that `reads` (a recording) reads, with its step windows compiled to PromQL
    (exporter_step_windows off), cut from their files as `dashgen test` cuts them."""
    config = Config(exporter_step_windows=False)
    files = {Path(rule_file.path).name: rule_file
             for rule_file in compile_rules(REPO, config, project_catalog(REPO)).files}
    paths = []
    for name, text in rule_file_texts(list(rules_read_by(reads, files).values()), config).items():
        (folder / Path(name).name).write_text(text)
        paths.append(str(folder / Path(name).name))
    return paths


def test_a_slow_run_moving_to_the_next_band_keeps_its_step_windows_history(tmp_path):
    slow_from = 12 * 3600
    timestamps, steps, _ = slow_run(slow_from, slow_from, 20)
    change = next(i for i in range(len(steps)) if band_at(i, timestamps, steps) == 9)
    assert band_at(change - 1, timestamps, steps) == 8
    # Entropy halves half an hour before the band changes: just after the change, most of the last 10
    # steps (about 2 h at band 9) were still 1, so their median is 1. A copy that began with the
    # new band would hold only the halves.
    falls_at = change * SAMPLE - 1800
    timestamps, steps, entropy = slow_run(slow_from, falls_at, 20)
    after = f"{(change + 1) * SAMPLE // 60}m"

    def values(series: list[float]) -> str:
        return " ".join(f"{v:g}" for v in series)

    fixture = {
        "rule_files": promql_step_window_rules(tmp_path, "verl:actor_entropy:median_10steps"),
        "evaluation_interval": "5m",
        "tests": [{
            "interval": "5m",
            "input_series": [
                {"series": f"verl_exporter_last_step_timestamp_seconds{{{RUN}}}", "values": values(timestamps)},
                {"series": f"verl_training_global_step{{{RUN}}}", "values": values(steps)},
                {"series": f"verl_actor_entropy{{{RUN}}}", "values": values(entropy)},
            ],
            "promql_expr_test": [
                {"expr": "verl:run:step_band", "eval_time": f"{(change - 1) * SAMPLE // 60}m",
                 "exp_samples": [{"labels": f"verl:run:step_band{{{RUN}}}", "value": 8}]},
                {"expr": "verl:run:step_band", "eval_time": after,
                 "exp_samples": [{"labels": f"verl:run:step_band{{{RUN}}}", "value": 9}]},
                # Its own band and the two beside it.
                {"expr": "count(verl:actor_entropy:by_band)", "eval_time": after,
                 "exp_samples": [{"labels": "{}", "value": 3}]},
                {"expr": "verl:actor_entropy:median_10steps", "eval_time": after,
                 "exp_samples": [{"labels": f"verl:actor_entropy:median_10steps{{{RUN}}}", "value": 1}]},
            ],
        }],
    }
    path = tmp_path / "bands-test.yaml"
    path.write_text(yaml.safe_dump(fixture, sort_keys=False))
    result = run_promtool(["test", "rules", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
