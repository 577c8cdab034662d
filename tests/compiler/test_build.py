"""dashgen build / check on a copy of the project: output shape, determinism, bad input."""

import gc
import json
import re
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, run, tree_digest, with_preview
from dashgen.compiler.output.build import render_project
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.targets.grafana import LINE_WIDTH, dashboard_to_text
from dashgen.compiler.dashboards.schema_validation import schema_errors
from dashgen.config import Config

DASHBOARD = "rendered/dashboards/verl-training.json"
LEGACY_KEYS = {"rows", "style", "hideControls", "sharedCrosshair", "gnetId", "span", "minSpan", "height",
               "cacheTimeout", "maxDataPoints", "intervalFactor", "step", "cards", "dataFormat", "xBucketSize"}


def load(project: Path) -> dict:
    return json.loads((project / DASHBOARD).read_text())


def all_keys(value, path=""):
    if isinstance(value, dict):
        for key, child in value.items():
            yield f"{path}/{key}", key, child
            yield from all_keys(child, f"{path}/{key}")
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from all_keys(child, f"{path}/{i}")


def test_committed_rendered_tree_is_up_to_date():
    result = run("check", "--root", str(REPO))
    assert result.exit_code == 0, result.output


def test_two_builds_are_byte_identical(project):
    assert run("build", "--root", str(project)).exit_code == 0
    first = tree_digest(project / "rendered")
    (project / DASHBOARD).unlink()
    assert run("build", "--root", str(project)).exit_code == 0
    assert tree_digest(project / "rendered") == first
    committed = tree_digest(REPO / "rendered")
    assert first == {rel: digest for rel, digest in committed.items() if not rel.startswith("preview/")}


def test_build_and_check_pause_the_cycle_collector_only_while_they_run(project, monkeypatch):
    import dashgen.compiler.output.build

    seen = []
    real_render = dashgen.compiler.output.build.render_project

    def render_noting_the_collector(*args, **kwargs):
        seen.append(gc.isenabled())
        return real_render(*args, **kwargs)

    monkeypatch.setattr(dashgen.compiler.output.build, "render_project", render_noting_the_collector)
    assert gc.isenabled()
    assert run("build", "--root", str(project)).exit_code == 0
    assert run("check", "--root", str(project)).exit_code == 0
    assert seen == [False, False]
    assert gc.isenabled()  # in-process callers (these tests) get their collector back
    (project / "panels" / "broken.py").write_text("raise RuntimeError('no')\n")
    assert run("build", "--root", str(project)).exit_code != 0
    assert gc.isenabled()  # also after a failed build


def test_dashboard_shape(project):
    model = load(project)
    assert model["uid"] == "verl-training" and model["title"] == "verl RL training"
    assert "id" not in model and model["schemaVersion"] >= 39  # Grafana assigns the numeric id
    rows = [(p["title"], p.get("collapsed", False)) for p in model["panels"] if p["type"] == "row"]
    # The design's layout: at a glance, then its four rows open; the rest follows, collapsed.
    assert rows == [("At a glance", False), ("Training stability", False), ("Losses", False),
                    ("Per-rank heatmap", False), ("Memory timeline", False), ("Train/rollout mismatch", True),
                    ("Rewards, advantages and values", True), ("Stage timeline", True),
                    ("Step time and progress", True), ("Throughput and MFU", True), ("Rollout engine", True)]
    variables = {v["name"]: v for v in model["templating"]["list"]}
    assert set(variables) == {"datasource", "job", "project", "experiment", "session", "node"}
    # All sessions means those the selected runs claim, not ".*"; one node at a time, never All.
    assert "allValue" not in variables["session"] and variables["session"].get("includeAll") is True
    assert not variables["node"].get("multi", False) and not variables["node"].get("includeAll", False)
    assert variables["datasource"]["query"] == "prometheus"
    for panel in iter_panels(model):
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            # A query without a data source uses its panel's.
            assert all(t.get("datasource", panel["datasource"]) == panel["datasource"] for t in panel["targets"])


def test_output_reviews_well(project):
    text = (project / DASHBOARD).read_text()
    model = json.loads(text)
    assert text == dashboard_to_text(model)
    # Sorted keys at every level; nothing but a single long string runs past the line width.
    for line in text.splitlines():
        assert len(line) <= LINE_WIDTH or re.fullmatch(r' *("[^"]+": )?"([^"\\]|\\.)*",?', line), line
    for path, key, value in all_keys(model):
        assert value is not None or re.fullmatch(r".*/thresholds/steps/0/value", path), f"null at {path}"
        assert key not in LEGACY_KEYS, f"legacy key at {path}"
    ids = [p["id"] for p in iter_panels(model)]
    assert len(ids) == len(set(ids))
    top = [p["gridPos"] for p in model["panels"]]
    for i, a in enumerate(top):
        assert a["x"] + a["w"] <= 24
        for b in top[i + 1:]:
            assert not (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
                        and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]), (a, b)


def test_heatmaps_are_modern_one_row_per_node_or_per_gpu_of_one_node(project):
    heatmaps = [p for p in iter_panels(load(project)) if p["type"] == "heatmap"]
    assert {p["title"] for p in heatmaps} >= {"Least busy GPU per node", "Fullest GPU's memory per node",
                                              "GPU utilisation, node $node"}
    for panel in heatmaps:
        assert panel["options"].get("calculate", False) is False  # Grafana's default: rows as they come
        assert panel["options"]["cellValues"]["unit"] in ("percent", "mbytes")
        assert "unit" not in panel["options"]["yAxis"]
        for target in panel["targets"]:
            assert target.get("format", "time_series") == "time_series"
            assert "{{ip}}" in target["legendFormat"]


RAW_PER_GPU = ("ray_node_gpus_utilization", "ray_node_gram_used")


def test_raw_per_gpu_series_are_read_only_for_one_node_and_without_arithmetic(project):
    from dashgen.compiler.queries.promql import metrics_in

    exprs = [t["expr"] for p in iter_panels(load(project)) if p["type"] != "row" for t in p["targets"]]
    raw = [e for e in exprs if metrics_in(e) & set(RAW_PER_GPU)]
    assert raw, "the node drill-down reads the per-GPU series"
    for expr in raw:
        assert expr in {f'{name}{{job="ray", ip=~"$node"}}' for name in RAW_PER_GPU}, expr
    # Scoped to the selected runs by the exporter's link to their Ray session: per node through the
    # session variable (which reads the link), per run by joining the link.
    per_node = [e for e in exprs if e.startswith("node:")]
    assert sorted(per_node) == ['node:ray_node_gpus_utilization:min{job="ray", SessionName=~"$session"}',
                                'node:ray_node_gram_used:max{job="ray", SessionName=~"$session"}']
    per_run = [e for e in exprs if e.startswith("session:")]
    assert per_run and all(e.endswith(' * on(SessionName) group_left(project, experiment) session:verl_run_ray_'
                                      'session_info:unique{job=~"$job", project=~"$project", '
                                      'experiment=~"$experiment"}') for e in per_run), per_run


def test_rendered_dashboard_matches_grafana_schema(project):
    assert schema_errors(load(project)) == []


def test_schema_rejects_what_grafana_would_not_load(project):
    model = load(project)
    model["rows"] = []
    model["panels"][1]["gridPos"]["h"] = "8"
    problems = "\n".join(schema_errors(model))
    assert "rows" in problems and "panels/1/gridPos/h" in problems


def test_gpu_source_switches_to_dcgm(project):
    files = render_project(project, Config(gpu_source="dcgm")).files
    model = json.loads(files["dashboards/verl-training.json"])
    exprs = [t["expr"] for p in iter_panels(model) if p["type"] == "heatmap" for t in p["targets"]]
    assert all("DCGM_FI_DEV" in e and 'job="dcgm"' in e for e in exprs)


@pytest.mark.heavy
def test_check_fails_after_an_unbuilt_source_edit(project):
    with_preview(project)
    assert run("check", "--root", str(project)).exit_code == 0
    module = project / "panels" / "verl_training.py"
    module.write_text(module.read_text().replace('"Policy entropy"', '"Token entropy"'))
    result = run("check", "--root", str(project))
    assert result.exit_code == 1
    assert "rendered/dashboards/verl-training.json: differs from its sources" in result.output
    assert run("build", "--root", str(project)).exit_code == 0
    # The JSON is current again; the committed preview still shows the old dashboard.
    result = run("check", "--root", str(project))
    assert result.exit_code == 1 and "differs from its sources" not in result.output
    assert "rendered/preview/verl-training.png: drawn from an older dashboards/verl-training.json" in result.output
    (project / "rendered" / "preview" / "verl-training.png").unlink()
    assert run("check", "--root", str(project)).exit_code == 0


def test_check_reports_left_over_files(project):
    (project / "rendered" / "dashboards" / "old.json").write_text("{}\n")
    result = run("check", "--root", str(project))
    assert result.exit_code == 1 and "rendered/dashboards/old.json: not produced by the sources" in result.output


BAD_PANEL_MODULE = '''
from dashgen.model import Dashboard, Query, Row, TimeSeries

def dashboard(config):
    return Dashboard(uid="{uid}", title="Broken", rows=(Row("Only row", ({panels})),))
'''


@pytest.mark.parametrize("panels, uid, expected", [
    ('TimeSeries("Reward", (Query("verl_critic_score_mena{run}"),)),', "broken",
     ["panels/broken.py", "panel 'Reward'", "unknown metric 'verl_critic_score_mena'",
      "did you mean 'verl_critic_score_mean'"]),
    ('TimeSeries("KL", (Query("max_over_time(verl_actor_ppo_kl{run}[5m]"),)),', "broken",
     ["panels/broken.py", "panel 'KL'", "PromQL syntax error", "expr: max_over_time("]),
    ('TimeSeries("Score rate", (Query("rate(verl_critic_score_mean{run}[5m])"),)),', "broken",
     ["panel 'Score rate'", "rate() applied to gauge 'verl_critic_score_mean'"]),
    ('TimeSeries("Copy", (Query("verl_actor_entropy{run}"),)),', "verl-training",
     ["uid 'verl-training' is already used by", "panels/broken.py", "panels/verl_training.py"]),
    ('TimeSeries("A", (Query("verl_actor_entropy{run}"),), position=__import__("dashgen.model").model.Position(0, 0, 12, 8)), '
     'TimeSeries("B", (Query("verl_actor_entropy{run}"),), position=__import__("dashgen.model").model.Position(6, 4, 12, 8)),',
     "broken", ["panels/broken.py", "panels 'A' and 'B' overlap"]),
])
def test_bad_panel_definitions_are_rejected_and_rendered_is_untouched(project, panels, uid, expected):
    before = tree_digest(project / "rendered")
    (project / "panels" / "broken.py").write_text(BAD_PANEL_MODULE.format(uid=uid, panels=panels))
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert result.output.count("Error:") == 1
    for fragment in expected:
        assert fragment in result.output
    assert tree_digest(project / "rendered") == before


def test_a_module_that_raises_is_named_with_its_line(project):
    before = tree_digest(project / "rendered")
    (project / "panels" / "raises.py").write_text("def dashboard(config):\n    return 1 / 0\n")
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert re.search(r"panels/raises.py: dashboard\(\) raised ZeroDivisionError.*\n\s+line 2: return 1 / 0",
                     result.output)
    assert tree_digest(project / "rendered") == before


def test_a_module_that_fails_to_import_is_named(project):
    (project / "panels" / "typo.py").write_text("from dashgen.model import Dashbord\n")
    result = run("build", "--root", str(project))
    assert result.exit_code == 1 and "panels/typo.py: importing the module failed: ImportError" in result.output


def test_bad_config_is_named(project, tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("rule_interval: 1 minute\nverl_jbo: x\n")
    result = run("build", "--root", str(project), "--config", str(config))
    assert result.exit_code == 1 and f"{config}: unknown config field 'verl_jbo'; did you mean 'verl_job'?" \
        in result.output
    config.write_text("rule_interval: 1 minute\n")
    result = run("build", "--root", str(project), "--config", str(config))
    assert result.exit_code == 1 and f"{config}: rule_interval: '1 minute' is not a Prometheus duration" \
        in result.output


def test_a_replaced_default_alert_area_drops_its_thresholds_from_the_default_dashboard_and_says_so(team):
    """A team's alerts/rollout.py that returns no alerts: the default dashboard's thresholds of the
    rollout alerts go, with a notice each, instead of a failed build; the other thresholds stay."""
    (team / "alerts" / "rollout.py").write_text("def rules(config):\n    return []\n")
    result = run("build", "--root", str(team))
    assert result.exit_code == 0, result.output
    notices = [line for line in result.output.splitlines() if line.startswith("notice: ")]
    assert notices == [
        f"notice: panels/verl_training.py: dashboard 'verl-training': panel {panel!r}: dropped the threshold of "
        f"{alert}: one of dashgen's default rollout alerts, which this project's alerts/ no longer define"
        for panel, alert in (("Response length clip ratio", "VerlResponseTruncationHigh"),
                             ("Rollout aborted ratio", "VerlRolloutAborts"))]
    panels = {panel["title"]: panel for panel in iter_panels(load(team))}
    assert panels["Response length clip ratio"]["fieldConfig"]["defaults"].get("thresholds") is None
    assert panels["Rollout aborted ratio"]["fieldConfig"]["defaults"].get("thresholds") is None
    assert panels["PPO KL (old vs new policy)"]["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 0.1
    # A name no default alert has is still a mistake, with its "did you mean".
    panels_module = team / "panels" / "verl_training.py"
    panels_module.write_text(panels_module.read_text() + textwrap.dedent('''
        TEAM_ROWS = (Row("Ours", (TimeSeries("Reward", (Query("verl_critic_score_mean{run}", "x"),),
                                             thresholds=(Threshold(alert="VerlRewardClif"),)),)),)
        '''))
    result = run("build", "--root", str(team))
    assert result.exit_code == 1
    assert "'VerlRewardClif' is not an alert defined in alerts/; did you mean 'VerlRewardCliff'?" in result.output
