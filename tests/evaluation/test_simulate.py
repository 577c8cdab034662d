"""dashgen/evaluation/simulate.py: the runs behind the published benchmark figures stay as they were."""

import hashlib
import importlib.util
import json
import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import REPO

from dashgen.evaluation.simulate import (VALIDATION_KEY, Fault, RunSpec, SmallBatch, healthy_entropy, noise_free_entropy,
                                     write_run)

# Four of bench/alert_lifecycle.py's 25 runs (plateaus, a skipped step, signed rewards, a restart,
# an entropy fault), and the digest of their logs when its figures were published, before the
# simulated verl runs logged the train/rollout gap: a new run shape must leave these bytes alone,
# or the old figures cannot be reproduced.
PUBLISHED_RUNS = (
    RunSpec("healthy-plateau", 1500, 1, 60, plateaus=((500, 700),), isolated_nan_steps=(900,), rollout_gap=False),
    RunSpec("healthy-signed", 1800, 2, 45, signed_reward=True, plateaus=((900, 1100),), rollout_gap=False),
    RunSpec("healthy-restart", 1300, 3, 70, restart_at=800, restart_from=700, rollout_gap=False),
    RunSpec("entropy-collapse", 1300, 17, 60, faults=(Fault("entropy_collapse", 700, speed=30),), rollout_gap=False),
)
GAP_KEYS = {"training/rollout_probs_diff_mean", "training/rollout_probs_diff_std", "training/rollout_probs_diff_max"}
PUBLISHED_DIGEST = "348dfaf7c4d218e4c28aff9ad53db7e57debd5e699e5fe9d4208dcb5e2be9fb4"


def test_the_published_runs_are_written_byte_for_byte_as_before(tmp_path: Path):
    digest = hashlib.sha256()
    for spec in PUBLISHED_RUNS:
        digest.update(write_run(spec, tmp_path / f"{spec.name}.jsonl").read_bytes())
    assert digest.hexdigest() == PUBLISHED_DIGEST


def test_a_verl_run_logs_a_healthy_train_rollout_gap_on_every_step_and_draws_the_rest_as_before(tmp_path: Path):
    for published in PUBLISHED_RUNS:
        before = _log(published, tmp_path / "before")
        now = _log(replace(published, rollout_gap=True), tmp_path / "now")
        assert list(now) == list(before)
        assert all(set(now[step]) - set(before[step]) == GAP_KEYS for step in now)
        assert all({key: value for key, value in now[step].items() if key not in GAP_KEYS} == before[step]
                   for step in now)
        gap = _values(now, "training/rollout_probs_diff_mean")
        # verl's healthy bf16 level (0.002-0.003), its noise modest: far below verl-omni's gate of 0.01.
        assert 0.002 <= statistics.median(gap) <= 0.003
        assert 0.001 <= min(gap) and max(gap) <= 0.005
        assert 0.05 <= statistics.stdev(gap) / statistics.mean(gap) <= 0.3
    assert RunSpec("verl", 10, 1).rollout_gap


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


# --- Issues 35 and 40: each scenario's log has what the runs it stands for had ---------------

def _log(spec: RunSpec, folder: Path) -> dict[int, dict]:
    """The run's logged steps: step -> its data."""
    lines = write_run(spec, folder / f"{spec.name}.jsonl").read_text().splitlines()
    return {entry["step"]: entry["data"] for entry in map(json.loads, lines)}


def _values(log: dict[int, dict], key: str) -> list:
    return [data[key] for data in log.values()]


def _swings(values: list[float], factor: float) -> float:
    """The share of consecutive steps whose values differ by at least `factor`x."""
    return statistics.fmean(max(a, b) / min(a, b) >= factor for a, b in zip(values, values[1:]))


SMALL_BATCH = SmallBatch(rewards=(0.0, 0.5, 2.0), zero_std_share=0.6)


def test_a_small_batch_run_jumps_across_its_rewards_and_learns_nothing_on_its_zero_std_steps(tmp_path: Path):
    log = _log(RunSpec("small", 400, 71, 30, small_batch=SMALL_BATCH), tmp_path)
    zero = [data for data in log.values() if data["critic/score/std"] == 0]
    assert 0.55 < len(zero) / len(log) < 0.65
    assert {data["actor/grad_norm"] for data in zero} == {0.0}
    assert all(data["actor/grad_norm"] > 0 for data in log.values() if data["critic/score/std"] > 0)
    assert {data["critic/score/mean"] for data in zero} == {0.0, 0.5, 2.0}
    rewards = _values(log, "critic/score/mean")
    assert max(abs(later - earlier) for earlier, later in zip(rewards, rewards[1:])) == 2.0  # its whole range
    entropy = _values(log, "actor/entropy")
    assert min(entropy) < 0.002 and max(entropy) > 0.9
    assert _swings(entropy, 10) > 0.3  # 10x or more from one step to the next, on a third of the steps
    assert 30 < statistics.median(_values(log, "response_length/mean")) < 50


def test_a_signed_small_batch_reward_jumps_from_minus_10_to_plus_11(tmp_path: Path):
    shape = SmallBatch(rewards=tuple(float(value) for value in range(-10, 12)), zero_std_share=0.3, completions=4)
    log = _log(RunSpec("signed", 400, 72, 20, small_batch=shape), tmp_path)
    assert 0.25 < statistics.fmean(std == 0 for std in _values(log, "critic/score/std")) < 0.35
    assert (min(_values(log, "critic/score/mean")), max(_values(log, "critic/score/mean"))) == (-10.0, 11.0)


def test_a_console_log_rounds_every_value_to_3_decimals_so_a_healthy_grad_norm_reads_0(tmp_path: Path):
    spec = RunSpec("console", 200, 71, 30, small_batch=SMALL_BATCH)
    exact = _log(spec, tmp_path / "exact")
    console = _log(RunSpec("console", 200, 71, 30, small_batch=SMALL_BATCH, console_decimals=3), tmp_path)
    for step, data in exact.items():
        assert console[step] == {key: round(value, 3) if isinstance(value, float) else value
                                 for key, value in data.items()}
    learning = [step for step, data in exact.items() if data["actor/grad_norm"] > 0]
    assert statistics.fmean(console[step]["actor/grad_norm"] == 0 for step in learning) > 0.6


def test_a_convergence_falls_tenfold_in_entropy_while_the_reward_rises_by_half(tmp_path: Path):
    spec = RunSpec("converge", 300, 74, 60, reward_range=(0.28, 0.3), faults=(Fault("convergence", 100, speed=50),))
    fault = spec.faults[0]
    assert noise_free_entropy(spec, fault, 100) == healthy_entropy(spec, 100)
    assert noise_free_entropy(spec, fault, 150) == pytest.approx(healthy_entropy(spec, 150) / 10)
    log = _log(spec, tmp_path)
    before = statistics.median(log[step]["critic/score/mean"] for step in range(80, 100))
    after = statistics.median(log[step]["critic/score/mean"] for step in range(150, 170))
    assert before == pytest.approx(0.28, abs=0.02) and after == pytest.approx(0.78, abs=0.02)


def test_an_implausible_first_line_then_no_reward_and_every_completion_truncated(tmp_path: Path):
    log = _log(RunSpec("first", 100, 75, 60, log_every=10, faults=(Fault("implausible_start", 1, speed=10),)),
               tmp_path)
    first, *later = log.values()
    assert 8_000 < first["actor/kl_loss"] < 14_000 and 300_000 < first["actor/grad_norm"] < 550_000
    assert {(data["critic/score/mean"], data["response_length/clip_ratio"]) for data in later} == {(0.0, 1.0)}


def test_a_reward_stuck_at_its_floor_from_step_1(tmp_path: Path):
    zero = _log(RunSpec("zero", 250, 76, 30, small_batch=SmallBatch((0.0, 1.0), zero_std_share=0.97),
                        faults=(Fault("no_reward", 1),)), tmp_path)
    stuck = [data["critic/score/mean"] == 0 and data["critic/score/std"] == 0 for data in zero.values()]
    assert 0.95 < statistics.fmean(stuck) < 0.99 and stuck[0]
    never = _log(RunSpec("never", 120, 77, 40, small_batch=SmallBatch((-1.0, 0.0), zero_std_share=0.86,
                                                                        grad_norm=1e-4),
                         faults=(Fault("no_reward", 1),)), tmp_path)
    assert max(_values(never, "critic/score/mean")) <= 0
    assert 0.8 < statistics.fmean(std == 0 for std in _values(never, "critic/score/std")) < 0.92
    learning = [norm for norm in _values(never, "actor/grad_norm") if norm > 0]
    assert 5e-5 < statistics.median(learning) < 2e-4


def test_a_saturated_reward_and_its_twin_at_the_floor_have_the_same_zero_gradient(tmp_path: Path):
    shape = SmallBatch((0.0, 1.0), zero_std_share=0.45, grad_norm=0.3, logs_zero_std_share=True)
    runs = {kind: _log(RunSpec(kind, 300, 90, 25, small_batch=shape, faults=(Fault(kind, 100, speed=50),)), tmp_path)
            for kind in ("saturation", "reward_floor")}
    for kind, top in (("saturation", 1.0), ("reward_floor", 0.0)):
        before = [data for step, data in runs[kind].items() if step < 100]
        after = [data for step, data in runs[kind].items() if step >= 150]
        pinned = [data["critic/score/mean"] == top and data["actor/grad_norm"] == 0
                  and data["frac_reward_zero_std"] == 1 for data in after]
        assert 0.9 < statistics.fmean(pinned) < 0.99, kind
        # Before the fault, a healthy small batch: a gradient on most steps, TRL's share 0 there.
        assert statistics.fmean(data["actor/grad_norm"] > 0 for data in before) > 0.3
        assert all(data["frac_reward_zero_std"] == float(data["critic/score/std"] == 0) for data in before)
    # The same steps draw the same zeros: the twins differ only in where the reward sits.
    zeros = {kind: [data["actor/grad_norm"] == 0 for data in log.values()] for kind, log in runs.items()}
    assert zeros["saturation"] == zeros["reward_floor"]


def test_a_reward_collapse_scores_every_rollout_0_on_every_step_after_a_large_batch_that_learned(tmp_path: Path):
    shape = SmallBatch((0.0, 1.0), zero_std_share=0.0, completions=256, grad_norm=0.3)
    log = _log(RunSpec("collapse", 41, 96, 60, small_batch=shape, faults=(Fault("reward_collapse", 12, speed=3),)),
               tmp_path)
    before = [data for step, data in log.items() if step < 12]
    after = [data for step, data in log.items() if step >= 14]
    # A large batch: its reward positive with a spread, and a gradient, on every step before.
    assert all(data["critic/score/mean"] > 0.3 and data["critic/score/std"] > 0.3 and data["actor/grad_norm"] > 0
               for data in before)
    # Unlike reward_floor's 95%, every step from at + speed on.
    assert all(data["critic/score/mean"] == data["critic/score/std"] == data["actor/grad_norm"] == 0 for data in after)


def test_a_slow_entropy_explosion_doubles_every_12_steps_with_two_nan_steps_at_an_hour_a_step(tmp_path: Path):
    spec = RunSpec("doubling", 100, 78, 3600, step_time_sigma=0.2, entropy_level=0.76, entropy_decline=0.0,
                   reward_range=(0.5, 0.5), isolated_nan_steps=(83, 85),
                   faults=(Fault("entropy_growth", 40, speed=12),))
    fault = spec.faults[0]
    doubling = [noise_free_entropy(spec, fault, step) for step in (39, 52, 64, 76)]
    assert doubling == pytest.approx([0.76, 1.52, 3.04, 6.08])
    assert noise_free_entropy(spec, fault, 100) == pytest.approx(9.88)
    log = _log(spec, tmp_path)
    assert [step for step, data in log.items() if data["actor/grad_norm"] is None] == [83, 85]
    assert statistics.median(log[step]["critic/score/mean"] for step in range(30, 40)) == pytest.approx(0.5, abs=0.03)
    assert max(log[step]["critic/score/mean"] for step in range(85, 101)) < 0.01
    seconds = _values(log, "timing_s/step")
    assert statistics.fmean(2400 <= value <= 4800 for value in seconds) > 0.8


def test_the_slower_collapse_falls_by_e_every_50_steps_to_its_floor_while_the_reward_slips(tmp_path: Path):
    spec = RunSpec("slow", 1200, 79, 30, entropy_level=0.5, entropy_decline=0.0,
                   faults=(Fault("entropy_slow_collapse", 1000, speed=50),))
    fault = spec.faults[0]
    assert noise_free_entropy(spec, fault, 1050) == pytest.approx(0.5 / math.e)
    assert noise_free_entropy(spec, fault, 1150) == pytest.approx(0.5 / math.e ** 3)
    assert noise_free_entropy(spec, fault, 1200) == 0.015
    healthy = _log(RunSpec("slow", 1200, 79, 30, entropy_level=0.5, entropy_decline=0.0), tmp_path / "healthy")
    log = _log(spec, tmp_path)
    assert [healthy[step]["critic/score/mean"] - log[step]["critic/score/mean"] for step in (1000, 1075, 1150)] \
        == pytest.approx([0.0, 0.05, 0.1])


def _twins(spec: RunSpec, folder: Path) -> tuple[dict[int, dict], dict[int, dict]]:
    """The log of a run with faults and that of its healthy twin (the same spec and seed without them)."""
    return _log(spec, folder / "faulty"), _log(replace(spec, faults=()), folder / "healthy")


def _changed_keys(faulty: dict[int, dict], healthy: dict[int, dict]) -> set[str]:
    return {key for step in faulty for key in faulty[step] if faulty[step][key] != healthy[step][key]}


def test_a_lone_gradient_explosion_leaves_kl_entropy_and_reward_as_its_healthy_twin_has_them(tmp_path: Path):
    faulty, healthy = _twins(RunSpec("grad", 300, 83, 60, grad_norm_level=2.5,
                                     faults=(Fault("grad_norm_explosion", 200),)), tmp_path)
    assert _changed_keys(faulty, healthy) == {"actor/grad_norm"}
    assert max(faulty[step]["actor/grad_norm"] for step in range(175, 200)) < 4.6
    ratios = [faulty[step]["actor/grad_norm"] / healthy[step]["actor/grad_norm"] for step in (200, 201, 202, 203)]
    assert ratios == pytest.approx([12, 36, 108, 120])


def test_an_explosion_after_500_quiet_steps(tmp_path: Path):
    faulty, healthy = _twins(RunSpec("late", 600, 84, 111, entropy_level=0.33, entropy_decline=0.0, grad_norm_level=1.0,
                                     faults=(Fault("late_entropy_explosion", 500, speed=50),)), tmp_path)
    assert all(faulty[step] == healthy[step] for step in range(1, 500))
    assert 0.3 < statistics.median(faulty[step]["actor/entropy"] for step in range(1, 500)) < 0.36
    entropy = [faulty[step]["actor/entropy"] for step in range(500, 551)]
    # 0.68, 3.4, 7.4 and 9.4 within 50 steps, as in the public run.
    assert 0.6 < entropy[0] < 0.9 and max(entropy[:15]) > 3.4 and max(entropy[:25]) > 7.4 and max(entropy) > 9.4
    end = [faulty[step] for step in range(560, 601)]
    assert statistics.median(data["actor/grad_norm"] for data in end) == pytest.approx(13, rel=0.25)
    assert statistics.median(data["actor/pg_clipfrac"] for data in end) == pytest.approx(0.7, abs=0.01)
    assert max(data["response_length/mean"] for data in end) < 5


@pytest.mark.parametrize("every", [5, 10])
def test_a_coarse_log_of_the_late_explosion_shows_it_on_its_first_line_after_the_onset(tmp_path: Path, every: int):
    faulty, healthy = _twins(RunSpec("late", 600, 84, 111, log_every=every, entropy_level=0.33, entropy_decline=0.0,
                                     grad_norm_level=1.0, faults=(Fault("late_entropy_explosion", 503, speed=50),)),
                             tmp_path)
    assert [step for step in faulty if step >= 503][0] == -(-503 // every) * every
    quiet = [data["actor/entropy"] for step, data in faulty.items() if step < 503]
    first = faulty[-(-503 // every) * every]
    assert first["actor/entropy"] > 2 * max(quiet)
    assert all(faulty[step] == healthy[step] for step in faulty if step < 503)


def _benchmark_runs() -> list[RunSpec]:
    """Every run of bench/alert_lifecycle.py."""
    spec = importlib.util.spec_from_file_location("alert_lifecycle", REPO / "bench/alert_lifecycle.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return [*bench.RUNS, *bench.ISSUE_20_RUNS, *bench.ISSUE_27_RUNS, *bench.ISSUE_35_RUNS]


def test_a_fault_of_a_coarsely_logged_benchmark_run_is_measurable_only_from_a_logged_step():
    coarse = [(spec.name, spec.log_every, fault.at, fault.measurable_from) for spec in _benchmark_runs()
              if spec.log_every > 1 for fault in spec.faults]
    assert {name for name, *_ in coarse} >= {"late-entropy-explosion-every-5", "late-entropy-explosion-every-10",
                                             "grad-norm-explosion-every-5"}
    assert [entry for entry in coarse if entry[3] % entry[1] or entry[3] < entry[2]] == []


def test_reward_hacking_against_validation_and_its_twin_where_validation_rises(tmp_path: Path):
    faulty, healthy = _twins(RunSpec("hacked", 300, 85, 60, reward_range=(0.08, 0.8), validation_every=10,
                                     faults=(Fault("reward_hacking_validation", 100, speed=100),)), tmp_path)
    assert _changed_keys(faulty, healthy) == {VALIDATION_KEY}
    rewards = [statistics.median(faulty[step]["critic/score/mean"] for step in steps)
               for steps in (range(1, 6), range(280, 301))]
    assert rewards == pytest.approx([0.1, 0.76], abs=0.03)
    assert [step for step in faulty if VALIDATION_KEY in faulty[step]] == list(range(10, 301, 10))
    assert faulty[90][VALIDATION_KEY] > 0.45
    falling = [faulty[step][VALIDATION_KEY] for step in range(110, 301, 10)]
    assert falling == sorted(falling, reverse=True) and falling[-11:] == [0.0] * 11  # 0 from step 200
    assert healthy[300][VALIDATION_KEY] > healthy[90][VALIDATION_KEY] + 0.2


# --- Issue 52: a few prompt groups a step, a loss explosion, truncation saturating, a destroyed run -------

def _issue_52_runs() -> dict[str, RunSpec]:
    spec = importlib.util.spec_from_file_location("alert_lifecycle", REPO / "bench/alert_lifecycle.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return {run.name: run for run in bench.ISSUE_52_RUNS}


def test_four_prompt_groups_a_step_are_as_noisy_as_the_public_4x4_trl_runs(tmp_path: Path):
    log = _log(_issue_52_runs()["healthy-four-prompts-trl"], tmp_path)
    # Each group alike on its own: TRL's share of alike groups in quarters, a median of one in four,
    # and no update only where every group is alike.
    shares = _values(log, "frac_reward_zero_std")
    assert set(shares) <= {0.0, 0.25, 0.5, 0.75, 1.0} and statistics.median(shares) == 0.25
    assert all((data["actor/grad_norm"] == 0) == (data["frac_reward_zero_std"] == 1) for data in log.values())
    assert 0 < statistics.fmean(share == 1 for share in shares) < 0.02
    # 16 completions: a reward mean in sixteenths of its values, a spread of about 0.38 (the public runs:
    # a median of 0.38, rewards 0.06-0.70 a step).
    assert 0.33 < statistics.median(_values(log, "critic/score/std")) < 0.43
    rewards = _values(log, "critic/score/mean")
    assert 0.35 < statistics.median(rewards) < 0.5 and min(rewards) < 0.15 and max(rewards) > 0.7
    # Grad norm 0.2-0.8 (median 0.4), now and then 3-5x its median; never near an explosion's 10x.
    norms = [norm for norm in _values(log, "actor/grad_norm") if norm > 0]
    deciles = statistics.quantiles(norms, n=10)
    assert 0.35 < statistics.median(norms) < 0.45 and 0.15 < deciles[0] and deciles[-1] < 0.9
    assert 3 < max(norms) / statistics.median(norms) < 6
    # Cut at a cap of 256 tokens: 0 to a few of the 16 completions, a median of 0 or 1.
    clipped = _values(log, "response_length/clip_ratio")
    assert all((16 * share).is_integer() for share in clipped)
    assert statistics.median(clipped) <= 1 / 16 and 0.1 <= statistics.quantiles(clipped, n=10)[-1] <= 0.2
    assert max(clipped) < 0.5 and max(_values(log, "response_length/max")) == 256
    entropy = _values(log, "actor/entropy")
    assert 0.18 <= min(entropy) and max(entropy) <= 0.41


def test_a_loss_explosion_leaves_everything_but_the_loss_as_its_healthy_twin_has_it(tmp_path: Path):
    spec = _issue_52_runs()["loss-explosion-reward-holding"]
    faulty, healthy = _twins(spec, tmp_path)
    assert _changed_keys(faulty, healthy) == {"actor/pg_loss"}
    assert not any("actor/grad_norm" in data for data in faulty.values())  # a log without a grad norm
    loss = {step: data["actor/pg_loss"] for step, data in faulty.items()}
    assert statistics.median(loss[step] for step in range(1, 200)) == pytest.approx(0.18, abs=0.02)
    assert max(abs(loss[step]) for step in range(1, 200)) < 1
    exploded = [step for step in range(200, 401) if loss[step] >= 1e6]
    assert all(loss[step] <= 4.5e7 for step in exploded) and 200 in exploded
    assert 0.7 < len(exploded) / 201 < 0.9
    assert all(loss[step] == healthy[step]["actor/pg_loss"] for step in range(200, 401) if step not in exploded)


def test_truncation_saturates_from_an_agent_runs_level_of_0_6(tmp_path: Path):
    spec = _issue_52_runs()["truncation-saturates-from-0.6"]
    faulty, healthy = _twins(spec, tmp_path)
    assert all(faulty[step] == healthy[step] for step in range(1, 150))
    # Each step's share drawn over 512 responses: 0.6 and a standard deviation of 0.022 (sqrt(0.24 / 512)).
    level = [healthy[step]["response_length/clip_ratio"] for step in healthy]
    assert statistics.fmean(level) == pytest.approx(0.6, abs=0.005)
    assert statistics.stdev(level) == pytest.approx(0.0217, rel=0.15)
    assert all((512 * share).is_integer() for share in level)
    rising = [faulty[step]["response_length/clip_ratio"] for step in (160, 175, 190)]
    assert rising == sorted(rising) and 0.64 < rising[0] < 0.74 and 0.86 < rising[-1] < 0.96
    saturated = [faulty[step] for step in range(199, 401)]
    assert {(data["response_length/clip_ratio"], data["response_length/mean"]) for data in saturated} == {(1.0, 2048.0)}
    # Cut responses are at the cap, so the mean length follows the share.
    assert all(data["response_length/mean"] > 2048 * data["response_length/clip_ratio"] for data in healthy.values())


def test_a_destroyed_run_samples_uniformly_from_its_vocabulary(tmp_path: Path):
    spec = _issue_52_runs()["destroyed-entropy-to-vocabulary-log"]
    faulty, healthy = _twins(spec, tmp_path)
    assert all(faulty[step] == healthy[step] for step in range(1, 200))
    uniform = math.log(151_936)  # Qwen2.5's vocabulary: 11.93 nats
    before = statistics.median(faulty[step]["actor/entropy"] for step in range(150, 200))
    assert 0.55 < before < 0.7
    assert faulty[201]["actor/entropy"] > 3 * before  # measurable: 3x its level the second step
    destroyed = [faulty[step] for step in range(204, 301)]
    entropy = [data["actor/entropy"] for data in destroyed]
    assert max(entropy) == pytest.approx(uniform) and statistics.median(entropy) > 0.98 * uniform and min(entropy) > 9
    assert {(data["critic/score/mean"], data["response_length/clip_ratio"], data["response_length/mean"])
            for data in destroyed} == {(0.0, 1.0, 2048.0)}
