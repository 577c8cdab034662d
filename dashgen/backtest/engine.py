"""The backtest itself: backfill the runs, fill the recording rules, evaluate every alert.

1. The runs are backfilled (only the series the rules select) into a temporary TSDB with
   promtool, as `dashgen backfill` does.
2. A real `prometheus` is started on loopback over it.
3. Recording rules are filled by evaluating each one with `query_range` at its group's
   interval, on the same timestamps the group's alerts are evaluated at, and writing the
   result back as blocks with promtool; then Prometheus is restarted to load them.
   `promtool tsdb create-blocks-from rules` does the same queries, but picks its own
   timestamps (newer versions shift them by the group's hash offset), so an alert at t could
   read the recording of the evaluation before t, one interval late, whereas Prometheus
   evaluates a group's recordings and alerts at one timestamp. It also cannot fill a
   recording that reads another; here such recordings are filled level by level.
4. Each alert is evaluated over the run (dashgen/backtest/evaluation.py).
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from dashgen.backfill import (RecordedRun, Timing, check_unique_runs, create_blocks, label_text, read_run,
                              run_labels, series_names, write_openmetrics)
from dashgen.backtest.evaluation import (RunOutcome, series_key, evaluate_alert, evaluation_times, query_range,
                                        query_spans)
from dashgen.backtest.rule_files import read_rule_files, recording_levels
from dashgen.config import Config
from dashgen.prometheus_server import PrometheusServer
from dashgen.promql import metrics_in
from dashgen.promtool import find_binary
from dashgen.rules import RecordingRule

# Backfilled runs may be years old; the default 15 d retention would delete them at start-up.
SERVER_ARGS = ("--storage.tsdb.retention.time=100y", "--log.level=warn")


def recorded_openmetrics(server: PrometheusServer, rules: list[RecordingRule], runs: list[RecordedRun]) -> str:
    """The rules' results over every run, as OpenMetrics text ('' if they produced nothing)."""
    out: list[str] = []
    for rule in rules:
        times = sorted({at for run in runs for at in evaluation_times(run, rule.interval_ms)})
        samples: dict[tuple, list[str]] = {}
        for span in query_spans(times, rule.interval_ms):
            for series in query_range(server, rule.expr, span, rule.interval_ms, f"recording rule {rule.record}"):
                key = tuple(sorted({**dict(series_key(series["metric"])), **dict(rule.labels)}.items()))
                samples.setdefault(key, []).extend(f" {value} {at}\n" for at, value in series["values"])
        if samples:
            out.append(f"# TYPE {rule.record} gauge\n")
            for key, lines in samples.items():
                prefix = rule.record + label_text(dict(key))
                out.extend(prefix + line for line in lines)
    return "".join(out) + "# EOF\n" if out else ""


@contextmanager
def serve_tsdb(workdir: Path, extra_args: tuple[str, ...] = ()) -> Iterator[PrometheusServer]:
    """A Prometheus over workdir/tsdb that scrapes nothing and evaluates no rule: queries only."""
    config_file = workdir / "prometheus.yml"
    if not config_file.exists():
        config_file.write_text("# dashgen backtest: no scrapes, no rules; queries only.\nglobal: {}\n")
    with PrometheusServer(config_file, workdir / "tsdb", (*SERVER_ARGS, *extra_args)) as server:
        yield server


def backtest(paths: list[Path], root: Path, config: Config, timing: Timing,
             say: Callable[[str], None] = lambda message: None,
             timings: dict[Path, Timing] | None = None, rule_files: list[Path] | None = None) -> list[RunOutcome]:
    """Backtest every alert of the project at `root` on the runs; cleans up after itself.

    `timings` gives some runs their own timing (e.g. how each ended) instead of `timing`.
    `rule_files`: backtest these Prometheus rule files instead of the project's alerts."""
    from dashgen.project_metrics import project_catalog
    from dashgen.rules import render_rules

    find_binary("promtool")
    find_binary("prometheus")
    catalog = project_catalog(root)
    if rule_files:
        recordings, alerts = read_rule_files(rule_files)
    else:
        compiled = render_rules(root, config, catalog)
        recordings, alerts = compiled.recording_rules, compiled.alert_rules
    selected = set().union(*(metrics_in(rule.expr) for rule in [*recordings, *alerts]))
    runs = [read_run(path, run_labels(path, config.verl_job), (timings or {}).get(path, timing), keep=selected,
                     catalog=catalog)
            for path in paths]
    check_unique_runs(runs)
    for run in runs:
        for note in run.notes:
            say(f"{run.path}: {note}")
    span = max(run.end for run in runs) - min(run.times[0] for run in runs)
    with tempfile.TemporaryDirectory(prefix="dashgen-backtest-") as tmp:
        workdir = Path(tmp)
        scraped = workdir / "runs.om"
        with open(scraped, "w") as handle:
            write_openmetrics(runs, handle, timing.scrape_interval, only=selected)
        create_blocks(scraped, workdir / "tsdb", span)
        recorded_names: set[str] = set()  # recordings that produced samples (GPU ones cannot: no GPU series)
        for level, rules in enumerate(recording_levels(recordings)):
            with serve_tsdb(workdir) as server:
                text = recorded_openmetrics(server, rules, runs)
            if text:
                recorded = workdir / f"recorded-{level}.om"
                recorded.write_text(text)
                create_blocks(recorded, workdir / "tsdb", span)
                recorded_names |= {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
        available = series_names(runs) | recorded_names
        with serve_tsdb(workdir) as server:
            outcomes = []
            for run in runs:
                results = []
                for alert in alerts:
                    alert_outcomes = evaluate_alert(server, alert, run)
                    if not metrics_in(alert.expr) & available:
                        alert_outcomes[0].note = (f"needs {', '.join(sorted(metrics_in(alert.expr)))}, which "
                                                  f"verl's step log does not hold: it cannot fire in a backtest")
                    results.extend(alert_outcomes)
                outcomes.append(RunOutcome(run, results))
    return outcomes
