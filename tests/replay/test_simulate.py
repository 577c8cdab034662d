"""dashgen/replay/simulate.py: the runs behind the published benchmark figures stay as they were."""

import hashlib
from pathlib import Path

from dashgen.replay.simulate import Fault, RunSpec, noise_free_entropy, write_run

# Four of bench/alert_lifecycle.py's 25 runs (plateaus, a skipped step, signed rewards, a restart,
# an entropy fault), and the digest of their logs when its figures were published: a new run
# shape must leave these bytes alone, or the old figures cannot be reproduced.
PUBLISHED_RUNS = (
    RunSpec("healthy-plateau", 1500, 1, 60, plateaus=((500, 700),), isolated_nan_steps=(900,)),
    RunSpec("healthy-signed", 1800, 2, 45, signed_reward=True, plateaus=((900, 1100),)),
    RunSpec("healthy-restart", 1300, 3, 70, restart_at=800, restart_from=700),
    RunSpec("entropy-collapse", 1300, 17, 60, faults=(Fault("entropy_collapse", 700, speed=30),)),
)
PUBLISHED_DIGEST = "348dfaf7c4d218e4c28aff9ad53db7e57debd5e699e5fe9d4208dcb5e2be9fb4"


def test_the_published_runs_are_written_byte_for_byte_as_before(tmp_path: Path):
    digest = hashlib.sha256()
    for spec in PUBLISHED_RUNS:
        digest.update(write_run(spec, tmp_path / f"{spec.name}.jsonl").read_bytes())
    assert digest.hexdigest() == PUBLISHED_DIGEST


def test_a_run_logged_every_tenth_step_is_the_every_step_run_with_lines_left_out(tmp_path: Path):
    every = write_run(RunSpec("every", 100, 5), tmp_path / "every.jsonl").read_text().splitlines()
    sparse = write_run(RunSpec("every", 100, 5, log_every=10), tmp_path / "sparse.jsonl").read_text().splitlines()
    assert sparse == every[9::10]


def test_entropy_decay_falls_tenfold_per_speed_steps_down_to_its_floor():
    spec = RunSpec("decay", 1000, 1, entropy_level=1.0, entropy_decline=0.0,
                   faults=(Fault("entropy_decay", 100, speed=50),))
    fault = spec.faults[0]
    assert noise_free_entropy(spec, fault, 99) == 1.0
    assert noise_free_entropy(spec, fault, 150) == 0.1
    assert noise_free_entropy(spec, fault, 900) == 0.02
