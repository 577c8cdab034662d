"""A series the run logged on every line and stopped logging: followed by the exporter and the backfill alike."""

import json
from pathlib import Path

from dashgen.catalog import SERIES_UNLOGGED_METRIC
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.evaluation.synthetic_runs import step_data
from dashgen.runtime.exporter import RunState
from dashgen.sources.series_arrival import REGULAR_LINES, SeriesArrival


def test_a_regular_series_that_stops_is_counted_in_training_lines_until_it_returns():
    arrival = SeriesArrival()
    for _ in range(REGULAR_LINES):
        arrival.observe({"entropy", "reward"})
    assert arrival.unlogged() == {}
    for _ in range(3):
        arrival.observe({"reward"})
    assert arrival.unlogged() == {"entropy": 3}
    arrival.observe({"reward", "entropy"})
    assert arrival.unlogged() == {}


def test_a_series_logged_now_and_then_or_not_yet_regular_is_not_followed():
    arrival = SeriesArrival()
    for line in range(60):  # a validation timing every 5 lines; a key that stops after 9 lines
        arrival.observe({"reward", *(["testing"] if line % 5 == 0 else []), *(["young"] if line < REGULAR_LINES - 1 else [])})
    assert arrival.unlogged() == {}


def test_only_the_followed_series_are_judged():
    arrival = SeriesArrival(followed={"entropy"})
    for _ in range(REGULAR_LINES):
        arrival.observe({"entropy", "my_key"})
    arrival.observe(set())
    assert arrival.unlogged() == {"entropy": 1}


def _run_without_entropy_from(path: Path, lines: int, stops_at: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for step in range(1, lines + 1):
            data = step_data(step)
            if step >= stops_at:
                del data["actor/entropy"]
            if step == 13:
                data["actor/ppo_kl"] = None  # a NaN is a value that arrived
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    return path


def test_the_exporter_and_the_backfill_serve_the_same_count(tmp_path: Path):
    log = _run_without_entropy_from(tmp_path / "gsm8k" / "renamed.jsonl", lines=20, stops_at=15)
    state = RunState("gsm8k", "renamed")
    for text in log.read_text().splitlines():  # as `dashgen export` reads a run's lines as they come
        record = json.loads(text)
        state.record(record["step"], record["data"])
    served = {sample.labels["series"]: sample.value for family in state.collect() if family.name == SERIES_UNLOGGED_METRIC
              for sample in family.samples}
    assert served == {"verl_actor_entropy": 6}
    run = read_run(log, run_labels(log, "verl"), Timing(start=1_700_000_000.0))
    assert run.unlogged[-1] == {"verl_actor_entropy": 6}
    assert run.unlogged[13] == {} and run.unlogged[14] == {"verl_actor_entropy": 1}
    assert {"verl_actor_entropy", "verl_actor_ppo_kl"} <= run.logged
