"""Alertmanager configuration as code: routing by severity, grouping by run, inhibition.

`rendered/alertmanager/alertmanager.yml` comes from the config (receivers, intervals, which
alerts go to `dashgen act`) and from the inhibitions that alert modules state next to their
alerts (`inhibitions(config)` in alerts/*.py). The rendered prometheus.yml's `alerting:` block
and the runbook's "Routing and inhibition" section come from the same definitions. Routing
fixtures (tests/alertmanager/*.yaml) are checked with `amtool config routes test`.
"""

from __future__ import annotations

import json
import re
from dataclasses import field
from pathlib import Path
from typing import Mapping

import yaml

from dashgen.compiler.block_yaml import indented_yaml
from dashgen.compiler.loader import DefinitionModule, call_definition
from dashgen.compiler.promql import label_value
from dashgen.compiler.references import check_alert_name
from dashgen.compiler.rendering import runbook_anchor, templates
from dashgen.compiler.targets.receivers import check_receiver
from dashgen.config import Config
from dashgen.errors import BuildError, get_close_matches
from dashgen.model import EXPORTER_LABELS, RUN_LABELS, Alert, Inhibition, Severity
from dashgen.records import record
from dashgen.sources.chosen import metric_source

ALERTMANAGER_FILE = "alertmanager/alertmanager.yml"
ROUTE_FIXTURES = Path("tests") / "alertmanager"
ACT_PATH = "/alerts"

# Receiver names, as notifications and routing fixtures show them.
NOWHERE, PAGE, CHANNEL, ACT = "nowhere", "page", "channel", "dashgen-act"

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


@record(frozen=False)
class AlertingOutput:
    """Alertmanager's files, the runbook's routing section and prometheus.yml's alerting block."""

    files: dict[str, str] = field(default_factory=dict)
    runbook_section: str = ""
    prometheus_alerting: str = ""  # the `alerting:` block of prometheus.yml
    inhibitions: list[tuple[str, Inhibition]] = field(default_factory=list)  # (module path, inhibition)


def render_alerting(alert_modules: list[DefinitionModule], config: Config, alerts: list[Alert],
                    alert_labels: Mapping[str, frozenset[str]]) -> AlertingOutput:
    """`alert_labels`: the labels each alert's notifications carry (RulesOutput.alert_labels)."""
    names = {alert.name for alert in alerts}
    inhibitions = collect_inhibitions(alert_modules, config, alert_labels)
    _check_config(config, names)
    out = AlertingOutput(inhibitions=inhibitions)
    header = ("# Rendered by `dashgen build` from dashgen/config.py and the inhibitions in alerts/*.py; do not edit.\n"
              "# Run: prometheus-alertmanager --config.file=rendered/alertmanager/alertmanager.yml\n"
              "# Receivers `page` and `channel` deliver nothing until the config's alertmanager_page and\n"
              "# alertmanager_channel say where (secrets only through *_file fields).\n")
    out.files[ALERTMANAGER_FILE] = header + indented_yaml(alertmanager_config(config, inhibitions))
    out.prometheus_alerting = indented_yaml(
        {"alerting": {"alertmanagers": [{"static_configs": [{"targets": [config.alertmanager_address]}]}]}})
    out.runbook_section = templates().get_template("alerts-routing.md.j2").render(
        config=config, routes=severity_routes(config), act_alerts=sorted(config.act_actions),
        inhibitions=[{"module": module, "inhibition": inhibition} for module, inhibition in inhibitions],
        anchor=runbook_anchor)
    return out


def collect_inhibitions(alert_modules: list[DefinitionModule], config: Config,
                        alert_labels: Mapping[str, frozenset[str]]) -> list[tuple[str, Inhibition]]:
    """Every module's `inhibitions(config)`, checked: each names known alerts, each source once, and
    holds back only alerts of the source's own run (see _check_equal)."""
    found: list[tuple[str, Inhibition]] = []
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
            found.append((module, inhibition))
    return found


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
    info = CHANNEL if config.alertmanager_info_to_channel else NOWHERE
    return [(Severity.CRITICAL, PAGE), (Severity.WARNING, CHANNEL), (Severity.INFO, info)]


def alertmanager_config(config: Config, inhibitions: list[tuple[str, Inhibition]]) -> dict:
    routes = []
    if config.act_address and config.act_actions:
        # `continue`: the alerts dashgen act handles still page or post to the channel as well.
        routes.append({"receiver": ACT, "matchers": [_any_of(sorted(config.act_actions))], "continue": True})
    routes += [{"receiver": receiver, "matchers": [f'severity="{severity.value}"']}
               for severity, receiver in severity_routes(config)]
    receivers = [{"name": NOWHERE},
                 {"name": PAGE, **config.alertmanager_page},
                 {"name": CHANNEL, **config.alertmanager_channel}]
    if config.act_address:
        receivers.append({"name": ACT, "webhook_configs": [{
            "url": f"http://{config.act_address}{ACT_PATH}",
            "send_resolved": True,
            "http_config": {"authorization": {"type": "Bearer", "credentials_file": config.act_token_file}},
        }]})
    label = metric_source(config).label  # the run's labels as the metric source names them
    return {
        "route": {
            "receiver": NOWHERE,
            "group_by": [label(name) for name in RUN_LABELS],
            "group_wait": config.alertmanager_group_wait,
            "group_interval": config.alertmanager_group_interval,
            "repeat_interval": config.alertmanager_repeat_interval,
            "routes": routes,
        },
        "inhibit_rules": [{
            "source_matchers": [f'alertname="{inhibition.source}"'],
            "target_matchers": [_any_of(inhibition.targets)],
            "equal": [label(name) for name in inhibition.equal],
        } for _, inhibition in inhibitions],
        "receivers": receivers,
    }


def _any_of(alert_names) -> str:
    names = list(alert_names)
    return f'alertname="{names[0]}"' if len(names) == 1 else f'alertname=~"{"|".join(names)}"'


def _check_config(config: Config, alert_names: set[str]) -> None:
    """What the config's schema cannot know: receivers as Alertmanager reads them, secrets, alert names."""
    for name in ("alertmanager_page", "alertmanager_channel"):
        check_receiver(name, getattr(config, name))
    if config.act_address and not config.act_token_file:
        raise BuildError("config: act_token_file is empty; Alertmanager needs the token file to reach dashgen act")
    for name in sorted(config.act_actions):
        check_alert_name(name, alert_names, f"{config.config_file or 'config'}: act_actions")


# --- Routing fixtures ---------------------------------------------------------------------------

def run_route_fixtures(root: Path) -> tuple[bool, str]:
    """Each fixture case's labels through `amtool config routes test`; (all passed, report)."""
    files = sorted((root / ROUTE_FIXTURES).glob("*.yaml"))
    if not files:
        return True, ""
    lines, passed = [], True
    for path in files:
        shown = path.relative_to(root).as_posix()
        config_file, cases = _read_fixture(path, shown)
        lines.append(f"Routing {shown}")
        for case in cases:
            resolved = route(config_file, case["labels"], f"{shown}: {case['name']}")
            if sorted(resolved) == sorted(case["receivers"]):
                lines.append(f"  PASS    {case['name']}")
            else:
                passed = False
                lines.append(f"  FAILED  {case['name']}: {_labels_text(case['labels'])} goes to "
                             f"{', '.join(resolved) or 'no receiver'}; expected {', '.join(case['receivers'])}")
    lines.append("SUCCESS" if passed else "FAILED")
    return passed, "\n".join(lines) + "\n"


def route(config_file: Path, labels: dict[str, str], where: str) -> list[str]:
    """The receivers Alertmanager's routing tree sends `labels` to, as amtool resolves them."""
    from dashgen.promtool import run_tool  # subprocess, for `dashgen test` only

    args = [f"{name}={json.dumps(value)}" for name, value in sorted(labels.items())]
    result = run_tool("amtool", ["config", "routes", "test", f"--config.file={config_file}", *args], timeout=60)
    if result.returncode != 0:
        raise BuildError(f"{where}: amtool config routes test failed:\n{result.stdout}{result.stderr}".rstrip())
    first = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
    return [name for name in first.split(",") if name]


def _read_fixture(path: Path, shown: str) -> tuple[Path, list[dict]]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BuildError(f"{shown}: cannot read routing fixtures: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("config_file"), str) \
            or not isinstance(data.get("tests"), list):
        raise BuildError(f"{shown}: expected config_file: PATH and tests: [{{name, labels, receivers}}, ...]")
    config_file = (path.parent / data["config_file"]).resolve()
    if not config_file.is_file():
        raise BuildError(f"{shown}: config_file {data['config_file']} does not exist; run `dashgen build` first")
    for index, case in enumerate(data["tests"]):
        ok = (isinstance(case, dict) and isinstance(case.get("name"), str)
              and isinstance(case.get("labels"), dict)
              and all(isinstance(k, str) and _LABEL_NAME.fullmatch(k) and isinstance(v, str)
                      for k, v in case["labels"].items())
              and isinstance(case.get("receivers"), list) and all(isinstance(r, str) for r in case["receivers"]))
        if not ok:
            raise BuildError(f"{shown}: test {index + 1} needs name: TEXT, labels: {{label: 'value'}} and "
                             f"receivers: [NAME, ...]")
    return config_file, data["tests"]


def _labels_text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={label_value(v)}" for k, v in sorted(labels.items())) + "}"
