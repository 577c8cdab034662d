"""`dashgen act` reads the run from the labels of the project's metric source: with RL-Insight's,
the experiment is `experiment_name`."""

from act_support import alert, notification
from dashgen.config import config_from
from dashgen.runtime.act import Actor, ActSettings


def rl_insight_alert(**fields) -> dict:
    firing = alert(**fields)
    firing["labels"]["experiment_name"] = firing["labels"].pop("experiment")
    return firing


def test_with_rl_insight_the_guarded_run_is_matched_on_experiment_name(tmp_path):
    config = config_from({"source": "rl_insight", "act": {"project": "gsm8k", "experiment": "ppo"}})
    actor = Actor(ActSettings.from_config(config, audit_log=tmp_path / "audit.jsonl"))
    decisions = actor.handle(notification(rl_insight_alert(), rl_insight_alert(experiment="other", fingerprint="2")))
    assert [(d.experiment, d.decision) for d in decisions] == [("ppo", "logged"), ("other", "ignored-other-run")]


def test_with_the_exporter_an_alert_labelled_experiment_name_is_not_the_guarded_run(tmp_path):
    config = config_from({"act": {"project": "gsm8k", "experiment": "ppo"}})
    actor = Actor(ActSettings.from_config(config, audit_log=tmp_path / "audit.jsonl"))
    assert [d.decision for d in actor.handle(notification(rl_insight_alert()))] == ["ignored-other-run"]
