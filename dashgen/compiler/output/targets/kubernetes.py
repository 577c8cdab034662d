"""rendered/kubernetes/: the same rules, dashboards and routing as objects of the Prometheus Operator.

Rendered only when the config says `kubernetes: {enabled: true}`, from the files the build has already
rendered (so the objects hold exactly what rendered/rules/ and rendered/dashboards/ hold):

- prometheus-rules/<module>.yaml: a PrometheusRule per rule file;
- dashboards/<uid>.yaml: a ConfigMap per dashboard, labelled for Grafana's dashboard sidecar;
- monitors/verl-exporter.yaml (PodMonitor or ServiceMonitor; under `source: rl_insight`,
  monitors/rl-insight-hub.yaml, a PodMonitor for the hub on KubeRay's head pod) and
  monitors/ray.yaml (PodMonitor for KubeRay's pods), each setting the target's `job` to the
  config's job name;
- alertmanager-config.yaml: an AlertmanagerConfig with the routes, receivers and inhibitions.

Every object is checked against the vendored schemas (dashgen/compiler/output/targets/kubernetes_schemas.py).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from dashgen.compiler.output.block_yaml import rule_yaml
from dashgen.compiler.compiled import CompiledDashboard, RuleFile
from dashgen.compiler.alerting.receivers import url_secret
from dashgen.compiler.alerting.routing import ACT, CHANNEL, NOWHERE, PAGE
from dashgen.compiler.output.targets.grafana import dashboard_path, dashboard_to_text
from dashgen.compiler.output.targets.kubernetes_schemas import check_object, object_name, receiver_schema
from dashgen.compiler.output.targets.prometheus import rule_file_model
from dashgen.config import Config, DnsLabel, LabelKey, LabelValue, Matches, PortName, Section
from dashgen.errors import BuildError
from dashgen.model import ActSection
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


@dataclass(frozen=True)
class KubernetesSection(Section, section="kubernetes"):
    """The config file's `kubernetes:` section: the Prometheus Operator's objects in rendered/kubernetes/."""

    # Whether to render rendered/kubernetes/ for the Prometheus Operator and Grafana's dashboard
    # sidecar: a PrometheusRule per rule file, a ConfigMap per dashboard, monitors for the exporter
    # and Ray, an AlertmanagerConfig; off, nothing is rendered there.
    enabled: bool = False
    # The namespace of every rendered object, which the alerts also carry as their `namespace`
    # label for the Operator's AlertmanagerConfig routes to match on.
    namespace: DnsLabel = "monitoring"
    # The labels on every rendered object, e.g. the `release` label by which kube-prometheus-stack's
    # Prometheus selects PrometheusRules and monitors (its Helm release name).
    labels: dict[LabelKey, LabelValue] = field(default_factory=lambda: {"release": "kube-prometheus-stack"})
    # The start of every rendered object's name (dashgen-verl-training, dashgen-stability, ...).
    name_prefix: DnsLabel = "dashgen"
    # The label Grafana's dashboard sidecar looks for on ConfigMaps (kube-prometheus-stack:
    # grafana_dashboard "1").
    dashboard_label: LabelKey = "grafana_dashboard"
    # The value of dashboard_label on the dashboards' ConfigMaps.
    dashboard_label_value: LabelValue = "1"
    # The annotation Grafana's dashboard sidecar reads each dashboard's folder from, which it does
    # only where the Grafana chart sets sidecar.dashboards.folderAnnotation to this name.
    dashboard_folder_annotation: LabelKey = "grafana_folder"
    # How the Operator finds `dashgen export`: a PodMonitor on pods labelled exporter_selector, or a
    # ServiceMonitor on services so labelled, with the target's job label set to verl_job (under
    # source: rl_insight, without an exporter, a PodMonitor for the hub is rendered instead, and
    # the exporter_* fields are refused).
    exporter_monitor: Literal["PodMonitor", "ServiceMonitor"] = "PodMonitor"
    # The labels of the exporter's pods (PodMonitor) or services (ServiceMonitor).
    exporter_selector: dict[LabelKey, LabelValue] = field(
        default_factory=lambda: {"app.kubernetes.io/name": "dashgen-exporter"})
    # The name of the exporter's port that its monitor scrapes.
    exporter_port: PortName = "metrics"
    # Whether to render a PodMonitor for KubeRay's head and worker pods (label ray.io/is-ray-node:
    # "yes"), their job label set to ray_job; off, Ray's metrics come from monitors of your own, and
    # ray_job must then be the job label those give them.
    ray_monitor: bool = True
    # The name of the Ray pods' metrics port that the Ray PodMonitor scrapes.
    ray_port: PortName = "metrics"
    # The `page` receiver of the AlertmanagerConfig, in the Operator's syntax, secrets as Secret
    # references: {"slackConfigs": [{"apiURL": {"name": "slack", "key": "url"}, "channel":
    # "#verl"}]}; empty, it delivers nothing.
    alertmanager_page: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The `channel` receiver of the AlertmanagerConfig, in the Operator's syntax of alertmanager_page.
    alertmanager_channel: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Where Alertmanager reaches `dashgen act` in the cluster, e.g.
    # http://dashgen-act.monitoring:9095/alerts; empty, the AlertmanagerConfig has no act receiver.
    act_url: Annotated[str, Matches(r"(https?://\S+)?", "http://dashgen-act.monitoring:9095/alerts")] = ""
    # The Secret (name, key) holding the bearer token Alertmanager sends to `dashgen act`.
    act_token_secret: tuple[DnsLabel, Annotated[str, Matches(r"[-._a-zA-Z0-9]+", "token")]] = \
        ("dashgen-act-token", "token")


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
    """The files of rendered/kubernetes/ (path under rendered/ -> text); none unless kubernetes.enabled."""
    config = project.config
    kubernetes = config.section(KubernetesSection)
    if not kubernetes.enabled:
        return {}
    objects = [*_prometheus_rules(config, project.rules.files, project.alert_panels), *_dashboard_config_maps(config, project.dashboards),
               _verl_monitor(config), *([_ray_monitor(config)] if kubernetes.ray_monitor else []),
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
    kubernetes = config.section(KubernetesSection)
    metadata: dict[str, Any] = {"name": name, "namespace": kubernetes.namespace}
    all_labels = {**kubernetes.labels, **(labels or {})}
    if all_labels:
        metadata["labels"] = dict(sorted(all_labels.items()))
    if annotations:
        metadata["annotations"] = annotations
    return metadata


def _name(config: Config, suffix: str, source: str) -> str:
    return object_name(f"{config.section(KubernetesSection).name_prefix}-{suffix}", source)


def _prometheus_rules(config: Config, rule_files: tuple[RuleFile, ...], panels) -> list[KubernetesObject]:
    objects = []
    for rule_file in sorted(rule_files, key=lambda rule_file: rule_file.path):
        stem = rule_file.name
        source = f"alerts/{stem}.py"
        groups = rule_file_model(rule_file, config, panels)["groups"]
        for group in groups:
            for rule in group["rules"]:
                if "alert" in rule:
                    # The Operator's AlertmanagerConfig routes only alerts of its own namespace.
                    rule["labels"] = {**rule.get("labels", {}),
                                      "namespace": config.section(KubernetesSection).namespace}
        objects.append(KubernetesObject(
            f"{KUBERNETES_DIR}/prometheus-rules/{stem}.yaml", f"{source} (rendered/{rule_file.path})",
            {"apiVersion": MONITORING_API, "kind": "PrometheusRule",
             "metadata": _metadata(config, _name(config, stem, source)), "spec": {"groups": groups}}))
    return objects


def _dashboard_config_maps(config: Config, dashboards: tuple[CompiledDashboard, ...]) -> list[KubernetesObject]:
    kubernetes = config.section(KubernetesSection)
    objects = []
    for dashboard in sorted(dashboards, key=lambda dashboard: dashboard.uid):
        source = f"{dashboard.module}: dashboard uid {dashboard.uid!r}"
        objects.append(KubernetesObject(
            f"{KUBERNETES_DIR}/dashboards/{dashboard.uid}.yaml",
            f"{dashboard.module} (rendered/{dashboard_path(dashboard.uid)})",
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": _metadata(config, _name(config, f"dashboard-{dashboard.uid}", source),
                                   {kubernetes.dashboard_label: kubernetes.dashboard_label_value},
                                   {kubernetes.dashboard_folder_annotation: config.grafana_folder}),
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
    KubeRay's head pod), at exporter_address's port; the kubernetes.exporter_* fields name an
    exporter's pods, so one set away from its default is refused rather than left unread."""
    defaults, kubernetes = KubernetesSection(), config.section(KubernetesSection)
    for name in ("exporter_monitor", "exporter_selector", "exporter_port"):
        if getattr(kubernetes, name) != getattr(defaults, name):
            raise BuildError(
                f"config: kubernetes.{name} is set, but it names `dashgen export`'s pods, and with source: "
                f"{source.name} there is no exporter: the build renders a PodMonitor for {source.title} on the pods "
                f"labelled {_labels_text(source.pod_labels)}, at exporter_address's port ({config.exporter_address}). Remove "
                f"it; for a hub elsewhere, set kubernetes.exporter_* back and scrape it with a monitor of your own "
                f"whose job label is verl_job ({config.verl_job!r})")
    port = int(config.exporter_address.rsplit(":", 1)[1])
    suffix = f"{source.name.replace('_', '-')}-hub"
    return KubernetesObject(
        f"{KUBERNETES_DIR}/monitors/{suffix}.yaml", f"dashgen/sources/{source.name}.py and config: exporter_address",
        {"apiVersion": MONITORING_API, "kind": "PodMonitor",
         "metadata": _metadata(config, _name(config, suffix, "config: kubernetes.name_prefix")),
         "spec": {"selector": {"matchLabels": dict(sorted(source.pod_labels.items()))},
                  "namespaceSelector": {"any": True},
                  "podMetricsEndpoints": [_endpoint(port, config.scrape_interval, config.verl_job)]}})


def _labels_text(labels: dict[str, str]) -> str:
    return ", ".join(f"{key}: {value}" for key, value in sorted(labels.items()))


def _exporter_monitor(config: Config) -> KubernetesObject:
    kubernetes = config.section(KubernetesSection)
    kind = kubernetes.exporter_monitor
    endpoints = "podMetricsEndpoints" if kind == "PodMonitor" else "endpoints"
    return KubernetesObject(
        f"{KUBERNETES_DIR}/monitors/verl-exporter.yaml", "dashgen/config.py (kubernetes_exporter_*)",
        {"apiVersion": MONITORING_API, "kind": kind,
         "metadata": _metadata(config, _name(config, "verl-exporter", "config: kubernetes.name_prefix")),
         "spec": {"selector": {"matchLabels": dict(sorted(kubernetes.exporter_selector.items()))},
                  "namespaceSelector": {"any": True},
                  endpoints: [_endpoint(kubernetes.exporter_port, config.scrape_interval, config.verl_job)]}})


def _ray_monitor(config: Config) -> KubernetesObject:
    return KubernetesObject(
        f"{KUBERNETES_DIR}/monitors/ray.yaml", "dashgen/config.py (kubernetes_ray_*)",
        {"apiVersion": MONITORING_API, "kind": "PodMonitor",
         "metadata": _metadata(config, _name(config, "ray", "config: kubernetes.name_prefix")),
         "spec": {"selector": {"matchLabels": KUBERAY_POD_LABELS},
                  "namespaceSelector": {"any": True},
                  "podMetricsEndpoints": [_endpoint(config.section(KubernetesSection).ray_port,
                                                    config.scrape_interval, config.ray_job)]}})


def _matcher(text: str) -> dict[str, str]:
    match = _MATCHER.fullmatch(text)
    if not match:
        raise BuildError(f"rendered/alertmanager/alertmanager.yml: matcher {text!r} has no AlertmanagerConfig "
                         f"form (name, matchType, value)")
    name, match_type, value = match.groups()
    return {"name": name, "matchType": match_type, "value": value}


def _alertmanager_config(config: Config, alertmanager: dict[str, Any]) -> KubernetesObject:
    """The native Alertmanager config's routing and inhibition, in the Operator's schema; the
    receivers from the kubernetes section (the native ones read secrets from files, which an
    AlertmanagerConfig takes as Secret references instead)."""
    native, kubernetes = alertmanager["route"], config.section(KubernetesSection)
    act = bool(kubernetes.act_url)
    routes = [{"receiver": route["receiver"], "matchers": [_matcher(m) for m in route["matchers"]],
               **({"continue": True} if route.get("continue") else {})}
              for route in native["routes"] if route["receiver"] != ACT or act]
    if act and config.section(ActSection).actions and not any(route["receiver"] == ACT for route in native["routes"]):
        raise BuildError("config: kubernetes.act_url is set but act.address is empty, so no alert is routed to "
                         "dashgen act; set act.address too, or leave kubernetes.act_url empty")
    for name in ("alertmanager_page", "alertmanager_channel"):
        _refuse_url_secrets(f"kubernetes.{name}", getattr(kubernetes, name), receiver_schema())
    if act and (leak := url_secret(urllib.parse.urlsplit(kubernetes.act_url))):
        raise BuildError(f"config: kubernetes.act_url has {leak}, and would go into {_COMMITTED}; dashgen act "
                         f"takes its bearer token from the Secret in kubernetes.act_token_secret: give the URL "
                         f"without it, e.g. http://dashgen-act.monitoring:9095/alerts")
    receivers: list[dict[str, Any]] = [{"name": NOWHERE}, {"name": PAGE, **kubernetes.alertmanager_page},
                                       {"name": CHANNEL, **kubernetes.alertmanager_channel}]
    if act:
        secret, key = kubernetes.act_token_secret
        receivers.append({"name": ACT, "webhookConfigs": [{
            "url": kubernetes.act_url, "sendResolved": True,
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
         "metadata": _metadata(config, _name(config, "routing", "config: kubernetes.name_prefix")), "spec": spec})


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
