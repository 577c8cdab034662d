"""The exporter reads a step as soon as verl writes it (inotify), not at its next poll, and answers
scrapes of an unchanged step from the bytes it made for the last one."""

import os
import subprocess
import sys
import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from support import scrape, start_exporter, wait_until
from dashgen.lifecycle import RunPhase
from dashgen.replay.prometheus_server import stop_process
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_watch import LogChanges
from dashgen.runtime.metrics_server import serve_metrics

LONG = 30.0  # a poll interval no test waits out: only a change notification ends a wait early

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def returns_early(changes: LogChanges, change) -> bool:
    """Whether wait(LONG) ends well before LONG once `change` is made from another thread."""
    timer = threading.Timer(0.05, change)
    timer.start()
    started = time.monotonic()
    try:
        changes.wait(LONG)
    finally:
        timer.join()
    return time.monotonic() - started < LONG / 3


@linux_only
def test_writes_creation_replacement_and_truncation_end_a_wait(tmp_path):
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    with LogChanges(log) as changes:
        assert changes.notified
        assert returns_early(changes, lambda: log.write_text("{}\n"))  # created
        assert returns_early(changes, lambda: log.open("a").write("{}\n"))  # appended
        (tmp_path / "proj" / "new.jsonl").write_text("{}\n")
        assert returns_early(changes, lambda: os.replace(tmp_path / "proj" / "new.jsonl", log))  # replaced
        assert returns_early(changes, lambda: log.open("a").write("{}\n"))  # the new file is watched
        assert returns_early(changes, lambda: log.write_text(""))  # truncated


@linux_only
def test_a_log_reached_through_a_symlink_is_watched(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    log.symlink_to(target)
    with LogChanges(log) as changes:
        assert returns_early(changes, lambda: target.open("a").write("{}\n"))


def test_without_inotify_a_short_poll_and_wake_end_a_wait(tmp_path):
    with LogChanges(tmp_path / "missing" / "exp.jsonl", use_inotify=False) as changes:
        assert not changes.notified
        started = time.monotonic()
        changes.wait(LONG)
        assert time.monotonic() - started < LONG / 3
    with LogChanges(tmp_path / "exp.jsonl") as changes:
        assert returns_early(changes, changes.wake)


def test_close_leaves_no_descriptor_open(tmp_path):
    before = set(os.listdir("/proc/self/fd"))
    changes = LogChanges(tmp_path / "exp.jsonl")
    changes.wait(0)
    changes.close()
    assert set(os.listdir("/proc/self/fd")) <= before


def metrics(port: int) -> str:
    return scrape(port) or ""


@linux_only
@pytest.mark.live
def test_export_serves_a_new_step_long_before_its_poll_and_stops_at_once(tmp_path):
    log = tmp_path / "proj" / "exp.jsonl"
    log.parent.mkdir()
    log.write_text('{"step": 1, "data": {"actor/ppo_kl": 0.1}}\n')
    exporter = start_exporter(log, poll_interval=str(LONG), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    process, port = exporter.process, exporter.port
    try:
        wait_until(lambda: 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.1' in metrics(port), 30, "step 1")
        time.sleep(0.2)  # the exporter is waiting for a change now
        with log.open("a") as handle:
            handle.write('{"step": 2, "data": {"actor/ppo_kl": 0.2}}\n')
        written = time.monotonic()
        wait_until(lambda: 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.2' in metrics(port), LONG / 3,
                   "step 2 before the next poll")
        assert time.monotonic() - written < LONG / 3
        process.terminate()
        process.wait(timeout=LONG / 3)  # SIGTERM ends the wait for a change at once
    finally:
        stop_process(process)


def test_a_scrape_is_answered_from_the_last_ones_bytes_until_the_state_changes():
    state = RunState("proj", "exp")
    state.record(1, {"actor/ppo_kl": 0.1})
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    server = serve_metrics(registry, "127.0.0.1", 0, version=lambda: state.version)
    try:
        port = server.server_port
        first = metrics(port)
        assert metrics(port) == first and 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.1' in first
        state.record(2, {"actor/ppo_kl": 0.2})
        assert 'verl_actor_ppo_kl{experiment="exp",project="proj"} 0.2' in metrics(port)
        state.ended(RunPhase.CRASHED, 1)
        assert 'verl_run_exit_code{experiment="exp",project="proj"} 1.0' in metrics(port)
    finally:
        server.shutdown()
        server.server_close()


def test_scrape_threads_wait_for_the_next_scrape_and_end_with_the_server():
    state = RunState("proj", "exp")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    server = serve_metrics(registry, "127.0.0.1", 0, version=lambda: state.version)

    def scrape_threads() -> list[threading.Thread]:
        return [thread for thread in threading.enumerate() if thread.name == "scrape"]

    try:
        for step in range(20):
            state.record(step, {"actor/ppo_kl": 0.1})
            assert "verl_actor_ppo_kl" in metrics(server.server_port)
        assert 1 <= len(scrape_threads()) < 10  # kept for the next scrapes, not one per scrape
    finally:
        server.shutdown()
        server.server_close()
    wait_until(lambda: not scrape_threads(), 5, "the scrape threads to end")


def test_a_scrape_thread_still_answering_when_the_server_closes_ends_too(monkeypatch):
    """The race of a scrape answered just before the close: its thread comes back for the next
    connection only after server_close has woken the waiting ones."""
    from dashgen.runtime import metrics_server

    answered = threading.Event()
    original = metrics_server._MetricsServer.shutdown_request

    def slow_to_come_back(self, request):
        original(self, request)  # the client has its answer now
        answered.set()
        time.sleep(0.5)  # ... and the server closes before this thread waits for the next connection

    monkeypatch.setattr(metrics_server._MetricsServer, "shutdown_request", slow_to_come_back)
    state = RunState("proj", "exp")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    server = serve_metrics(registry, "127.0.0.1", 0, version=lambda: state.version)
    try:
        state.record(1, {"actor/ppo_kl": 0.1})
        assert "verl_actor_ppo_kl" in metrics(server.server_port)
        assert answered.wait(5)
    finally:
        server.shutdown()
        server.server_close()
    wait_until(lambda: not [t for t in threading.enumerate() if t.name == "scrape"], 5, "the scrape thread to end")
