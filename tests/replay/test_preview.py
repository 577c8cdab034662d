"""dashgen preview: every dashboard drawn from a backfilled run, verl panels with data, byte-stable PNGs."""

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import REPO, run, with_preview
from dashgen.replay.preview.units import format_value

# Whether matplotlib is installed, asked without importing it: pytest collects this module in every
# worker, also when the heavy tests are left out.
pytestmark = [pytest.mark.heavy, pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                                    reason="matplotlib is not installed")]

SAMPLE = REPO / "examples" / "runs" / "gsm8k" / "ppo-qwen-7b.jsonl"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_preview_draws_every_dashboard_as_the_committed_preview(project: Path, tmp_path: Path):
    # The committed PNGs were drawn from the same sample by another process, on another day and
    # machine: the same bytes again is the drawing's determinism, and the README's image current.
    out = tmp_path / "out"
    result = run("preview", str(SAMPLE), "--out", str(out), "--root", str(project))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["verl-compare-runs.png", "verl-training.png"]
    for png in out.iterdir():
        assert png.read_bytes().startswith(PNG_SIGNATURE)
        assert png.read_bytes() == (REPO / "rendered" / "preview" / png.name).read_bytes(), (
            f"{png.name} differs from rendered/preview/{png.name}: redraw it with `dashgen preview {SAMPLE.relative_to(REPO)}` "
            f"if the dashboard or the drawing changed on purpose")
    assert "verl-training.png: 45 of 54 panels with data" in result.output


def hostile_sample(folder: Path) -> Path:
    """The sample run with a logged 1.7e308 (finite, but past what matplotlib's ticks can span) and
    integers of 400 digits (served as infinities) at step 51."""
    import json

    sample = SAMPLE.read_text().splitlines()
    hostile = json.loads(sample[50])
    hostile["data"].update({"critic/score/mean": 1.7e308, "actor/entropy": "HUGE", "actor/grad_norm": "-HUGE"})
    sample[50] = json.dumps(hostile).replace('"HUGE"', "9" * 400).replace('"-HUGE"', "-" + "9" * 400)
    path = folder / "gsm8k" / "huge.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(sample) + "\n")
    return path


def test_a_verl_panel_without_data_is_counted_fails_only_when_strict_and_values_beyond_an_axis_draw_as_gaps(project: Path,
                                                                                               tmp_path: Path):
    """The allowed preview is drawn from a run holding values beyond what an axis can hold: they
    draw as gaps (one drawing for both checks; drawing is most of a preview's CPU)."""
    module = project / "panels" / "verl_training.py"
    # A key the sample run does not log (only REMAX logs timing_s/gen_max).
    module.write_text(module.read_text().replace('Query("verl_timing_step_seconds{$run}", "{{experiment}}")',
                                                 'Query("verl_timing_gen_max_seconds{$run}", "{{experiment}}")'))
    assert run("build", "--root", str(project)).exit_code == 0
    out = tmp_path / "out"
    result = run("preview", str(SAMPLE), "--out", str(out), "--root", str(project), "--strict")
    assert result.exit_code == 1
    assert "verl-training: 'Step time'" in result.output and "--strict" in result.output
    assert list(out.iterdir()) == []  # nothing replaced, no partial left
    allowed = run("preview", str(hostile_sample(tmp_path)), "--out", str(out), "--root", str(project))
    assert allowed.exit_code == 0, allowed.output
    assert "1 panel reading verl's series has no data" in allowed.output
    assert "verl-training: 'Step time'" in allowed.output
    assert sorted(p.name for p in out.iterdir()) == ["verl-compare-runs.png", "verl-training.png"]
    assert all(png.read_bytes().startswith(PNG_SIGNATURE) for png in out.iterdir())


def test_a_failed_preview_leaves_the_committed_previews_as_they_were(project: Path):
    committed = with_preview(project)
    before = {png.name: png.read_bytes() for png in committed.iterdir()}
    module = project / "panels" / "verl_training.py"
    module.write_text(module.read_text().replace('Query("verl_timing_step_seconds{$run}", "{{experiment}}")',
                                                 'Query("verl_timing_gen_max_seconds{$run}", "{{experiment}}")'))
    assert run("build", "--root", str(project)).exit_code == 0
    result = run("preview", str(SAMPLE), "--root", str(project), "--strict")
    assert result.exit_code == 1 and "no preview in" in result.output
    assert {png.name: png.read_bytes() for png in committed.iterdir()} == before


def test_build_and_check_leave_the_preview_folder_alone(project: Path):
    preview = with_preview(project) / "verl-training.png"
    assert run("build", "--root", str(project)).exit_code == 0
    assert preview.is_file()
    assert run("check", "--root", str(project)).exit_code == 0


def test_check_names_a_preview_drawn_from_an_older_dashboard(project: Path):
    with_preview(project)
    module = project / "panels" / "compare_runs.py"
    module.write_text(module.read_text().replace('"Policy entropy"', '"Entropy"'))
    assert run("build", "--root", str(project)).exit_code == 0
    result = run("check", "--root", str(project))
    assert result.exit_code == 1
    assert ("rendered/preview/verl-compare-runs.png: drawn from an older dashboards/verl-compare-runs.json; "
            "run `dashgen preview`") in result.output
    assert "verl-training.png" not in result.output  # that one is current


def test_without_a_run_a_project_without_the_sample_draws_a_corpus_run(project: Path, tmp_path: Path):
    """A wheel-installed project has no examples/ folder: the preview draws a verl run of the public
    corpus the package ships, counts the panels that run leaves empty, and succeeds."""
    assert not (project / "examples").exists()
    out = tmp_path / "out"
    result = run("preview", "--out", str(out), "--root", str(project))
    assert result.exit_code == 0, result.output
    assert "drawing verl-qwen25-7b-gsm8k-ppo-dstack of the public corpus" in result.output
    assert "panels reading verl's series have no data" in result.output
    assert sorted(p.name for p in out.iterdir()) == ["verl-compare-runs.png", "verl-training.png"]


CORPUS_RUNS = sorted(path.parent.name for path in (REPO / "bench" / "realruns").glob("*/steps.jsonl"))


@pytest.mark.live
@pytest.mark.slow  # every run of the public corpus backfilled and drawn: minutes
@pytest.mark.parametrize("name", CORPUS_RUNS)
def test_every_corpus_run_previews_and_says_how_many_panels_had_data(project: Path, tmp_path: Path, name: str):
    """Real runs lack some keys, log only every Nth step, come from TRL or hand-written loops: each is
    drawn, with the panels it leaves empty counted, and the preview exits 0."""
    out = tmp_path / "out"
    result = run("preview", str(REPO / "bench" / "realruns" / name / "steps.jsonl"), "--out", str(out),
                 "--root", str(project))
    assert result.exit_code == 0, result.output
    drawn = dict(re.findall(r"/(verl-[a-z-]+)\.png: (\d+) of \d+ panels with data", result.output))
    assert sorted(drawn) == ["verl-compare-runs", "verl-training"] and int(drawn["verl-training"]) > 0, result.output


def test_a_key_logged_under_a_name_no_series_reads_is_named_beside_the_empty_panels(project: Path, tmp_path: Path):
    """The sample run with perf/throughput logged as perf/throughput_per_gpu: its panel is empty, and the
    preview names the key the run does log."""
    renamed = tmp_path / "gsm8k" / "renamed.jsonl"
    renamed.parent.mkdir()
    renamed.write_text(SAMPLE.read_text().replace('"perf/throughput"', '"perf/throughput_per_gpu"'))
    result = run("preview", str(renamed), "--out", str(tmp_path / "out"), "--root", str(project))
    assert result.exit_code == 0, result.output
    assert "verl-training: 'Throughput per GPU'" in result.output
    assert "It logs keys no series reads under names like keys it never logged" in result.output
    assert "\n  perf/throughput_per_gpu for perf/throughput\n" in result.output


def test_a_missing_run_is_named(project: Path):
    result = run("preview", str(project / "runs" / "gone.jsonl"), "--root", str(project))
    assert result.exit_code == 1 and "runs/gone.jsonl: no such step log" in result.output


@pytest.mark.parametrize("value, unit, shown", [
    (0.0123, "percentunit", "1.23%"), (1536, "suffix: tokens/s", "1.54 k tokens/s"), (0.0000219, "s", "21.9 µs"),
    (62, "s", "1.03 min"), (60 * 2**30, "bytes", "60 GiB"), (0.5, "suffix: nats", "0.5 nats"), (42, "none", "42"),
])
def test_units_read_as_grafana_shows_them(value, unit, shown):
    assert format_value(value, unit) == shown


def test_heatmaps_stats_and_collapsed_rows_are_drawn_as_grafana_shows_them(tmp_path: Path):
    """Without Prometheus: the sample run has no GPU series, so its heatmaps are empty."""
    from dashgen.replay.backfill import RecordedRun
    from dashgen.replay.preview import PanelResult, PreviewRun, Series, draw_dashboard

    run_ = RecordedRun(Path("run.jsonl"), {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                       steps=[1])
    times = tuple(float(t) for t in range(0, 601, 60))
    red_above_one = {"mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}]}
    model = {"title": "GPUs", "panels": [
        {"type": "row", "title": "Hidden", "collapsed": True, "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}, "id": 1,
         "panels": [{"id": 9}]},
        {"type": "heatmap", "title": "Least busy GPU per node", "id": 2, "gridPos": {"x": 0, "y": 1, "w": 12, "h": 8},
         "options": {"color": {"scheme": "Viridis", "min": 0, "max": 100}, "cellValues": {"unit": "percent"}}},
        {"type": "stat", "title": "Firing", "id": 3, "gridPos": {"x": 12, "y": 1, "w": 4, "h": 4},
         "fieldConfig": {"defaults": {"thresholds": red_above_one}}},
    ]}
    results = {2: PanelResult("Least busy GPU per node", [Series("A", f"10.0.0.{n}", {}, times, tuple(
                   float(n * 20) for _ in times)) for n in range(5)]),
               3: PanelResult("Firing", [Series("A", "firing", {}, times, tuple(2.0 for _ in times))])}
    png = tmp_path / "gpus.png"
    draw_dashboard(model, results, {}, PreviewRun(run_, 0.0, 600.0, 60.0), png)
    assert png.read_bytes().startswith(PNG_SIGNATURE)


def test_a_legend_fits_its_panel_with_each_value_whole(tmp_path: Path, monkeypatch):
    """A quarter-width panel of a run with a long experiment name (a real run's file name): each
    legend entry ends with the series' whole value and lies inside the panel; the name is what is cut."""
    from dashgen.replay.backfill import RecordedRun
    from dashgen.replay.preview import PanelResult, PreviewRun, Series, draw, draw_dashboard

    experiment = "qwen25-7b-gsm8k-ppo-lr1e-6-kl0.001-rollout-n5-seed42-resumed-run3"
    run_ = RecordedRun(Path(f"{experiment}.jsonl"), {"job": "verl", "instance": "i", "project": "p",
                                                      "experiment": experiment}, steps=[1])
    times = tuple(float(t) for t in range(0, 601, 60))
    model = {"title": "Stability", "panels": [
        {"type": "timeseries", "title": "Reward (score)", "id": 2, "gridPos": {"x": 0, "y": 0, "w": 6, "h": 8},
         "fieldConfig": {"defaults": {"unit": "suffix: reward"}}},
        {"type": "timeseries", "title": "Short", "id": 3, "gridPos": {"x": 6, "y": 0, "w": 6, "h": 8}}]}
    results = {2: PanelResult("Reward (score)", [Series("A", f"{stat} {experiment}", {}, times,
                                                        tuple(value for _ in times))
                                                 for stat, value in (("mean", 0.621), ("min", 0.0), ("max", 1.0))]),
               3: PanelResult("Short", [Series("A", "e", {}, times, tuple(2.5 for _ in times))])}
    legends = []  # per legend, (text, right edge in pixels) of each entry, as the saved figure lays them out

    def laid_out(figure, path, stamp):
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        legends.extend([(text.get_text(), text.get_window_extent(renderer).x1) for text in axes.get_legend().get_texts()]
                       for axes in figure.axes if axes.get_legend() is not None)

    monkeypatch.setattr(draw, "_save_png", laid_out)
    draw_dashboard(model, results, {}, PreviewRun(run_, 0.0, 600.0, 60.0), tmp_path / "legend.png")
    reward, short = ([label for label, _ in legend] for legend in legends)
    assert short == ["e  2.5"]  # what fits is left whole
    assert [label.rsplit("  ", 1)[1] for label in reward] == ["0.621 reward", "0 reward", "1 reward"]
    assert all(label.startswith(stat + " qwen25") for label, stat in zip(reward, ("mean", "min", "max")))
    assert "\u2026" in reward[0]  # the longest name is cut
    panel_right = 6 * draw.COLUMN_PX  # the first panel's right edge, in pixels
    assert all(right <= panel_right for _, right in legends[0]), legends[0]


@pytest.mark.parametrize("limit, colour", [(1440.0, "#56A64B"), (350.0, "#E02F44")], ids=["slow steps", "fast steps"])
def test_a_threshold_set_by_a_query_colours_the_stat_by_the_runs_own_limit(tmp_path: Path, monkeypatch, limit, colour):
    """400 s of silence is green where the run's stall limit is 1,440 s, red where it is 350 s; the limit's
    own series is not drawn as a value."""
    from dashgen.replay.backfill import RecordedRun
    from dashgen.replay.preview import PanelResult, PreviewRun, Series, draw, draw_dashboard

    run_ = RecordedRun(Path("run.jsonl"), {"job": "verl", "instance": "i", "project": "p", "experiment": "e"},
                       steps=[1])
    times = tuple(float(t) for t in range(0, 601, 60))
    model = {"title": "Glance", "panels": [{
        "type": "stat", "title": "Seconds since the last step", "id": 2, "gridPos": {"x": 0, "y": 0, "w": 4, "h": 4},
        "fieldConfig": {"defaults": {"unit": "s", "thresholds": {"mode": "absolute", "steps": [
            {"color": "green", "value": None}, {"color": "red", "value": 300}]}}},
        "transformations": [{"id": "configFromData", "options": {
            "configRefId": "B", "mappings": [{"fieldName": "stall limit", "handlerKey": "threshold1"}]}}]}]}
    results = {2: PanelResult("Seconds since the last step", [
        Series("A", "e", {}, times, tuple(400.0 for _ in times)),
        Series("B", "stall limit", {}, times, tuple(limit for _ in times))], reads_verl=True)}
    texts = []
    monkeypatch.setattr(draw, "_save_png", lambda figure, path, stamp: texts.extend(
        (text.get_text(), text.get_color()) for text in figure.texts))
    draw_dashboard(model, results, {}, PreviewRun(run_, 0.0, 600.0, 60.0), tmp_path / "stat.png")
    values = [(text, shown) for text, shown in texts if text.endswith(" min") or text.endswith(" s")]
    assert values == [("6.67 min", colour)], texts


@pytest.mark.live
def test_the_preview_shows_the_alerts_the_backtest_reports():
    """The sample run diverges at step 75: the preview's firing-alerts stat and annotation read the
    ALERTS series its rules wrote, which begin where the backtest's firing intervals begin."""
    import json

    from dashgen.compiler.output.build import render_files
    from dashgen.compiler.project import compile_project
    from dashgen.config import duration_seconds, load_config
    from dashgen.project_metrics import project_catalog
    from dashgen.replay.backfill import Timing
    from dashgen.replay.backtest import RuleSet, backtest
    from dashgen.replay.preview import preview_data
    from dashgen.replay.preview.query import backfilled

    config = load_config(None, REPO)
    project = compile_project(REPO, config)
    catalog = project_catalog(REPO)
    timing = Timing(start=1735689600.0, scrape_interval=duration_seconds(config.scrape_interval))
    rule_alerts = backtest([SAMPLE], REPO, config, timing)[0].alerts
    fired = {alert.alertname: alert.firing[0] for alert in rule_alerts if alert.firing}
    assert "VerlTrainingDivergence" in fired and fired["VerlTrainingDivergence"].start_step >= 75
    model = json.loads(render_files(project)["dashboards/verl-training.json"])
    rules = RuleSet(project.rules.recording_rules, project.rules.alert_rules, project.step_statistics)
    with backfilled(SAMPLE, config, catalog, timing, rules) as (server, run):
        results, events = preview_data(server, model, run, catalog, timing.scrape_interval, "verl_training.py")
        grid_start = run.start // timing.scrape_interval * timing.scrape_interval  # evaluations fall on the grid
        alerts = server.api("query_range", query='ALERTS{alertstate="firing"}', start=f"{grid_start}",
                            end=f"{run.end}", step=f"{timing.scrape_interval:g}")["result"]
    first_sample = {series["metric"]["alertname"]: float(series["values"][0][0]) for series in alerts}
    assert first_sample == {name: firing.start for name, firing in fired.items()}
    stat = next(result for result in results.values() if result.title == "Firing alerts")
    counted = dict(zip(stat.series[0].times, stat.series[0].values))
    divergence = fired["VerlTrainingDivergence"].start
    severe = {name for name in fired if any(alert.alertname == name and alert.severity in ("critical", "warning")
                                            for alert in rule_alerts)}
    assert max(counted.values()) == len(severe)  # infos are not counted
    assert all(count == 0 for at, count in counted.items() if at < min(f.start for f in fired.values()))
    assert counted[min(at for at in counted if at >= divergence)] >= 1
    # One annotation mark where each alert began (not one per evaluation).
    assert sorted(events["Firing alerts"]) == sorted(
        min(at for at in stat.series[0].times if at >= firing.start) for firing in fired.values())


def _validating_run(path: Path, core: bool) -> Path:
    """30 one-minute steps validating at steps 5, 15 and 25 (val-aux only, unless `core`)."""
    import json

    lines = []
    for step in range(1, 31):
        data = {"training/global_step": step, "actor/ppo_kl": 0.01, "timing_s/step": 60.0}
        if step % 10 == 5:
            data.update({"val-aux/aime/reward/mean@30": -0.5 - step / 100, "val-aux/aime/reward/best@4/std": 0.1})
            if core:
                data["val-core/aime/reward/mean@32"] = -0.4 - step / 100
        lines.append(json.dumps({"step": step, "data": data}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.live
@pytest.mark.parametrize("core", [False, True])
def test_validation_panels_read_val_aux_when_a_run_logs_no_val_core(tmp_path: Path, core: bool):
    import json

    from dashgen.compiler.output.build import render_project
    from dashgen.config import load_config
    from dashgen.project_metrics import project_catalog
    from dashgen.replay.backfill import Timing
    from dashgen.replay.preview import preview_data
    from dashgen.replay.preview.query import backfilled

    config = load_config(None, REPO)
    model = json.loads(render_project(REPO, config).files["dashboards/verl-training.json"])
    catalog = project_catalog(REPO)
    timing = Timing(start=1735689600.0, scrape_interval=15.0)
    path = _validating_run(tmp_path / "run.jsonl", core)
    with backfilled(path, config, catalog, timing) as (server, run):
        results, _ = preview_data(server, model, run, catalog, timing.scrape_interval, "verl_training.py")
    by_title = {result.title: result for result in results.values()}
    for title in ("Latest validation score", "Validation score"):
        shown = {series.labels["metric"] for series in by_title[title].series if series.values}
        assert shown == ({"mean@32"} if core else {"mean@30"}), title  # val-aux's means only without val-core
        last = by_title[title].series[0].values[-1]
        assert last == pytest.approx(-0.65 if core else -0.75)
