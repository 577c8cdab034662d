"""Where notifications go: routing by severity, grouping by run, the alerts `dashgen act` handles,
and the inhibitions alert modules state next to their alerts (`inhibitions(config)` in alerts/*.py).

Compiled once into Alertmanager's own model (route tree, inhibit rules, receivers), which the
Alertmanager config, the Kubernetes AlertmanagerConfig and the runbook's routing section are
rendered from (dashgen/compiler/output/targets/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from dashgen.compiler.compiled import StatedInhibition
from dashgen.compiler.loader import DefinitionModule, call_definition
from dashgen.compiler.alerting.receivers import check_receiver
from dashgen.compiler.queries.references import check_alert_name
from dashgen.config import Address, Config, Duration, Interval, Section
from dashgen.errors import BuildError, get_close_matches
from dashgen.model import ACT_PATH, EXPORTER_LABELS, RUN_LABELS, ActSection, Inhibition, Severity
from dashgen.sources.chosen import metric_source

# Receiver names, as notifications and routing fixtures show them.
NOWHERE, PAGE, CHANNEL, ACT = "nowhere", "page", "channel", "dashgen-act"

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@dataclass(frozen=True)
class AlertmanagerSection(Section, section="alertmanager"):
    """The config file's `alertmanager:` section: where alerts go, how they are grouped, who gets them."""

    # Where Prometheus sends alerts (the rendered prometheus.yml's alerting section).
    address: Address = "localhost:9093"
    # How long a new group of notifications (one a run: project, experiment) waits for more alerts.
    group_wait: Duration = "30s"
    # How often a group of notifications may report changes.
    group_interval: Interval = "5m"
    # How often a group of notifications repeats while nothing changes.
    repeat_interval: Interval = "4h"
    # What the `page` receiver (critical alerts) delivers to, in Alertmanager's own receiver
    # syntax, e.g. {"slack_configs": [{"api_url_file": "/etc/alertmanager/slack-url",
    # "channel": "#verl"}]}; empty, it delivers nothing, and secrets are read only from *_file fields.
    page: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # What the `channel` receiver (warnings) delivers to, in the syntax of the `page` receiver.
    channel: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Whether info alerts go to the `channel` receiver too; off, they go nowhere.
    info_to_channel: bool = False


def collect_inhibitions(alert_modules: list[DefinitionModule], config: Config,
                        alert_labels: Mapping[str, frozenset[str]]) -> tuple[StatedInhibition, ...]:
    """Every module's `inhibitions(config)`, checked: each names known alerts, each source once, and
    holds back only alerts of the source's own run (see _check_equal). `alert_labels`: the labels
    each alert's notifications carry (CompiledRules.notified_labels)."""
    found: list[StatedInhibition] = []
    sources: dict[str, str] = {}
    for definition in alert_modules:
        entry = getattr(definition.module, "inhibitions", None)
        if entry is None:
            continue
        result = call_definition(definition, "inhibitions", config)
        module = definition.path.as_posix()
        if not isinstance(result, (list, tuple)) or not all(isinstance(i, Inhibition) for i in result):
            raise BuildError(f"{module}: inhibitions() must return a tuple of dashgen.model.Inhibition")
        for inhibition in result:
            where = f"{module}: inhibition by {inhibition.source!r}"
            if inhibition.source in sources:
                raise BuildError(f"{where}: already stated in {sources[inhibition.source]}; "
                                 f"state each source's inhibition once")
            sources[inhibition.source] = module
            _check_inhibition(inhibition, alert_labels, where)
            found.append(StatedInhibition(module, inhibition))
    return tuple(found)


def _check_inhibition(inhibition: Inhibition, alert_labels: Mapping[str, frozenset[str]], where: str) -> None:
    for name in (inhibition.source, *inhibition.targets):
        check_alert_name(name, alert_labels, where)
    if not inhibition.targets or inhibition.source in inhibition.targets:
        raise BuildError(f"{where}: targets must be other alerts, at least one")
    if not inhibition.equal or not all(_LABEL_NAME.fullmatch(label) for label in inhibition.equal):
        raise BuildError(f"{where}: equal must name the labels that identify the run, e.g. "
                         f"('project', 'experiment')")
    if not inhibition.why.strip():
        raise BuildError(f"{where}: why is empty; say in one line why the source explains the targets")
    _check_equal(inhibition, alert_labels, where)


def _check_equal(inhibition: Inhibition, alert_labels: Mapping[str, frozenset[str]], where: str) -> None:
    """`equal` names a run (project and experiment, or the one exporter serving it: job and instance),
    and only labels that the source and every target carry: Alertmanager counts a label missing on
    both sides as equal, so a misspelt one would let one run's alert silence the targets of every run."""
    if not (set(RUN_LABELS) <= set(inhibition.equal) or set(EXPORTER_LABELS) <= set(inhibition.equal)):
        raise BuildError(f"{where}: equal={tuple(inhibition.equal)!r} does not name the run, so the source firing in "
                         f"one run would silence {', '.join(inhibition.targets)} in every run; include "
                         f"{' and '.join(RUN_LABELS)} (or {' and '.join(EXPORTER_LABELS)}, the run's one exporter)")
    for name in (inhibition.source, *inhibition.targets):
        missing = [label for label in inhibition.equal if label not in alert_labels[name]]
        if missing:
            known = sorted(alert_labels[name])
            close = get_close_matches(missing[0], known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise BuildError(f"{where}: equal label {missing[0]!r} is not a label of {name} ({hint}its labels: "
                             f"{', '.join(known)}); Alertmanager counts a label missing on both sides as equal, so "
                             f"this inhibition would reach across runs")


def severity_routes(config: Config) -> list[tuple[Severity, str]]:
    info = CHANNEL if config.section(AlertmanagerSection).info_to_channel else NOWHERE
    return [(Severity.CRITICAL, PAGE), (Severity.WARNING, CHANNEL), (Severity.INFO, info)]


def alertmanager_config(config: Config, inhibitions: tuple[StatedInhibition, ...]) -> dict[str, Any]:
    """The routes, inhibit rules and receivers, as Alertmanager's config holds them."""
    alertmanager, act = config.section(AlertmanagerSection), config.section(ActSection)
    routes = []
    if act.address and act.actions:
        # `continue`: the alerts dashgen act handles still page or post to the channel as well.
        routes.append({"receiver": ACT, "matchers": [_any_of(sorted(act.actions))], "continue": True})
    routes += [{"receiver": receiver, "matchers": [f'severity="{severity.value}"']}
               for severity, receiver in severity_routes(config)]
    receivers = [{"name": NOWHERE},
                 {"name": PAGE, **alertmanager.page},
                 {"name": CHANNEL, **alertmanager.channel}]
    if act.address:
        receivers.append({"name": ACT, "webhook_configs": [{
            "url": f"http://{act.address}{ACT_PATH}",
            "send_resolved": True,
            "http_config": {"authorization": {"type": "Bearer", "credentials_file": act.token_file}},
        }]})
    label = metric_source(config).label  # the run's labels as the metric source names them
    return {
        "route": {
            "receiver": NOWHERE,
            "group_by": [label(name) for name in RUN_LABELS],
            "group_wait": alertmanager.group_wait,
            "group_interval": alertmanager.group_interval,
            "repeat_interval": alertmanager.repeat_interval,
            "routes": routes,
        },
        "inhibit_rules": [{
            "source_matchers": [f'alertname="{stated.inhibition.source}"'],
            "target_matchers": [_any_of(stated.inhibition.targets)],
            "equal": [label(name) for name in stated.inhibition.equal],
        } for stated in inhibitions],
        "receivers": receivers,
    }


def _any_of(alert_names) -> str:
    names = list(alert_names)
    return f'alertname="{names[0]}"' if len(names) == 1 else f'alertname=~"{"|".join(names)}"'


def check_routing_config(config: Config, alert_names: set[str]) -> None:
    """What the config's schema cannot know: receivers as Alertmanager reads them, secrets, alert names."""
    alertmanager, act = config.section(AlertmanagerSection), config.section(ActSection)
    for name in ("page", "channel"):
        check_receiver(f"alertmanager.{name}", getattr(alertmanager, name))
    if act.address and not act.token_file:
        raise BuildError("config: act.token_file is empty; Alertmanager needs the token file to reach dashgen act")
    for name in sorted(act.actions):
        check_alert_name(name, alert_names, f"{config.config_file or 'config'}: act.actions")
