"""The alerts a backtest reports on every public corpus run and every simulated run of
bench/alert_lifecycle.py (names, severities, labels, start and end steps), by the replay engine and
by the calendar path it replaced (issue 56: every sample written, every rule evaluated at every
interval of the run's whole span), and where the two differ: what tests/replay/test_replay_identity.py
holds a change of the engine to, on the rules as they are.

Run from the repository root: .venv/bin/python bench/replay_identity.py [--only corpus|simulated]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

from dashgen.config import Config
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import RunOutcome, backtest
from dashgen.review.comparison import START, run_timings
from dashgen.review.corpus import public_corpus
from dashgen.review.runs import find_runs

REPO = Path(__file__).resolve().parent.parent


def alert_intervals(outcomes: list[RunOutcome], names: list[str]) -> dict[str, list[list]]:
    """Per run name: [alertname, severity, labels, start_step, end_step] of each firing, sorted."""
    out = {}
    for name, outcome in zip(names, outcomes):
        out[name] = sorted([alert.alertname, alert.severity, sorted(alert.labels.items()), firing.start_step,
                            firing.end_step] for alert in outcome.alerts for firing in alert.firing)
    return out


def corpus_alerts(calendar: bool = False) -> dict[str, list[list]]:
    runs = find_runs([public_corpus()])
    outcomes = backtest([run.steps_path for run in runs], REPO, Config(), Timing(start=START),
                        timings=run_timings(runs), _calendar=calendar)
    return alert_intervals(outcomes, [run.name for run in runs])


def simulated_alerts(calendar: bool = False) -> dict[str, list[list]]:
    spec = importlib.util.spec_from_file_location("alert_lifecycle", REPO / "bench" / "alert_lifecycle.py")
    lifecycle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lifecycle)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number, runs in enumerate((lifecycle.RUNS, lifecycle.ISSUE_20_RUNS, lifecycle.ISSUE_27_RUNS,
                                       lifecycle.ISSUE_35_RUNS, lifecycle.ISSUE_52_RUNS)):
            outcomes = lifecycle._backtest(runs, Path(tmp) / f"set-{number}", calendar)
            out.update(alert_intervals(outcomes, [f"set-{number}/{spec.name}" for spec in runs]))
    return out


def _patient_queries() -> None:
    """Queries wait up to 10 minutes: on a machine others load, one over a whole span may take more
    than the 30 s a backtest allows it (this process only)."""
    import urllib.request

    original = urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        kwargs["timeout"] = max(kwargs.get("timeout") or 0, 600)
        return original(url, *args, **kwargs)

    urllib.request.urlopen = urlopen


def differences(calendar: dict, stepped: dict) -> list[str]:
    """A line per run whose alerts differ between the two paths."""
    return [f"{name}: calendar {calendar.get(name)}, stepped {stepped.get(name)}"
            for name in sorted(set(calendar) | set(stepped)) if calendar.get(name) != stepped.get(name)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("corpus", "simulated"), help="compare one part only")
    args = parser.parse_args()
    _patient_queries()
    found = []
    for part, alerts in (("corpus", corpus_alerts), ("simulated", simulated_alerts)):
        if args.only in (None, part):
            calendar, stepped = alerts(calendar=True), alerts()
            found += differences(calendar, stepped)
            print(f"{part}: {len(stepped)} runs, {sum(map(len, stepped.values()))} firings, "
                  f"{len(differences(calendar, stepped))} runs differ")
    print("\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
