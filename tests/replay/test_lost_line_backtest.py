"""VerlTrainingStalled on a step log written every 10th step with no step timing (a line every 10
one-minute steps), backtested through a real Prometheus with the project's rules: one line lost from
the log (a 20-minute silence: past the 15-minute floor and 1.5x the longest gap seen) does not page,
and the same log whose trainer then hangs does."""

import json
from pathlib import Path

import pytest

from conftest import REPO, run

pytestmark = pytest.mark.live

LOGGED_EVERY = 10
LAST_STEP = 400
LOST_STEP = 270  # the line never written


def _write(path: Path) -> Path:
    with open(path, "w") as handle:
        for step in range(LOGGED_EVERY, LAST_STEP + 1, LOGGED_EVERY):
            if step != LOST_STEP:
                data = {"critic/score/mean": 0.5 + step / 1000, "actor/pg_loss": 0.01}
                handle.write(json.dumps({"step": step, "data": data}) + "\n")
    return path


def _stalled_from(log: Path, *how_it_ends: str) -> list[int]:
    result = run("backtest", "--root", str(REPO), "--format", "json", *how_it_ends, str(log))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return [firing["start_step"] for alert in report["alerts"] if alert["alertname"] == "VerlTrainingStalled"
            for firing in alert["firing"]]


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("runs") / "every-ten-lost-line.jsonl")


def test_one_line_lost_from_a_log_written_every_10_steps_does_not_page(log):
    assert _stalled_from(log, "--end", "finished") == []


def test_the_same_log_pages_once_its_trainer_hangs(log):
    assert _stalled_from(log, "--end", "hung", "--hold", "1h") == [LAST_STEP]
