"""A backtest's outcome as a table for people and as JSON for tools."""

from __future__ import annotations

from datetime import datetime, timezone

from dashgen.replay.backtest.evaluation import SEVERITY_ORDER, AlertOutcome, RunOutcome


def iso_time(when: float | None) -> str:
    if when is None:
        return ""
    return datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_json(outcomes: list[RunOutcome]) -> dict:
    return {
        "runs": [{"path": str(o.run.path), "labels": o.run.labels, "first_step": o.run.steps[0],
                  "last_step": o.run.steps[-1], "steps": len(o.run.steps), "start": iso_time(o.run.times[0]),
                  "end": iso_time(o.run.end), "unparseable_lines": o.run.parse_errors, "notes": o.run.notes}
                 for o in outcomes],
        "alerts": [{"alertname": a.alertname, "severity": a.severity, "labels": a.labels,
                    "firing": [{"start_step": f.start_step, "end_step": f.end_step, "start": iso_time(f.start),
                                "end": iso_time(f.end) or None} for f in a.firing],
                    **({"note": a.note} if a.note else {})}
                   for o in outcomes for a in o.alerts],
    }


def format_table(outcomes: list[RunOutcome]) -> str:
    lines = []
    for outcome in outcomes:
        run = outcome.run
        lines.append(f"run {run.name} ({run.path}): steps {run.steps[0]}-{run.steps[-1]}, "
                     f"{iso_time(run.times[0])} to {iso_time(run.end)}")
        rows = [("ALERT", "SEVERITY", "FIRED", "FROM STEP", "FROM", "TO STEP", "TO", "")]
        by_alert: dict[str, list[AlertOutcome]] = {}
        for alert in outcome.alerts:
            by_alert.setdefault(alert.alertname, []).append(alert)
        ordered = sorted(by_alert.values(), key=lambda group: (SEVERITY_ORDER.get(group[0].severity, 9),
                                                               group[0].alertname))
        for group in ordered:
            count = sum(len(alert.firing) for alert in group)
            head = [group[0].alertname, group[0].severity, str(count)]
            if not count:
                rows.append((*head, "", "", "", "", group[0].note))
            for alert in group:
                which = ", ".join(f"{k}={v}" for k, v in alert.labels.items() if k not in run.labels)
                for firing in alert.firing:
                    rows.append((*head, str(firing.start_step), iso_time(firing.start),
                                 "" if firing.end_step is None else str(firing.end_step),
                                 iso_time(firing.end) or "(still firing at the run's end)", which))
                    head = ["", "", ""]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines.extend("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     + (f"  {row[-1]}" if row[-1] else "") for row in rows)
        lines.append("")
    return "\n".join(lines)
