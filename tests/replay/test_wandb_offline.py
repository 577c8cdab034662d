"""A W&B offline run folder read as its run (issue 55, item 3), through the wandb package's own reader
(`wandb leet inspect --json`), with no network: the run is logged as verl's wandb logger logs it
(`wandb.log(data, step=step)`, WANDB_MODE=offline) by the real wandb package, then read back."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashgen.formats.wandb_offline import is_wandb_offline_run, wandb_log
from dashgen.replay.backfill import Timing, read_run, recorded_format
from dashgen.review.corpus import public_corpus

pytestmark = pytest.mark.heavy  # wandb-core starts and reads for seconds
pytest.importorskip("wandb")
RUN = "verl-qwen25-7b-gsm8k-ppo-dstack"
LABELS = {"job": "verl", "instance": "i", "project": "p", "experiment": "e"}
TIMING = Timing(start=1_735_689_600.0, default_step_seconds=60.0)
# verl's wandb logger (verl/utils/tracking.py): wandb.init(project, name, config), then log(data, step).
LOGGER = """
import json, math, sys, wandb
run = wandb.init(project="gsm8k", name="ppo", dir=sys.argv[2], config={"trainer": {"total_epochs": 1}})
for line in open(sys.argv[1]):
    record = json.loads(line)
    run.log({key: math.nan if value is None else value for key, value in record["data"].items()}, step=record["step"])
run.finish()
"""


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wandb")
    environment = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    subprocess.run([sys.executable, "-c", LOGGER, str(public_corpus() / RUN / "steps.jsonl"), str(folder)],
                   check=True, env=environment, timeout=600, cwd=folder)
    [run] = (folder / "wandb").glob("offline-run-*")
    return run


def test_an_offline_run_reads_as_the_same_run_as_its_step_log(offline_run: Path):
    assert is_wandb_offline_run(offline_run) and recorded_format(offline_run) is not None
    assert not is_wandb_offline_run(offline_run.parent)  # the wandb/ folder above it is no run
    mine = read_run(offline_run, LABELS, TIMING)
    theirs = read_run(public_corpus() / RUN / "steps.jsonl", LABELS, TIMING)
    assert mine.steps == theirs.steps and len(mine.steps) > 300
    for read, expected in zip(mine.values, theirs.values):
        assert read.keys() == expected.keys()
        assert all((math.isnan(read[key]) and math.isnan(expected[key])) or read[key] == expected[key] for key in read)
    # The transaction log given itself is read too, known by its first bytes.
    log = wandb_log(offline_run)
    renamed = offline_run / "renamed.bin"
    renamed.write_bytes(log.read_bytes())
    assert read_run(renamed, LABELS, TIMING).steps == theirs.steps
    renamed.unlink()


def test_the_wandb_package_reads_it_with_no_network(offline_run: Path):
    """In a network namespace of its own (no interface but a down loopback), the read gives every step."""
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no network namespace here (unshare: {probe.stderr.decode().strip()})")
    script = ("import json, sys; from pathlib import Path; from dashgen.formats.wandb_offline import step_log_lines; "
              "print(json.dumps([json.loads(line)['step'] for line in step_log_lines(Path(sys.argv[1]))]))")
    read = subprocess.run(["unshare", "--net", sys.executable, "-c", script, str(offline_run)],
                          capture_output=True, text=True, timeout=600)
    assert read.returncode == 0, read.stderr
    steps = [json.loads(line)["step"] for line in (public_corpus() / RUN / "steps.jsonl").read_text().splitlines()]
    assert json.loads(read.stdout) == steps
