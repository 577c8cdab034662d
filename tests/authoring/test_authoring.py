"""A team writes its own alert in a few lines on the vocabulary, gets tests generated for it,
and every name it refers to is checked; an `init` project renders exactly what dashgen ships."""

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run, tree_digest
from dashgen.compiler.project import compile_project
from dashgen.compiler.rule_tests.promtool_files import write_generated_tests
from dashgen.compiler.queries.selectors import expand_selectors, rule_selectors
from dashgen.config import config_from
from dashgen.promtool import run_tool

pytestmark = pytest.mark.heavy

TEAM_ALERT = '''\
from dashgen.conditions import Baseline, Signal
from dashgen.model import Alert, RuleGroup, Severity

reward = Signal("critic/score/mean").median_over("5m")


def rules(config):
    return RuleGroup("team-rewards", (Alert.when(
        "TeamRewardDrop", reward.below({factor}, times=Baseline("1h")),
        keep_firing_while=reward.below(0.8, times=Baseline.held()), for_="10m", severity=Severity.WARNING,
        summary="The reward fell to half its level of the hour before."),))
'''


def add_team_alert(project: Path, factor: str = "0.5") -> None:
    (project / "alerts" / "team.py").write_text(TEAM_ALERT.replace("{factor}", factor))


def test_an_init_project_renders_exactly_what_the_repository_renders(team):
    result = run("build", "--root", str(team))
    assert result.exit_code == 0, result.output
    built = {path: digest for path, digest in tree_digest(REPO / "rendered").items()
             if not path.startswith("preview/")}  # drawn by `dashgen preview`, not by build
    assert tree_digest(team / "rendered") == built
    inhibitions = yaml.safe_load((team / "rendered" / "alertmanager" / "alertmanager.yml").read_text())["inhibit_rules"]
    assert ['alertname="VerlTrainingDivergence"'] in [rule["source_matchers"] for rule in inhibitions]


def test_a_team_alert_takes_a_dozen_lines_builds_and_its_generated_tests_pass(team):
    add_team_alert(team)
    assert len(TEAM_ALERT.strip().splitlines()) <= 12
    result = run("build", "--root", str(team))
    assert result.exit_code == 0, result.output
    rules = (team / "rendered" / "rules" / "team.yaml").read_text()
    # The hysteresis and the description are written by the compiler; the reward's baselines are
    # the ones dashgen's rewards module already records (one recording per series, project-wide).
    for piece in ("< 0.5 * verl:critic_score_mean:baseline_median", "< 0.8 * verl:critic_score_mean:baseline_held",
                  'ALERTS{alertname="TeamRewardDrop", alertstate="firing"}', "below 0.5x its median of the 1h before the recent window"):
        assert piece in rules, rules
    assert "record: verl:critic_score_mean:baseline_held" in (team / "rendered/rules/rewards.yaml").read_text()
    # The runbook says when a day-long fault resolves, naming the alerts that hold a baseline.
    long_faults = re.search(r"\*\*A fault that lasts longer than a day\.\*\*.*\(([^)]*)\) stop holding",
                            (team / "rendered/docs/alerts.md").read_text())
    assert long_faults and "TeamRewardDrop" in long_faults.group(1).split(", ")
    assert "VerlTrainingStalled" not in long_faults.group(1)
    result = run("test", "--root", str(team), "team")
    assert result.exit_code == 0, result.output
    assert re.search(r"team-TeamRewardDrop-generated-test\.yaml\n\s+SUCCESS", result.output), result.output


def test_baselines_of_a_new_signal_are_recorded_with_the_alert(team):
    (team / "alerts" / "team.py").write_text(TEAM_ALERT.replace("{factor}", "0.5").replace(
        "critic/score/mean", "response_length/mean"))
    assert run("build", "--root", str(team)).exit_code == 0
    rules = yaml.safe_load((team / "rendered" / "rules" / "team.yaml").read_text())
    groups = {group["name"]: [rule.get("record") or rule.get("alert") for rule in group["rules"]]
              for group in rules["groups"]}
    assert groups == {
        "team-rewards": ["verl:response_length_mean:baseline_median", "verl:response_length_mean:baseline_held",
                         "TeamRewardDrop"],
        "team-rewards-hold": ["verl:response_length_mean:baseline_high"]}
    assert [group["interval"] for group in rules["groups"]] == ["1m", "10m"]
    assert run("test", "--root", str(team), "team").exit_code == 0


def test_a_factor_against_its_direction_is_refused_where_it_is_written(team):
    """A factor above 1 for a fall would fire on a healthy, flat reward (its generated 'stays quiet'
    case used to be what caught it): the build refuses it, naming the alert (issues 29 and 30)."""
    add_team_alert(team, factor="1.5")
    result = run("build", "--root", str(team))
    assert result.exit_code == 1
    assert result.output.startswith("Error: alerts/team.py: alert 'TeamRewardDrop': condition: critic/score/mean: "
                                    "below(1.5, times=...) holds whenever the signal is at its baseline"), result.output


def test_a_ratio_threshold_out_of_range_fails_its_generated_test(project, tmp_path):
    """10 meant as 10%: a share of responses can never exceed it, so the 'fires' case fails."""
    rollout = project / "alerts" / "rollout.py"
    text = rollout.read_text()
    assert "clip_ratio.above(tunables.truncation_threshold)," in text
    rollout.write_text(text.replace("clip_ratio.above(tunables.truncation_threshold),", "clip_ratio.above(10),"))
    assert run("build", "--root", str(project)).exit_code == 0
    result = run("test", "--root", str(project), "rollout")
    assert result.exit_code == 1 and "VerlResponseTruncationHigh-fires" in result.output


def test_the_hysteresis_case_fails_on_a_rule_without_its_keep_firing_branch(project, tmp_path):
    compiled = compile_project(project, config_from({}))
    generated = write_generated_tests(tmp_path, compiled.rules, compiled.alerts, config_from({}))
    test_file = tmp_path / "rewards-VerlRewardCliff-generated-test.yaml"
    hourly = tmp_path / "rewards-VerlRewardCliff-every-5m-generated-test.yaml"
    assert test_file in generated and hourly in generated  # the cases at 3,600 s a step are evaluated every 5m
    for path in (test_file, hourly):
        tests = yaml.safe_load(path.read_text())
        assert {case["name"].split(": ", 1)[1].split(" at ")[0] for case in tests["tests"]} == \
            {"fires", "stays quiet", "holds in hysteresis band"}, path.name
    assert run_tool("promtool", ["test", "rules", str(test_file), str(hourly)]).returncode == 0
    # The cliff without its hysteresis: only the onset condition, as a hand-written rule might forget.
    onset = expand_selectors(next(alert.rule.condition for alert in compiled.alerts if alert.name == "VerlRewardCliff"),
                             rule_selectors(config_from({})))
    rules = tmp_path / "rewards-VerlRewardCliff-rules" / "rewards.yaml"
    data = yaml.safe_load(rules.read_text())
    cliff = next(rule for group in data["groups"] for rule in group["rules"] if rule.get("alert") == "VerlRewardCliff")
    assert "ALERTS" in cliff["expr"] and "ALERTS" not in onset
    cliff["expr"] = onset
    rules.write_text(yaml.safe_dump(data))
    result = run_tool("promtool", ["test", "rules", str(test_file), str(hourly)])
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "VerlRewardCliff-holds-in-hysteresis-band" in output
    assert "VerlRewardCliff-stays-quiet" not in output
    # At 1.5 s a step the cliff's 100-step baseline absorbs a fault within about 3 minutes, less than
    # the reduce window and `for` together: there the alert is still firing when checked only
    # through its hysteresis. At the slower rhythms the onset alone fires it.
    assert "VerlRewardCliff-fires-at-60s-per-step" not in output and "VerlRewardCliff-fires-at-3600s" not in output


def test_an_alert_without_any_test_fails_dashgen_test_unless_it_says_why(team):
    untested = textwrap.dedent('''\
        from dashgen.model import Alert, RuleGroup, Severity


        def rules(config):
            return RuleGroup("team", (Alert("TeamQueueDeep", expr="up{verl} == 0", severity=Severity.INFO,
                                            summary="The exporter is down.", description="Down."{why}),))
        ''')
    (team / "alerts" / "team.py").write_text(untested.replace("{why}", ""))
    assert run("build", "--root", str(team)).exit_code == 0
    result = run("test", "--root", str(team), "team")
    assert result.exit_code == 1
    assert "alerts/team.py: alert 'TeamQueueDeep' has no rule test" in result.output
    (team / "alerts" / "team.py").write_text(untested.replace("{why}", ', untested="a copy of up == 0"'))
    assert run("build", "--root", str(team)).exit_code == 0
    assert run("test", "--root", str(team), "team").exit_code == 0


@pytest.mark.parametrize("edit, expected", [
    # a panel threshold naming an alert
    (("panels/verl_training.py", 'kl_spike_threshold, "VerlKLSpike")', 'kl_spike_threshold, "VerlKLSpik")'),
     "panel 'PPO KL (old vs new policy)': threshold: 'VerlKLSpik' is not an alert defined in alerts/; did you mean 'VerlKLSpike'?"),
    (("panels/verl_training.py", 'stall_min_silence.seconds, "VerlTrainingStalled",',
      'stall_min_silence.seconds, "VerlTrainingStaled",'),
     "did you mean 'VerlTrainingStalled'?"),
    # an inhibition
    (("alerts/progress.py", 'Inhibition("VerlTrainingStalled", ("VerlRewardStagnation",)',
      'Inhibition("VerlTrainingStalled", ("VerlRewardStagnaton",)'),
     "inhibition by 'VerlTrainingStalled': 'VerlRewardStagnaton' is not an alert defined in alerts/; did you mean "
     "'VerlRewardStagnation'?"),
    # an annotation's alertname matcher
    (("panels/verl_training.py", "ALERTS{$run, alertstate=\"firing\"}'", "ALERTS{$run, alertname=\"VerlNaNMetric\", "
      "alertstate=\"firing\"}'"), "annotation 'Firing alerts': 'VerlNaNMetric' is not an alert"),
    # a signal
    (("alerts/stability.py", 'Signal("actor/ppo_kl")', 'Signal("actor/ppo_kll")'),
     "signal 'actor/ppo_kll' is neither a verl key nor a known metric; did you mean 'actor/ppo_kl'?"),
])
def test_a_typo_in_any_reference_fails_the_build_with_a_did_you_mean(project, edit, expected):
    path, old, new = edit
    module = project / path
    text = module.read_text()
    assert old in text
    module.write_text(text.replace(old, new, 1))
    before = tree_digest(project / "rendered")
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}") and expected in result.output, result.output
    assert tree_digest(project / "rendered") == before


def test_an_act_action_for_an_unknown_alert_has_a_did_you_mean(project, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("act: {actions: {VerlTrainingDivergance: stop}}\n")
    result = run("build", "--root", str(project), "--config", str(config))
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {config}: act.actions: 'VerlTrainingDivergance'")
    assert "did you mean 'VerlTrainingDivergence'?" in result.output


YOUNG_RUN_ALERTS = '''\
from dashgen.conditions import Baseline, Signal, all_of
from dashgen.model import Alert, RuleGroup, Severity

kl, entropy = Signal("actor/ppo_kl"), Signal("actor/entropy").median_over("5m")


def rules(config):
    return RuleGroup("team-early", (
        Alert.when("TeamEarlyKLBreak", kl.max_over("10m").above(4, times=Baseline("1h", min_history="15m")),
                   for_="2m", severity=Severity.WARNING, summary="KL broke away in a young run."),
        Alert.when("TeamEntropyFall", all_of(entropy.below(0.3, times=Baseline.held(of=Baseline("1h"))),
                                            entropy.below(0.5)),
                   for_="5m", severity=Severity.WARNING, summary="Entropy fell to under 30% of its best level."),
    ))
'''
YOUNG_RUN_FIXTURE = '''\
# The entropy baseline and its held level are the ones alerts/stability.py records: both files.
rule_files: [../../rendered/rules/team.yaml, ../../rendered/rules/stability.yaml]
evaluation_interval: 1m
tests:
  - name: a run 30 minutes old is compared with its own first steps
    interval: 1m
    input_series:
      - {series: 'verl_actor_ppo_kl{job="verl",instance="t:9464",project="p",experiment="young"}', values: '0.02x29 0.2x10'}
    alert_rule_test:
      - {eval_time: 29m, alertname: TeamEarlyKLBreak, exp_alerts: []}
      - eval_time: 32m
        alertname: TeamEarlyKLBreak
        exp_alerts:
          - exp_labels: {severity: warning, job: verl, instance: "t:9464", project: p, experiment: young}
            exp_annotations:
              summary: KL broke away in a young run.
              description: "Run p/young: the highest value of actor/ppo_kl over 10m is above 4x its median of the 1h before the recent window (the highest value of actor/ppo_kl over 10m: 0.2)."
              runbook_url: "rendered/docs/alerts.md#teamearlykl\u0062reak"
  - name: entropy falling from a high level fires; a level low from the start does not
    interval: 1m
    input_series:
      - {series: 'verl_actor_entropy{job="verl",instance="t:9464",project="p",experiment="falls"}', values: '0.9x99 0.2x60'}
      - {series: 'verl_actor_entropy{job="verl",instance="t:9464",project="p",experiment="low"}', values: '0.02x159'}
    alert_rule_test:
      - eval_time: 159m
        alertname: TeamEntropyFall
        exp_alerts:
          - exp_labels: {severity: warning, job: verl, instance: "t:9464", project: p, experiment: falls}
            exp_annotations:
              summary: Entropy fell to under 30% of its best level.
              description: "Run p/falls: the median of actor/entropy over 5m is below 0.3x the best of its median of the 1h before the recent window; and the median of actor/entropy over 5m is below 0.5 (the median of actor/entropy over 5m: 0.2)."
              runbook_url: "rendered/docs/alerts.md#teamentropyfall"
'''


def test_a_young_run_is_watched_from_its_own_first_steps_and_a_fall_is_relative(team):
    """min_history: a baseline from the run's first steps; Baseline.held(of=...): a fall from the
    run's own best level, which a run whose level is low from its start never makes."""
    (team / "alerts" / "team.py").write_text(YOUNG_RUN_ALERTS)
    (team / "tests" / "rules" / "team-test.yaml").write_text(YOUNG_RUN_FIXTURE)
    assert run("build", "--root", str(team)).exit_code == 0
    rules = (team / "rendered" / "rules" / "team.yaml").read_text()
    assert "present_over_time(verl_actor_ppo_kl{job=\"verl\"}[45m] offset 25m)" in rules
    result = run("test", "--root", str(team), "team")
    assert result.exit_code == 0, result.output
    # Its two test groups read different alerts: a file each, named by the fixture and the group.
    assert re.findall(r"/team-test/(groups-\d)\.yaml\n\s+SUCCESS", result.output) == ["groups-1", "groups-2"]


WARM_UP_ALERTS = '''\
from dashgen.conditions import Baseline, Signal
from dashgen.model import Alert, RuleGroup, Severity

kl = Signal("actor/ppo_kl").max_over("5m")


def rules(config):
    return RuleGroup("team-warm-up", (
        Alert.when("TeamKLAboveSettled", kl.above(3, times=Baseline.quietest("5m", over="1h", min_history="10m")),
                   for_="2m", severity=Severity.WARNING, summary="KL rose above 3x its settled level."),
        Alert.when("TeamKLAboveMedian", kl.above(3, times=Baseline("1h", ending="10m", min_history="10m")),
                   for_="2m", severity=Severity.WARNING, summary="KL rose above 3x its median."),
    ))
'''
WARM_UP_FIXTURE = '''\
# The settled KL level is the one alerts/stability.py records (same window, look-back and history).
rule_files: [../../rendered/rules/team.yaml, ../../rendered/rules/stability.yaml]
evaluation_interval: 1m
tests:
  - name: KL decaying from a warm-up, settled, then 5x its settled level
    interval: 1m
    input_series:
      # 0.3 falling to 0.02 over the first 20 minutes, 0.02 until minute 40, then 0.1.
      - {series: 'verl_actor_ppo_kl{job="verl",instance="t:9464",project="p",experiment="grpo"}', values: '0.3-0.014x20 0.02x19 0.1x10'}
    promql_expr_test:
      - expr: ALERTS{alertstate="firing"}
        eval_time: 39m
        exp_samples: []
      # The median of the young run's history is still inside the decay (about 0.09): only the
      # settled level sees the rise.
      - expr: ALERTS{alertstate="firing"}
        eval_time: 44m
        exp_samples:
          - labels: 'ALERTS{alertname="TeamKLAboveSettled",alertstate="firing",severity="warning",job="verl",instance="t:9464",project="p",experiment="grpo"}'
            value: 1
      - expr: verl:actor_ppo_kl:baseline_floor
        eval_time: 44m
        exp_samples:
          - labels: 'verl:actor_ppo_kl:baseline_floor{job="verl",instance="t:9464",project="p",experiment="grpo"}'
            value: 0.02
'''


def test_a_warm_up_is_compared_with_its_settled_level_not_the_median_of_its_decay(team):
    """Baseline.quietest: the lowest 5m median of the last hour for a rising signal, so a GRPO
    warm-up's decaying KL does not lift the level a fault is measured from."""
    (team / "alerts" / "team.py").write_text(WARM_UP_ALERTS)
    (team / "tests" / "rules" / "team-test.yaml").write_text(WARM_UP_FIXTURE)
    assert run("build", "--root", str(team)).exit_code == 0
    rules = (team / "rendered" / "rules" / "team.yaml").read_text()
    stability = (team / "rendered" / "rules" / "stability.yaml").read_text()
    # The divergence counts steps, so the team's quietest level of an hour is a recording of its own.
    assert "> 3 * verl:actor_ppo_kl:baseline_floor" in rules and "record: verl:actor_ppo_kl:baseline_floor" in rules
    assert "min_over_time(verl:actor_ppo_kl:median_5m[1h])" in rules
    assert "record: verl:actor_ppo_kl:baseline_floor\n" not in stability
    result = run("test", "--root", str(team), "team")
    assert result.exit_code == 0, result.output  # the fixture and both alerts' generated cases


def test_a_quietest_baseline_longer_than_its_look_back_is_refused(team):
    (team / "alerts" / "team.py").write_text(WARM_UP_ALERTS.replace('Baseline.quietest("5m", over="1h"',
                                                                    'Baseline.quietest("2h", over="1h"'))
    result = run("build", "--root", str(team))
    assert result.exit_code != 0
    assert "TeamKLAboveSettled" in result.output and "its window '2h' must be shorter than over '1h'" in result.output, result.output


@pytest.mark.parametrize("baseline, problem", [
    ('Baseline("1h", ending="10m", min_history="2h")', "min_history '2h' must be a duration longer than 0s and "
                                                       "shorter than the window (1h)"),
    ('Baseline(steps(100), ending=steps(20), min_history="10m")', "a baseline in steps gives its window and ending in "
                                                                  "steps"),
])
def test_a_min_history_refusal_names_the_file_and_the_alert(team, baseline, problem):
    """Issue 38: this refusal alone said neither where nor which alert."""
    (team / "alerts" / "team.py").write_text(
        WARM_UP_ALERTS.replace('Baseline("1h", ending="10m", min_history="10m")', baseline)
        .replace("import Baseline, Signal", "import Baseline, Signal, steps"))
    result = run("build", "--root", str(team))
    assert result.exit_code != 0
    assert f"alerts/team.py: alert 'TeamKLAboveMedian': baseline of verl_actor_ppo_kl{{verl}}: {problem}" \
        in result.output, result.output


def test_dashgen_test_of_one_module_runs_its_tests_only_and_names_an_unknown_one(team):
    add_team_alert(team)
    (team / "tests" / "rules" / "team-test.yaml").write_text(WARM_UP_FIXTURE)  # reads team.yaml and stability.yaml
    (team / "alerts" / "team.py").write_text(WARM_UP_ALERTS)
    assert run("build", "--root", str(team)).exit_code == 0
    result = run("test", "--root", str(team), "alerts/team.py")
    assert result.exit_code == 0, result.output
    tested = re.findall(r"Unit Testing:\s+(\S+)", result.output)
    assert [Path(path).name for path in tested] == ["team-test.yaml", "team-TeamKLAboveMedian-generated-test.yaml",
                                                         "team-TeamKLAboveSettled-generated-test.yaml"]
    result = run("test", "--root", str(team), "teams")
    assert result.exit_code == 1 and "no alert module alerts/teams.py; did you mean 'team'?" in result.output
