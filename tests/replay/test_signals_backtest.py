"""Issue 39's "Done when", end to end: verl step logs backtested through a real Prometheus with the
project's rules (a train/rollout gap that grows, actor/entropy that stops arriving or never arrives)."""

import json
import random
from pathlib import Path

import pytest

from conftest import REPO, run
from dashgen.evaluation.synthetic_runs import step_data

pytestmark = pytest.mark.live

STEPS = 260
GAP_RISES_AT, HEALTHY_GAP, BROKEN_GAP = 150, 0.002, 0.05
ENTROPY_STOPS_AT = 200
WITHIN_STEPS = 10
MISMATCH_ALERTS = ("VerlTrainRolloutMismatch", "VerlTrainRolloutGapBeyondGate")
ENTROPY_ALERTS = ("VerlEntropyCollapse", "VerlEntropyExplosion")


def _write(path: Path, gap_rises_at: int | None = None, entropy_from: int = 1,
           entropy_until: int | None = None) -> Path:
    """A healthy verl run whose mean train/rollout gap is HEALTHY_GAP (15% noise), BROKEN_GAP from
    `gap_rises_at`; actor/entropy is logged on steps [entropy_from, entropy_until) only."""
    rng = random.Random(39)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for step in range(1, STEPS + 1):
            data = step_data(step, seed=39)
            level = BROKEN_GAP if gap_rises_at is not None and step >= gap_rises_at else HEALTHY_GAP
            data["training/rollout_probs_diff_mean"] = level * (1 + 0.15 * rng.uniform(-1, 1))
            if not entropy_from <= step < (entropy_until or STEPS + 1):
                del data["actor/entropy"]
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("runs") / "issue-39"
    paths = [_write(folder / "healthy.jsonl"),
             _write(folder / "mismatch.jsonl", gap_rises_at=GAP_RISES_AT),
             _write(folder / "entropy-stops.jsonl", entropy_until=ENTROPY_STOPS_AT),
             _write(folder / "no-entropy.jsonl", entropy_from=STEPS + 1)]
    result = run("backtest", "--root", str(REPO), "--format", "json", *map(str, paths))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _alerts(report: dict, experiment: str, alertname: str) -> list[dict]:
    return [alert for alert in report["alerts"]
            if alert["alertname"] == alertname and alert["labels"]["experiment"] == experiment]


def _first_firing_step(report: dict, experiment: str, alertname: str) -> int | None:
    starts = [firing["start_step"] for alert in _alerts(report, experiment, alertname) for firing in alert["firing"]]
    return min(starts, default=None)


def test_a_gap_rising_from_0_002_to_0_05_warns_within_10_logged_steps(report):
    for alertname in MISMATCH_ALERTS:
        first = _first_firing_step(report, "mismatch", alertname)
        assert first is not None and GAP_RISES_AT <= first <= GAP_RISES_AT + WITHIN_STEPS, (alertname, first)
        assert _alerts(report, "mismatch", alertname)[0]["severity"] == "warning"


def test_a_healthy_gap_and_keys_that_keep_arriving_stay_quiet(report):
    for alertname in (*MISMATCH_ALERTS, "VerlSignalStopped", "VerlSignalNeverLogged"):
        assert _first_firing_step(report, "healthy", alertname) is None, alertname
    # Before the rise the broken run is the healthy one: nothing fired early.
    assert all(_first_firing_step(report, "mismatch", name) >= GAP_RISES_AT for name in MISMATCH_ALERTS)


def test_entropy_stopping_at_step_200_warns_naming_the_key_within_10_logged_steps(report):
    stopped = [alert for alert in _alerts(report, "entropy-stops", "VerlSignalStopped") if alert["firing"]]
    assert [alert["labels"]["key"] for alert in stopped] == ["actor/entropy"]
    assert stopped[0]["severity"] == "warning"
    assert ENTROPY_STOPS_AT < stopped[0]["firing"][0]["start_step"] <= ENTROPY_STOPS_AT + WITHIN_STEPS
    assert set(ENTROPY_ALERTS) <= set(stopped[0]["labels"]["alerts"].split(", "))


def test_the_backtest_of_a_run_that_never_logged_entropy_lists_the_entropy_alerts_as_unable_to_judge_it(report):
    for alertname in ENTROPY_ALERTS:
        notes = {alert.get("note") for alert in _alerts(report, "no-entropy", alertname)}
        assert notes == {"could not judge this run: it never logged actor/entropy"}, alertname
        # The run that logged it was judged by them.
        assert all("note" not in alert for alert in _alerts(report, "healthy", alertname))
    never = [alert["labels"]["key"] for alert in _alerts(report, "no-entropy", "VerlSignalNeverLogged")
             if alert["firing"]]
    assert never == ["actor/entropy"]
