"""The rules on VictoriaMetrics: rendered/victoriametrics/rules/ (config `victoriametrics: true`),
which Debian's vmalert (1.79, no keep_firing_for) loads as it is; vmalert's dry run in `dashgen
build` and `dashgen lint`; and replays of the sample run through VictoriaMetrics and vmalert whose
alerts fire and resolve when Prometheus' backtest says they do.

vmalert replays rule after rule and waits RULES_DELAY after each, so a replay costs seconds per
rule: the replay of every rule file is `slow` (make test-slow), and so is the divergence's (two
passes over its chained recordings); `make test` replays the rules VerlKLSpike and VerlNaNMetrics read."""

import re
import time
from pathlib import Path

import pytest
import yaml

import dashgen.compiler.output.targets.victoriametrics as victoriametrics
from dashgen.compiler.output.build import render_project
from dashgen.compiler.output.targets.victoriametrics import VMALERT_RULES_DIR, dry_run, fired_recording, vmalert_installed
from dashgen.config import Config, config_from
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.replay.backtest.engine import backtest
from dashgen.replay.victoriametrics import VictoriaMetricsServer, firing_starts, prometheus_text, replay
from dashgen.sources.statistics_file import rendered_statistics

from conftest import REPO, run

SAMPLE_RUN = REPO / "examples/runs/gsm8k/ppo-qwen-7b.jsonl"
needs_victoria_metrics = pytest.mark.skipif(
    not vmalert_installed(), reason="vmalert not installed (Debian package victoria-metrics; `make test` installs it)")
# Two days ago, at midnight: inside retention, not in the future.
START = float((int(time.time()) // 86400 - 2) * 86400)
VICTORIA_METRICS = config_from({"victoriametrics": True})
# The step windows the exporter serves for this repository's rules, as `dashgen backfill` writes them.
STATISTICS = rendered_statistics(REPO)


def vmalert_rule_files(folder: Path) -> list[Path]:
    """This repository's rule files as rendered for VictoriaMetrics, written into `folder`."""
    files = render_project(REPO, VICTORIA_METRICS).files
    paths = []
    for rel, text in sorted(files.items()):
        if rel.startswith(f"{VMALERT_RULES_DIR}/"):
            path = folder / Path(rel).name
            path.write_text(text)
            paths.append(path)
    return paths


def set_up_project(project: Path) -> Path:
    (project / "dashgen.yaml").write_text("victoriametrics: true\n")
    assert run("build", "--root", str(project)).exit_code == 0
    return project / "rendered" / VMALERT_RULES_DIR


def rules_read_by(alertname: str, rule_files: list[Path], folder: Path) -> Path:
    """One rule file with the groups of `rule_files`, in order, cut down to `alertname` and the
    recordings it reads, directly or through other recordings."""
    groups = [group for path in rule_files for group in yaml.safe_load(path.read_text())["groups"]]
    rules = {rule.get("record") or rule["alert"]: rule for group in groups for rule in group["rules"]}
    needed, pending = set(), [alertname]
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending += [read for read in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rules[name]["expr"])
                        if read in rules and ":" in read]
    kept = [{**group, "rules": [r for r in group["rules"] if (r.get("record") or r["alert"]) in needed]}
            for group in groups]
    path = folder / f"{alertname}.yaml"
    path.write_text(yaml.safe_dump({"groups": [group for group in kept if group["rules"]]}, sort_keys=False))
    return path


def test_the_vmalert_files_are_prometheus_files_with_the_hold_written_as_a_recording():
    files = render_project(REPO, VICTORIA_METRICS).files
    assert not any(rel.startswith(VMALERT_RULES_DIR) for rel in render_project(REPO, Config()).files)  # off by default
    stems = sorted(rel.split("/")[-1] for rel in files if rel.startswith("rules/"))
    assert sorted(rel.split("/")[-1] for rel in files if rel.startswith(VMALERT_RULES_DIR)) == stems
    held = 0
    for stem in stems:
        text = files[f"{VMALERT_RULES_DIR}/{stem}"]
        assert "keep_firing_for" not in text
        assert text.startswith(files[f"rules/{stem}"].splitlines()[0])  # "Rendered by dashgen build from ..."
        for prometheus, vm in zip(yaml.safe_load(files[f"rules/{stem}"])["groups"], yaml.safe_load(text)["groups"]):
            assert {k: v for k, v in prometheus.items() if k != "rules"} == {k: v for k, v in vm.items() if k != "rules"}
            vm_rules = iter(vm["rules"])
            for rule in prometheus["rules"]:
                if "keep_firing_for" not in rule:
                    assert next(vm_rules) == rule
                    continue
                held += 1
                recording, alert = next(vm_rules), next(vm_rules)
                assert recording["record"] == fired_recording(rule["alert"])
                assert " ".join(rule["expr"].split()) in " ".join(recording["expr"].split())
                assert {k: v for k, v in alert.items() if k != "expr"} == {
                    k: v for k, v in rule.items() if k not in ("expr", "keep_firing_for")}
                assert alert["expr"].startswith("(\n") and f"last_over_time({recording['record']}[" in alert["expr"]
            assert next(vm_rules, None) is None
    assert held >= 8


def test_the_hold_counts_the_evaluations_for_needs_and_one_interval_more():
    rule = {"alert": "X", "expr": "m > 1", "for": "10m", "keep_firing_for": "15m", "labels": {"severity": "warning"}}
    recording, alert = victoriametrics.held_alert(rule, "1m")
    # for: 10m at a 1m interval fires on the 11th true evaluation in a row (as Prometheus does).
    assert recording == {"record": "dashgen:X:fired", "expr": "(\n  m > 1\n)\nand\ncount_over_time((\n  m > 1\n)[11m:1m]) >= 11"}
    assert alert == {"alert": "X", "expr": "(\n  m > 1\n)\nor\nlast_over_time(dashgen:X:fired[16m])", "for": "10m",
                     "labels": {"severity": "warning"}}
    recording, _ = victoriametrics.held_alert({"alert": "Y", "expr": "m > 1", "keep_firing_for": "5m"}, "30s")
    assert recording["expr"] == "m > 1"  # without `for`, firing is the condition itself
    assert victoriametrics.held_alert({"alert": "Z", "expr": "m > 1", "for": "1m"}, "1m") == [
        {"alert": "Z", "expr": "m > 1", "for": "1m"}]


@pytest.mark.heavy
@needs_victoria_metrics
def test_every_rule_file_rendered_for_victoria_metrics_loads_in_vmalert(tmp_path: Path):
    paths = vmalert_rule_files(tmp_path)
    assert len(paths) == len(list((REPO / "rendered/rules").glob("*.yaml")))
    result = dry_run(paths)
    assert result.returncode == 0, result.stdout + result.stderr
    # The Prometheus files are what this vmalert cannot load, if it is older than 1.92 (Debian's 1.79).
    refused = dry_run(sorted((REPO / "rendered/rules").glob("*.yaml")))
    assert refused.returncode == 0 or "keep_firing_for" in refused.stdout + refused.stderr


@pytest.mark.heavy
@needs_victoria_metrics
def test_lint_dry_runs_the_victoria_metrics_files_as_they_are(project: Path):
    folder = set_up_project(project)
    result = run("lint", "--root", str(project))
    assert result.exit_code == 0, result.output
    files = len(list((project / "rendered" / "victoriametrics" / "rules").glob("*.yaml")))
    assert files >= 12 and f"vmalert -dryRun: {files} rule files in rendered/victoriametrics/rules/ load" in result.output
    # A file edited after the build is checked as it is, not repaired first.
    rules = folder / "memory.yaml"
    rules.write_text(rules.read_text().replace("    for: ", "    keep_firing_for: 15m\n    for: ", 1))
    result = run("lint", "--root", str(project))
    assert result.exit_code != 0 and f"vmalert -dryRun: {files} rule files in rendered/victoriametrics/rules/ FAILED" in result.output


@pytest.mark.heavy
@needs_victoria_metrics
def test_build_runs_vmalert_on_the_files_before_replacing_rendered(project: Path, monkeypatch):
    set_up_project(project)
    before = {p: p.read_bytes() for p in (project / "rendered").rglob("*") if p.is_file()}
    # As if the hold were not rewritten: vmalert 1.79 refuses keep_firing_for, and the build stops.
    monkeypatch.setattr(victoriametrics, "held_alert", lambda rule, interval: [rule])
    result = run("build", "--root", str(project))
    if result.exit_code == 0:
        pytest.skip("this vmalert reads keep_firing_for (1.92 or later): nothing to refuse")
    assert "vmalert -dryRun rejects the rule files rendered for VictoriaMetrics" in result.output
    assert "keep_firing_for" in result.output and "rendered/victoriametrics/rules/" in result.output
    assert {p: p.read_bytes() for p in (project / "rendered").rglob("*") if p.is_file()} == before


def test_lint_says_why_it_skipped_vmalert(monkeypatch, tmp_path, project: Path):
    result = run("lint", "--root", str(REPO))
    assert "VictoriaMetrics is not a target (config `victoriametrics: true` renders its rule files)" in result.output
    set_up_project(project)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    from dashgen.promtool import find_binary

    for tool in ("promtool", "amtool"):
        (bin_dir / tool).symlink_to(find_binary(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("VMALERT", raising=False)
    result = run("lint", "--root", str(project))
    assert "vmalert not found: skipped `vmalert -dryRun`" in result.output


def prometheus_firing(timing: Timing) -> dict[str, list[tuple[float, float | None]]]:
    """alertname -> (start, resolved at) of each firing, by Prometheus' backtest of the sample run."""
    return {outcome.alertname: [(firing.start, firing.end) for firing in outcome.firing]
            for result in backtest([SAMPLE_RUN], REPO, Config(), timing) for outcome in result.alerts if outcome.firing}


def firing_intervals(server: VictoriaMetricsServer, alertname: str, interval: float = 60) -> list[tuple[float, float]]:
    """(first, resolved at) of each firing of `alertname` in the ALERTS a replay wrote: resolved
    one evaluation after its last firing sample, as Prometheus' backtest counts it."""
    [series] = server.export(f'ALERTS{{alertname="{alertname}", alertstate="firing"}}')
    intervals: list[list[float]] = []
    for at in sorted(set(t / 1000 for t in series["timestamps"])):
        if intervals and at - intervals[-1][1] <= interval:
            intervals[-1][1] = at
        else:
            intervals.append([at, at])
    return [(first, last + interval) for first, last in intervals]


@pytest.mark.live
@pytest.mark.slow  # two replay passes of ~20 chained rules, RULES_DELAY after each: two minutes of waiting
@needs_victoria_metrics
@pytest.mark.xfail(strict=True, reason=(
    "open: since the divergence's onset holds only while entropy is still falling (a few steps), its "
    "firing after that rests on its own ALERTS series (its keep-firing branch), and vmalert's replay "
    "evaluates a rule over the whole range at once: each pass extends the firing by one evaluation "
    "(2 passes: it resolves 5 min after the start, 3 passes: 6 min; Prometheus' backtest: 39 min). "
    "vmalert evaluating live, in time order, is not expected to differ; not proven here."))
def test_the_divergence_fires_once_on_victoria_metrics_where_prometheus_fires_it(tmp_path: Path):
    """The divergence reads chained recordings (its quietest baselines from recorded medians, its
    hysteresis from a held baseline recorded in the main group from the hold group's recording).
    vmalert replays one group after the other, so after a second pass it fires where Prometheus does,
    once, from the onset to the run's end, as Prometheus' backtest does."""
    timing = Timing(start=START)
    recorded = read_run(SAMPLE_RUN, run_labels(SAMPLE_RUN, "verl"), timing, step_statistics=STATISTICS)
    [(start, end)] = prometheus_firing(timing)["VerlTrainingDivergence"]
    stability, = [p for p in vmalert_rule_files(tmp_path) if p.stem == "stability"]
    rules = rules_read_by("VerlTrainingDivergence", [stability], tmp_path)
    groups = [[r.get("record") or r["alert"] for r in g["rules"]] for g in yaml.safe_load(rules.read_text())["groups"]]
    assert len(groups) == 2 and groups[0][-1] == "VerlTrainingDivergence"
    assert any(":baseline_held" in name for name in groups[0]) and groups[1]  # the hold group
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        for _ in range(2):
            replay(server, [rules], recorded.times[0], recorded.end, "1m")
        got = firing_intervals(server, "VerlTrainingDivergence")
        assert set(firing_starts(server, gap_seconds=60)) == {"VerlTrainingDivergence"}
    assert len(got) == 1, got
    # It starts where Prometheus starts it. It may end up to 10 minutes sooner: since the divergence
    # reads PPO KL's 3-step median (issue 35), it ends 7 minutes before Prometheus's at the end of the
    # sample run, whose last steps log NaN, which VictoriaMetrics drops at ingestion (not proven: open).
    assert abs(got[0][0] - start) <= 60 and end - 600 <= got[0][1] <= end + 60, (got, start, end)


@pytest.mark.live
@needs_victoria_metrics
def test_the_hold_keeps_an_alert_firing_as_long_as_keep_firing_for_does_on_prometheus(tmp_path: Path):
    """VerlKLSpike (keep_firing_for 15m) on the sample run: Prometheus holds it 15 minutes after the
    median KL falls back; the vmalert files hold it as long, in one replay pass."""
    timing = Timing(start=START)
    recorded = read_run(SAMPLE_RUN, run_labels(SAMPLE_RUN, "verl"), timing, step_statistics=STATISTICS)
    [(start, end)] = prometheus_firing(timing)["VerlKLSpike"]
    stability, = [p for p in vmalert_rule_files(tmp_path) if p.stem == "stability"]
    rules = rules_read_by("VerlKLSpike", [stability], tmp_path)
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        replay(server, [rules], recorded.times[0], recorded.end, "1m")
        got = firing_intervals(server, "VerlKLSpike")
    assert len(got) == 1, got
    # It starts where Prometheus starts it. It may end up to 10 minutes sooner: since VerlKLSpike reads
    # PPO KL's 10-step median (issue 35), it ends 8 minutes before Prometheus's at the end of the sample
    # run, as the divergence's 3-step median does (whose last steps log NaN, which VictoriaMetrics drops
    # at ingestion; not proven: open).
    assert abs(got[0][0] - start) <= 60 and end - 600 <= got[0][1] <= end + 60, (got, start, end)
    assert end - 15 * 60 > got[0][0]  # the hold is part of it


@pytest.mark.live
@pytest.mark.slow
@needs_victoria_metrics
def test_a_replay_through_victoria_metrics_starts_the_alerts_prometheus_backtest_starts(tmp_path: Path):
    timing = Timing(start=START)
    recorded = read_run(SAMPLE_RUN, run_labels(SAMPLE_RUN, "verl"), timing, step_statistics=STATISTICS)
    expected = prometheus_firing(timing)
    assert set(expected) >= {"VerlTrainingDivergence"}, expected
    # GPU rules read Ray's series, which the step log does not hold: nothing to replay there; the
    # readers table is 89 constant rules, each of which vmalert would wait RULES_DELAY after, twice.
    rule_files = [f for f in vmalert_rule_files(tmp_path) if f.stem not in ("gpu", "dashgen-series-readers")]
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        # vmalert replays one group after the other, so alerts that read a held baseline (recorded
        # from the `-hold` group, which comes after them) see it only in a second pass.
        for _ in range(2):
            replay(server, rule_files, recorded.times[0], recorded.end, "1m")
        got = {name: firing_intervals(server, name) for name in firing_starts(server, gap_seconds=60)}
    assert set(got) == set(expected), (got, expected)
    for name, firings in expected.items():
        assert abs(got[name][0][0] - firings[0][0]) <= 60, (name, got[name], firings)
    assert len(got["VerlTrainingDivergence"]) == 1, got


@pytest.mark.live
@needs_victoria_metrics
def test_a_nan_loss_pages_on_victoria_metrics_which_drops_the_nan_samples(tmp_path: Path):
    import json

    log = tmp_path / "gsm8k" / "nan-loss.jsonl"
    log.parent.mkdir()
    steps = [{"step": n, "data": {"actor/pg_loss": None if n >= 20 else 0.1, "actor/grad_norm": 1.0}}
             for n in range(1, 31)]
    log.write_text("".join(json.dumps(step) + "\n" for step in steps))
    timing = Timing(start=START, default_step_seconds=60.0)
    recorded = read_run(log, run_labels(log, "verl"), timing, step_statistics=STATISTICS)
    expected = {outcome.alertname: outcome.firing[0].start
                for result in backtest([log], REPO, Config(), timing) for outcome in result.alerts if outcome.firing}
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        # VictoriaMetrics (1.79) dropped the NaN samples: only the finite loss is stored.
        assert set(server.export('verl_actor_pg_loss{experiment="nan-loss"}')[0]["values"]) == {0.1}
        stability, = [p for p in vmalert_rule_files(tmp_path) if p.stem == "stability"]
        rules = rules_read_by("VerlNaNMetrics", [stability], tmp_path)
        replay(server, [rules], recorded.times[0], recorded.end, "1m")
        got = firing_starts(server, gap_seconds=60)
    assert "VerlNaNMetrics" in expected and "VerlNaNMetrics" in got, (expected, got)
    assert abs(got["VerlNaNMetrics"][0] - expected["VerlNaNMetrics"]) <= 60
