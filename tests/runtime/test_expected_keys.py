"""Keys a framework logs on every step by default that a run never logged: followed by the exporter and the
backfill alike (dashgen/sources/expected_keys.py)."""

import json
from pathlib import Path

import pytest

from dashgen.catalog import CATALOG, SERIES_NEVER_LOGGED_METRIC
from dashgen.evaluation.synthetic_runs import step_data
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.runtime.exporter import RunState
from dashgen.formats import trl
from dashgen.framework_keys import FRAMEWORKS, TRL, VERL
from dashgen.sources.expected_keys import NeverLogged

# What verl logs on every step of every version (compute_data_metrics): enough to be taken for verl.
_VERL_LINE = {"critic/advantages/mean": 0.0, "critic/returns/mean": 0.1, "critic/score/mean": 0.5,
              "actor/pg_loss": 0.1, "actor/entropy_loss": 0.4}


def test_a_verl_run_that_never_logs_an_expected_key_is_counted_in_training_lines_until_it_arrives():
    never = NeverLogged(CATALOG)
    for _ in range(3):
        never.observe(_VERL_LINE)
    missing = never.missing()
    assert never.framework is VERL
    assert missing["verl_training_rollout_probs_diff_mean"] == 3 and missing["verl_timing_step_seconds"] == 3
    # actor/entropy_loss is actor/entropy's older name: one series, logged
    assert "verl_actor_entropy" not in missing and "verl_actor_pg_loss" not in missing
    never.observe({**_VERL_LINE, "training/rollout_probs_diff_mean": 0.002})
    assert "verl_training_rollout_probs_diff_mean" not in never.missing()
    never.observe(_VERL_LINE)  # once arrived, a later absence is VerlSignalStopped's business
    assert "verl_training_rollout_probs_diff_mean" not in never.missing()


def test_a_run_of_no_known_framework_expects_nothing():
    never = NeverLogged(CATALOG)
    for _ in range(30):  # a hand-written GRPO loop: a reward and its spread, no critic/advantages, no epoch
        never.observe({"actor/pg_loss": 0.1, "critic/score/mean": 0.3, "critic/score/std": 0.2,
                       "frac_reward_zero_std": 0.4})
    assert never.framework is None and never.missing() == {}


# log_history entries of TRL's GRPOTrainer with its defaults: the first release of it (0.14: kl with
# beta 0.04, completion_length) and 1.9 (beta 0, so no kl; completions/*, entropy, frac_reward_zero_std).
_TRL_0_14 = {"loss": 0.0, "grad_norm": 0.8, "learning_rate": 1e-6, "epoch": 0.01, "completion_length": 180.0,
             "reward": 0.4, "reward_std": 0.3, "kl": 0.0004, "rewards/accuracy_reward": 0.4}
_TRL_1_9 = {"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-6, "epoch": 0.02, "num_tokens": 90000.0,
            "completions/mean_length": 210.0, "completions/clipped_ratio": 0.0, "reward": 0.5, "reward_std": 0.4,
            "frac_reward_zero_std": 0.2, "entropy": 0.6, "clip_ratio/region_mean": 0.0}


@pytest.mark.parametrize("entry", [_TRL_0_14, _TRL_1_9], ids=["trl-0.14", "trl-1.9"])
def test_a_trl_grpo_run_with_defaults_is_taken_for_trl_and_logs_every_key_expected_of_it(entry):
    never = NeverLogged(CATALOG)
    for _ in range(25):
        never.observe(trl.step_data(entry))
    assert never.framework is TRL and never.missing() == {}


def test_a_trl_run_whose_log_lacks_the_response_length_is_told_so(tmp_path: Path):
    history = [{**{k: v for k, v in _TRL_1_9.items() if k != "completions/mean_length"}, "step": step}
               for step in range(1, 26)]
    state = tmp_path / "grpo" / "trainer_state.json"
    state.parent.mkdir()
    state.write_text(json.dumps({"log_history": history}))
    run = read_run(state, run_labels(state, "verl"), Timing(start=1_700_000_000.0))
    assert run.never_logged[-1] == {("verl_response_length_mean", ""): 25}


def test_a_trl_log_without_the_trainers_epoch_and_a_verl_run_are_not_taken_for_trl():
    table = NeverLogged(CATALOG)  # a notebook's progress table: its columns, no epoch
    for _ in range(25):
        table.observe(trl.step_data({key: value for key, value in _TRL_1_9.items() if key != "epoch"}))
    assert table.framework is None and table.missing() == {}
    verl = NeverLogged(CATALOG)  # verl logs training/epoch too, but no reward spread
    verl.observe({**_VERL_LINE, "training/epoch": 0})
    assert verl.framework is VERL


def test_keys_of_a_feature_are_expected_only_once_the_run_shows_the_feature_on():
    never = NeverLogged(CATALOG)
    never.observe(_VERL_LINE)
    assert not {"verl_critic_vf_loss", "verl_rollout_corr_kl", "verl_rollout_corr_chi2_token"} & set(never.missing())
    never.observe({**_VERL_LINE, "timing_s/values": 1.0, "rollout_corr/kl": 0.001, "rollout_corr/ess": 0.9})
    missing = never.missing()
    assert {"verl_critic_vf_loss", "verl_critic_vf_explained_var", "verl_rollout_corr_chi2_token",
            "verl_rollout_corr_log_ppl_abs_diff"} <= set(missing)
    assert "verl_rollout_corr_kl" not in missing


def test_every_expected_key_is_the_catalog_key_its_alert_names():
    """The info names the key by dashgen:series_readers' `key` label: the catalog's first key of the metric."""
    first_keys = {metric.verl_keys[0] for metric in CATALOG.values() if metric.verl_keys}
    for framework in FRAMEWORKS:
        assert framework.recognised_by and framework.checked_against
        for entry in framework.expected:
            assert entry.key in first_keys, entry.key


def test_the_exporter_and_the_backfill_serve_the_same_count(tmp_path: Path):
    log = tmp_path / "gsm8k" / "old-verl.jsonl"
    log.parent.mkdir(parents=True)
    with open(log, "w") as handle:
        for step in range(1, 26):
            data = step_data(step)
            for key in ("training/rollout_probs_diff_mean", "training/rollout_probs_diff_max",
                        "training/rollout_probs_diff_std"):
                del data[key]
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
    state = RunState("gsm8k", "old-verl")
    for text in log.read_text().splitlines():
        record = json.loads(text)
        state.record(record["step"], record["data"])
    served = {sample.labels["series"]: sample.value for family in state.collect()
              if family.name == SERIES_NEVER_LOGGED_METRIC for sample in family.samples}
    assert served == {"verl_training_rollout_probs_diff_mean": 25}
    run = read_run(log, run_labels(log, "verl"), Timing(start=1_700_000_000.0))
    assert run.never_logged[-1] == {("verl_training_rollout_probs_diff_mean", ""): 25}
    assert run.never_logged[0] == {("verl_training_rollout_probs_diff_mean", ""): 1}


def test_a_missing_key_names_the_run_key_no_series_reads_that_looks_like_it(tmp_path: Path):
    """timing_ms/gen (a unit renamed under the same name) for timing_s/gen, perf/throughput_per_gpu (a close
    spelling) for perf/throughput; a key alike none of the missing ones, or a validation result, names nothing."""
    line = {**_VERL_LINE, "timing_ms/gen": 12000.0, "perf/throughput_per_gpu": 900.0, "judge/score": 0.3,
            "val-core/gsm8k/reward/mean@1": 0.5}
    never = NeverLogged(CATALOG)
    for _ in range(3):
        never.observe(line)
    labelled = never.labelled()
    assert labelled[("verl_timing_gen_seconds", "timing_ms/gen")] == 3
    assert labelled[("verl_perf_throughput", "perf/throughput_per_gpu")] == 3
    assert labelled[("verl_timing_step_seconds", "")] == 3  # timing_ms/gen is gen's, not the step's
    assert never.unmapped == {"timing_ms/gen", "perf/throughput_per_gpu", "judge/score"}
    # The exporter serves it as the series' logged_as label ...
    state = RunState("p", "e", catalog=CATALOG)
    for step in range(1, 4):
        state.record(step, line)
    served = {(sample.labels["series"], sample.labels["logged_as"]) for family in state.collect()
              if family.name == SERIES_NEVER_LOGGED_METRIC for sample in family.samples}
    assert ("verl_timing_gen_seconds", "timing_ms/gen") in served and ("verl_timing_step_seconds", "") in served
    # ... and the backfill the same, from the log.
    log = tmp_path / "old.jsonl"
    log.write_text("".join(json.dumps({"step": step, "data": line}) + "\n" for step in range(1, 4)))
    run = read_run(log, run_labels(log, "verl"), Timing(start=1_700_000_000.0))
    assert run.never_logged[-1][("verl_timing_gen_seconds", "timing_ms/gen")] == 3
    assert run.unmapped_keys == never.unmapped
