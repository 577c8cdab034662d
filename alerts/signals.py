"""Signals: a series the alerts read that a run stops logging while it keeps logging steps, or that
its framework logs by default and the run never logged.

An alert whose series no longer arrives can never fire, and its panel reads "No data": a key renamed
by a new version of the trainer (verl's actor/entropy_loss became actor/entropy), dropped by a config
change, or logged under another name by async training. Nothing else tells.
"""

from dataclasses import dataclass

from dashgen.catalog import SERIES_NEVER_LOGGED_METRIC, SERIES_READERS_METRIC, SERIES_UNLOGGED_METRIC
from dashgen.conditions import RUN_NAME
from dashgen.config import AreaConfig, Config, StepCount
from dashgen.model import Alert, RuleGroup, Severity
from dashgen.framework_keys import FRAMEWORKS, FrameworkKeys


@dataclass(frozen=True)
class SignalsConfig(AreaConfig, area="signals"):
    """The tunables of alerts/signals.py: the config file's `signals:` section."""

    # VerlSignalStopped: a series the run had logged on every one of at least 10 consecutive training
    # lines (dashgen/sources/series_arrival.py) has not arrived on this many training lines since,
    # while the run kept logging them. Keys logged only now and then (validation timings, checkpoint
    # saves) never count as regular, so their gaps are no news.
    stopped_after_steps: StepCount = 5
    # VerlSignalNeverLogged: a key the run's framework logs on every step by default
    # (dashgen/sources/expected_keys.py) has not arrived on any of the run's first this many training
    # lines. Past a critic warm-up (verl skips the actor's update on its first critic_warmup steps).
    never_logged_after_steps: StepCount = 20


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
            "Add the new name as an alias of the catalog's key (`aliases:` in metrics.yaml, see "
            "docs/add-a-metric.md), or turn the logging back on; rebuild and restart `dashgen export`.",
        ),
    )
    return RuleGroup("verl-signals", (stopped, _never_logged(tunables.never_logged_after_steps)))


def _expected(framework: FrameworkKeys) -> str:
    """A framework's expected keys, as the runbook lists them."""
    text = (f"{framework.framework} (read from the source of {framework.checked_against}; a run is taken for "
            f"{framework.framework}'s once it logs {' and '.join(f'`{k}`' for k in sorted(framework.recognised_by))}): "
            + ", ".join(f"`{e.key}`" + (f" ({e.note})" if e.note else "") for e in framework.expected if not e.when))
    features: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for entry in framework.expected:
        if entry.when:
            features.setdefault((entry.note, entry.when), []).append(f"`{entry.key}`")
    for (note, when), keys in features.items():
        shows = " or ".join(f"`{p}`" for p in when)
        text += f"; with {note}, {', '.join(keys)}, once a key starting with {shows} arrives"
    return text


def _never_logged(after: int) -> Alert:
    return Alert(
        name="VerlSignalNeverLogged",
        severity=Severity.INFO,
        expr=(f"({SERIES_NEVER_LOGGED_METRIC}{{verl}} >= {after})\n"
              f"* on(series) group_left(key, alerts)\n"
              f"{SERIES_READERS_METRIC}"),
        summary="A key the run's framework logs on every step by default has not arrived in the run's first "
                "steps: the alerts that read it are blind.",
        description=(f"Run {RUN_NAME}: {{{{ $labels.key }}}} ({{{{ $labels.series }}}}) has not arrived on any of "
                     f"the run's {{{{ $value }}}} logged steps, though its framework logs it on every step by "
                     f"default; alerts blind without it: "
                     f"{{{{ if $labels.alerts }}}}{{{{ $labels.alerts }}}}{{{{ else }}}}none (its panels show no data)"
                     f"{{{{ end }}}}.{{{{ if $labels.logged_as }}}} The run logs {{{{ $labels.logged_as }}}}, a key "
                     f"no series reads: if it is the same signal, alias it in metrics.yaml.{{{{ end }}}}"),
        meaning=("The run logs steps, but never this key, which its framework logs on every training step under "
                 "its default configuration: an older or newer version that names it otherwise, a setting that "
                 "turns it off, a logger that drops it. The alerts named read it on every way they can fire and "
                 "cannot judge the run, and its panels read \"No data\". What is expected, per framework (a "
                 "framework not listed, such as a hand-written loop, expects nothing): "
                 + "; ".join(_expected(fw) for fw in FRAMEWORKS) + ". A key logged only where a feature is on "
                 "(a critic, rollout correction) is expected only once the run logs a key that shows the "
                 f"feature on. It is judged once the run has logged {after} training steps, and resolves "
                 "when the key arrives. It is an info: it never pages."),
        healthy_runs=("A healthy run of a recent version with default settings logs every expected key from its "
                      "first step. A run of an older version, or one that turned a key off on purpose (verl's "
                      "rollout.calculate_log_probs=False), gets this info for each key it never logs: true, and "
                      "it says which alerts cannot judge the run; it is an info, so it never pages."),
        next_steps=(
            "Look for the key under another name in the run's step log (`head -2` of it; the description names "
            "a key the run logs that no series reads and whose name looks like it, the alert's `logged_as` "
            "label): if it is there, add that name as an alias of the catalog's key (`aliases:` in metrics.yaml, see "
            "docs/add-a-metric.md) and rebuild.",
            "If the run turned it off on purpose, nothing: the named alerts cannot judge this run.",
        ),
    )
