"""Backtest the alerts on recorded runs with Prometheus' own query engine.

engine.py        backfill the runs, fill the recording rules, evaluate every alert: `backtest()`
blocks.py        OpenMetrics into TSDB blocks, part by part, by promtools in the background
server.py        the query-only Prometheus, and the threads that query it
recordings.py    the recording rules' results, by Prometheus or (a window over a recording) here
thinning.py      which samples of a run of equal values can be left out without changing a result
step_clock.py    rules of the newest step alone, evaluated once a step on a clock of the steps
clocked_rules.py which rules go on the step clock, and their results back on the calendar
evaluation.py    one alert over the runs, as Prometheus' rule manager would; the outcome types
rule_files.py    rules from Prometheus rule files (`--rules`), and the fill order of recordings
rule_sets.py     several rule sets (before and after a change) as one, for one pass
alert_series.py  the firing alerts as Prometheus' `ALERTS` series (what a preview draws)
report.py        the outcome as a table or JSON
plot.py          the outcome as a picture (`--plot`, needs matplotlib)
"""

from dashgen.replay.backtest.engine import SERVER_ARGS, backtest, backtest_rule_sets, recorded_openmetrics, serve_tsdb
from dashgen.replay.backtest.evaluation import AlertOutcome, Firing, RunOutcome, firing_intervals, query_spans
from dashgen.replay.backtest.plot import plot
from dashgen.replay.backtest.report import format_table, iso_time, to_json
from dashgen.replay.backtest.rule_files import load_rules, read_rule_files, recording_levels
from dashgen.replay.backtest.rule_sets import RuleSet

__all__ = ["SERVER_ARGS", "AlertOutcome", "Firing", "RuleSet", "RunOutcome", "backtest", "backtest_rule_sets", "firing_intervals", "format_table",
           "iso_time", "load_rules", "plot", "query_spans", "read_rule_files", "recorded_openmetrics",
           "recording_levels", "serve_tsdb", "to_json"]
