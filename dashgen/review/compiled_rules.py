"""The rules a project compiles to, as JSON: run in a process of its own for each revision a
review compares (`python -B -m dashgen.review.compiled_rules ROOT`).

A process of its own, because a project's definition modules are imported by file and may
import helpers of their own folder: two revisions of them in one interpreter would share
whichever helper was imported first. `-B` keeps the import from writing bytecode into the
project. The process inherits the review's folder and environment, so both revisions are
compiled by the dashgen the review runs (never by a dashgen inside the revision's tree).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from dashgen.compiler.compiled import AlertRule, RecordingRule
from dashgen.compiler.sections import load_config
from dashgen.project_metrics import project_catalog
from dashgen.replay.backtest import RuleSet
from dashgen.sources.chosen import REPLAYED_SOURCE
from dashgen.sources.step_statistics import ServedStatistics, StepStatistic


def compiled_json(root: Path) -> str:
    """The project's recording and alerting rules as the backtest evaluates them, and the statistics
    over steps they read, for the exporter as a recorded run is replayed."""
    from dashgen.compiler.rules.rule_files import compile_rules

    config = load_config(None, root).with_source(REPLAYED_SOURCE.name)
    compiled = compile_rules(root, config, project_catalog(root))
    return json.dumps({"recordings": [dataclasses.asdict(rule) for rule in compiled.recording_rules],
                       "alerts": [dataclasses.asdict(rule) for rule in compiled.alert_rules],
                       "step_statistics": [dataclasses.asdict(stat) for stat in compiled.step_statistics.statistics],
                       "step_window_floor_seconds": compiled.step_statistics.floor_seconds})


def rule_set_from_json(text: str) -> RuleSet:
    data = json.loads(text)
    return RuleSet([RecordingRule(**{**rule, "labels": _labels(rule["labels"])}) for rule in data["recordings"]],
                   [AlertRule(**{**rule, "labels": _labels(rule["labels"])}) for rule in data["alerts"]],
                   ServedStatistics(tuple(StepStatistic(**stat) for stat in data["step_statistics"]),
                                    data["step_window_floor_seconds"]))


def _labels(pairs: list[list[str]]) -> tuple[tuple[str, str], ...]:
    return tuple((name, value) for name, value in pairs)


def main() -> int:
    root = Path(sys.argv[1])
    try:
        print(compiled_json(root))
    except click.ClickException as exc:
        print(exc.format_message(), file=sys.stderr)
        return 1
    except Exception as exc:  # a revision's own bug: said in one line, as the parent reports it
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
