"""The backtest engine of issue 19 (blocks made part by part, queries a few at a time, an alert's
queries shared by every run) reports what the engine before it reported.

The reference below is that engine, kept to the letter of its steps: one OpenMetrics file and one
promtool, recordings filled one query after another with a Prometheus per level, then each alert
evaluated run by run over the run's own times. Several simulated runs with faults (held
baselines, a hang, a crash, a divergence) are backtested both ways and their firing episodes
compared. Each Prometheus binds 127.0.0.1 on a free port over a temporary TSDB and is stopped
by its PID when its `with` block ends, also on failure (dashgen/replay/prometheus_server.py).
"""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from dashgen.compiler.queries.promql import metrics_in
from dashgen.compiler.compiled import RecordingRule
from dashgen.compiler.rules.rule_files import compile_rules
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.project_metrics import project_catalog
from dashgen.replay.backfill import RecordedRun, Timing, create_blocks, read_run, run_labels
from dashgen.replay.openmetrics import write_openmetrics
from dashgen.replay.backtest import backtest, recorded_openmetrics, recording_levels, serve_tsdb
from dashgen.replay.backtest import blocks as backtest_blocks
from dashgen.replay.backtest.blocks import BlockParts
from dashgen.replay.backtest.evaluation import evaluate_alert
from dashgen.replay.backtest.recordings import Window, queried_series, series_of
from dashgen.replay.backtest.recordings import samples as runs_samples
from dashgen.evaluation.simulate import Fault, RunSpec, write_run
from dashgen.sources.step_statistics import served_by

from conftest import REPO

START = 1_700_000_000.0
# Each fault begins after 150 steps, past the divergence's and the reward cliff's baselines (60 and
# 100 steps): the same nine alerts fire as on runs of 300 to 600 steps, for two thirds of the CPU.
RUNS = (
    RunSpec("divergence", 250, 11, 60, faults=(Fault("divergence", 150, speed=3),)),
    RunSpec("reward-cliff", 250, 18, 50, faults=(Fault("reward_cliff", 150, speed=2),)),
    RunSpec("token-runaway", 250, 29, 50, faults=(Fault("token_runaway", 150, speed=20),)),
    RunSpec("stall", 200, 23, 60, faults=(Fault("stall", 150),)),
    RunSpec("crash", 200, 25, 60, faults=(Fault("crash", 150),)),
    RunSpec("length-collapse-every-10", 400, 46, 60, log_every=10,
            faults=(Fault("length_collapse", 200, speed=20),)),
)


def _timing(spec: RunSpec) -> Timing:
    return Timing(start=START, end=spec.end, hold_seconds=3600.0 if spec.end == "hung" else 300.0)


def _reference_backtest(paths: list[Path], timings: dict[Path, Timing]) -> list[list]:
    """Per run: (alert, labels, firing episodes) as the engine before issue 19 found them."""
    catalog = project_catalog(REPO)
    compiled = compile_rules(REPO, Config(), catalog)
    recordings, alerts = compiled.recording_rules, compiled.alert_rules
    selected = set().union(*(metrics_in(rule.expr) for rule in [*recordings, *alerts]))
    wanted = served_by((rule.expr for rule in [*recordings, *alerts]), 60.0)
    runs = [read_run(path, run_labels(path, Config().verl_job), timings[path], keep=selected, catalog=catalog,
                     step_statistics=wanted) for path in paths]
    span = max(run.end for run in runs) - min(run.times[0] for run in runs)
    with tempfile.TemporaryDirectory(prefix="dashgen-reference-") as tmp:
        workdir = Path(tmp)
        with open(workdir / "runs.om", "w") as handle:
            write_openmetrics(runs, handle, 15.0, only=selected)
        create_blocks(workdir / "runs.om", workdir / "tsdb", span)
        for level, rules in enumerate(recording_levels(recordings)):
            with serve_tsdb(workdir) as server:
                text = recorded_openmetrics(server, rules, runs)
            if text:
                (workdir / f"recorded-{level}.om").write_text(text)
                create_blocks(workdir / f"recorded-{level}.om", workdir / "tsdb", span)
        with serve_tsdb(workdir) as server:
            return [[(outcome.alertname, outcome.labels, outcome.firing) for alert in alerts
                     for outcome in evaluate_alert(server, alert, [run])[0]] for run in runs]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> tuple[list[Path], dict[Path, Timing]]:
    folder = tmp_path_factory.mktemp("runs")
    paths = [write_run(spec, folder / "sim" / f"{spec.name}.jsonl") for spec in RUNS]
    return paths, {path: _timing(spec) for path, spec in zip(paths, RUNS)}


@pytest.mark.live  # a Prometheus a recording level, and promtools
def test_the_engine_reports_the_firing_episodes_the_engine_before_it_did(simulated, monkeypatch):
    paths, timings = simulated
    # Small parts: the runs' series go to several promtools, as a long run's do.
    monkeypatch.setattr(backtest_blocks, "PART_BYTES", 2_000_000)
    outcomes = backtest(paths, REPO, Config(), Timing(), timings=timings)
    found = [[(alert.alertname, alert.labels, alert.firing) for alert in outcome.alerts] for outcome in outcomes]
    assert found == _reference_backtest(paths, timings)
    fired = {alert.alertname for outcome in outcomes for alert in outcome.alerts if alert.firing}
    # Held baselines (token runaway, reward cliff), a hang, a crash and a divergence: the
    # comparison covers recordings of every level, not only alerts on raw series.
    assert {"VerlBatchTokenRunaway", "VerlRewardCliff", "VerlTrainingStalled", "VerlRunCrashed",
            "VerlTrainingDivergence"} <= fired, fired


def _lines_one_by_one(runs: list[RecordedRun], only: set[str]) -> str:
    """The scrapes' sample lines, each written on its own (how write_openmetrics wrote them before issue 19)."""
    from dashgen.lifecycle import RunPhase
    from dashgen.replay.openmetrics import _families, _final_phase, _gone_scrapes, _stamp, label_text, openmetrics_value

    out = []
    scrapes = [run.scrapes(15.0) for run in runs]
    for family in _families(runs, only):
        out.append(f"# TYPE {family.name} {family.type}\n")
        for run, run_scrapes, per_step in zip(runs, scrapes, family.values):
            out += [f"{family.sample}{label_text(run.labels)} {per_step[index]}{_stamp(at)}"
                    for at, index in run_scrapes if per_step[index] is not None]
    for name in ("verl_val_core", "verl_val_aux"):
        per_run = [sorted({series for held in run.validation for series in held if series[0] == name})
                   for run in runs]
        if any(per_run):
            out.append(f"# TYPE {name} gauge\n")
        for run, run_scrapes, all_series in zip(runs, scrapes, per_run):
            for series in all_series:
                labels = label_text({**run.labels, "data_source": series[1], "variable": series[2],
                                     "metric": series[3]})
                out += [f"{name}{labels} {openmetrics_value(run.validation[index][series])}{_stamp(at)}"
                        for at, index in run_scrapes if series in run.validation[index]]
    out.append("# TYPE verl_run_state gauge\n")
    for run, run_scrapes in zip(runs, scrapes):
        last_ms = round(run.times[-1] * 1000)
        for phase in RunPhase:
            value = {True: float(phase is _final_phase(run)), False: float(phase is RunPhase.RUNNING)}
            out += [f"verl_run_state{label_text({**run.labels, 'state': phase.value})} {value[at > last_ms]}"
                    f"{_stamp(at)}" for at, _ in run_scrapes]
    out.append("# TYPE verl_run_exit_code gauge\n")
    for run, run_scrapes in zip(runs, scrapes):
        if run.end_kind != "hung":
            code = 1 if run.end_kind == "crashed" else 0
            out += [f"verl_run_exit_code{label_text(run.labels)} {code}{_stamp(at)}" for at, _ in run_scrapes
                    if at > round(run.times[-1] * 1000)]
    out.append("# TYPE up gauge\n")
    for run, run_scrapes in zip(runs, scrapes):
        labels = label_text({"job": run.labels["job"], "instance": run.labels["instance"]})
        out += [f"up{labels} 1{_stamp(at)}" for at, _ in run_scrapes]
        out += [f"up{labels} 0{_stamp(at)}" for at in _gone_scrapes(run, 15.0)]
    return "".join(out) + "# EOF\n"


def test_openmetrics_joined_step_by_step_is_the_same_text(simulated):
    paths, timings = simulated
    only = {"verl_actor_entropy", "verl_critic_score_mean", "verl_val_core", "verl_val_aux", "verl_run_state",
            "verl_run_exit_code", "up", "verl_exporter_last_step_timestamp_seconds", "verl_exporter_steps_total"}
    runs = [read_run(path, run_labels(path, "verl"), timings[path], keep=only) for path in paths]
    out = io.StringIO()
    written = write_openmetrics(runs, out, 15.0, only=only)
    assert out.getvalue() == _lines_one_by_one(runs, only)
    assert written == out.getvalue().count("\n") - out.getvalue().count("# ")


def test_parts_split_at_families_and_a_refused_part_names_itself(tmp_path: Path):
    with BlockParts(tmp_path / "parts", tmp_path / "tsdb", "demo", part_bytes=10) as blocks:
        for name in ("a", "b", "c"):
            blocks.write(f"# TYPE {name} gauge\n")
            blocks.writelines([f'{name}{{job="x"}} 1 1700000000.000\n', f'{name}{{job="x"}} 2 1700000015.000\n'])
        blocks.write("# EOF\n")
    assert blocks.parts == 3
    assert len([block for block in (tmp_path / "tsdb").iterdir() if (block / "meta.json").is_file()]) == 3
    assert not list((tmp_path / "parts").iterdir())  # inputs and their folders removed
    with pytest.raises(BuildError, match=r"promtool could not turn .*bad-0\.om into blocks"):
        with BlockParts(tmp_path / "parts", tmp_path / "tsdb", "bad") as blocks:
            blocks.write("# TYPE a gauge\n")
            blocks.write("a{job=\"x\"} not-a-number 1700000000\n")
    with pytest.raises(BuildError, match="before a '# TYPE' line"):
        BlockParts(tmp_path / "parts", tmp_path / "tsdb", "untyped").write("a 1 1\n")


@pytest.mark.live
def test_a_window_over_a_recording_is_what_prometheus_computes(tmp_path: Path):
    """NaN samples (alone and among others), equal values of either sign, a gap longer than the
    window, samples on the window's lower edge: min and max, at the recording's and at a coarser step."""
    start = 1_700_000_000 // 600 * 600
    values = ["1.5", "NaN", "-0.0", "0.0", "2", "NaN", "NaN", "NaN", "-3e-05", "7", "7.0", "1e+300", "-Inf", "+Inf"]
    at_ms = [(start + 60 * index) * 1000 for index in range(len(values))]
    at_ms += [(start + 3600 + 60 * index) * 1000 for index in range(3)]
    values += ["NaN", "4", "NaN"]
    # The recording as its blocks hold it: two series, one without the +Inf.
    samples = {(("job", "verl"), ("run", run)): ([t for t, v in zip(at_ms, values) if run == "a" or v != "+Inf"],
                                                 [v for v in values if run == "a" or v != "+Inf"])
               for run in ("a", "b")}
    source = {labels: series_of(times, texts, 60_000) for labels, (times, texts) in samples.items()}
    lines = [f'rec:x{{job="verl",run="{labels[1][1]}"}} {value} {at // 1000}\n'
             for labels, (times, texts) in samples.items() for at, value in zip(times, texts)]
    (tmp_path / "rec.om").write_text("# TYPE rec:x gauge\n" + "".join(lines) + "# EOF\n")
    create_blocks(tmp_path / "rec.om", tmp_path / "tsdb", 7200)
    span = RecordedRun(Path("window"), {}, times=[start - 600], end=start + 7200)

    def as_floats(series):  # repr tells -0.0 from 0.0; the texts differ ("-0.0" written, "-0" read back)
        return {labels: [(at, repr(float(value))) for at, value in runs_samples(runs)] for labels, runs in series.items()}

    with serve_tsdb(tmp_path) as server:
        for function in ("min_over_time", "max_over_time"):
            for interval_ms, window in ((60_000, "10m"), (600_000, "3m"), (60_000, "5m")):
                rule = RecordingRule("rec:x:window", f"{function}(rec:x[{window}])", interval_ms, (("held", "1"),))
                expected = queried_series(server, rule, [span])
                assert as_floats(Window.of(rule).over(source, rule, [span])) == as_floats(expected), (function, window)


def test_only_a_window_over_a_bare_recorded_name_is_computed_here():
    assert Window.of(RecordingRule("r", "max_over_time(verl:x:baseline[24h])", 60_000, ())).range_ms == 86_400_000
    for expr in ('min_over_time(verl:x{job="verl"}[10m])', "min_over_time(verl:x[10m] offset 5m)",
                 "min_over_time(verl:x[10m:1m])", "avg_over_time(verl:x[10m])", "min(verl:x)",
                 "min_over_time(verl:x[10m] @ 100)"):
        assert Window.of(RecordingRule("r", expr, 60_000, ())) is None, expr
