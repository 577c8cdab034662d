"""The exporter survives any line, stays stoppable, keeps its state bounded and reports what it drops."""

import json
import math
import os
import signal
import time
import tracemalloc

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from dashgen.runtime.exporter import RunState

from dashgen.runtime.log_follower import MAX_LINE_BYTES, LogFollower, run_from_path
from dashgen.sources.step_statistics import ServedStatistics, StepStatistic
from dashgen.formats.verl_log import MAX_REMEMBERED_KEYS, MAX_UNKNOWN_SERIES, LineError, StepMapper, parse_line
from support import announced_port, dashgen_process, start_exporter, wait_until


def line(step: int, data: dict) -> bytes:
    return (json.dumps({"step": step, "data": data}) + "\n").encode()


def counters(state: RunState) -> dict[str, float]:
    return {sample.name: sample.value for family in state.collect() for sample in family.samples
            if sample.name.startswith("verl_exporter_") and sample.name.endswith("_total")}


def follow(tmp_path, *chunks: bytes, **kwargs) -> tuple[RunState, list[str]]:
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir(exist_ok=True)
    said: list[str] = []
    state = RunState("proj", "exp")
    follower = LogFollower(path, state, say=said.append, **kwargs)
    with open(path, "wb") as handle:
        for chunk in chunks:
            handle.write(chunk)
            handle.flush()
            follower.poll()
    return state, said


def test_deep_nesting_is_an_unparseable_line_not_a_crash(tmp_path):
    deep = b'{"step": 1, "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    with pytest.raises(LineError, match="nested deeper"):
        parse_line(deep)
    state, _ = follow(tmp_path, deep, line(2, {"actor/ppo_kl": 0.5}))
    assert counters(state)["verl_exporter_parse_errors_total"] == 1
    assert state.last_step == 2 and state._values == {"verl_actor_ppo_kl": 0.5, "verl_training_global_step": 2.0}


def test_an_overlong_line_is_dropped_and_counted_without_holding_it(tmp_path):
    long_line = b'{"step": 1, "data": {"x": "' + b"a" * 3000 + b'"}}\n'
    # Written in pieces, as a writer without newlines would: never held beyond the limit.
    state, _ = follow(tmp_path, long_line[:1000], long_line[1000:2500], long_line[2500:],
                      line(2, {"actor/ppo_kl": 0.5}), max_line_bytes=2048)
    assert counters(state)["verl_exporter_dropped_lines_total"] == 1
    assert counters(state)["verl_exporter_parse_errors_total"] == 0
    assert state.last_step == 2


def test_the_default_line_limit_drops_a_line_of_more_than_16_mib(tmp_path):
    big = b'{"step": 1, "data": {"x": "' + b"a" * (MAX_LINE_BYTES + 10) + b'"}}\n'
    tracemalloc.start()
    state, _ = follow(tmp_path, big, line(2, {"actor/ppo_kl": 0.5}))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert counters(state)["verl_exporter_dropped_lines_total"] == 1 and state.last_step == 2
    # The 16 MiB line is never concatenated whole: at most the limit plus a read chunk or two.
    assert peak < MAX_LINE_BYTES + 4 * 2**20


def test_a_flood_of_new_keys_is_bounded_and_counted(tmp_path):
    steps = [line(step, {f"flood/{step}/{i}": 1.0 for i in range(5000)} | {"actor/ppo_kl": 0.1})
             for step in range(1, 4)]
    state, said = follow(tmp_path, *steps)
    mapper = state._mapper
    exported_unknown = [name for name in mapper._owner if mapper._owner[name] != "the catalog"]
    assert len(exported_unknown) == MAX_UNKNOWN_SERIES
    assert len(mapper._by_key) <= len(mapper._owner) + MAX_REMEMBERED_KEYS
    # Steps 1-2 are caught up in one poll each here; the newest step's keys are all over the limit.
    assert counters(state)["verl_exporter_dropped_keys_total"] > 0
    assert "verl_actor_ppo_kl" in state._values
    assert any("distinct unknown keys; dropping new ones" in message for message in said)


def test_keys_that_map_to_one_name_are_reported_not_overwritten(tmp_path):
    state, said = follow(tmp_path, line(1, {"my.metric": 1.0, "my/metric": 2.0, "kl_é": 3.0, "kl_ü": 4.0,
                                            "actor.ppo_kl": 9.0, "actor/ppo_kl": 0.1}))
    assert state._values["verl_my_metric"] == 1.0  # the first key keeps the name
    assert state._values["verl_kl_"] == 3.0
    assert state._values["verl_actor_ppo_kl"] == 0.1  # the catalog's key owns the catalog's name
    assert counters(state)["verl_exporter_key_collisions_total"] == 3
    joined = "\n".join(said)
    assert "keys 'my/metric' and 'my.metric' both map to verl_my_metric" in joined
    assert "keys 'kl_ü' and 'kl_é' both map to verl_kl_" in joined
    assert "keys 'actor.ppo_kl' and 'the catalog' both map to verl_actor_ppo_kl" in joined


def test_mapper_state_stays_flat_over_many_steps_of_new_keys():
    mapper = StepMapper()
    for step in range(20):
        mapper.map({f"k{step}_{i}": 1.0 for i in range(2000)})
    assert len(mapper._by_key) <= len(mapper._owner) + MAX_REMEMBERED_KEYS
    assert len(mapper.counts.notes) <= 100


def test_a_symlinked_log_is_named_by_the_link(tmp_path):
    target = tmp_path / "storage" / "abc123" / "real.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("")
    link = tmp_path / "gsm8k" / "ppo-7b.jsonl"
    link.parent.mkdir()
    link.symlink_to(target)
    assert run_from_path(link) == ("gsm8k", "ppo-7b")


@pytest.mark.live
@pytest.mark.parametrize("args, expected", [
    (["--jsonl", "", "--listen", "127.0.0.1:0"], "--jsonl '': give the path of verl's step log"),
    (["--jsonl", "x.jsonl", "--listen", "127.0.0.1:99999"], "--listen '127.0.0.1:99999': expected host:port"),
    (["--jsonl", "x.jsonl", "--listen", "9464"], "--listen '9464': expected host:port"),
    (["--jsonl", "x.jsonl", "--listen", "256.1.1.1:9464"], "cannot listen on 256.1.1.1:9464"),
])
def test_bad_export_arguments_are_one_clear_error(args, expected):
    process = dashgen_process("export", *args)
    try:
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode != 0 and expected in stderr and "Traceback" not in stderr, stderr


@pytest.mark.live
def test_port_0_announces_the_port_it_got(tmp_path):
    import urllib.request

    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_bytes(line(1, {"actor/ppo_kl": 0.25}))
    process = dashgen_process("export", "--jsonl", str(path), "--listen", "127.0.0.1:0")
    try:
        port = announced_port(process)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.25' in response.read().decode()
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_listen_without_a_host_means_every_interface():
    from dashgen.cli.trainer import _listen_address

    assert _listen_address(":0") == ("0.0.0.0", 0)
    assert _listen_address("[::1]:9464") == ("::1", 9464)


@pytest.mark.live
def test_a_fifo_is_refused_at_start_and_waited_out_later_without_blocking_sigterm(tmp_path):
    fifo = tmp_path / "proj" / "exp.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    process = start_exporter(fifo).process
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 1 and "not a regular file" in stderr

    later = tmp_path / "proj" / "later.jsonl"
    process = start_exporter(later).process
    try:
        assert "waiting for" in process.stderr.readline() + process.stderr.readline()
        os.mkfifo(later)  # appears as a FIFO no one writes to: opening it would block forever
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    finally:
        process.kill()
    assert process.returncode == 0 and "is not a regular file" in stderr


# Lines a float, the JSON parser or the step's meaning cannot take: each one a parse error, never an end.
HOSTILE_LINES = {
    "step beyond a float (json reads inf)": b'{"step": 1e400, "data": {"actor/entropy": 1.0}}',
    "step an integer of 400 digits": b'{"step": ' + b"9" * 400 + b', "data": {"actor/entropy": 1.0}}',
    "step an integer of 5,000 digits": b'{"step": ' + b"9" * 5000 + b', "data": {"actor/entropy": 1.0}}',
    "global step of 400 digits": b'{"data": {"training/global_step": ' + b"9" * 400 + b', "actor/entropy": 1.0}}',
    "step beyond 2^53": b'{"step": 1e300, "data": {"actor/entropy": 1.0}}',
    "step NaN": b'{"step": NaN, "data": {"actor/entropy": 1.0}}',
    "step true": b'{"step": true, "data": {"actor/entropy": 1.0}}',
    "step a string": b'{"step": "5", "data": {"actor/entropy": 1.0}}',
    "step negative": b'{"step": -5, "data": {"actor/entropy": 1.0}}',
    "step fractional": b'{"step": 4.5, "data": {"actor/entropy": 1.0}}',
    "nested 100,000 deep": b'{"step": 4, "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


@pytest.mark.parametrize("hostile", HOSTILE_LINES.values(), ids=HOSTILE_LINES.keys())
def test_a_line_no_step_can_be_read_from_is_a_parse_error(hostile):
    with pytest.raises(LineError):
        parse_line(hostile)


@pytest.mark.parametrize("start_at_tail", [False, True], ids=["appended", "in the log at a tail start"])
def test_hostile_lines_are_counted_and_the_run_goes_on(tmp_path, start_at_tail):
    good = [line(step, {"actor/entropy": 0.5}) for step in (1, 2)]
    hostile = b"".join(each + b"\n" for each in HOSTILE_LINES.values())
    if start_at_tail:  # read back from the log's end, then counted in the background
        path = tmp_path / "proj" / "exp.jsonl"
        path.parent.mkdir()
        path.write_bytes(b"".join(good) + hostile)
        state = RunState("proj", "exp")
        follower = LogFollower(path, state, start_at_tail=True)
        follower.poll()
        assert follower.wait_for_history(30)
        with open(path, "ab") as handle:
            handle.write(line(3, {"actor/entropy": 0.4}))
        follower.poll()
    else:
        state, _ = follow(tmp_path, *good, hostile, line(3, {"actor/entropy": 0.4}), start_at_tail=False)
    assert state.last_step == 3 and state._values["verl_actor_entropy"] == 0.4
    assert counters(state)["verl_exporter_parse_errors_total"] == len(HOSTILE_LINES)


@pytest.mark.live
def test_a_running_exporter_survives_every_hostile_line_and_serves_the_next_good_one(tmp_path, exporters):
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(line(step, {"actor/entropy": value}) for step, value in ((1, 0.5), (2, 0.7), (3, 0.9))))
    exporter = exporters(path)  # from this repository: it computes the rendered step windows
    run = '{experiment="exp",project="proj"}'
    wait_until(lambda: exporter.metrics().get(f"verl_exporter_steps_total{run}") == 3, 20, "the first steps counted")
    with open(path, "ab") as handle:
        for hostile in HOSTILE_LINES.values():  # one at a time, each read on its own
            handle.write(hostile + b"\n")
            handle.flush()
            time.sleep(0.06)
        handle.write(b'{"step": 4, "data": {"actor/entropy": 0.3, "custom/huge": ' + b"9" * 400 + b"}}\n")
    metrics = wait_until(lambda: (m := exporter.metrics()).get(f"verl_training_global_step{run}") == 4 and m, 20,
                         "the good line after the hostile ones served")
    assert metrics[f"verl_exporter_parse_errors_total{run}"] == len(HOSTILE_LINES)
    assert metrics[f"verl_actor_entropy{run}"] == 0.3 and metrics[f"verl_custom_huge{run}"] == math.inf
    assert metrics['verl_step_statistic{experiment="exp",project="proj",series="verl_actor_entropy",'
                   'statistic="median_5steps"}'] == pytest.approx(0.6)  # of 0.5, 0.7, 0.9, 0.3
    assert exporter.process.poll() is None


@pytest.mark.parametrize("start_at_tail", [False, True])
def test_a_step_time_past_any_plausible_one_is_untimed_not_the_exporters_end(tmp_path, start_at_tail):
    """timing_s/step 1e303 overflowed the step statistics' clock: an OverflowError ended `dashgen export`."""
    lines = [line(step, {"actor/entropy": 0.5, "timing_s/step": 1e303 if step == 3 else 2.0}) for step in range(1, 6)]
    path = tmp_path / "proj" / "exp.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"".join(lines))
    statistics = ServedStatistics((StepStatistic("verl_actor_entropy", "median", 3),), 60.0)
    state = RunState("proj", "exp", step_statistics=statistics)
    follower = LogFollower(path, state, say=lambda _: None, start_at_tail=start_at_tail)
    try:
        follower.poll()
        with open(path, "ab") as log:
            log.write(line(6, {"actor/entropy": 0.5, "timing_s/step": 1e303}))
        follower.poll()
    finally:
        follower.stop()
    assert state.last_step == 6
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    assert 'statistic="median_3steps"} 0.5' in generate_latest(registry).decode()
