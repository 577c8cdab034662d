"""The dashboard on-call opens: status row, annotations, links, alert thresholds, compact JSON."""

import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run
from dashgen.compiler.output.build import render_project
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.targets.grafana import dashboard_to_text
from dashgen.compiler.dashboards.schema_validation import schema_errors
from dashgen.config import Config, config_from
from dashgen.promtool import run_promtool

DASHBOARD = "dashboards/verl-training.json"
MAX_BYTES_PER_PANEL = 1_200
# An XY chart carries two queries (the step and the value) and the two transformations that pair
# them, and its legend and tooltip options are required by its schema: about 1,400 B each.
MAX_BYTES_PER_PANEL_OF = {"verl-compare-runs.json": 1_400}
# A panel whose threshold the run's data sets (Threshold.query: the silence VerlTrainingStalled waits
# out) carries that query and the transformation that applies it: up to 600 B beside the others' share.
THRESHOLD_QUERY_BYTES = 600


def model(project: Path, config: Config = Config()) -> dict:
    return json.loads(render_project(project, config).files[DASHBOARD])


def panels_by_title(dashboard: dict) -> dict[str, dict]:
    return {panel["title"]: panel for panel in iter_panels(dashboard)}


def test_committed_dashboards_are_small_and_schema_valid():
    for path in (REPO / "rendered" / "dashboards").glob("*.json"):
        dashboard = json.loads(path.read_text())
        panels = list(iter_panels(dashboard))
        # A collapsed row's panels sit two levels deeper (4 more spaces a line, nothing else), so
        # the bound is on the dashboard with every row open, as Grafana lays it out when opened.
        opened = dashboard_to_text({**dashboard, "panels": _opened_as_grafana_does(dashboard)})
        queried = sum(any(t["id"] == "configFromData" for t in panel.get("transformations", ())) for panel in panels)
        allowed = (MAX_BYTES_PER_PANEL_OF.get(path.name, MAX_BYTES_PER_PANEL) * len(panels)
                   + THRESHOLD_QUERY_BYTES * queried)
        assert len(opened.encode()) <= allowed, path
        assert schema_errors(dashboard) == []


def test_top_row_is_the_run_at_a_glance(project):
    dashboard = model(project)
    first_row = dashboard["panels"][0]
    assert first_row["type"] == "row" and first_row["title"] == "At a glance"
    top = [p for p in dashboard["panels"][1:] if p["gridPos"]["y"] == first_row["gridPos"]["y"] + 1]
    assert [(p["type"], p["title"]) for p in top] == [
        ("stat", "Current step"), ("stat", "Seconds since the last step"), ("stat", "Firing alerts"),
        ("stat", "Signals missing"), ("stat", "Latest validation score")]
    assert sum(p["gridPos"]["w"] for p in top) == 24
    exprs = {p["title"]: p["targets"][0]["expr"] for p in top}
    # warnings and criticals: a healthy run has infos, which made the stat a red 6
    assert ('ALERTS{job=~"$job", project=~"$project", experiment=~"$experiment", alertstate="firing", '
            'severity=~"critical|warning"}') in exprs["Firing alerts"]
    assert exprs["Latest validation score"].startswith("verl_val_core{")
    assert panels_by_title(dashboard)["Validation score"]["targets"][0]["expr"].startswith("verl_val_core{")


def test_thresholds_follow_the_config_and_link_to_the_runbook(project):
    config = config_from({"stability": {"kl_spike_threshold": 0.25}, "progress": {"stall_min_silence": "20m"},
                          "runbook_base_url": "https://git.example.org/rb.md"})
    panels = panels_by_title(model(project, config))
    kl = panels["PPO KL (old vs new policy)"]
    assert kl["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 0.25
    assert kl["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"] == {"mode": "line"}
    assert kl["links"][0]["url"] == "https://git.example.org/rb.md#verlklspike"
    assert panels["Seconds since the last step"]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 1200
    memory = panels["Peak GPU memory per step"]["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"]
    assert memory == 0.92 * Config().gpu_memory_bytes  # memory_pressure_reserved_fraction of the card
    # The rule uses the same number.
    rules = render_project(project, config).files["rules/stability.yaml"]
    assert "> 0.25" in rules


def test_annotations_mark_firing_alerts_and_restarts_and_links_join_dashboards(project):
    dashboard = model(project)
    annotations = {a["name"]: a for a in dashboard["annotations"]["list"]}
    assert annotations["Firing alerts"]["expr"].startswith("ALERTS{") and "firing" in annotations["Firing alerts"]["expr"]
    assert "offset" in annotations["Run restarts"]["expr"]
    links = {link["title"]: link for link in dashboard["links"]}
    assert links["Runbook"]["url"] == Config().runbook_base_url
    assert links["Dashboards"]["type"] == "dashboards" and links["Dashboards"]["tags"] == ["dashgen"]


def test_datasource_is_not_default_unless_configured(project):
    def is_default(config: Config) -> bool:
        text = render_project(project, config).files["provisioning/datasources/prometheus.yaml"]
        return yaml.safe_load(text)["datasources"][0]["isDefault"]

    assert is_default(Config()) is False
    assert is_default(Config(datasource_is_default=True)) is True


def test_grafana_base_url_links_the_runbook_to_the_dashboards(project):
    docs = render_project(project, Config(grafana_base_url="https://grafana.example.org")).files["docs/alerts.md"]
    assert "- [verl RL training](https://grafana.example.org/d/verl-training)" in docs
    assert "/d/verl-training" not in render_project(project, Config()).files["docs/alerts.md"]
    (project / "dashgen.yaml").write_text("grafana_base_url: https://grafana.example.org/\n")
    result = run("build", "--root", str(project))
    assert result.exit_code == 1 and "grafana_base_url" in result.output


def _opened_as_grafana_does(dashboard: dict) -> list[dict]:
    """The top-level panels after opening every collapsed row the way Grafana's toggleRow does:
    the row's panels move in under it (shifted by how far the row sits from their first panel),
    and everything below is pushed down by their height."""
    panels = [dict(p, gridPos=dict(p["gridPos"])) for p in dashboard["panels"]]
    index = 0
    while index < len(panels):
        row = panels[index]
        children = [dict(p, gridPos=dict(p["gridPos"])) for p in row.get("panels", [])]
        if row["type"] == "row" and row.get("collapsed") and children:
            shift = children[0]["gridPos"]["y"] - (row["gridPos"]["y"] + 1)
            bottom = row["gridPos"]["y"]
            for child in children:
                child["gridPos"]["y"] -= shift
                bottom = max(bottom, child["gridPos"]["y"] + child["gridPos"]["h"])
            for below in panels[index + 1:]:
                below["gridPos"]["y"] += bottom - row["gridPos"]["y"] - 1
            panels[index] = dict(row, collapsed=False, panels=[])
            panels[index + 1:index + 1] = children
        index += 1
    return panels


def _overlap(a: dict, b: dict) -> bool:
    return (a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"]
            and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"])


def test_the_four_rows_follow_the_glance_open_and_the_rest_is_collapsed_with_its_panels(project):
    dashboard = model(project)
    top = dashboard["panels"]
    rows = [p for p in top if p["type"] == "row"]
    assert [r["title"] for r in rows[:5]] == ["At a glance", "Training stability", "Losses", "Per-rank heatmap",
                                              "Memory timeline"]
    assert not any(r.get("collapsed") or r["panels"] for r in rows[:5])
    # Every later row is collapsed and holds its own panels, so nothing of it is queried until opened.
    assert len(rows) > 5 and all(r["collapsed"] and r["panels"] for r in rows[5:])
    first_collapsed = top.index(rows[5])
    assert [p["type"] for p in top[first_collapsed:]] == ["row"] * (len(rows) - 5)
    # Collapsed headers stack one grid row apart under the last open row's panels.
    open_bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in top[:first_collapsed])
    assert [r["gridPos"]["y"] for r in rows[5:]] == list(range(open_bottom, open_bottom + len(rows) - 5))
    ids = [p["id"] for p in iter_panels(dashboard)]
    assert len(ids) == len(set(ids))
    assert schema_errors(dashboard) == []

    # Opened (all of them, top to bottom), each row's panels lie under its header, before the next
    # header, and no two panels overlap: the layout a collapsed row keeps is the one it was built with.
    opened = _opened_as_grafana_does(dashboard)
    assert len(opened) == len(ids)
    header_ys = [p["gridPos"]["y"] for p in opened if p["type"] == "row"]
    assert header_ys == sorted(header_ys)
    current_row = None
    for panel in opened:
        if panel["type"] == "row":
            current_row = panel["gridPos"]["y"]
            continue
        following = [y for y in header_ys if y > current_row]
        assert panel["gridPos"]["y"] > current_row, panel["title"]
        assert not following or panel["gridPos"]["y"] + panel["gridPos"]["h"] <= following[0], panel["title"]
    for i, a in enumerate(opened):
        for b in opened[i + 1:]:
            assert not _overlap(a["gridPos"], b["gridPos"]), (a["title"], b["title"])


@pytest.mark.heavy
def test_signals_missing_counts_the_keys_stopped_and_never_logged_of_the_selected_run(project, tmp_path):
    """The stat's query, on the alerts the project's rules raise from the exporter's series."""
    rendered = render_project(project, Config()).files
    for rules in ("signals.yaml", "dashgen-series-readers.yaml"):
        (tmp_path / rules).write_text(rendered[f"rules/{rules}"])
    expr = panels_by_title(json.loads(rendered[DASHBOARD]))["Signals missing"]["targets"][0]["expr"]
    for variable, value in {"$job": "verl", "$project": "gsm8k", "$experiment": "grpo"}.items():
        expr = expr.replace(variable, value)

    def series(metric: str, experiment: str, key: str, values: str) -> dict:
        labels = f'job="verl",instance="t:9464",project="gsm8k",experiment="{experiment}",series="{key}"'
        return {"series": f"{metric}{{{labels}}}", "values": values}

    unlogged, never = "verl_exporter_series_unlogged_steps", "verl_exporter_series_never_logged_steps"
    fixture = {"rule_files": ["signals.yaml", "dashgen-series-readers.yaml"], "evaluation_interval": "1m",
               "tests": [{"interval": "1m", "input_series": [
                   # grpo: entropy missing from 5 steps by 1m, KL never from 5; the gap not logged in the first
                   # 20 steps by 1m, a timing by 2m; another run's stopped key is not the selected run's.
                   series(unlogged, "grpo", "verl_actor_entropy", "4 5 6"),
                   series(unlogged, "grpo", "verl_actor_ppo_kl", "2 3 4"),
                   series(never, "grpo", "verl_training_rollout_probs_diff_mean", "19 20 21"),
                   series(never, "grpo", "verl_timing_step_seconds", "18 19 20"),
                   series(unlogged, "other", "verl_actor_entropy", "9 9 9")],
                   "promql_expr_test": [
                       {"expr": expr, "eval_time": "1m", "exp_samples": [{"labels": "{}", "value": 2}]},
                       {"expr": expr, "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": 3}]},
                       # Nothing missing: 0, not "No data".
                       {"expr": expr.replace('"grpo"', '"quiet"'), "eval_time": "2m",
                        "exp_samples": [{"labels": "{}", "value": 0}]}]}]}
    (tmp_path / "signals-missing-test.yaml").write_text(yaml.safe_dump(fixture))
    result = run_promtool(["test", "rules", "signals-missing-test.yaml"], cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_silence_threshold_is_read_from_the_run_through_the_stall_limit_it_records(project):
    panel = panels_by_title(model(project))["Seconds since the last step"]
    assert [t["refId"] for t in panel["targets"]] == ["A", "B"]
    assert panel["targets"][1]["expr"].startswith("verl:stall:silence_limit_seconds{")
    assert panel["transformations"] == [{"id": "configFromData", "options": {
        "configRefId": "B", "mappings": [{"fieldName": "stall limit", "handlerKey": "threshold1"}]}}]
    # Before the query has data, the floor.
    assert panel["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 300


@pytest.mark.heavy
def test_the_stall_limit_follows_the_runs_step_time(project, tmp_path):
    """Three runs in promtool, 3 h in: 8-minute steps are allowed 3 of them (1,440 s); 1-minute steps the
    5-minute floor once they have saved a checkpoint, 15 minutes before their first save."""
    (tmp_path / "progress.yaml").write_text(render_project(project, Config()).files["rules/progress.yaml"])
    minutes = 200

    def run(name: str, step_minutes: int, saves: bool) -> list[dict[str, str]]:
        labels = f'job="verl",instance="t:9464",project="p",experiment="{name}"'
        last = " ".join(str(m // step_minutes * step_minutes * 60) for m in range(minutes))
        series = [{"series": f"verl_exporter_last_step_timestamp_seconds{{{labels}}}", "values": last},
                  {"series": f"verl_timing_step_seconds{{{labels}}}", "values": f"{step_minutes * 60}x{minutes}"}]
        if saves:
            series.append({"series": f"verl_timing_save_checkpoint_seconds{{{labels}}}", "values": f"30x{minutes}"})
        return series

    expected = {"slow": 1440, "fast": 300, "unsaved": 900}
    fixture = {"rule_files": ["progress.yaml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": run("slow", 8, True) + run("fast", 1, True) + run("unsaved", 1, False),
        "promql_expr_test": [{"expr": "verl:stall:silence_limit_seconds", "eval_time": "180m", "exp_samples": [
            {"labels": f'verl:stall:silence_limit_seconds{{job="verl",instance="t:9464",project="p",'
                       f'experiment="{name}"}}', "value": value} for name, value in expected.items()]}]}]}
    (tmp_path / "progress-test.yaml").write_text(yaml.safe_dump(fixture))
    result = run_promtool(["test", "rules", "progress-test.yaml"], cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
