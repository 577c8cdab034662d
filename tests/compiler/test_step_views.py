"""The views a verl user opens instead of wandb: runs compared by step, the stage timeline, run-scoped rows."""

import json

from conftest import REPO, run
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.dashboards.schema_validation import schema_errors
from dashgen_panels.verl_training import STAGE_COLOURS

RENDERED = REPO / "rendered" / "dashboards"


def load(uid: str) -> dict:
    return json.loads((RENDERED / f"{uid}.json").read_text())


def panels_by_title(model: dict) -> dict[str, dict]:
    return {panel["title"]: panel for panel in iter_panels(model)}


def test_compare_runs_plots_each_signal_against_the_training_step():
    model = load("verl-compare-runs")
    charts = [p for p in iter_panels(model) if p["type"] != "row"]
    assert [p["title"] for p in charts] == ["Reward (score)", "Validation score", "KL divergence (PPO)",
                                            "Policy entropy", "Actor grad norm", "Response length", "Step time"]
    for chart in charts:
        assert chart["type"] == "xychart"
        step, value = chart["targets"]
        assert step["expr"].startswith("verl_training_global_step{") and step["refId"] == "A"
        assert step["format"] == value["format"] == "table"
        assert chart["options"]["series"][0]["x"]["matcher"] == {"id": "byName", "options": "Value #A"}
        assert [t["id"] for t in chart["transformations"]] == ["merge", "partitionByValues"]
    assert schema_errors(model) == []


def test_the_two_dashboards_link_to_each_other_keeping_run_and_time():
    for uid, other in (("verl-training", "verl-compare-runs"), ("verl-compare-runs", "verl-training")):
        link, = [link for link in load(uid)["links"] if link.get("url") == f"/d/{other}"]
        assert link["includeVars"] and link["keepTime"]


def test_stage_timeline_stacks_the_stages_in_order_with_fixed_colours():
    panels = panels_by_title(load("verl-training"))
    timeline = panels["Step time by stage"]
    assert timeline["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    stages = [t["expr"].split("{")[0].removeprefix("verl_timing_").removesuffix("_seconds")
              for t in timeline["targets"]]
    assert stages == [stage for stage, _ in STAGE_COLOURS]
    colours = {o["matcher"]["options"]: o["properties"][0]["value"]["fixedColor"]
               for o in timeline["fieldConfig"]["overrides"]}
    assert [colours[t["refId"]] for t in timeline["targets"]] == [colour for _, colour in STAGE_COLOURS]
    per_token = panels["Time per token by stage"]
    assert per_token["gridPos"]["y"] == timeline["gridPos"]["y"]  # beside it
    assert all(t["expr"].startswith("verl_timing_per_token_") for t in per_token["targets"])


def test_the_rollout_panels_keep_to_the_run():
    model = load("verl-training")
    rollout = [p for p in iter_panels(model) if p["type"] != "row" and p["title"] in
               ("vLLM requests", "Generation tokens/s", "Time to first token p90", "Rollout KV-cache usage")]
    assert len(rollout) == 4
    for panel in rollout:
        assert all('project=~"$project", experiment=~"$experiment"' in t["expr"] for t in panel["targets"])


def test_validation_and_checkpoint_steps_are_annotated():
    annotations = {a["name"]: a["expr"] for a in load("verl-training")["annotations"]["list"]}
    assert annotations["Validation steps"].startswith("verl_timing_testing_seconds{")
    assert annotations["Checkpoints"].startswith("verl_timing_save_checkpoint_seconds{")


def test_signals_have_units():
    panels = panels_by_title(load("verl-training"))
    units = {title: panels[title]["fieldConfig"]["defaults"].get("unit") for title in
             ("Reward (score)", "PPO KL (old vs new policy)", "Policy entropy", "Throughput per GPU", "Validation score",
              "Time per token by stage", "PPO clip fraction")}
    assert units == {"Reward (score)": "suffix: reward", "PPO KL (old vs new policy)": "suffix: nats",
                     "Policy entropy": "suffix: nats", "Throughput per GPU": "suffix: tokens/s",
                     "Validation score": "suffix: reward", "Time per token by stage": "s",
                     "PPO clip fraction": "percentunit"}


def test_a_step_chart_value_with_other_labels_is_refused(project):
    module = project / "panels" / "compare_runs.py"
    module.write_text(module.read_text().replace('Query(f"avg by ({RUN}) (verl_val_core{{$run}})")',
                                                 'Query("verl_val_core{$run}")'))
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert "panels/compare_runs.py: dashboard 'verl-compare-runs', panel 'Validation score'" in result.output
    assert "carries data_source, experiment, instance, job, metric, project, variable" in result.output
