"""VerlRewardNeverPays on step logs of one prompt a step logged every 5th step, backtested through
a real Prometheus with the project's rules: a run whose groups nearly all fail alike warns although
a step pays in every 10 logged (so "never paid" never holds), and a healthy run with as many
all-equal steps as healthy small-batch runs have (60%), some of them paying, does not."""

import json
import random
from pathlib import Path

import pytest

from conftest import REPO, run
from dashgen.evaluation.synthetic_runs import step_data

pytestmark = pytest.mark.live

LOGGED_EVERY = 5
LOGGED_STEPS = 120
WINDOW = 10  # VerlRewardNeverPays' window, in logged values
FLOOR, PAID, SPREAD = -7.5, 13.0, 10.25  # the corpus' FP8 run's floor, best reward and a paying group's spread


def _nearly_never(index: int) -> tuple[float, float]:
    """(reward, score std) of the index-th logged step: every group at the floor alike, but one step
    in 10 pays (all its completions alike, or with a spread)."""
    if index % WINDOW == 3:
        return PAID, 0.0
    if index % WINDOW == 8 and index % (2 * WINDOW) == 8:
        return 2.75, SPREAD
    return FLOOR, 0.0


def _healthy(rng: random.Random) -> tuple[float, float]:
    """A healthy one-prompt step: all completions alike on 60% of steps (half of them right), else a spread."""
    if rng.random() < 0.6:
        return (1.0 if rng.random() < 0.5 else 0.0), 0.0
    return rng.choice((0.25, 0.5, 0.75)), 0.45


def _write(path: Path, rewards: list[tuple[float, float]]) -> Path:
    with open(path, "w") as handle:
        for index, (reward, std) in enumerate(rewards):
            step = LOGGED_EVERY * (index + 1)
            data = step_data(step, seed=35)
            data.update({"critic/score/mean": reward, "critic/score/std": std})
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    return path


def _windows(rewards: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    return [rewards[end - WINDOW:end] for end in range(WINDOW, len(rewards) + 1)]


@pytest.fixture(scope="module")
def first_warning(tmp_path_factory) -> dict[str, int | None]:
    rng = random.Random(35)
    runs = {"nearly-never": [_nearly_never(index) for index in range(LOGGED_STEPS)],
            "healthy-small-batch": [_healthy(rng) for _ in range(LOGGED_STEPS)]}
    # What makes each a test: "never paid" holds on no window of the failing run, and the healthy run
    # has windows of 9 all-equal steps in 10 (the share alone would warn): its paying steps spare it.
    assert all(any(reward > 0 for reward, _ in window) for window in _windows(runs["nearly-never"]))
    assert any(sum(std == 0 for _, std in window) >= 9 for window in _windows(runs["healthy-small-batch"]))
    folder = tmp_path_factory.mktemp("runs") / "never-pays"
    folder.mkdir()
    paths = [_write(folder / f"{name}.jsonl", rewards) for name, rewards in runs.items()]
    result = run("backtest", "--root", str(REPO), "--format", "json", *map(str, paths))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return {name: min((firing["start_step"] for alert in report["alerts"]
                       if alert["alertname"] == "VerlRewardNeverPays" and alert["labels"]["experiment"] == name
                       for firing in alert["firing"]), default=None) for name in runs}


def test_groups_that_nearly_all_fail_alike_warn_within_10_logged_steps(first_warning):
    assert first_warning["nearly-never"] is not None
    assert first_warning["nearly-never"] <= WINDOW * LOGGED_EVERY, first_warning


def test_a_healthy_small_batch_run_whose_all_equal_steps_pay_half_the_time_stays_quiet(first_warning):
    assert first_warning["healthy-small-batch"] is None, first_warning
