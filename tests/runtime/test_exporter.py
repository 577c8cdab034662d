"""The verl step-log mapping, the tail -F follower, the /metrics exposition and `dashgen export`."""

import json
import math
import os
import re
import socket
import subprocess

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from dashgen.runtime.exporter import RunState, VerlPrometheusLogger

from dashgen.replay.prometheus_server import stop_process
from dashgen.runtime.log_follower import LogFollower, run_from_path
from dashgen.formats.verl_log import MAX_UNKNOWN_SERIES, StepMapper, parse_line
from support import start_exporter, wait_until


def line(step, **data) -> str:
    return json.dumps({"step": step, "data": {k.replace("__", "/"): v for k, v in data.items()}}) + "\n"


def test_mapping_follows_the_catalog_names_and_units():
    values = StepMapper().map({
        "actor/ppo_kl": 0.02, "timing_s/step": 61.5, "timing_per_token_ms/gen": 2.0,
        "perf/max_memory_reserved_gb": 1.5, "critic/score/mean": 1, "my/custom-metric": 3,
    })
    assert values == {"verl_actor_ppo_kl": 0.02, "verl_timing_step_seconds": 61.5,
                      "verl_timing_per_token_gen_seconds": 0.002,
                      "verl_perf_max_memory_reserved_bytes": 1.5 * 2**30, "verl_critic_score_mean": 1.0,
                      "verl_my_custom_metric": 3.0}
    assert StepMapper(export_unknown=False).map({"my/custom-metric": 3}) == {}


def test_version_aliases_and_the_preferred_key():
    assert StepMapper().map({"actor/entropy_loss": 0.7}) == {"verl_actor_entropy": 0.7}
    # verl 0.8+ logs both; the current key wins whatever the order.
    assert StepMapper().map({"actor/entropy_loss": 0.7, "actor/entropy": 0.6}) == {"verl_actor_entropy": 0.6}
    assert StepMapper().map({"actor/perf/max_memory_allocated_gb": 2.0}) == {
        "verl_perf_max_memory_allocated_bytes": 2.0 * 2**30}
    # verl before 0.2 (its getting-started notebook, TinyZero) timed its stages as timing/<stage>.
    assert StepMapper().map({"timing/gen": 12.5, "timing/update_actor": 3.0}) == {
        "verl_timing_gen_seconds": 12.5, "verl_timing_update_actor_seconds": 3.0}


def test_null_and_nan_become_nan_and_non_numbers_are_skipped():
    step, data = parse_line('{"step": 3, "data": {"actor/pg_loss": null, "actor/ppo_kl": NaN, '
                            '"actor/grad_norm": Infinity, "note": "text", "flag": true, "nested": {"a": 1}}}')
    values = StepMapper().map(data)
    assert step == 3
    assert math.isnan(values["verl_actor_pg_loss"]) and math.isnan(values["verl_actor_ppo_kl"])
    assert values["verl_actor_grad_norm"] == math.inf
    assert set(values) == {"verl_actor_pg_loss", "verl_actor_ppo_kl", "verl_actor_grad_norm"}


def test_a_key_that_would_shadow_the_exporters_own_metrics_is_dropped():
    assert StepMapper().map({"exporter/steps_total": 5}) == {}


# Keys that map onto a family or sample the exporter serves itself: the validation family (a
# second HELP in the text format), a counter's OpenMetrics family and its _created sample, Ray's link.
SHADOWING_KEYS = ("val_core", "val/aux", "exporter/steps", "exporter/dropped_keys_created", "run/ray_session_info",
                  "run/state")


def test_keys_named_like_the_exporters_own_families_leave_a_page_promtool_accepts(tmp_path):
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_page
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from dashgen.promtool import find_binary

    state = RunState("p", "e")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    state.record(1, {"actor/ppo_kl": 0.1, "val-core/gsm8k/acc/mean@1": 0.5, **{key: 1.0 for key in SHADOWING_KEYS}})
    page = generate_latest(registry)
    check = subprocess.run([find_binary("promtool"), "check", "metrics"], input=page, capture_output=True, timeout=60)
    assert check.returncode == 0, check.stderr.decode() + check.stdout.decode()
    list(text_string_to_metric_families(openmetrics_page(registry).decode()))  # what Prometheus asks for
    samples = {line.split("{")[0] for line in page.decode().splitlines() if not line.startswith("#")}
    assert "verl_actor_ppo_kl" in samples and not {"verl_exporter_steps", "verl_run_ray_session_info"} & samples
    assert f'verl_exporter_dropped_keys_total{{experiment="e",project="p"}} {float(len(SHADOWING_KEYS))}' in \
        page.decode()
    assert any("a name the exporter serves itself" in note for note in state.take_notes())


def test_a_log_read_in_one_poll_counts_dropped_keys_as_one_read_line_by_line(tmp_path):
    over_limit = {f"custom/k{i}": 1.0 for i in range(MAX_UNKNOWN_SERIES + 10)}  # 10 keys over the limit per step
    lines = [line(step, **{k.replace("/", "__"): v for k, v in over_limit.items()}, exporter__steps=1.0)
             for step in (1, 2, 3)]
    counted = []
    for chunks in (["".join(lines)], lines):  # one poll, then a poll per line
        path = tmp_path / f"{len(chunks)}" / "exp.jsonl"
        path.parent.mkdir()
        state = RunState("p", "e")
        follower = LogFollower(path, state, say=lambda _: None, start_at_tail=False)
        for chunk in chunks:
            with open(path, "a") as log:
                log.write(chunk)
            follower.poll()
        counted.append(re.search(r"^verl_exporter_dropped_keys_total\{.*\} (\S+)$", exposition(state), re.M).group(1))
    assert counted == ["33.0", "33.0"]


def test_lines_written_just_before_a_rotation_are_read(tmp_path):
    """logrotate's default: rename the log, then the writer opens a new one at the same path."""
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    state = RunState("p", "e")
    follower = LogFollower(path, state, say=lambda _: None)
    path.write_text(line(1, actor__ppo_kl=0.1) + line(2, actor__ppo_kl=0.2))
    follower.poll()
    for rotation in range(1, 4):
        with open(path, "a") as log:
            log.write(line(10 * rotation, actor__ppo_kl=0.3) + line(10 * rotation + 1, actor__ppo_kl=0.4))
        os.rename(path, path.with_name(f"exp.jsonl.{rotation}"))
        path.write_text(line(10 * rotation + 2, actor__ppo_kl=0.5))
        follower.poll()
    assert state.last_step == 32
    assert state.steps_total == 2 + 3 * 3  # every line of every file, none lost at a rename


def exposition(state: RunState) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    return generate_latest(registry).decode()


def test_follower_waits_reads_holds_partial_lines_and_counts_garbage(tmp_path):
    path = tmp_path / "proj" / "exp.jsonl"
    said = []
    state = RunState("proj", "exp")
    follower = LogFollower(path, state, say=said.append)
    assert follower.poll() == 0 and follower.poll() == 0
    assert said == [f"dashgen export: waiting for {path} to appear"]  # said once
    path.parent.mkdir()
    with open(path, "w") as log:
        log.write(line(1, actor__ppo_kl=0.01) + "garbage\n[1, 2]\n" + line(2, actor__ppo_kl=0.02))
        log.write('{"step": 3, "data": {"actor/ppo_kl": 0.')  # verl is mid-write
    follower.poll()
    text = exposition(state)
    assert 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.02' in text
    assert 'verl_exporter_steps_total{experiment="exp",project="proj"} 2.0' in text
    assert 'verl_exporter_parse_errors_total{experiment="exp",project="proj"} 2.0' in text
    with open(path, "a") as log:
        log.write('03}}\n')
    follower.poll()
    assert 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.03' in exposition(state)
    assert state.last_step == 3 and state.steps_total == 3


def test_truncation_and_replacement_start_over_and_a_backward_step_is_noted(tmp_path):
    path = tmp_path / "run.jsonl"
    said = []
    state = RunState("p", "e")
    follower = LogFollower(path, state, say=said.append)
    path.write_text(line(1, actor__ppo_kl=0.1) + line(2, actor__ppo_kl=0.2) + line(3, actor__ppo_kl=0.3))
    follower.poll()
    assert state.last_step == 3
    # verl opens the log with mode "w": a restarted run truncates it.
    path.write_text(line(1, actor__ppo_kl=0.5))
    follower.poll()
    assert state.last_step == 1 and "verl_actor_ppo_kl" in exposition(state)
    assert any("truncated" in m for m in said) and any("step went back from 3 to 1" in m for m in said)
    replacement = tmp_path / "new.jsonl"
    replacement.write_text(line(7, actor__ppo_kl=0.7))
    os.replace(replacement, path)
    follower.poll()
    assert state.last_step == 7 and any("replaced" in m for m in said)
    assert 'verl_actor_ppo_kl{experiment="e",project="p"} 0.7' in exposition(state)


def test_a_step_drops_keys_it_no_longer_logs(tmp_path):
    state = RunState("p", "e")
    state.record(1, {"actor/ppo_kl": 0.1, "critic/vf_loss": 1.0})
    state.record(2, {"actor/ppo_kl": 0.2})
    assert "verl_critic_vf_loss" not in exposition(state)


def test_library_form_updates_the_same_metrics_and_never_raises():
    logger = VerlPrometheusLogger("gsm8k", "grpo")
    logger.log({"actor/entropy": 0.4, "timing_s/gen": 12.0}, step=5)
    logger.log("not a dict", step=6)  # type: ignore[arg-type]
    text = generate_latest(logger.registry).decode()
    assert 'verl_actor_entropy{experiment="grpo",project="gsm8k"} 0.4' in text
    assert 'verl_timing_gen_seconds{experiment="grpo",project="gsm8k"} 12.0' in text
    assert 'verl_exporter_parse_errors_total{experiment="grpo",project="gsm8k"} 1.0' in text


def test_project_and_experiment_default_from_verls_log_path(tmp_path):
    assert run_from_path(tmp_path / "gsm8k" / "ppo-qwen-7b.jsonl") == ("gsm8k", "ppo-qwen-7b")


@pytest.mark.live
def test_export_serves_the_newest_step_and_follows_appends(tmp_path):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_text(line(1, actor__ppo_kl=0.01))
    exporter = start_exporter(path)
    try:
        assert 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.01' in exporter.scrape()
        with open(path, "a") as log:
            log.write(line(2, actor__ppo_kl=0.02))
        wait_until(lambda: 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.02' in exporter.scrape(), 10,
                   "step 2 served")
    finally:
        stop_process(exporter.process)
    assert exporter.process.returncode == 0


@pytest.mark.live
def test_export_serves_the_step_windows_the_projects_rules_read(tmp_path):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_text("".join(line(step, actor__entropy=entropy) for step, entropy in ((1, 0.5), (2, 0.7), (3, 0.9))))
    exporter = start_exporter(path)  # from this repository: its rendered/exporter/step-statistics.yaml
    try:
        assert ('verl_step_statistic{experiment="exp",project="proj",series="verl_actor_entropy",'
                'statistic="median_5steps"} 0.7') in exporter.scrape()
    finally:
        stop_process(exporter.process)
    unbuilt = start_exporter(path, "--root", str(tmp_path))  # a project never built: said, and none served
    try:
        assert "verl_step_statistic" not in unbuilt.scrape()
    finally:
        stop_process(unbuilt.process)
    assert "serving no statistics over steps" in unbuilt.process.stderr.read()


@pytest.mark.live
def test_export_on_a_port_in_use_fails_with_a_clear_message(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = start_exporter(tmp_path / "x.jsonl", port=port).process
        try:
            _, err = process.communicate(timeout=30)
        finally:
            process.kill()
    assert process.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in err


def test_a_log_rewritten_past_the_old_offset_between_polls_is_still_read_from_the_start(tmp_path):
    path = tmp_path / "run.jsonl"
    state = RunState("p", "e")
    follower = LogFollower(path, state, say=lambda m: None)
    path.write_text(line(1, actor__ppo_kl=0.1) + line(2, actor__ppo_kl=0.2))
    follower.poll()
    with open(path, "r+") as log:  # same inode, rewritten and longer than before
        log.write(line(1, actor__ppo_kl=0.5, actor__grad_norm=1.0) + line(2, actor__ppo_kl=0.6) + line(3, actor__ppo_kl=0.7))
    follower.poll()
    assert state.parse_errors_total == 0 and state.last_step == 3
    assert 'verl_actor_ppo_kl{experiment="e",project="p"} 0.7' in exposition(state)


def test_a_line_without_training_values_keeps_the_last_step_values_and_moves_the_step(tmp_path):
    """A validation-only line (verl's check before training, a TRL eval entry) is no training step:
    a key missing from it is no value, so the series the alerts read do not vanish on it."""
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"step": 20, "data": {"actor/entropy": 0.5, "response_length/clip_ratio": 0.2}}) + "\n"
                    + json.dumps({"step": 20, "data": {"val-aux/openai/gsm8k/reward/mean@1": 0.7}}) + "\n")
    state = RunState("proj", "exp")
    LogFollower(path, state, start_at_tail=False).poll()
    assert state._values == {"verl_actor_entropy": 0.5, "verl_response_length_clip_ratio": 0.2,
                             "verl_training_global_step": 20.0}
    with open(path, "a") as log:
        log.write(json.dumps({"step": 40, "data": {"val-core/openai/gsm8k/reward/mean@1": 0.8}}) + "\n")
    LogFollower(path, state, start_at_tail=False).poll()
    assert state._values["verl_training_global_step"] == 40.0 and state._values["verl_actor_entropy"] == 0.5
    with open(path, "a") as log:
        log.write(json.dumps({"step": 41, "data": {"actor/entropy": 0.4}}) + "\n")
    LogFollower(path, state, start_at_tail=False).poll()
    assert state._values == {"verl_actor_entropy": 0.4, "verl_training_global_step": 41.0}  # a training line replaces


def test_export_help_gives_the_poll_interval_its_own_default_and_the_short_poll_as_such():
    """The help once said 0.05 s beside `[default: 0.5]`: both numbers now come from where they
    are used, and each says what it is."""
    import re

    from click.testing import CliRunner

    from dashgen.cli import cli
    from dashgen.cli.options import DEFAULT_POLL_SECONDS
    from dashgen.runtime.log_watch import SHORT_POLL_SECONDS

    result = CliRunner().invoke(cli, ["export", "--help"], terminal_width=200)
    assert result.exit_code == 0
    entry = re.search(r"--poll-interval FLOAT RANGE\s+(.*?)\n\s+--", result.output, re.S).group(1)
    text = " ".join(entry.split())
    assert f"(default {DEFAULT_POLL_SECONDS:g})" in text
    assert f"elsewhere the log is also looked at every {SHORT_POLL_SECONDS:g} s, whatever this interval" in text
    assert set(re.findall(r"\d+(?:\.\d+)?", text)) == {f"{DEFAULT_POLL_SECONDS:g}", f"{SHORT_POLL_SECONDS:g}", "0.01", "60"}
    option = next(p for p in cli.commands["export"].params if p.name == "poll_interval")
    assert option.default == DEFAULT_POLL_SECONDS
