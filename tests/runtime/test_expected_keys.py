"""Keys a framework logs on every step by default that a run never logged: followed by the exporter and the
backfill alike (dashgen/sources/expected_keys.py)."""

import json
from pathlib import Path

from dashgen.catalog import CATALOG, SERIES_NEVER_LOGGED_METRIC
from dashgen.evaluation.synthetic_runs import step_data
from dashgen.replay.backfill import Timing, read_run, run_labels
from dashgen.runtime.exporter import RunState
from dashgen.framework_keys import FRAMEWORKS, VERL
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
    for _ in range(30):  # TRL's keys as its reader names them: no critic/advantages, no critic/returns
        never.observe({"actor/pg_loss": 0.1, "critic/score/mean": 0.3, "critic/score/std": 0.2,
                       "frac_reward_zero_std": 0.4})
    assert never.framework is None and never.missing() == {}


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
    assert run.never_logged[-1] == {"verl_training_rollout_probs_diff_mean": 25}
    assert run.never_logged[0] == {"verl_training_rollout_probs_diff_mean": 1}
