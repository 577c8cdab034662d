"""Rule sets backtested side by side in one pass give each set what a backtest of it alone gives:
the same firings, labels and notes, run by run, whether the sets share every rule, differ in one
area's recordings, or in every rule's interval."""

import pytest

from conftest import REPO
from dashgen.compiler.rules.rule_files import compile_rules
from dashgen.config import config_from
from dashgen.project_metrics import project_catalog
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import RuleSet, backtest_rule_sets
from dashgen.review.comparison import START, run_timings
from dashgen.review.corpus import public_corpus
from dashgen.review.runs import find_runs

pytestmark = [pytest.mark.live, pytest.mark.heavy]

# Runs where a touchier reward cliff changes what fires, and one it does not touch.
RUNS = ["trl-qwen35-9b-gsm8k-grpo-rho070-spike", "trl-qwen25-7b-gsm8k-grpo-rho010-reward-collapse",
        "verl-qwen25-3b-retool-opd-length-collapse", "trl-openr1-kl-nan-issue704"]
CONFIGS = [{}, {"rewards": {"reward_cliff_drop_fraction": 0.05, "reward_cliff_min_drop": 0, "reward_cliff_noise_z": 0}},
           {"rule_interval": "30s"}]


def rule_set(overrides: dict) -> RuleSet:
    """The set as a review makes it: with the step windows it reads, whose digest an exporter of
    that build serves (the touchy cliff reads no noise, so its digest differs)."""
    config = config_from(overrides).with_source("exporter")
    compiled = compile_rules(REPO, config, project_catalog(REPO))
    return RuleSet(compiled.recording_rules, compiled.alert_rules, compiled.step_statistics)


def outcomes_of(per_run) -> list:
    return [[(a.alertname, a.severity, a.labels, a.firing, a.note, a.signals) for a in outcome.alerts]
            for outcome in per_run]


def test_sets_side_by_side_give_what_each_gives_alone():
    runs = [run for run in find_runs([public_corpus()]) if run.name in RUNS]
    paths, timings, config = [run.steps_path for run in runs], run_timings(runs), config_from({})
    sets = [rule_set(overrides) for overrides in CONFIGS]
    together = backtest_rule_sets(paths, sets, project_catalog(REPO), config, Timing(start=START), timings=timings)
    alone = [backtest_rule_sets(paths, [one], project_catalog(REPO), config, Timing(start=START), timings=timings)[0]
             for one in sets]
    assert [outcomes_of(per_run) for per_run in together] == [outcomes_of(per_run) for per_run in alone]
    # The change shows: the touchy cliff fires where the default does not.
    cliff = [sum(a.alertname == "VerlRewardCliff" and bool(a.firing) for o in per_run for a in o.alerts)
             for per_run in together]
    assert cliff[1] > cliff[0]
