"""The rules on VictoriaMetrics: vmalert's dry run in `dashgen lint`, the no-keep-firing-for
dialect Debian's vmalert (1.79) needs, and a replay of the sample run through VictoriaMetrics
and vmalert whose alerts start when Prometheus' backtest says they do.

vmalert replays rule after rule and waits RULES_DELAY after each, so a replay costs seconds per
rule: the replay of every rule file is `slow` (make test-slow); `make test` replays the rules
one alert with a chained, held baseline reads (VerlTrainingDivergence)."""

import re
import time
from pathlib import Path

import pytest
import yaml

from dashgen.compiler.targets.victoriametrics import dry_run, vmalert_installed, without_keep_firing_for
from dashgen.config import Config
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.replay.backtest.engine import backtest
from dashgen.replay.victoriametrics import VictoriaMetricsServer, firing_starts, prometheus_text, replay

from conftest import REPO, run

SAMPLE_RUN = REPO / "examples/runs/gsm8k/ppo-qwen-7b.jsonl"
RULE_FILES = sorted((REPO / "rendered/rules").glob("*.yaml"))
needs_victoria_metrics = pytest.mark.skipif(
    not vmalert_installed(), reason="vmalert not installed (Debian package victoria-metrics; `make test` installs it)")
# Two days ago, at midnight: inside retention, not in the future.
START = float((int(time.time()) // 86400 - 2) * 86400)


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


def test_the_dialect_drops_keep_firing_for_and_nothing_else():
    text = (REPO / "rendered/rules/stability.yaml").read_text()
    assert "keep_firing_for" in text
    stripped = yaml.safe_load(without_keep_firing_for(text))
    original = yaml.safe_load(text)
    for group in original["groups"]:
        for rule in group["rules"]:
            rule.pop("keep_firing_for", None)
    assert stripped == original


@pytest.mark.heavy
@needs_victoria_metrics
def test_vmalert_dry_run_accepts_the_rendered_rules():
    result, note = dry_run(RULE_FILES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert note.startswith("vmalert -dryRun")


@pytest.mark.heavy
@needs_victoria_metrics
def test_lint_runs_vmalert_when_installed():
    result = run("lint", "--root", str(REPO))
    assert "vmalert -dryRun" in result.output and "FAILED" not in result.output


def test_lint_says_it_skipped_vmalert_when_it_is_missing(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    from dashgen.promtool import find_binary

    for tool in ("promtool", "amtool"):
        (bin_dir / tool).symlink_to(find_binary(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("VMALERT", raising=False)
    result = run("lint", "--root", str(REPO))
    assert "vmalert not found: skipped `vmalert -dryRun`" in result.output


@pytest.mark.live
@needs_victoria_metrics
def test_a_held_baseline_chained_across_groups_fires_on_victoria_metrics_in_the_second_pass(tmp_path: Path):
    """The divergence reads chained recordings (its quietest baselines from recorded medians, its
    hysteresis from a held baseline recorded in the main group from the hold group's recording).
    vmalert replays one group after the other, so after a second pass it fires where Prometheus does."""
    timing = Timing(start=START)
    recorded = read_run(SAMPLE_RUN, run_labels(SAMPLE_RUN, "verl"), timing)
    [expected] = [outcome.firing[0].start for result in backtest([SAMPLE_RUN], REPO, Config(), timing)
                  for outcome in result.alerts if outcome.alertname == "VerlTrainingDivergence" and outcome.firing]
    rules = rules_read_by("VerlTrainingDivergence", [REPO / "rendered/rules/stability.yaml"], tmp_path)
    groups = [[r.get("record") or r["alert"] for r in g["rules"]] for g in yaml.safe_load(rules.read_text())["groups"]]
    assert len(groups) == 2 and groups[0][-1] == "VerlTrainingDivergence"
    assert any(":baseline_held" in name for name in groups[0]) and groups[1]  # the hold group
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        replay(server, [rules], recorded.times[0], recorded.end, "1m", tmp_path)
        replay(server, [rules], recorded.times[0], recorded.end, "1m", tmp_path)
        got = firing_starts(server, gap_seconds=60)
    assert set(got) == {"VerlTrainingDivergence"}
    assert abs(got["VerlTrainingDivergence"][0] - expected) <= 60, (got, expected)


@pytest.mark.live
@pytest.mark.slow
@needs_victoria_metrics
def test_a_replay_through_victoria_metrics_starts_the_alerts_prometheus_backtest_starts(tmp_path: Path):
    timing = Timing(start=START)
    recorded = read_run(SAMPLE_RUN, run_labels(SAMPLE_RUN, "verl"), timing)
    expected = {outcome.alertname: [firing.start for firing in outcome.firing]
                for result in backtest([SAMPLE_RUN], REPO, Config(), timing)
                for outcome in result.alerts if outcome.firing}
    assert set(expected) >= {"VerlTrainingDivergence"}, expected
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        # GPU rules read Ray's series, which the step log does not hold: nothing to replay there.
        # vmalert replays one group after the other, so alerts that read a held baseline (recorded
        # from the `-hold` group, which comes after them) see it only in a second pass.
        for _ in range(2):
            replay(server, [f for f in RULE_FILES if f.stem != "gpu"], recorded.times[0], recorded.end, "1m",
                   tmp_path)
        got = firing_starts(server, gap_seconds=60)
    assert set(got) == set(expected), (got, expected)
    for name, starts in expected.items():
        # Without keep_firing_for (the dialect) an alert may resolve and fire again where Prometheus
        # holds it: compare when each first fires, to within one evaluation interval.
        assert abs(got[name][0] - starts[0]) <= 60, (name, got[name], starts)


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
    recorded = read_run(log, run_labels(log, "verl"), timing)
    expected = {outcome.alertname: outcome.firing[0].start
                for result in backtest([log], REPO, Config(), timing) for outcome in result.alerts if outcome.firing}
    with VictoriaMetricsServer(tmp_path / "victoria-metrics") as server:
        server.import_prometheus_text(prometheus_text([recorded], timing.scrape_interval))
        # VictoriaMetrics (1.79) dropped the NaN samples: only the finite loss is stored.
        assert set(server.export('verl_actor_pg_loss{experiment="nan-loss"}')[0]["values"]) == {0.1}
        rules = rules_read_by("VerlNaNMetrics", [REPO / "rendered/rules/stability.yaml"], tmp_path)
        replay(server, [rules], recorded.times[0], recorded.end, "1m", tmp_path)
        got = firing_starts(server, gap_seconds=60)
    assert "VerlNaNMetrics" in expected and "VerlNaNMetrics" in got, (expected, got)
    assert abs(got["VerlNaNMetrics"][0] - expected["VerlNaNMetrics"]) <= 60
