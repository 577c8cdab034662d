"""`dashgen backfill`: a recorded run becomes blocks that a real Prometheus serves like scrapes of the exporter."""

import json
import math
from pathlib import Path

import pytest
from dashgen.evaluation.synthetic_runs import step_data, write_run

from conftest import REPO, run
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.replay.backtest import serve_tsdb
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower
from dashgen.sources.statistics_file import rendered_statistics

START = 1_700_000_000  # a fixed, past anchor: results do not depend on the clock


def _values_at(server, when: float) -> dict[tuple[str, tuple], float]:
    result = server.api("query", query='{job="verl", __name__!="up"}', time=f"{when:.3f}")["result"]
    return {(s["metric"]["__name__"], tuple(sorted((k, v) for k, v in s["metric"].items() if k != "__name__"))):
            float(s["value"][1]) for s in result}


def test_backfilled_series_match_the_exporter(tmp_path: Path):
    log = write_run(tmp_path / "gsm8k" / "ppo-7b.jsonl", "healthy", steps=4)
    last = step_data(5)
    last["actor/ppo_kl"] = None  # verl's file logger writes NaN as null
    with open(log, "a") as handle:
        handle.write("not json\n")
        handle.write(json.dumps({"step": 5, "data": last}) + "\n")

    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", str(START))
    assert result.exit_code == 0, result.output
    assert "skipped 1 unparseable line(s)" in result.output

    # Both compute the statistics over steps the project's rules read, from its last build.
    state = RunState("gsm8k", "ppo-7b", step_statistics=rendered_statistics(REPO))
    LogFollower(log, state).poll()  # what `dashgen export` serves once it has read the whole log
    exporter = {}
    for family in state.collect():
        for sample in family.samples:
            exporter[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    last_time = START + sum(step_data(n)["timing_s/step"] for n in range(1, 5)) + last["timing_s/step"]
    with serve_tsdb(tmp_path) as server:
        step_times = [float(s["value"][1]) for s in server.api(
            "query", query="verl_exporter_last_step_timestamp_seconds", time=f"{last_time + 60:.3f}")["result"]]
        assert step_times == [pytest.approx(last_time, abs=1e-3)]
        backfilled = _values_at(server, last_time)
        up = server.api("query", query='up{job="verl"}', time=f"{last_time:.3f}")["result"]

    target = {("instance", "backfill/gsm8k/ppo-7b"), ("job", "verl")}
    assert all(target <= set(key[1]) for key in backfilled)
    labels = (("experiment", "ppo-7b"), ("instance", "backfill/gsm8k/ppo-7b"), ("job", "verl"), ("project", "gsm8k"))
    # The same series (name and labels, the scrape's job and instance aside) with the same values.
    by_series = {(name, tuple(sorted(set(key) - target))): value for (name, key), value in backfilled.items()}
    assert set(by_series) == set(exporter)
    assert ("verl_step_statistic", (("experiment", "ppo-7b"), ("project", "gsm8k"), ("series", "verl_actor_entropy"),
                                    ("statistic", "median_5steps"))) in exporter
    for (name, key), value in exporter.items():
        if name == "verl_exporter_last_step_timestamp_seconds":
            continue  # the exporter's wall clock; the backfill's reconstructed time is checked above
        got = by_series[(name, key)]
        assert (math.isnan(got) and math.isnan(value)) or got == value, (name, key)
    assert by_series[("verl_run_state", (("experiment", "ppo-7b"), ("project", "gsm8k"), ("state", "running")))] == 1
    assert math.isnan(backfilled[("verl_actor_ppo_kl", labels)])
    assert [s["value"][1] for s in up] == ["1"]
    assert {s["metric"]["instance"] for s in up} == {"backfill/gsm8k/ppo-7b"}


def test_values_repeat_at_the_scrape_interval_until_the_next_step(tmp_path: Path):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", steps=3)
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", str(START),
                 "--scrape-interval", "10s")
    assert result.exit_code == 0, result.output
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=START, scrape_interval=10))
    with serve_tsdb(tmp_path) as server:
        data = server.api("query", query="verl_actor_ppo_kl[1d]", time=str(recorded.end + 1))["result"]
    samples = data[0]["values"]
    times = [t for t, _ in samples]
    assert all(round(b - a, 3) == 10 for a, b in zip(times, times[1:]))
    assert times[-1] == pytest.approx(recorded.served_until, abs=1e-3)
    assert times[0] >= recorded.times[0] and times[0] - recorded.times[0] < 10
    for when, value in samples:
        shown = max(i for i, t in enumerate(recorded.times) if t <= when + 1e-3)
        assert float(value) == recorded.values[shown]["verl_actor_ppo_kl"]


def test_step_times_come_from_timing_and_a_default_spacing(tmp_path: Path):
    log = tmp_path / "p" / "e.jsonl"
    log.parent.mkdir()
    log.write_text("".join(json.dumps({"step": n, "data": data}) + "\n" for n, data in
                           ((1, {"timing_s/step": 30.0}), (2, {"actor/ppo_kl": 0.1}), (3, {"timing_s/step": 5.0}))))
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=1000.0, default_step_seconds=100.0), now=10_000)
    assert recorded.times == [1030.0, 1130.0, 1135.0]
    assert "1 step(s) without timing_s/step" in " ".join(recorded.notes)

    anchored_at_mtime = read_run(log, run_labels(log, "verl"), Timing(default_step_seconds=100.0))
    assert anchored_at_mtime.times[-1] == pytest.approx(log.stat().st_mtime)


def test_a_log_of_every_tenth_step_advances_ten_step_times_per_line(tmp_path: Path):
    # Logged every 10 steps, a restart back to step 10, then a jump no logging interval explains.
    # Step 30 validated (200 s): the 9 steps left out before it take the median step time.
    log = tmp_path / "p" / "e.jsonl"
    log.parent.mkdir()
    lines = ((10, 60.0), (20, 60.0), (30, 200.0), (10, 60.0), (20, 60.0), (5000, 60.0))
    log.write_text("".join(json.dumps({"step": n, "data": {"timing_s/step": seconds}}) + "\n"
                           for n, seconds in lines))
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=0.0), now=10**6)
    assert recorded.times == [60.0, 660.0, 1400.0, 1460.0, 2060.0, 2120.0]


def test_a_run_reaching_into_the_future_is_moved_back_to_now(tmp_path: Path):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", steps=3)
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=1_000_000.0, end="hung", hold_seconds=60),
                        now=1_000_100.0)
    assert recorded.end == pytest.approx(1_000_100.0)
    assert recorded.times[-1] == pytest.approx(1_000_040.0)
    assert any("past now" in note for note in recorded.notes)

    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", "2999-01-01T00:00:00Z")
    assert result.exit_code == 0, result.output
    assert "moved the run back to end now" in result.output


@pytest.mark.parametrize("end, final_state, exit_code", [("finished", "finished", "0"), ("crashed", "crashed", "1")])
def test_the_end_of_a_run_is_backfilled_as_the_exporter_publishes_it(tmp_path: Path, end: str, final_state: str,
                                                                       exit_code: str):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", steps=3)
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", str(START), "--end", end)
    assert result.exit_code == 0, result.output
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=START, end=end))
    last_step = recorded.times[-1]
    assert recorded.served_until == pytest.approx(last_step + 300)  # the default 5m grace
    with serve_tsdb(tmp_path) as server:
        def states(when: float) -> dict[str, str]:
            result = server.api("query", query="verl_run_state == 1", time=f"{when:.3f}")["result"]
            return {s["metric"]["state"]: s["value"][1] for s in result}

        assert states(last_step - 1) == {"running": "1"}
        assert states(last_step + 120) == {final_state: "1"}
        code = server.api("query", query="verl_run_exit_code", time=f"{last_step + 120:.3f}")["result"]
        assert [s["value"][1] for s in code] == [exit_code]
        # After the grace period the exporter is gone: its scrapes fail, nothing else is served.
        assert states(recorded.served_until + 600) == {}
        up = server.api("query", query="up", time=f"{recorded.served_until + 600:.3f}")["result"]
        assert [s["value"][1] for s in up] == ["0"]


def test_a_hung_run_keeps_serving_its_last_step_as_running(tmp_path: Path):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", steps=3)
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", str(START), "--hold", "30m")
    assert result.exit_code == 0, result.output
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=START, end="hung", hold_seconds=1800))
    with serve_tsdb(tmp_path) as server:
        running = server.api("query", query='verl_run_state{state="running"}',
                             time=f"{recorded.times[-1] + 1700:.3f}")["result"]
        up = server.api("query", query="up", time=f"{recorded.times[-1] + 1700:.3f}")["result"]
    assert [s["value"][1] for s in running] == ["1"]
    assert [s["value"][1] for s in up] == ["1"]


@pytest.mark.parametrize("content, expected", [
    ("", "no step records in 0 non-empty line(s)"),
    ('garbage\n{"step": 1}\n[1, 2]\n', "no step records in 3 non-empty line(s) (3 unparseable)"),
])
def test_a_file_without_steps_is_refused(tmp_path: Path, content: str, expected: str):
    log = tmp_path / "p" / "e.jsonl"
    log.parent.mkdir()
    log.write_text(content)
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"))
    assert result.exit_code == 1
    assert expected in result.output
    assert not (tmp_path / "tsdb").exists()


def test_missing_promtool_names_the_install_command(tmp_path: Path, monkeypatch):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", steps=2)
    monkeypatch.delenv("PROMTOOL", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"))
    assert result.exit_code == 1
    assert "promtool not found on PATH" in result.output
    assert "apt-get install" in result.output


def test_a_validation_only_line_is_backfilled_as_the_exporter_serves_it(tmp_path: Path):
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    log.write_text(json.dumps({"step": 20, "data": {"actor/entropy": 0.5}}) + "\n"
                   + json.dumps({"step": 40, "data": {"val-aux/openai/gsm8k/reward/mean@1": 0.8}}) + "\n")
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=1000.0, default_step_seconds=60.0), now=10_000)
    assert recorded.values[1]["verl_actor_entropy"] == 0.5  # the validation line measured no entropy
    assert recorded.values[1]["verl_training_global_step"] == 40.0  # but the run stands at step 40
    state = RunState("proj", "exp")
    LogFollower(log, state, start_at_tail=False).poll()
    assert {name: value for name, value in recorded.values[1].items() if name in state._values} == state._values


def test_a_project_never_built_is_said_to_backfill_no_step_statistics(tmp_path: Path):
    log = write_run(tmp_path / "p" / "e.jsonl", "healthy", steps=3)
    unbuilt = tmp_path / "project"
    unbuilt.mkdir()
    result = run("backfill", str(log), "--tsdb", str(tmp_path / "tsdb"), "--start", str(START), "--root", str(unbuilt))
    assert result.exit_code == 0, result.output
    assert (f"dashgen backfill: no {unbuilt}/rendered/exporter/step-statistics.yaml: writing no statistics over "
            "steps, so the alerts that count in steps read nothing; run `dashgen build`") in result.output


def _served(families, last_scrape_only: bool = False) -> dict[tuple[str, frozenset], float]:
    """Each sample of an exposition by name and labels, the scrape's job and instance aside; of a
    backfill's scrapes (`last_scrape_only`), those of the last one."""
    samples = [sample for family in families for sample in family.samples
               if not sample.name.endswith("_created") and sample.name != "up"]
    if last_scrape_only:  # OpenMetrics' Timestamp: seconds and nanoseconds
        last = max(float(sample.timestamp) for sample in samples)
        samples = [sample for sample in samples if float(sample.timestamp) == last]
    return {(sample.name, frozenset((k, v) for k, v in sample.labels.items() if k not in ("job", "instance"))):
            sample.value for sample in samples}


@pytest.mark.live
def test_a_live_scrape_serves_what_the_backfill_of_the_same_log_writes_last(tmp_path: Path):
    """The run's own series (catalog.EXPORTER_SERIES: run state, counters, streaks, step windows,
    validation) and its logged keys: a scrape of `dashgen export` once it has read a log, against the
    last scrape a backfill of the same log writes (of a run still running: hung)."""
    import io

    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
    from prometheus_client.parser import text_string_to_metric_families as text_families

    from dashgen.catalog import EXPORTER_SERIES, LAST_STEP_METRIC
    from dashgen.replay.openmetrics import write_openmetrics
    from support import start_exporter, wait_until

    log = write_run(tmp_path / "gsm8k" / "ppo-7b.jsonl", "diverging", steps=40, event_at=30)
    last = step_data(41)
    last["actor/grad_norm"] = None  # verl's file logger writes NaN as null
    with open(log, "a") as handle:
        handle.write("not json\n")
        handle.write(json.dumps({"step": 41, "data": last}) + "\n")

    exporter = start_exporter(log, "--root", str(REPO))
    try:
        def read_whole_log() -> dict | None:
            served = _served(text_families(exporter.scrape()))
            steps = [value for (name, _), value in served.items() if name == "verl_exporter_steps_total"]
            return served if steps == [41] else None
        live = wait_until(read_whole_log, 60, "dashgen export to read the whole log")
    finally:
        exporter.kill()

    recorded = read_run(log, run_labels(log, "verl"), Timing(start=START, end="hung"),
                        step_statistics=rendered_statistics(REPO))
    text = io.StringIO()
    write_openmetrics([recorded], text, 15.0)
    backfilled = _served(openmetrics_families(text.getvalue()), last_scrape_only=True)

    assert set(live) == set(backfilled)
    for (name, labels), value in live.items():
        if name == LAST_STEP_METRIC:
            continue  # the exporter's wall clock, where the backfill places the step on the run's own
        got = backfilled[(name, labels)]
        assert (math.isnan(got) and math.isnan(value)) or got == value, (name, sorted(labels), value, got)
    own = {name for name, _ in live if any(name.startswith(series.removesuffix("_total")) for series in EXPORTER_SERIES)}
    assert own >= {LAST_STEP_METRIC, "verl_exporter_steps_total", "verl_exporter_parse_errors_total", "verl_run_state",
                   "verl_nonfinite_streak_steps", "verl_exporter_step_windows_info", "verl_step_statistic"}


def test_the_backfill_computes_each_validation_series_statistics_as_the_exporter_does(tmp_path: Path):
    """verl_val_core's statistics, per data_source/variable/metric, from a log that validates every
    10 steps: the backfill's at the last step are the exporter's, written with the member's labels."""
    import io

    from dashgen.replay.openmetrics import write_openmetrics

    log = tmp_path / "gsm8k" / "ppo-7b.jsonl"
    log.parent.mkdir()
    with open(log, "w") as handle:
        for step in range(1, 121):
            validation = {"val-core/openai/gsm8k/reward/mean@1": 0.5 if step < 60 else 0.2} if step % 10 == 0 else {}
            training = {key: value for key, value in step_data(step).items() if not key.startswith("val-")}
            handle.write(json.dumps({"step": step, "data": training | validation}) + "\n")
    served = rendered_statistics(REPO)
    recorded = read_run(log, run_labels(log, "verl"), Timing(start=START, end="hung"), step_statistics=served)
    state = RunState("gsm8k", "ppo-7b", step_statistics=served)
    LogFollower(log, state).poll()
    exporter = state._statistics.values()
    assert recorded.statistics[-1] == exporter
    member = (("data_source", "openai/gsm8k"), ("variable", "reward"), ("metric", "mean@1"))
    peak = {stat.name: value for (stat, labels), value in exporter.items() if stat.series == "verl_val_core"}
    assert peak == {"max_80steps": 0.5, "max_300steps_of_median_100steps": 0.5}  # 0.5 held at steps 41..59
    assert {labels for (stat, labels) in exporter if stat.series == "verl_val_core"} == {member}
    text = io.StringIO()
    write_openmetrics([recorded], text, 15.0)
    assert ('verl_step_statistic{job="verl",instance="backfill/gsm8k/ppo-7b",project="gsm8k",experiment="ppo-7b",'
            'series="verl_val_core",statistic="max_80steps",data_source="openai/gsm8k",variable="reward",'
            'metric="mean@1"} 0.5') in text.getvalue()
