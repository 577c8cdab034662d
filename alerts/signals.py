"""Signals: a series the alerts read that a run stops logging while it keeps logging steps.

An alert whose series no longer arrives can never fire, and its panel reads "No data": a key renamed
by a new version of the trainer (verl's actor/entropy_loss became actor/entropy), dropped by a config
change, or logged under another name by async training. Nothing else tells.
"""

from dataclasses import dataclass

from dashgen.catalog import SERIES_READERS_METRIC, SERIES_UNLOGGED_METRIC
from dashgen.conditions import RUN_NAME
from dashgen.config import AreaConfig, Config, StepCount
from dashgen.model import Alert, RuleGroup, Severity


@dataclass(frozen=True)
class SignalsConfig(AreaConfig, area="signals"):
    """The tunables of alerts/signals.py: the config file's `signals:` section."""

    # VerlSignalStopped: a series the run had logged on every one of at least 10 consecutive training
    # lines (dashgen/sources/series_arrival.py) has not arrived on this many training lines since,
    # while the run kept logging them. Keys logged only now and then (validation timings, checkpoint
    # saves) never count as regular, so their gaps are no news.
    stopped_after_steps: StepCount = 5


def rules(config: Config) -> RuleGroup:
    tunables = config.area(SignalsConfig)
    after = tunables.stopped_after_steps
    stopped = Alert(
        name="VerlSignalStopped",
        severity=Severity.WARNING,
        expr=(f"({SERIES_UNLOGGED_METRIC}{{verl}} >= {after})\n"
              f"* on(series) group_left(key, alerts)\n"
              f"{SERIES_READERS_METRIC}"),
        keep_firing_for=config.warning_keep_firing_for,
        summary="A signal the run logged on every step has stopped arriving while the run goes on: the alerts "
                "that read it are blind.",
        description=(f"Run {RUN_NAME}: {{{{ $labels.key }}}} ({{{{ $labels.series }}}}) has not arrived for the last "
                     f"{{{{ $value }}}} logged steps, after arriving on every step; alerts blind without it: "
                     f"{{{{ if $labels.alerts }}}}{{{{ $labels.alerts }}}}{{{{ else }}}}none (its panels show no data)"
                     f"{{{{ end }}}}."),
        meaning="The run still logs steps, but no longer this key: a trainer version that renamed it, a config "
                "change that turned it off, a logger that lost it. The alerts named read it on every way they can "
                "fire: they stay quiet whatever the run does until the key comes back, and the dashboard's panels "
                "of it read \"No data\". It counts logged steps, so a log written every 10 steps is judged after "
                f"{after} of its lines; a key logged only now and then (validation, checkpoints) is never judged.",
        healthy_runs=("A healthy run logs the same keys on every step; keys logged only on some steps (validation "
                      "timings, checkpoint saves) never arrive on 10 consecutive steps, so they are not followed, and "
                      f"a key must then be missing from {after} consecutive logged steps while the run goes on."),
        next_steps=(
            "Look for the key's new name in the run's newest step-log line (`tail -1` of the log), or in the "
            "trainer's release notes.",
            "Add the new name as an alias of the catalog's key (metrics.yaml, see docs/add-a-metric.md), or turn "
            "the logging back on; rebuild and restart `dashgen export`.",
        ),
    )
    return RuleGroup("verl-signals", (stopped,))
