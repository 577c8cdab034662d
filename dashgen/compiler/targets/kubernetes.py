"""rendered/kubernetes/: the same rules, dashboards and routing as objects of the Prometheus Operator.

Rendered only when the config says `kubernetes: true`, from the files the build has already
rendered (so the objects hold exactly what rendered/rules/ and rendered/dashboards/ hold):

- prometheus-rules/<module>.yaml: a PrometheusRule per rule file;
- dashboards/<uid>.yaml: a ConfigMap per dashboard, labelled for Grafana's dashboard sidecar;
- monitors/verl-exporter.yaml (PodMonitor or ServiceMonitor; under `source: rl_insight`,
  monitors/rl-insight-hub.yaml, a PodMonitor for the hub on KubeRay's head pod) and
  monitors/ray.yaml (PodMonitor for KubeRay's pods), each setting the target's `job` to the
  config's job name;
- alertmanager-config.yaml: an AlertmanagerConfig with the routes, receivers and inhibitions.

Every object is checked against the vendored schemas (dashgen/compiler/targets/kubernetes_schemas.py).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import TYPE_CHECKING, Any

from dashgen.compiler.block_yaml import rule_yaml
from dashgen.compiler.compiled import CompiledDashboard, RuleFile
from dashgen.compiler.receivers import url_secret
from dashgen.compiler.routing import ACT, CHANNEL, NOWHERE, PAGE
from dashgen.compiler.targets.grafana import dashboard_path, dashboard_to_text
from dashgen.compiler.targets.kubernetes_schemas import check_object, object_name, receiver_schema
from dashgen.compiler.targets.prometheus import rule_file_model
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.records import record
from dashgen.sources.chosen import metric_source
from dashgen.sources.metric_source import MetricSource

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject

KUBERNETES_DIR = "kubernetes"
MONITORING_API = "monitoring.coreos.com/v1"
ALERTMANAGER_CONFIG_API = "monitoring.coreos.com/v1alpha1"
# KubeRay labels every Ray pod it creates with this (head and workers alike).
KUBERAY_POD_LABELS = {"ray.io/is-ray-node": "yes"}
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"(.*)"')


@record
class KubernetesObject:
    """One object, the file it is written to under rendered/, and what it was made from."""

    path: str
    source: str
    body: dict[str, Any]

    def text(self) -> str:
        header = f"# Rendered by `dashgen build` from {self.source}; do not edit.\n"
        return header + rule_yaml(self.body)


def render_kubernetes(project: CompiledProject) -> dict[str, str]:
    """The files of rendered/kubernetes/ (path under rendered/ -> text); none unless config.kubernetes."""
    config = project.config
    if not config.kubernetes:
        return {}
    objects = [*_prometheus_rules(config, project.rules.files), *_dashboard_config_maps(config, project.dashboards),
               _verl_monitor(config), *([_ray_monitor(config)] if config.kubernetes_ray_monitor else []),
               _alertmanager_config(config, project.routing)]
    names: dict[tuple[str, str], str] = {}
    rendered = {}
    for obj in objects:
        where = f"rendered/{obj.path}"
        key = (obj.body["kind"], obj.body["metadata"]["name"])
        if key in names:
            raise BuildError(f"{obj.source}: the {key[0]} name {key[1]!r} is also {names[key]}'s; "
                             f"rename one of them")
        names[key] = obj.source
        check_object(obj.body, where)
        rendered[obj.path] = obj.text()
    return rendered


def _metadata(config: Config, name: str, labels: dict[str, str] | None = None,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": config.kubernetes_namespace}
    all_labels = {**config.kubernetes_labels, **(labels or {})}
    if all_labels:
        metadata["labels"] = dict(sorted(all_labels.items()))
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def _name(config: Config, suffix: str, source: str) -> str:
    return object_name(f"{config.kubernetes_name_prefix}-{suffix}", source)


def _prometheus_rules(config: Config, rule_files: tuple[RuleFile, ...]) -> list[KubernetesObject]:
    objects = []
    for rule_file in sorted(rule_files, key=lambda rule_file: rule_file.path):
        stem = rule_file.name
        source = f"alerts/{stem}.py"
        groups = rule_file_model(rule_file, config)["groups"]
        for group in groups:
            for rule in group["rules"]:
                if "alert" in rule:
                    # The Operator's AlertmanagerConfig routes only alerts of its own namespace.
                    rule["labels"] = {**rule.get("labels", {}), "namespace": config.kubernetes_namespace}
        objects.append(KubernetesObject(
            f"{KUBERNETES_DIR}/prometheus-rules/{stem}.yaml", f"{source} (rendered/{rule_file.path})",
            {"apiVersion": MONITORING_API, "kind": "PrometheusRule",
             "metadata": _metadata(config, _name(config, stem, source)), "spec": {"groups": groups}}))
    return objects


def _dashboard_config_maps(config: Config, dashboards: tuple[CompiledDashboard, ...]) -> list[KubernetesObject]:
    objects = []
    for dashboard in sorted(dashboards, key=lambda dashboard: dashboard.uid):
        source = f"{dashboard.module}: dashboard uid {dashboard.uid!r}"
        objects.append(KubernetesObject(
            f"{KUBERNETES_DIR}/dashboards/{dashboard.uid}.yaml",
            f"{dashboard.module} (rendered/{dashboard_path(dashboard.uid)})",
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": _metadata(config, _name(config, f"dashboard-{dashboard.uid}", source),
                                   {config.kubernetes_dashboard_label: config.kubernetes_dashboard_label_value},
                                   {config.kubernetes_dashboard_folder_annotation: config.grafana_folder}),
             "data": {f"{dashboard.uid}.json": dashboard_to_text(dashboard.model)}}))
    return objects


def _endpoint(port: str | int, interval: str, job: str) -> dict[str, Any]:
    """A scrape endpoint, at a port named (str) or numbered (int), whose targets get `job` as their
    job label (the Operator's default job is the monitor's or service's name, which the rules'
    selectors would not match)."""
    return {"portNumber" if isinstance(port, int) else "port": port, "path": "/metrics", "interval": interval,
            "relabelings": [{"action": "replace", "targetLabel": "job", "replacement": job}]}


def _verl_monitor(config: Config) -> KubernetesObject:
    """The monitor of what serves the verl job's series: `dashgen export`, or the source's own pods."""
    source = metric_source(config)
    return _exporter_monitor(config) if source.is_catalog else _source_monitor(config, source)


def _source_monitor(config: Config, source: MetricSource) -> KubernetesObject:
    """A PodMonitor for the pods of a source that is not dashgen's exporter (RL-Insight's hub on
    KubeRay's head pod), at exporter_address's port; the kubernetes_exporter_* fields name an
    exporter's pods, so one set away from its default is refused rather than left unread."""
    defaults = Config()
    for name in ("kubernetes_exporter_monitor", "kubernetes_exporter_selector", "kubernetes_exporter_port"):
        if getattr(config, name) != getattr(defaults, name):
            raise BuildError(
                f"config: {name} is set, but it names `dashgen export`'s pods, and with source: {source.name} there "
                f"is no exporter: the build renders a PodMonitor for {source.title} on the pods labelled "
                f"{_labels_text(source.pod_labels)}, at exporter_address's port ({config.exporter_address}). Remove "
                f"{name}; for a hub elsewhere, set kubernetes_exporter_* back and scrape it with a monitor of your own "
                f"whose job label is verl_job ({config.verl_job!r})")
    port = int(config.exporter_address.rsplit(":", 1)[1])
    suffix = f"{source.name.replace('_', '-')}-hub"
    return KubernetesObject(
        f"{KUBERNETES_DIR}/monitors/{suffix}.yaml", f"dashgen/sources/{source.name}.py and config: exporter_address",
        {"apiVersion": MONITORING_API, "kind": "PodMonitor",
         "metadata": _metadata(config, _name(config, suffix, "config: kubernetes_name_prefix")),
         "spec": {"selector": {"matchLabels": dict(sorted(source.pod_labels.items()))},
                  "namespaceSelector": {"any": True},
                  "podMetricsEndpoints": [_endpoint(port, config.scrape_interval, config.verl_job)]}})


def _labels_text(labels: dict[str, str]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in sorted(labels.items()))


def _exporter_monitor(config: Config) -> KubernetesObject:
    kind = config.kubernetes_exporter_monitor
    endpoints = "podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"
    return KubernetesObject(
        f"{KUBERNETES_DIR}/monitors/verl-exporter.yaml", "dashgen/config.py (kubernetes_exporter_*)",
        {"apiVersion": MONITORING_API, "kind": kind,
         "metadata": _metadata(config, _name(config, "verl-exporter", "config: kubernetes_name_prefix")),
         "spec": {"selector": {"matchLabels": dict(sorted(config.kubernetes_exporter_selector.items()))},
                  "namespaceSelector": {"any": True},
                  endpoints: [_endpoint(config.kubernetes_exporter_port, config.scrape_interval, config.verl_job)]}})


def _ray_monitor(config: Config) -> KubernetesObject:
    return KubernetesObject(
        f"{KUBERNETES_DIR}/monitors/ray.yaml", "dashgen/config.py (kubernetes_ray_*)",
        {"apiVersion": MONITORING_API, "kind": "PodMonitor",
         "metadata": _metadata(config, _name(config, "ray", "config: kubernetes_name_prefix")),
         "spec": {"selector": {"matchLabels": KUBERAY_POD_LABELS},
                  "namespaceSelector": {"any": True},
                  "podMetricsEndpoints": [_endpoint(config.kubernetes_ray_port, config.scrape_interval,
                                                    config.ray_job)]}})


def _matcher(text: str) -> dict[str, str]:
    match = _MATCHER.fullmatch(text)
    if not match:
        raise BuildError(f"rendered/alertmanager/alertmanager.yml: matcher {text!r} has no AlertmanagerConfig "
                         f"form (name, matchType, value)")
    name, match_type, value = match.groups()
    return {"name": name, "matchType": match_type, "value": value}


def _alertmanager_config(config: Config, alertmanager: dict[str, Any]) -> KubernetesObject:
    """The native Alertmanager config's routing and inhibition, in the Operator's schema; the
    receivers from the kubernetes_* fields (the native ones read secrets from files, which an
    AlertmanagerConfig takes as Secret references instead)."""
    native = alertmanager["route"]
    act = bool(config.kubernetes_act_url)
    routes = [{"receiver": route["receiver"], "matchers": [_matcher(m) for m in route["matchers"]],
               **({"continue": True} if route.get("continue") else {})}
              for route in native["routes"] if route["receiver"] != ACT or act]
    if act and config.act_actions and not any(route["receiver"] == ACT for route in native["routes"]):
        raise BuildError("config: kubernetes_act_url is set but act_address is empty, so no alert is routed to "
                         "dashgen act; set act_address too, or leave kubernetes_act_url empty")
    for field in ("kubernetes_alertmanager_page", "kubernetes_alertmanager_channel"):
        _refuse_url_secrets(field, getattr(config, field), receiver_schema())
    if act and (leak := url_secret(urllib.parse.urlsplit(config.kubernetes_act_url))):
        raise BuildError(f"config: kubernetes_act_url has {leak}, and would go into {_COMMITTED}; dashgen act "
                         f"takes its bearer token from the Secret in kubernetes_act_token_secret: give the URL "
                         f"without it, e.g. http://dashgen-act.monitoring:9095/alerts")
    receivers: list[dict[str, Any]] = [{"name": NOWHERE}, {"name": PAGE, **config.kubernetes_alertmanager_page},
                                       {"name": CHANNEL, **config.kubernetes_alertmanager_channel}]
    if act:
        secret, key = config.kubernetes_act_token_secret
        receivers.append({"name": ACT, "webhookConfigs": [{
            "url": config.kubernetes_act_url, "sendResolved": True,
            "httpConfig": {"authorization": {"type": "Bearer", "credentials": {"name": secret, "key": key}}}}]})
    spec = {
        "route": {"receiver": native["receiver"], "groupBy": native["group_by"], "groupWait": native["group_wait"],
                  "groupInterval": native["group_interval"], "repeatInterval": native["repeat_interval"],
                  "routes": routes},
        "receivers": receivers,
        "inhibitRules": [{"sourceMatch": [_matcher(m) for m in rule["source_matchers"]],
                          "targetMatch": [_matcher(m) for m in rule["target_matchers"]],
                          "equal": rule["equal"]} for rule in alertmanager["inhibit_rules"]],
    }
    return KubernetesObject(
        f"{KUBERNETES_DIR}/alertmanager-config.yaml",
        "dashgen/config.py and the inhibitions in alerts/*.py (as rendered/alertmanager/alertmanager.yml)",
        {"apiVersion": ALERTMANAGER_CONFIG_API, "kind": "AlertmanagerConfig",
         "metadata": _metadata(config, _name(config, "routing", "config: kubernetes_name_prefix")), "spec": spec})


_COMMITTED = f"rendered/{KUBERNETES_DIR}/alertmanager-config.yaml, which is committed"


def _refuse_url_secrets(path: str, value: Any, schema: dict[str, Any], field: str = "",
                        siblings: dict[str, Any] | None = None) -> None:
    """BuildError for a URL in a receiver (at `path`) with credentials or a query string, pointing
    to the Secret reference the CRD's schema offers beside it (`urlSecret` beside `url`)."""
    if isinstance(value, str):
        try:
            leak = url_secret(urllib.parse.urlsplit(value)) if "://" in value else None
        except ValueError:
            leak = None  # not a URL; the schema check judges the value
        if leak:
            secret_field = f"{field}Secret"
            fix = (f"put the URL in a Secret and give {secret_field}: {{name: SECRET, key: KEY}} instead of {field}"
                   if secret_field in (siblings or {}) else
                   "put the credential in a Secret and send it with httpConfig's authorization.credentials or "
                   "basicAuth (Secret references: {name: SECRET, key: KEY})")
            raise BuildError(f"config: {path}: the URL has {leak}, and would go into {_COMMITTED}; {fix}")
    elif isinstance(value, dict):
        properties = schema.get("properties", {})
        for key, item in value.items():
            _refuse_url_secrets(f"{path}.{key}", item, properties.get(key, {}), key, properties)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_url_secrets(f"{path}[{index}]", item, schema.get("items", {}), field, siblings)
