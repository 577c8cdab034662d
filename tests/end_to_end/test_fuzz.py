"""Fuzz-style: random config values and random log lines give a clear error or success, never a
traceback, and leave nothing behind. Seeded, and bounded in cases and time."""

import json
import random
import string
import tempfile
import time

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from conftest import REPO, run, tree_digest
from dashgen.compiler.output.tree_writer import STAGING
from dashgen.config import CONFIG_FILE_NAME, Config
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower

TIME_BUDGET_S = 40


def random_text(rng: random.Random) -> str:
    alphabet = string.printable + "éü中\u200b\U0001F600:#'\"[]{}|&*!%@`"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))


def random_value(rng: random.Random):
    choices = [
        lambda: rng.choice([0, 1, -1, 2**70, 0.5, -0.5, 1e308, float("nan"), float("inf"), 1e-300]),
        lambda: rng.choice(["10m", "0s", "90s", "1h30m", "5", "1 minute", "-5m", "999999999y", "now-6h"]),
        lambda: rng.choice(["40GiB", "1 TB", "80", "localhost:9464", "host:0", "[::1]:9090", "verl", "ray"]),
        lambda: random_text(rng),
        lambda: rng.choice([None, True, False, [], {}, [1, 2], {"a": 1}]),
    ]
    return rng.choice(choices)()


def random_config(rng: random.Random) -> str:
    fields = [name for name in Config.__dataclass_fields__]
    data = {rng.choice(fields): random_value(rng) for _ in range(rng.randint(1, 3))}
    if rng.random() < 0.1:
        data[random_text(rng) or "x"] = 1
    text = yaml.safe_dump(data, allow_unicode=True)
    if rng.random() < 0.1:  # broken YAML or encoding
        text = rng.choice([text[: len(text) // 2] + "\n  - [", "\udcff" + text])
    return text


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """Temporary files of in-process commands go here, to be seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_random_config_values(project, own_tmp):
    rng = random.Random(20251123)
    deadline = time.monotonic() + TIME_BUDGET_S
    outcomes = {0: 0, 1: 0}
    for case in range(60):
        if time.monotonic() > deadline:
            break
        before = tree_digest(project / "rendered")
        text = random_config(rng)
        path = project / CONFIG_FILE_NAME
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        result = run("build", "--root", str(project))  # a traceback would raise here
        assert result.exit_code in (0, 1), (text, result.output)
        outcomes[result.exit_code] += 1
        if result.exit_code == 1:
            assert result.output.startswith(f"Error: {path}: "), (text, result.output)
            assert tree_digest(project / "rendered") == before
        else:
            checked = run("check", "--root", str(project))  # YAML parses, promtool check config passes
            assert checked.exit_code == 0, (text, checked.output)
        assert not (project / STAGING).exists()
        assert list(own_tmp.iterdir()) == []
    assert outcomes[0] and outcomes[1], outcomes


def random_line(rng: random.Random) -> bytes:
    kind = rng.randrange(8)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
    if kind == 1:
        depth = rng.choice([10, 999, 1500, 50_000])
        return b'{"step": 1, "data": {"x": ' + b"[" * depth + b"]" * depth + b"}}"
    if kind == 2:
        return b'{"step": ' + str(rng.choice([1, -5, 10**30, "1e400", "NaN"])).encode() + b', "data": {"a": 1}'
    data = {}
    for _ in range(rng.randint(0, 40)):
        key = rng.choice([random_text(rng), f"actor/{random_text(rng)}", "actor/ppo_kl", "timing_s/step",
                          "perf/max_memory_reserved_gb", "actor.ppo_kl", "verl_exporter_steps_total"])
        data[key] = rng.choice([rng.uniform(-1e6, 1e6), 10**400, None, True, "x", [1], {"y": 2},
                                float("nan"), float("inf"), -0.0, 2**63])
    step = rng.choice([rng.randint(0, 10**6), -1, 1.5, "7", None, float("inf")])
    record = {"step": step, "data": data} if rng.random() < 0.9 else rng.choice([[], "x", 3, {"data": 1}])
    return json.dumps(record, ensure_ascii=rng.random() < 0.5).encode()


def test_random_log_lines_through_the_exporter_and_backfill(tmp_path, own_tmp):
    rng = random.Random(9)
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    state = RunState("proj", "exp")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    follower = LogFollower(path, state, say=lambda message: None)
    lines = [random_line(rng) for _ in range(400)]
    blob = b"\n".join(lines) + b"\n"
    with open(path, "wb") as handle:
        position = 0
        while position < len(blob):  # written in random pieces, read as they come
            size = rng.randint(1, 20_000)
            handle.write(blob[position:position + size])
            handle.flush()
            position += size
            follower.poll()
            generate_latest(registry)  # /metrics can always be rendered
    follower.close()
    exposition = generate_latest(registry).decode()
    assert "verl_exporter_parse_errors_total" in exposition
    assert 0 < state.steps_total and state.steps_total + state.parse_errors_total <= blob.count(b"\n")

    for attempt in range(3):
        run_file = tmp_path / "runs" / f"fuzz{attempt}.jsonl"
        run_file.parent.mkdir(exist_ok=True)
        run_file.write_bytes(b"\n".join(rng.sample(lines, 100)) + b"\n")
        result = run("backfill", str(run_file), "--tsdb", str(tmp_path / f"tsdb{attempt}"), "--root", str(REPO),
                     "--start", "1700000000")
        assert result.exit_code in (0, 1), result.output
        if result.exit_code == 1:
            assert result.output.startswith(f"Error: {run_file}"), result.output
        assert list(own_tmp.iterdir()) == []
