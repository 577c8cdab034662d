"""The `ALERTS` series Prometheus' rule manager would have written over the runs, from a backtest's outcomes.

A dashboard reads firing alerts from `ALERTS{alertstate="firing"}` (the at-a-glance count, the
alert annotations). `dashgen preview` writes these series into its TSDB, so the picture shows
the alerts the backtest reports. Prometheus writes a sample at each evaluation of the alert's
group and its lookback holds it until the next; a preview shortens the lookback to two scrapes
(dashgen/replay/preview/query.py), so a firing interval is written as a sample every `spacing`
instead, from the evaluation it fired at up to the one it resolved at (or the run's last
evaluation, if it was still firing). Labels as Prometheus writes them: the result series' labels,
the rule's labels, `alertname` and `alertstate`. Pending states are left out: no panel of
dashgen reads them.
"""

from __future__ import annotations

from dashgen.compiler.compiled import AlertRule
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.openmetrics import label_text
from dashgen.replay.backtest.evaluation import AlertOutcome, evaluation_times

ALERTS_SERIES = "ALERTS"


def alerts_openmetrics(alerts: list[AlertRule], per_alert: list[list[list[AlertOutcome]]], runs: list[RecordedRun],
                       spacing: float) -> str:
    """OpenMetrics text of the firing alerts (`evaluate_rules`' outcomes, per alert then run), a
    sample every `spacing` seconds while each fires; '' if none fired."""
    spacing_ms = round(spacing * 1000)
    lines: list[str] = []
    for alert, per_run in zip(alerts, per_alert):
        for run, outcomes in zip(runs, per_run):
            last_evaluation = evaluation_times(run, alert.interval_ms)[-1]
            for outcome in outcomes:
                labels = {"alertname": alert.name, "alertstate": "firing", **outcome.labels,
                          "severity": alert.severity}
                prefix = ALERTS_SERIES + label_text(labels) + " 1 "
                for firing in outcome.firing:
                    start = round(firing.start * 1000)
                    end = last_evaluation + 1 if firing.end is None else round(firing.end * 1000)
                    lines.extend(f"{prefix}{at // 1000}.{at % 1000:03d}\n" for at in range(start, end, spacing_ms))
    if not lines:
        return ""
    return f"# TYPE {ALERTS_SERIES} gauge\n" + "".join(lines) + "# EOF\n"
