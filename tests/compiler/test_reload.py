"""`dashgen build --reload URL`: a running Prometheus picks up the rebuilt rules at once."""

import json
import urllib.request
from pathlib import Path

import yaml

import pytest

from conftest import run
from dashgen.compiler.output.build import render_project
from dashgen.config import Config
from dashgen.replay.prometheus_server import PrometheusServer

pytestmark = pytest.mark.live


def rules_of(server: PrometheusServer) -> dict[str, str]:
    with urllib.request.urlopen(f"{server.url}/api/v1/rules", timeout=10) as response:
        groups = json.load(response)["data"]["groups"]
    return {rule["name"]: rule["query"] for group in groups for rule in group["rules"]}


def test_build_reload_makes_prometheus_read_the_new_rules(project: Path, tmp_path: Path):
    assert run("build", "--root", str(project)).exit_code == 0
    config_file = project / "rendered" / "prometheus" / "prometheus.yml"
    with PrometheusServer(config_file, tmp_path / "tsdb", ["--web.enable-lifecycle"]) as server:
        assert "> 0.1" in rules_of(server)["VerlKLSpike"]
        (project / "dashgen.yaml").write_text("stability: {kl_spike_threshold: 0.3}\n")
        result = run("build", "--root", str(project), "--reload", server.url)
        assert result.exit_code == 0, result.output
        assert f"reloaded Prometheus at {server.url}" in result.output
        assert "> 0.3" in rules_of(server)["VerlKLSpike"]


def test_reload_without_lifecycle_says_how_to_enable_it(project: Path, tmp_path: Path):
    assert run("build", "--root", str(project)).exit_code == 0
    config_file = project / "rendered" / "prometheus" / "prometheus.yml"
    with PrometheusServer(config_file, tmp_path / "tsdb") as server:
        result = run("build", "--root", str(project), "--reload", server.url)
    assert result.exit_code == 1
    assert "did not reload" in result.output and "--web.enable-lifecycle" in result.output
    assert (project / "rendered" / "rules" / "stability.yaml").is_file()  # the build itself was written


def test_the_rollout_job_reads_its_own_targets_file_not_verls_config(project: Path):
    def rollout_job(config: Config) -> dict:
        text = render_project(project, config).files["prometheus/prometheus.yml"]
        return next(job for job in yaml.safe_load(text)["scrape_configs"] if job["job_name"] == "rollout")

    assert rollout_job(Config())["file_sd_configs"] == [{"files": ["/tmp/dashgen/rollout_targets.json"]}]
    assert rollout_job(Config(rollout_service_discovery_file="/etc/x.yml"))["file_sd_configs"] == [
        {"files": ["/etc/x.yml"]}]
