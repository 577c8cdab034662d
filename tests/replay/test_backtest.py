"""`dashgen backtest`: recorded runs replayed through a real Prometheus, alerts judged like Prometheus does."""

import json
import os
import tempfile
from pathlib import Path

import pytest
from dashgen.evaluation.synthetic_runs import write_run

from conftest import REPO, run
from dashgen.config import duration_seconds
from dashgen.promtool import find_binary
from dashgen.replay.backtest import engine as backtest_engine
from dashgen.replay.backtest import evaluation as backtest_evaluation
from dashgen.replay.backtest import firing_intervals, query_spans
from dashgen_alerts.rewards import RewardsConfig
from dashgen_alerts.rollout import RolloutConfig

pytestmark = pytest.mark.live

DIVERGES_AT = 100  # after the 1h baseline of VerlTrainingDivergence is complete (steps are about 60 s)
STEPS = 150


def _backtest_json(*args: str) -> dict:
    result = run("backtest", "--root", str(REPO), "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _firing(report: dict, alertname: str, experiment: str) -> list[dict]:
    return [firing for alert in report["alerts"] if alert["alertname"] == alertname
            and alert["labels"]["experiment"] == experiment for firing in alert["firing"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("runs") / "synthetic"
    return {"healthy": write_run(folder / "healthy.jsonl", "healthy", STEPS),
            "diverging": write_run(folder / "diverging.jsonl", "diverging", STEPS, event_at=DIVERGES_AT),
            "stalled": write_run(folder / "stalled.jsonl", "stalled", STEPS, event_at=80),
            "reward_cliff": write_run(folder / "reward_cliff.jsonl", "reward_cliff", STEPS, event_at=DIVERGES_AT),
            "truncation": write_run(folder / "truncation.jsonl", "truncation", STEPS, event_at=DIVERGES_AT)}


@pytest.fixture(scope="module")
def healthy_and_diverging(runs) -> dict:
    return _backtest_json(str(runs["healthy"]), str(runs["diverging"]))


def test_divergence_is_reported_within_a_few_steps_of_where_it_began(healthy_and_diverging):
    firing = _firing(healthy_and_diverging, "VerlTrainingDivergence", "diverging")
    assert firing, healthy_and_diverging
    # `for: 2m` at a 1m evaluation interval with ~60 s steps: two to four steps after the event.
    assert DIVERGES_AT <= firing[0]["start_step"] <= DIVERGES_AT + 5
    assert firing[0]["start"].endswith("Z")
    alert = next(a for a in healthy_and_diverging["alerts"] if a["alertname"] == "VerlTrainingDivergence"
                 and a["labels"]["experiment"] == "diverging")
    assert alert["severity"] == "critical"
    assert alert["labels"]["project"] == "synthetic"


def test_no_critical_alert_fires_on_the_healthy_run(healthy_and_diverging):
    healthy = [a for a in healthy_and_diverging["alerts"] if a["labels"].get("experiment") == "healthy"]
    assert {a["alertname"] for a in healthy} >= {"VerlTrainingDivergence", "VerlTrainingStalled", "VerlNaNMetrics"}
    assert [a for a in healthy if a["severity"] == "critical" and a["firing"]] == []


def test_alerts_that_need_gpu_metrics_say_they_cannot_fire(healthy_and_diverging):
    straggler = [a for a in healthy_and_diverging["alerts"] if a["alertname"] == "VerlGPUStraggler"]
    assert straggler and all("cannot fire in a backtest" in a["note"] and not a["firing"] for a in straggler)


def test_the_table_names_the_divergence_and_its_start_step(runs):
    result = run("backtest", "--root", str(REPO), str(runs["diverging"]))
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if "VerlTrainingDivergence" in line)
    cells = line.split()
    assert cells[:2] == ["VerlTrainingDivergence", "critical"]
    assert int(cells[2]) >= 1 and DIVERGES_AT <= int(cells[3]) <= DIVERGES_AT + 5
    assert "run synthetic/diverging" in result.stdout


def test_a_stalled_run_fires_only_while_the_exporter_outlives_it(runs):
    without_hold = _backtest_json(str(runs["stalled"]))
    assert _firing(without_hold, "VerlTrainingStalled", "stalled") == []
    held = _backtest_json(str(runs["stalled"]), "--hold", "30m")
    firing = _firing(held, "VerlTrainingStalled", "stalled")
    assert len(firing) == 1
    # Silent for more than 15m, then `for: 1m`; still firing when the held exporter ends.
    assert firing[0]["start_step"] == 80 and firing[0]["end_step"] is None and firing[0]["end"] is None


def test_a_log_that_ends_is_a_finished_run_and_pages_nobody(runs):
    # The log stops at step 80; by default the trainer exited 0 and its exporter went away.
    report = _backtest_json(str(runs["stalled"]))
    critical = [a for a in report["alerts"] if a["severity"] == "critical" and a["firing"]]
    assert critical == []
    assert {a["alertname"] for a in report["alerts"]} >= {"VerlMetricsAbsent", "VerlRunCrashed"}


def test_a_crashed_run_pages_at_its_last_step_until_the_backtest_ends(runs):
    report = _backtest_json(str(runs["stalled"]), "--end", "crashed")
    firing = _firing(report, "VerlRunCrashed", "stalled")
    assert len(firing) == 1 and firing[0]["start_step"] == 80 and firing[0]["end"] is None
    assert _firing(report, "VerlTrainingStalled", "stalled") == []
    assert _firing(report, "VerlMetricsAbsent", "stalled") == []


def test_unparseable_lines_are_skipped_and_counted(tmp_path: Path):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", 5)
    with open(log, "a") as handle:
        handle.write("{truncated\n\n42\n")
    result = run("backtest", "--root", str(REPO), "--format", "json", str(log))
    assert result.exit_code == 0, result.output
    assert "skipped 2 unparseable line(s)" in result.stderr
    assert json.loads(result.stdout)["runs"][0]["unparseable_lines"] == 2


@pytest.mark.parametrize("content", ["", "not json\n{\"data\": {}}\n"])
def test_a_file_without_steps_is_refused(tmp_path: Path, content: str):
    log = tmp_path / "p" / "e.jsonl"
    log.parent.mkdir()
    log.write_text(content)
    result = run("backtest", "--root", str(REPO), str(log))
    assert result.exit_code == 1
    assert f"{log}: no step records" in result.output


def test_times_past_now_are_clamped_with_a_note(tmp_path: Path):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", 5)
    result = run("backtest", "--root", str(REPO), "--format", "json", "--start", "2999-01-01T00:00:00Z", str(log))
    assert result.exit_code == 0, result.output
    assert "moved the run back to end now" in result.stderr


@pytest.mark.parametrize("missing", ["prometheus", "promtool"])
def test_a_missing_binary_names_the_install_command(tmp_path: Path, monkeypatch, missing: str):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", 5)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in {"prometheus", "promtool"} - {missing}:
        (bin_dir / name).symlink_to(find_binary(name))
    monkeypatch.delenv("PROMTOOL", raising=False)
    monkeypatch.delenv("PROMETHEUS", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    result = run("backtest", "--root", str(REPO), str(log))
    assert result.exit_code == 1
    assert f"{missing} not found on PATH" in result.output
    assert "apt-get install -y --no-install-recommends prometheus" in result.output


def test_server_and_temporary_tsdb_are_gone_after_ctrl_c(tmp_path: Path, monkeypatch):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", 5)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen = {}

    def interrupted(server, alert, recorded_run):
        seen["process"], seen["workdir"] = server.process, server.storage_dir.parent
        assert seen["workdir"].is_dir()
        raise KeyboardInterrupt

    monkeypatch.setattr(backtest_engine, "evaluate_alert", interrupted)
    result = run("backtest", "--root", str(REPO), str(log))
    assert result.exit_code == 1  # click's "Aborted!"
    assert seen["process"].poll() is not None
    assert not seen["workdir"].exists() and list(scratch.iterdir()) == []


def test_plot_draws_a_png(runs, tmp_path: Path):
    out = tmp_path / "backtest.png"
    result = run("backtest", "--root", str(REPO), "--plot", str(out), str(runs["diverging"]))
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and os.path.getsize(out) > 10_000


def test_for_is_applied_like_prometheus():
    times = [0, 60, 120, 180, 240, 300, 360]
    # Pending at 60, firing once it has held for 120 (at 180), resolved at the first miss (300).
    assert firing_intervals(times, {60, 120, 180, 240}, 120) == [(180, 300)]
    assert firing_intervals(times, {60, 120}, 120) == []  # resolved while pending
    assert firing_intervals(times, {0, 300, 360}, 0) == [(0, 60), (300, None)]  # still firing at the end


def test_queries_are_split_at_gaps_and_at_the_point_limit(monkeypatch):
    monkeypatch.setattr(backtest_evaluation, "MAX_POINTS_PER_QUERY", 3)
    assert query_spans([0, 10, 20, 30, 40, 70, 80], 10) == [(0, 20), (30, 40), (70, 80)]


@pytest.mark.parametrize("kind, alertname, for_steps", [
    # One step a minute: `for` in steps is the area's `for` in minutes; the cliff's reward is also a
    # median of its last 10 steps (the exporter's, exact), which moves once half of them have fallen.
    ("reward_cliff", "VerlRewardCliff",
     duration_seconds(RewardsConfig().reward_cliff_for) / 60 + RewardsConfig().reward_cliff_smoothing_steps / 2),
    ("truncation", "VerlResponseTruncation", duration_seconds(RolloutConfig().truncation_for) / 60),
])
def test_a_reward_cliff_and_truncation_fire_after_their_for_and_nothing_critical_else(runs, kind, alertname,
                                                                                     for_steps):
    report = _backtest_json(str(runs[kind]))
    firing = _firing(report, alertname, kind)
    assert firing, report
    # The simulated reward still rises before its cliff (about 0.25 to 0.32 over the baseline's 100
    # steps): a fall of 0.25 clears the baseline's 0.2 floor, and the noise margin of a 10-step median
    # (2.1 step-to-step spreads), up to a dozen steps after the median has fallen.
    late = 12 if kind == "reward_cliff" else 3
    assert DIVERGES_AT + for_steps - 1 <= firing[0]["start_step"] <= DIVERGES_AT + for_steps + late
    critical = {a["alertname"] for a in report["alerts"] if a["severity"] == "critical" and a["firing"]}
    # A cliff to far below the reward's best is a collapse too (VerlRewardCollapse, issue 52).
    assert critical <= {alertname} | ({"VerlRewardCollapse"} if kind == "reward_cliff" else set())
