"""The alerts a backtest reports on every public corpus run and every simulated run of
bench/alert_lifecycle.py, as one JSON document: what tests/replay/test_replay_identity.py holds
a change of the replay engine to (names, severities, labels, start and end steps).

Run from the repository root: .venv/bin/python bench/replay_identity.py [OUT.json]
(default: the test's fixture, tests/replay/fixtures/replay_alerts.json). The committed fixture was
written by the engine before issue 56 (commit f31c964), which evaluated every rule at every interval
of the run's whole span and wrote every scrape.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
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
FIXTURE = REPO / "tests" / "replay" / "fixtures" / "replay_alerts.json"


def alert_intervals(outcomes: list[RunOutcome], names: list[str]) -> dict[str, list[list]]:
    """Per run name: [alertname, severity, labels, start_step, end_step] of each firing, sorted."""
    out = {}
    for name, outcome in zip(names, outcomes):
        out[name] = sorted([alert.alertname, alert.severity, sorted(alert.labels.items()), firing.start_step,
                            firing.end_step] for alert in outcome.alerts for firing in alert.firing)
    return out


def corpus_alerts() -> dict[str, list[list]]:
    runs = find_runs([public_corpus()])
    outcomes = backtest([run.steps_path for run in runs], REPO, Config(), Timing(start=START),
                        timings=run_timings(runs))
    return alert_intervals(outcomes, [run.name for run in runs])


def simulated_alerts() -> dict[str, list[list]]:
    spec = importlib.util.spec_from_file_location("alert_lifecycle", REPO / "bench" / "alert_lifecycle.py")
    lifecycle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lifecycle)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number, runs in enumerate((lifecycle.RUNS, lifecycle.ISSUE_20_RUNS, lifecycle.ISSUE_27_RUNS,
                                       lifecycle.ISSUE_35_RUNS, lifecycle.ISSUE_52_RUNS)):
            outcomes = lifecycle._backtest(runs, Path(tmp) / f"set-{number}")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", type=Path, default=FIXTURE)
    parser.add_argument("--only", choices=("corpus", "simulated"), help="record one part, keeping the other's")
    args = parser.parse_args()
    _patient_queries()
    result = json.loads(args.out.read_text()) if args.only and args.out.exists() else {}
    if args.only != "simulated":
        result["corpus"] = corpus_alerts()
    if args.only != "corpus":
        result["simulated"] = simulated_alerts()
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
