"""The alerts that could not judge a run, from the compiled rules and the series the run logged."""

import pytest

from conftest import REPO
from dashgen.catalog import CATALOG
from dashgen.compiler.rules.rule_files import compile_rules
from dashgen.compiler.rules.signal_needs import NOTHING, alert_needs, blind_without
from dashgen.config import Config
from dashgen.replay.unjudged import needs_of_rules, unjudged
from dashgen.sources.series_arrival import logged_series

ENTROPY, KL, GRAD, REWARD = "verl_actor_entropy", "verl_actor_ppo_kl", "verl_actor_grad_norm", "verl_critic_score_mean"


def test_and_needs_both_or_either_unless_only_its_left_and_recordings_are_read_through():
    recordings = [("r:kl", f"max_over_time({KL}[5m])"), ("r:both", f"r:kl > 1 and {ENTROPY} < 2")]
    needs = alert_needs([("Both", "r:both"), ("Either", f"{KL} > 1 or {GRAD} > 2"),
                         ("Unless", f"{KL} > 1 unless {ENTROPY} > 0"), ("Exporter", "verl_run_state == 1"),
                         ("Window", f'verl_step_statistic{{series="{ENTROPY}", statistic="median_5steps"}} < 0.1')],
                        recordings, CATALOG)
    assert needs["Both"] == (frozenset({KL, ENTROPY}),)
    assert set(needs["Either"]) == {frozenset({KL}), frozenset({GRAD})}
    assert needs["Unless"] == (frozenset({KL}),)
    assert needs["Exporter"] == NOTHING
    assert needs["Window"] == (frozenset({ENTROPY}),)
    assert blind_without(needs, ENTROPY) == ["Both", "Window"]


@pytest.fixture(scope="module")
def project_needs():
    compiled = compile_rules(REPO, Config(), CATALOG)
    return needs_of_rules(compiled.alert_rules, compiled.recording_rules, compiled.catalog)


def test_a_run_that_never_logged_entropy_is_not_judged_by_the_entropy_alerts(project_needs):
    logged = set(logged_series(CATALOG)) - {ENTROPY}
    blind = {each.alertname: each for each in unjudged(project_needs, logged, CATALOG)}
    assert {"VerlEntropyCollapse", "VerlEntropyExplosion", "VerlTrainingDivergence"} <= set(blind)
    assert blind["VerlEntropyCollapse"].why == "could not judge this run: it never logged actor/entropy"
    # An alert that has another way to fire (a bound on KL or grad norm) still judges the run.
    assert "VerlImplausibleValue" not in blind and "VerlKLSpike" not in blind


def test_an_alert_of_either_key_names_every_key_when_the_run_logged_none(project_needs):
    logged = set(logged_series(CATALOG)) - {ENTROPY, KL, GRAD, "verl_actor_kl_loss"}
    blind = {each.alertname: each for each in unjudged(project_needs, logged, CATALOG)}
    assert blind["VerlImplausibleValue"].why == ("could not judge this run: it never logged any of actor/entropy, "
                                                 "actor/grad_norm, actor/kl_loss, actor/ppo_kl")


def test_a_run_that_logs_everything_is_judged_by_every_alert_of_the_log(project_needs):
    assert unjudged(project_needs, set(logged_series(CATALOG)), CATALOG) == []
    # A TRL run lacks PPO's KL to the old policy: the KL spike cannot judge it.
    trl = set(logged_series(CATALOG)) - {KL}
    assert "VerlKLSpike" in {each.alertname for each in unjudged(project_needs, trl, CATALOG)}


def test_a_key_the_run_logs_under_a_name_no_series_reads_is_named_beside_the_one_it_never_logged(project_needs):
    logged = set(logged_series(CATALOG)) - {ENTROPY}
    blind = {each.alertname: each for each in unjudged(project_needs, logged, CATALOG,
                                                       unmapped={"actor/entropy_mean", "judge/score"})}
    assert blind["VerlEntropyCollapse"].why == ("could not judge this run: it never logged actor/entropy (it logs "
                                                "actor/entropy_mean for actor/entropy, which dashgen does not read: "
                                                "`aliases:` in metrics.yaml would)")
