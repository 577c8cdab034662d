"""A zero gradient counts only where the log prints a 0 for 0 (dashgen/formats/rounding.py)."""

import json
import math
from pathlib import Path

import pytest

from dashgen.evaluation.synthetic_runs import step_data
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower
from dashgen.formats.rounding import line_rounding, value_rounding

from conftest import REPO, run


@pytest.mark.parametrize("value, rounding", [(0.452, 0.0005), (0.45, 0.005), (12.5, 0.05), (1200.0, 50.0),
                                              (0.4523817539215088, 5e-17), (3e-05, 5e-06)])
def test_a_values_rounding_is_half_its_last_digit(value, rounding):
    assert value_rounding(value) == pytest.approx(rounding)


@pytest.mark.parametrize("value", [0.0, -0.0, math.nan, math.inf])
def test_zero_and_non_finite_values_show_no_digit(value):
    assert value_rounding(value) is None


def test_a_line_shows_its_finest_digit_and_whole_numbers_say_nothing():
    assert line_rounding({"a": 0.45, "b": 0.452, "c": 12.0, "d": 0.0}) == pytest.approx(0.0005)
    assert line_rounding({"step": 3, "flag": True, "tokens": 512, "zero": 0.0}) is None


def _dead_gradient_log(path: Path, decimals: int | None) -> Path:
    """60 steps; from step 31 the grad norm is 0 although the groups' rewards differ, and so is the policy
    loss (GRPO's loss is 0 where no advantage is left; VerlNoLearningSignal's 20-step branch asks both)."""
    lines = []
    for step in range(1, 61):
        data = {key: value for key, value in step_data(step).items() if not key.startswith("val-")}
        data["critic/score/std"] = 0.3 + 0.01 * math.sin(step)
        if step > 30:
            data["actor/grad_norm"] = data["actor/pg_loss"] = 0.0
        if decimals is not None:  # as verl's console prints it
            data = {key: round(value, decimals) if isinstance(value, float) else value for key, value in data.items()}
        lines.append(json.dumps({"step": step, "data": data}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_exporter_serves_the_logs_rounding(tmp_path: Path):
    served = {}
    for decimals in (3, None):
        state = RunState("p", "e")
        LogFollower(_dead_gradient_log(tmp_path / str(decimals) / "e.jsonl", decimals), state,
                    say=lambda _: None).poll()
        served[decimals] = [sample.value for family in state.collect() for sample in family.samples
                            if sample.name == "verl_log_rounding"]
    assert served[3] == [pytest.approx(0.0005)]
    (full,) = served[None]
    assert full < 1e-12


@pytest.mark.live
def test_a_zero_gradient_warns_in_a_log_of_full_floats_and_not_in_a_console_one(tmp_path: Path):
    fired = {}
    for decimals in (None, 3):
        log = _dead_gradient_log(tmp_path / f"decimals-{decimals}" / "run.jsonl", decimals)
        result = run("backtest", str(log), "--format", "json", "--root", str(REPO))
        assert result.exit_code == 0, result.output
        fired[decimals] = {alert["alertname"] for alert in json.loads(result.stdout)["alerts"] if alert["firing"]}
    assert "VerlNoLearningSignal" in fired[None]
    assert "VerlNoLearningSignal" not in fired[3]
