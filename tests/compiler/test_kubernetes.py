"""rendered/kubernetes/: off by default; when on, every object fits the vendored Operator and
Kubernetes schemas, holds what rendered/ holds, and bad names or sizes are refused or converted."""

import re
from pathlib import Path

import pytest
import yaml

from dashgen.compiler.output.build import render_project
from dashgen.compiler.output.targets.kubernetes import KubernetesSection
from dashgen.compiler.output.targets.kubernetes_schemas import LAST_APPLIED_ANNOTATION_MAX, check_object, object_name, schema_problems
from dashgen.config import ConfigError, config_from
from dashgen.errors import BuildError

from conftest import REPO, run

KUBERNETES_ON = {"enabled": True, "act_url": "http://dashgen-act.monitoring:9095/alerts",
                 "alertmanager_page": {"pagerdutyConfigs": [{"routingKey": {"name": "pagerduty", "key": "key"}}]}}
ON = {"kubernetes": KUBERNETES_ON}


def kubernetes(**fields) -> dict:
    """A config mapping of the kubernetes section ON with `fields` set in it."""
    return {"kubernetes": {**KUBERNETES_ON, **fields}}


@pytest.fixture(scope="module")
def kubernetes_files() -> dict[str, str]:
    files = render_project(REPO, config_from(ON)).files
    return {rel: text for rel, text in files.items() if rel.startswith("kubernetes/")}


def test_the_default_config_renders_nothing_for_kubernetes():
    assert not [rel for rel in render_project(REPO, config_from({})).files if rel.startswith("kubernetes/")]


def test_every_rendered_object_fits_its_schema(kubernetes_files):
    kinds = {}
    for rel, text in kubernetes_files.items():
        obj = yaml.safe_load(text)
        assert schema_problems(obj) == [], rel
        kinds.setdefault(obj["kind"], []).append(rel)
    rule_files = sorted(p.stem for p in (REPO / "rendered" / "rules").glob("*.yaml"))
    assert sorted(Path(rel).stem for rel in kinds["PrometheusRule"]) == rule_files
    dashboards = sorted(f"kubernetes/dashboards/{p.stem}.yaml" for p in (REPO / "rendered" / "dashboards").glob("*.json"))
    assert sorted(kinds["ConfigMap"]) == dashboards
    assert sorted(kinds["PodMonitor"]) == ["kubernetes/monitors/ray.yaml", "kubernetes/monitors/verl-exporter.yaml"]
    assert kinds["AlertmanagerConfig"] == ["kubernetes/alertmanager-config.yaml"]


def test_objects_hold_what_rendered_holds(kubernetes_files):
    config_map = yaml.safe_load(kubernetes_files["kubernetes/dashboards/verl-training.yaml"])
    assert config_map["data"]["verl-training.json"] == (REPO / "rendered/dashboards/verl-training.json").read_text()
    assert config_map["metadata"]["labels"] == {"grafana_dashboard": "1", "release": "kube-prometheus-stack"}
    assert config_map["metadata"]["annotations"] == {"grafana_folder": "verl"}
    rule = yaml.safe_load(kubernetes_files["kubernetes/prometheus-rules/stability.yaml"])
    native = yaml.safe_load((REPO / "rendered/rules/stability.yaml").read_text())["groups"]
    for group in rule["spec"]["groups"]:
        for item in group["rules"]:
            if "alert" in item:
                assert item["labels"].pop("namespace") == "monitoring"
    assert rule["spec"]["groups"] == native
    monitor = yaml.safe_load(kubernetes_files["kubernetes/monitors/verl-exporter.yaml"])
    assert monitor["spec"]["podMetricsEndpoints"][0]["relabelings"] == [
        {"action": "replace", "targetLabel": "job", "replacement": "verl"}]


def test_the_service_monitor_variant_fits_its_schema():
    files = render_project(REPO, config_from(kubernetes(exporter_monitor="ServiceMonitor"))).files
    monitor = yaml.safe_load(files["kubernetes/monitors/verl-exporter.yaml"])
    assert monitor["kind"] == "ServiceMonitor" and schema_problems(monitor) == []


def test_a_schema_violation_names_the_file_and_the_path():
    obj = {"apiVersion": "monitoring.coreos.com/v1alpha1", "kind": "AlertmanagerConfig",
           "metadata": {"name": "x", "namespace": "monitoring"},
           "spec": {"route": {"receiver": "r", "routes": [{"matchers": [{"name": "a", "matchType": "=="}]}]}}}
    with pytest.raises(BuildError, match=r"(?s)rendered/kubernetes/x.yaml: .*spec\.route\.routes\[0\]\.matchers\.0"
                                         r"\.matchType: '==' is not one of"):
        check_object(obj, "rendered/kubernetes/x.yaml")


def test_a_config_map_too_large_for_client_side_apply_suggests_server_side_apply():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "monitoring"},
           "data": {"big.json": "x" * LAST_APPLIED_ANNOTATION_MAX}}
    with pytest.raises(BuildError, match=r"rendered/kubernetes/dashboards/big.yaml: .* --server-side"):
        check_object(obj, "rendered/kubernetes/dashboards/big.yaml")


def test_the_size_check_counts_what_kubectl_stores_escaped():
    """kubectl writes the annotation with Go's encoding/json: each '>' (PromQL's comparisons) is
    stored as \\u003e, six bytes, and the annotation's key and the object's own annotations count."""
    overhead = len("kubectl.kubernetes.io/last-applied-configuration") + len('{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big",'
                                                  '"namespace":"monitoring"},"data":{"big.json":""}}\n')
    raw = "x>" * ((LAST_APPLIED_ANNOTATION_MAX - overhead) // 2)  # fits unescaped, not as stored
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "monitoring"},
           "data": {"big.json": raw}}
    with pytest.raises(BuildError, match=r"big.yaml: the ConfigMap takes 917,\d{3} bytes of annotations .* --server-side"):
        check_object(obj, "rendered/kubernetes/dashboards/big.yaml")
    obj["data"]["big.json"] = "x" * len(raw)  # the same bytes without escapes fit
    check_object(obj, "rendered/kubernetes/dashboards/big.yaml")
    obj["data"]["big.json"] = "x" * (len(raw) + 2)  # one byte over the limit
    with pytest.raises(BuildError, match="more than the 262,144 bytes"):
        check_object(obj, "rendered/kubernetes/dashboards/big.yaml")


@pytest.mark.parametrize("fields, expected", [
    ({"labels": {".".join(["a" * 63] * 4) + "/name": "x"}}, "kubernetes.labels key: 'aaa"),  # prefix over 253
    # A part of the prefix over a DNS label's 63 (a 100-character one was accepted).
    ({"labels": {"a" * 100 + ".example.com/name": "x"}}, "kubernetes.labels key: 'aaa"),
    ({"dashboard_label": "example." + "b" * 64 + "/dashboard"}, "kubernetes.dashboard_label: 'example.bbb"),
    ({"exporter_selector": {"example.com/" + "n" * 64: "x"}}, "kubernetes.exporter_selector key"),
    ({"dashboard_label": "-grafana"}, "kubernetes.dashboard_label: '-grafana'"),
    ({"exporter_port": "exporter-metrics"}, "kubernetes.exporter_port: 'exporter-metrics'"),  # 16
    ({"ray_port": "8080"}, "kubernetes.ray_port: '8080'"),  # no letter
    ({"ray_port": "ray--metrics"}, "kubernetes.ray_port: 'ray--metrics'"),
    ({"ray_port": "metrics-"}, "kubernetes.ray_port: 'metrics-'"),
    ({"ray_port": "Metrics"}, "kubernetes.ray_port: 'Metrics'"),
])
def test_label_keys_and_port_names_beyond_kubernetes_limits_are_refused(fields, expected):
    with pytest.raises(ConfigError, match="^" + re.escape(expected) + ".*is not valid here"):
        config_from({"kubernetes": fields}).section(KubernetesSection)


def test_label_keys_and_port_names_at_kubernetes_limits_are_accepted():
    prefix = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253, each part 63 at most
    config_from(kubernetes(labels={prefix + "/" + "n" * 63: "x"}, exporter_port="exporter-metric",
                           ray_port="h2c")).section(KubernetesSection)


@pytest.mark.parametrize("fields, expected", [
    ({"alertmanager_page": {"webhookConfigs": [{"url": "https://bot:hunter2@hooks.example.org/verl"}]}},
     r"kubernetes.alertmanager_page.webhookConfigs\[0\].url: the URL has credentials .* give urlSecret: "
     r"\{name: SECRET, key: KEY\} instead of url"),
    ({"alertmanager_channel": {"webhookConfigs": [{"url": "https://hooks.example.org/v?token=abc"}]}},
     r"kubernetes.alertmanager_channel.webhookConfigs\[0\].url: the URL has a query string, .* give urlSecret"),
    ({"alertmanager_channel": {"slackConfigs": [{"apiURL": {"name": "slack", "key": "url"},
                                                 "httpConfig": {"proxyURL": "http://u:p@proxy:3128"}}]}},
     r"kubernetes.alertmanager_channel.slackConfigs\[0\].httpConfig.proxyURL: the URL has credentials .*\(Secret references"),
    ({"act_url": "http://dashgen-act.monitoring:9095/alerts?token=abc"},
     r"kubernetes.act_url has a query string, .* kubernetes.act_token_secret"),
    ({"act_url": "http://act:s3cret@dashgen-act.monitoring:9095/alerts"},
     r"kubernetes.act_url has credentials .* kubernetes.act_token_secret"),
])
def test_secrets_in_receiver_urls_never_reach_the_committed_alertmanager_config(fields, expected):
    with pytest.raises(BuildError, match=r"^config: " + expected) as error:
        render_project(REPO, config_from(kubernetes(**fields)))
    assert "rendered/kubernetes/alertmanager-config.yaml, which is committed" in str(error.value)
    assert "hunter2" not in str(error.value)


def test_names_are_converted_to_dns_1123_or_refused_naming_the_source():
    assert object_name("dashgen-dashboard-Verl_Training Board", "x") == "dashgen-dashboard-verl-training-board"
    with pytest.raises(BuildError, match=r"panels/x.py: dashboard uid '__': '__' cannot be made a Kubernetes name"):
        object_name("__", "panels/x.py: dashboard uid '__'")
    with pytest.raises(ConfigError, match=r"^kubernetes.namespace: 'Monitoring' is not valid here"):
        config_from(kubernetes(namespace="Monitoring")).section(KubernetesSection)
    with pytest.raises(ConfigError, match=r"^kubernetes.labels key: 'bad key' is not valid here"):
        config_from(kubernetes(labels={"bad key": "x"})).section(KubernetesSection)


@pytest.mark.heavy
def test_dashgen_check_covers_the_kubernetes_files(project, tmp_path):
    config = tmp_path / "k8s.yaml"
    config.write_text(yaml.safe_dump(ON))
    assert run("build", "--root", str(project), "--config", str(config)).exit_code == 0
    assert (project / "rendered/kubernetes/alertmanager-config.yaml").is_file()
    assert run("check", "--root", str(project), "--config", str(config)).exit_code == 0
    (project / "rendered/kubernetes/monitors/ray.yaml").write_text("edited\n")
    result = run("check", "--root", str(project), "--config", str(config))
    assert result.exit_code == 1 and "rendered/kubernetes/monitors/ray.yaml: differs from its sources" in result.output


def test_the_docs_example_config_renders_valid_objects():
    import re

    page = (REPO / "docs/deploy-kubernetes.md").read_text()
    block = re.search(r"```yaml\n# dashgen.yaml\n(.*?)```", page, re.S).group(1)
    files = render_project(REPO, config_from(yaml.safe_load(block))).files
    objects = [yaml.safe_load(text) for rel, text in files.items() if rel.startswith("kubernetes/")]
    # A rule per rule file, a ConfigMap per dashboard, two monitors, the AlertmanagerConfig.
    rendered = {rel.split("/")[0] for rel in files}
    expected = sum(1 for rel in files if rel.startswith(("rules/", "dashboards/"))) + 3
    assert "kubernetes" in rendered and len(objects) == expected
    assert all(schema_problems(obj) == [] for obj in objects)


def test_the_docs_say_which_grafana_chart_values_make_the_folder_annotation_work(kubernetes_files):
    """The sidecar reads the folder annotation only where the chart names it: docs/deploy-kubernetes.md's
    Helm values name the annotation the ConfigMaps carry, and have Grafana build folders from it."""
    import re

    page = (REPO / "docs/deploy-kubernetes.md").read_text()
    block = re.search(r"```yaml\n(grafana:\n.*?)```", page, re.S).group(1)
    dashboards = yaml.safe_load(block)["grafana"]["sidecar"]["dashboards"]
    config_map = yaml.safe_load(kubernetes_files["kubernetes/dashboards/verl-training.yaml"])
    assert list(config_map["metadata"]["annotations"]) == [dashboards["folderAnnotation"]]
    assert dashboards["provider"]["foldersFromFilesStructure"] is True


def test_under_rl_insight_the_monitor_is_for_the_hub_not_for_an_exporter():
    """Issue 38: the build rendered a monitor for dashgen's exporter, which this source does not run."""
    config = config_from({**ON, "source": "rl_insight", "exporter_address": "ray-head:9092"})
    files = render_project(REPO, config).files
    monitors = sorted(rel for rel in files if rel.startswith("kubernetes/monitors/"))
    assert monitors == ["kubernetes/monitors/ray.yaml", "kubernetes/monitors/rl-insight-hub.yaml"]
    hub = yaml.safe_load(files["kubernetes/monitors/rl-insight-hub.yaml"])
    assert schema_problems(hub) == []
    assert hub["kind"] == "PodMonitor" and hub["spec"]["selector"] == {"matchLabels": {"ray.io/node-type": "head"}}
    assert hub["spec"]["podMetricsEndpoints"] == [{
        "portNumber": 9092, "path": "/metrics", "interval": config.scrape_interval,
        "relabelings": [{"action": "replace", "targetLabel": "job", "replacement": config.verl_job}]}]


@pytest.mark.parametrize("field, value", [("kubernetes.exporter_selector", {"app": "hub"}),
                                          ("kubernetes.exporter_port", "hub"),
                                          ("kubernetes.exporter_monitor", "ServiceMonitor")])
def test_under_rl_insight_an_exporter_monitor_field_is_refused_not_left_unread(field, value):
    with pytest.raises(BuildError, match=f"config: {field} is set, but it names `dashgen export`'s pods, and with "
                                         f"source: rl_insight there is no exporter"):
        render_project(REPO, config_from({**kubernetes(**{field.removeprefix("kubernetes."): value}),
                                          "source": "rl_insight"}))
