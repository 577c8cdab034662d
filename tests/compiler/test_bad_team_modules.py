"""A team's bad alert module or config never reaches Prometheus (issue 30): each mistake is one
error naming the file and the alert or group, a non-zero exit, no traceback, and rendered/ as it was.

Each case adds alerts/team.py (HEADER, then the case's own lines) and, for some, a dashgen.yaml, to a
copy of this repository's project, and builds it."""

import re
import textwrap
import time

import pytest

from conftest import run, tree_digest

HEADER = """\
from dataclasses import dataclass

from dashgen.conditions import Baseline, Signal, all_of, any_of, steps
from dashgen.config import AreaConfig
from dashgen.model import Alert, Inhibition, Recording, RuleGroup, Severity

kl = Signal("actor/ppo_kl")
"""


def one_alert(condition: str, *fields: str, group: str = "'team'") -> str:
    """A module whose one group holds one alert TeamX on `condition`."""
    extra = "".join(f", {f}" for f in fields)
    return (f"def rules(config):\n    return RuleGroup({group}, (Alert.when(\n"
            f"        'TeamX', {condition}, severity=Severity.WARNING, summary='x'{extra}),))\n")


def two_groups(first: str, second: str, held: bool = False) -> str:
    keep = ", keep_firing_while=kl.above(2, times=Baseline.held())" if held else ""
    condition = "kl.above(3, times=Baseline('1h'))" if held else "kl.above(1)"
    return (f"def rules(config):\n    return [\n"
            f"        RuleGroup({first!r}, (Alert.when('TeamA', {condition}{keep}, severity=Severity.WARNING, "
            f"summary='x'),)),\n"
            f"        RuleGroup({second!r}, (Alert.when('TeamB', kl.above(2), severity=Severity.WARNING, "
            f"summary='x'),))]\n")


def build_fails(project, module: str, expected: str, config: str | None = None) -> str:
    (project / "alerts" / "team.py").write_text(HEADER + textwrap.dedent(module))
    if config is not None:
        (project / "dashgen.yaml").write_text(config)
    before = tree_digest(project / "rendered")
    result = run("build", "--root", str(project))  # an exception would fail the test: no traceback
    assert result.exit_code != 0, result.output
    assert result.output.startswith("Error: alerts/team.py") or result.output.startswith(f"Error: {project}"), \
        result.output
    assert expected in result.output, result.output
    assert "Traceback" not in result.output
    assert tree_digest(project / "rendered") == before
    return result.output


# 1. What Prometheus' rule loader (promtool check rules) refuses.
PROMETHEUS_REFUSES = {
    "two groups of one name": (two_groups("t", "t"), "group 't' is defined twice"),
    "a group named like the compiler's hold group": (
        two_groups("t", "t-hold", held=True),
        "group 't-hold': the compiler names the group that steps the held baselines of group 't' so"),
    "an empty group name": (one_alert("kl.above(1)", group="''"), "a rule group has the empty name ''"),
    "a label name with a dash": (one_alert("kl.above(1)", "labels=(('bad-label', 'x'),)"),
                                 "alert 'TeamX': label name 'bad-label' is not valid"),
    "the metric name label": (one_alert("kl.above(1)", "labels=(('__name__', 'x'),)"),
                              "alert 'TeamX': label name '__name__' is reserved"),
    "labels not pairs": (one_alert("kl.above(1)", "labels=('team',)"),
                         "alert 'TeamX': labels are a tuple of (name, value) string pairs"),
    "a for_ out of range": (one_alert("kl.above(1)", "for_='300y'"),
                            "alert 'TeamX': for_ = '300y' is out of Prometheus' duration range (at most 292y)"),
    "a for_ with units out of order": (one_alert("kl.above(1)", "for_='5m1h'"),
                                       "alert 'TeamX': for_ = '5m1h' is not a Prometheus duration"),
    "a window out of range": (one_alert("kl.median_over('300y').above(1)"),
                              "alert 'TeamX': condition: actor/ppo_kl: the median window: '300y' is out of "
                              "Prometheus' duration range (at most 292y)"),
    "a hand-written range out of range": (
        one_alert("None", "expr='max_over_time(verl_actor_ppo_kl{verl}[300y]) > 1'", "description='x'")
        .replace("Alert.when(\n        'TeamX', None,", "Alert(\n        'TeamX',"),
        "alert 'TeamX': a range or offset of 300 years is out of Prometheus' duration range"),
    "an unclosed action in a summary": (one_alert("kl.above(1)").replace("summary='x'", "summary='{{ $labels.x'"),
                                        "alert 'TeamX': summary: not a valid Prometheus template: an action {{ ..."),
    "an unclosed if in a description": (one_alert("kl.above(1)", "description='{{ if $value }} high'"),
                                        "alert 'TeamX': description: not a valid Prometheus template: {{ if }} is "
                                        "not closed by {{ end }}"),
    "a stray end in a label value": (one_alert("kl.above(1)", "labels=(('team', 'rl{{ end }}'),)"),
                                     "alert 'TeamX': label team: not a valid Prometheus template: {{ end }} without"),
    "an unclosed string in an action": (one_alert("kl.above(1)", "description='{{ printf \"%.2f $value }}'"),
                                        "alert 'TeamX': description: not a valid Prometheus template: a string"),
    "a group interval out of range": (one_alert("kl.above(1)").replace("),))", "),), interval='300y')"),
                                      "group 'team': interval '300y' is out of Prometheus' duration range"),
}


@pytest.mark.parametrize("module, expected", PROMETHEUS_REFUSES.values(), ids=PROMETHEUS_REFUSES.keys())
def test_what_prometheus_refuses_is_refused_by_the_build(project, module, expected):
    build_fails(project, module, expected)


@pytest.mark.heavy
def test_what_only_promtool_knows_is_refused_before_rendered_changes(project):
    """The in-process checks do not know Go's template functions; promtool, run on the changed rule
    files before rendered/ is replaced, does."""
    output = build_fails(project, one_alert("kl.above(1)", "description='{{ nosuchfunc $value }}'"),
                         "alerts/team.py (rendered/rules/team.yaml): `promtool check rules` refuses")
    assert 'function "nosuchfunc" not defined' in output and "rendered/ was left as it was" in output


def test_templates_the_rules_use_pass_the_in_process_check():
    from dashgen.compiler.rules.prometheus_limits import template_problem

    good = ['{{ $labels.project }}/{{ $labels.experiment }}', '{{ printf "%.4g" $value }}',
            '{{ if gt $value 1.0 }}high{{ else }}low{{ end }}', '{{- range $i, $x := . -}}{{ $x }}{{ end }}',
            '{{/* a comment with }} inside */}}', '{{ "}}" }}', '{{ `a {{ raw` }}', 'no action at all']
    assert [template_problem(text) for text in good] == [None] * len(good)
    bad = ['{{ $value', '{{ if $value }}', '{{ end }}', '{{ else }}', '{{ "abc }}', '{{/* open }}']
    assert all(template_problem(text) for text in bad)


# 2. Thresholds, factors, fractions and floors: finite numbers that fit their direction, refused where
# the alert is written (the file, the alert and its line).
THRESHOLD = "alert 'TeamX': condition: actor/ppo_kl: the threshold of above() is"
VALUES = {
    "inf": ("kl.above(float('inf'))", f"{THRESHOLD} inf, not a finite number"),
    "nan": ("kl.above(float('nan'))", f"{THRESHOLD} nan, not a finite number"),
    "-inf": ("kl.above(float('-inf'))", f"{THRESHOLD} -inf, not a finite number"),
    "None": ("kl.above(None)", f"{THRESHOLD} None, not a number"),
    "a string": ("kl.above('0.5')", f"{THRESHOLD} '0.5', not a number (a string: convert it"),
    "a bool": ("kl.above(True)", f"{THRESHOLD} True, not a number"),
    "a threshold that overflows": ("kl.above(1e308)", f"{THRESHOLD} 1e+308, beyond +-1e+100"),
    "a factor that overflows": ("kl.above(1e308, times=Baseline('1h'))",
                                "the factor of above(..., times=...) is 1e+308, beyond +-1e+100"),
    "a negative factor": ("kl.below(-2, times=Baseline('1h'))",
                          "the factor of below(..., times=...) is -2; it must be greater than 0"),
    "above a fraction of the baseline": ("kl.above(0.5, times=Baseline('1h'))",
                                         "above(0.5, times=...) holds whenever the signal is at its baseline: a "
                                         "factor above a baseline is at least 1 (for a fall to under 0.5x, write "
                                         "below(0.5, times=...))"),
    "below a multiple of the held baseline": (
        "kl.below(0.5, times=Baseline('1h')), keep_firing_while=kl.below(2, times=Baseline.held())",
        "alert 'TeamX': keep_firing_while: actor/ppo_kl: below(2, times=...) holds whenever the signal is at its "
        "baseline: a factor below a baseline is at most 1"),
    "rises_by a negative fraction": ("kl.rises_by(-0.5, of=Baseline('1h'))",
                                     "the fraction of rises_by() is -0.5; it must be greater than 0"),
    "falls_by nothing": ("kl.falls_by(0, of=Baseline('1h'))",
                         "the fraction of falls_by() is 0; it must be greater than 0"),
    "rises_to its own level": ("kl.rises_to(1, of=Baseline('1h'))",
                               "the fraction of rises_by() is 0; it must be greater than 0 (rises_to(m) is "
                               "rises_by(m - 1))"),
    "falls_to more than its level": ("kl.falls_to(1.5, of=Baseline('1h'))",
                                     "the fraction of falls_by() is -0.5; it must be greater than 0 (falls_to(s) is "
                                     "falls_by(1 - s))"),
    "a negative floor": ("kl.falls_by(0.5, of=Baseline('1h'), at_least=-1)",
                         "at_least of falls_by() is -1; it must be 0 or more"),
    "an infinite floor": ("kl.rises_by(0.5, of=Baseline('1h'), at_least=float('inf'))",
                          "at_least of rises_by() is inf, not a finite number"),
    "a baseline of '5x'": ("kl.above(2, times=Baseline('5x'))",
                           "alert 'TeamX': condition: actor/ppo_kl: baseline window: '5x' is not a Prometheus duration"),
    "a baseline out of range": ("kl.above(2, times=Baseline('300y'))",
                                "baseline window: '300y' is out of Prometheus' duration range"),
    "a baseline that is not one": ("kl.above(2, times='1h')", "actor/ppo_kl: '1h' is not a Baseline(...)"),
    "a nested bad value": ("all_of(kl.above(1), any_of(kl.below(2), kl.below(float('nan'))))",
                           "the threshold of below() is nan, not a finite number"),
    "not a condition": ("all_of(kl.above(1), 'kl > 2')", "'kl > 2' is not a condition"),
}


@pytest.mark.parametrize("condition, expected", VALUES.values(), ids=VALUES.keys())
def test_values_that_are_not_what_they_look_like_are_refused(project, condition, expected):
    output = build_fails(project, one_alert(condition), expected)
    assert "\n  line 9: return RuleGroup('team', (Alert.when(" in output  # where the alert is written


def test_a_bad_value_at_import_names_the_alert_and_its_line(project):
    module = "BROKEN = Alert.when('TeamY', kl.above(None), severity=Severity.WARNING, summary='x')\n"
    output = build_fails(project, module + one_alert("kl.above(1)"), "alerts/team.py: alert 'TeamY': condition:")
    assert "\n  line 8: BROKEN = Alert.when(" in output


def test_a_threshold_reaches_promql_as_written(project):
    (project / "alerts" / "team.py").write_text(HEADER + one_alert("kl.above(0.1234567)"))
    assert run("build", "--root", str(project)).exit_code == 0
    assert "verl_actor_ppo_kl{" in (rules := (project / "rendered" / "rules" / "team.yaml").read_text())
    assert "> 0.1234567\n" in rules, rules


# 3. A team's area config cannot give raw text to PromQL.
AREA = '''
@dataclass(frozen=True)
class TeamConfig(AreaConfig, area="team"):
    window: {kind} = "5m"


def rules(config):
    window = config.area(TeamConfig).window
    return RuleGroup("team", (Alert("TeamX", expr=f"max_over_time(verl_actor_ppo_kl{{{{verl}}}}[{{window}}]) > 1",
                                    severity=Severity.WARNING, summary="x", description="x"),))
'''
INJECTION = 'team: {window: "5m]) or vector(1) #"}\n'


AREA_CLASSES = {
    "without @dataclass": (AREA.format(kind="Duration").replace("@dataclass(frozen=True)\n", ""),
                           "alerts/team.py: TeamConfig (alert area 'team') is not a dataclass: put "
                           "@dataclass(frozen=True) above it"),
    "a field without a default": (AREA.format(kind="Duration").replace(' = "5m"', ""),
                                  "alerts/team.py: TeamConfig.window has no default: every tunable needs one"),
    "a field typed object": (AREA.format(kind="object"), "alerts/team.py: TeamConfig.window is typed object"),
    "an area named like a core field": (AREA.format(kind="Duration").replace('area="team"', 'area="verl_job"'),
                                        "alerts/team.py: TeamConfig: alert area 'verl_job' is named like a core "
                                        "config field"),

    # Blamed on dashgen.yaml before, which did not set it.
    "a default that breaks its own annotation": (AREA.format(kind="Duration").replace(' = "5m"', ' = "5 minutes"'),
                                                 "alerts/team.py: TeamConfig.window: '5 minutes' is not a Prometheus "
                                                 "duration"),
}


@pytest.mark.parametrize("module, expected", AREA_CLASSES.values(), ids=AREA_CLASSES.keys())
def test_an_area_class_that_cannot_be_read_is_refused_by_build_and_config(project, module, expected):
    module = "from dashgen.config import Duration\n" + module
    build_fails(project, module, expected)
    for command in (("config",), ("config", "--describe")):
        result = run(*command, "--root", str(project))
        assert result.exit_code == 1 and result.output.startswith(f"Error: {expected}"), result.output


def test_an_area_named_like_a_core_field_is_the_name_clash_when_dashgen_yaml_sets_it(project):
    """A YAML type error of the core field before ("expected a string, got a mapping")."""
    module = "from dashgen.config import Duration\n" + AREA.format(kind="Duration").replace('area="team"',
                                                                                          'area="verl_job"')
    (project / "alerts" / "team.py").write_text(HEADER + module)
    (project / "dashgen.yaml").write_text("verl_job: {window: 10m}\n")
    for command in ("build", "config"):
        result = run(command, "--root", str(project))
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert "alert area 'verl_job' is named like a core config field" in result.output or \
            "dashgen.yaml: verl_job: a mapping, as a section or alert area takes, under the name of a core config " \
            "field (a string): a section or alert area cannot be named 'verl_job'" in result.output, result.output


@pytest.mark.parametrize("kind", ["str", "str | None", "typing.Any", "tuple[str, ...]"])
def test_an_area_field_of_any_text_is_refused(project, kind):
    module = AREA.format(kind=kind) if kind != "typing.Any" else "import typing\n" + AREA.format(kind=kind)
    build_fails(project, module, "alerts/team.py: TeamConfig.window is typed", config=INJECTION)
    result = run("config", "--root", str(project))
    assert result.exit_code == 1 and "TeamConfig.window is typed" in result.output, result.output


def test_a_window_from_the_config_cannot_close_its_range(project):
    module = "from dashgen.config import Duration\n" + AREA.format(kind="Duration")
    build_fails(project, module, "dashgen.yaml: team.window: '5m]) or vector(1) #' is not a Prometheus duration",
                config=INJECTION)
    (project / "dashgen.yaml").write_text("team: {window: 10m}\n")
    assert run("build", "--root", str(project)).exit_code == 0
    assert "max_over_time(verl_actor_ppo_kl{job=\"verl\"}[10m]) > 1" in \
        (project / "rendered" / "rules" / "team.yaml").read_text()


def test_a_window_given_to_the_vocabulary_cannot_close_its_range(project):
    build_fails(project, one_alert("kl.median_over('5m]) or vector(1) #').above(1)"),
                "alert 'TeamX': condition: actor/ppo_kl: the median window: '5m]) or vector(1) #' is not a "
                "Prometheus duration")


# 4. References: ALERTS{alertname=...} in hand-written rules, and inhibitions' equal labels.
def reads_alerts(name: str) -> str:
    return ("def rules(config):\n    return RuleGroup('team', (Alert('TeamX', expr='(verl_actor_ppo_kl{verl} > 1) and on"
            f"(job, instance, project, experiment) ALERTS{{alertname=\"{name}\", alertstate=\"firing\"}}', "
            "severity=Severity.WARNING, summary='x', description='x'),))\n")


def inhibits(equal: str, targets: str = "('VerlKLSpike',)") -> str:
    return one_alert("kl.above(1)") + (f"\n\ndef inhibitions(config):\n    return (Inhibition('TeamX', {targets}, "
                                       f"why='x', equal={equal}),)\n")


def reads_statistic(matchers: str) -> str:
    return ("def rules(config):\n    return RuleGroup('team', (Alert('TeamX', expr='max without(series, statistic) "
            f"(verl_step_statistic{{verl, {matchers}}}) < 0.1', severity=Severity.WARNING, summary='x', "
            "description='x'),))\n")


REFERENCES = {
    "ALERTS of a misspelt alert": (reads_alerts("VerlKLSpik"),
                                   "alerts/team.py: alert 'TeamX': 'VerlKLSpik' is not an alert defined in alerts/; "
                                   "did you mean 'VerlKLSpike'?"),
    "ALERTS of a misspelt alert in backticks": (reads_alerts("VerlKLSpik").replace('"VerlKLSpik"', "`VerlKLSpik`"),
                                                "'VerlKLSpik' is not an alert defined in alerts/"),
    "a recording reading ALERTS of an unknown alert": (
        "def rules(config):\n    return RuleGroup('team', (Recording('team:firing:count', "
        "'count(ALERTS{alertname=~\"VerlKLSpike|NoSuchAlert\"})', 'x'),))\n",
        "alerts/team.py: recording rule 'team:firing:count': 'NoSuchAlert' is not an alert defined in alerts/"),
    "equal naming a label no alert carries": (
        inhibits("('project', 'experiment', 'projct')"),
        "alerts/team.py: inhibition by 'TeamX': equal label 'projct' is not a label of TeamX (did you mean "
        "'project'? its labels: alertname, experiment, instance, job, project, severity); Alertmanager counts a "
        "label missing on both sides as equal"),
    "equal misspelling the run's label": (
        inhibits("('projct', 'experiment')"),
        "inhibition by 'TeamX': equal=('projct', 'experiment') does not name the run, so the source firing in one "
        "run would silence VerlKLSpike in every run"),
    "equal without the run": (inhibits("('job',)"), "equal=('job',) does not name the run"),
    # Live and backtest agree: the exporter serves only what the build lists.
    "a step statistic no condition asks for": (
        reads_statistic('series="verl_actor_entropy", statistic="median_7steps"'),
        "alerts/team.py: alert 'TeamX': reads verl_step_statistic{series=\"verl_actor_entropy\", "
        "statistic=\"median_7steps\"}, which no condition's step window asks for: the build does not list it in "
        "exporter/step-statistics.yaml, so the exporter never serves it"),
    "a step statistic without its series": (reads_statistic('statistic="median_3steps"'),
                                            "reads verl_step_statistic{statistic=\"median_3steps\"}, which no"),
    "a step statistic matched by a regex": (reads_statistic('series="verl_actor_entropy", statistic=~"median.*"'),
                                            "reads verl_step_statistic{series=\"verl_actor_entropy\"}, which no"),
    "a recording named as dashgen's record of a fired alert": (
        "def rules(config):\n    return RuleGroup('team', (Recording('dashgen:VerlKLSpike:fired', "
        "'vector(1)', 'x'),))\n",
        "alerts/team.py: recording rule 'dashgen:VerlKLSpike:fired': a name of the form dashgen:<alert>:fired is "
        "dashgen's own (the recording of when an alert fired, under vmalert): rename it"),
    "equal naming a label only the target carries": (
        inhibits("('project', 'experiment', 'ip')", "('VerlGPUStraggler',)"),
        "equal label 'ip' is not a label of TeamX"),
}


@pytest.mark.parametrize("module, expected", REFERENCES.values(), ids=REFERENCES.keys())
def test_every_reference_is_checked(project, module, expected):
    build_fails(project, module, expected)


def test_a_step_statistic_the_build_lists_may_be_read_by_hand(project):
    (project / "alerts" / "team.py").write_text(
        HEADER + reads_statistic('series="verl_actor_entropy", statistic="median_5steps"'))
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output


def test_an_inhibition_within_the_run_and_reading_a_real_alert_builds(project):
    module = reads_alerts("VerlKLSpike") + "\n\ndef inhibitions(config):\n    return (Inhibition('TeamX', " \
        "('VerlEntropyCollapse',), why='x', equal=('project', 'experiment')),)\n"
    (project / "alerts" / "team.py").write_text(HEADER + module)
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output


# 5. Deep, wide and repeated definitions: stated limits with an error at the limit, never a RecursionError.
NESTED = "cond = kl.above(1)\nfor i in range({depth}):\n    cond = (all_of if i % 2 else any_of)(kl.above(i + 2), cond)\n"
HAND_WRITTEN_OR = one_alert("None", "expr='{expr}'", "description='x'").replace(
    "Alert.when(\n        'TeamX', None,", "Alert(\n        'TeamX',")
LARGE = {
    "all_of/any_of nested 400 deep": (NESTED.format(depth=400) + one_alert("cond"),
                                      "alert 'TeamX': condition: all_of and any_of nest more than 8 deep"),
    "any_of 3,000 wide": (one_alert("any_of(*(kl.above(i + 1) for i in range(3000)))"),
                          "alert 'TeamX': condition: the condition holds more than 64 comparisons"),
    "a hand-written expression 3,000 wide": (
        HAND_WRITTEN_OR.replace("{expr}", " or ".join(f"verl_actor_ppo_kl{{verl}} > {i}" for i in range(3000))),
        "alert 'TeamX': the expression holds 8999 operators and parentheses, more than the 1000 dashgen checks"),
    "a hand-written expression 30,000 wide": (  # the native parser would crash the process
        HAND_WRITTEN_OR.replace("{expr}", " or ".join(f"verl_actor_ppo_kl{{verl}} > {i}" for i in range(30000))),
        "more than the 1000 dashgen checks"),
    "a group interval of 0s": (one_alert("kl.above(1)").replace("),))", "),), interval='0s')"),
                               "alerts/team.py: group 'team': interval '0s' must be longer than 0s"),
    "a recording declared twice": (
        "def rules(config):\n    return RuleGroup('team', (Recording('team:kl', 'verl_actor_ppo_kl{verl}', 'x'), "
        "Recording('team:kl', 'verl_actor_ppo_kl{verl}', 'x')))\n",
        "alerts/team.py: recording rule 'team:kl': the series is already a metric of the catalog or recorded"),
    "a recording named like a catalog metric": (
        "def rules(config):\n    return RuleGroup('team', (Recording('verl_actor_ppo_kl', 'vector(1)', 'x'),))\n",
        "alerts/team.py: recording rule 'verl_actor_ppo_kl': the series is already a metric of the catalog"),
}


@pytest.mark.parametrize("module, expected", LARGE.values(), ids=LARGE.keys())
def test_large_definitions_meet_a_stated_limit(project, module, expected):
    build_fails(project, module, expected)


def test_at_the_limits_a_condition_builds(project):
    module = NESTED.format(depth=8) + one_alert("cond").replace("TeamX", "TeamDeep").replace("RuleGroup('team', (", (
        "RuleGroup('team', (Alert.when('TeamWide', any_of(*(kl.above(i + 1) for i in range(64))), "
        "severity=Severity.WARNING, summary='x'), "))
    (project / "alerts" / "team.py").write_text(HEADER + module)
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output


def test_three_quietest_baselines_of_one_signal_each_get_a_recording(project):
    alerts = ", ".join(f"Alert.when('TeamQuiet{i}', kl.above(2, times=Baseline.quietest('{window}', over='1h')), "
                       f"severity=Severity.WARNING, summary='x')" for i, window in enumerate(("5m", "10m", "15m")))
    again = "Alert.when('TeamQuietAgain', kl.above(3, times=Baseline.quietest('5m', over='1h')), " \
            "severity=Severity.WARNING, summary='x')"
    (project / "alerts" / "team.py").write_text(
        HEADER + f"def rules(config):\n    return RuleGroup('team', ({alerts}, {again}))\n")
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    rules = (project / "rendered" / "rules" / "team.yaml").read_text()
    floors = re.findall(r"record: (verl:actor_ppo_kl:baseline_floor\S*)", rules)
    # One recording a window, the first written first; the same baseline twice is one recording,
    # read by both alerts.
    assert len(floors) == len(set(floors)) == 3
    assert "median_5m[1h]" in rules.split(f"record: {floors[0]}\n")[1].split("record:")[0]
    assert rules.count(f"> 2 * {floors[0]})") + rules.count(f"> 2 * {floors[0]}\n") == 1
    assert rules.count(f"> 3 * {floors[0]})") + rules.count(f"> 3 * {floors[0]}\n") == 1


def test_a_generated_test_promtool_cannot_run_names_its_alert_and_why(project):
    (project / "alerts" / "team.py").write_text(HEADER + one_alert("kl.above(2, times=Baseline('30d'))"))
    assert run("build", "--root", str(project)).exit_code == 0
    result = run("test", "--root", str(project), "team")
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: alerts/team.py: alert 'TeamX': its generated test cannot run in promtool: its longest window, "
        "30d10m, is 43,210 samples at the rule interval, more than the 10,000 `promtool test rules` loads in one "
        "query (\"too many samples\")"), result.output


@pytest.mark.heavy
def test_an_untestable_alert_that_says_why_is_left_out_of_the_generated_tests(project):
    (project / "alerts" / "team.py").write_text(
        HEADER + one_alert("kl.above(2, times=Baseline('30d'))", "untested='a fixture samples it every 10m'"))
    assert run("build", "--root", str(project)).exit_code == 0
    result = run("test", "--root", str(project), "team")
    assert result.exit_code == 0, result.output
    assert "no rule tests of team: every alert there says why" in result.output


# 6. YAML aliases: a few lines of nested aliases expand to billions of nodes.
def alias_bomb(field: str) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return "\n".join(lines) + f"\nteam: {{{field}: *a8}}\n"


@pytest.mark.parametrize("command", ["build", "config", "check"])
def test_an_alias_bomb_in_a_team_area_field_is_refused_at_once(project, command):
    module = "from dashgen.config import Duration\n" + AREA.format(kind="Duration")
    (project / "alerts" / "team.py").write_text(HEADER + module)
    (project / "dashgen.yaml").write_text(alias_bomb("window"))
    before = tree_digest(project / "rendered")
    started = time.monotonic()
    result = run(command, "--root", str(project))
    assert time.monotonic() - started < 5
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {project / 'dashgen.yaml'}: not valid YAML: the alias *a0 is not allowed "
                                    f"here"), result.output
    assert "line 2, column 10" in result.output
    assert tree_digest(project / "rendered") == before


def test_merge_keys_and_aliases_in_the_project_metrics_are_refused(project):
    (project / "metrics.yaml").write_text(
        "base: &base {type: gauge, unit: none}\nmetrics:\n- {<<: *base, name: team_queue_depth, help: x}\n")
    build_fails(project, one_alert("kl.above(1)"), "metrics.yaml: cannot read the project's metrics: the alias *base "
                                                    "is not allowed here (nor merge keys <<: *...)")


def test_amtool_guards_the_alertmanager_config_a_build_would_write():
    from dashgen.compiler.output.staged_checks import ALERTMANAGER_FILE, check_with_tools
    from dashgen.errors import BuildError

    files = {ALERTMANAGER_FILE: "route: {receiver: nowhere}\nreceivers: [{name: somewhere}]\n"}
    check_with_tools(files, [])  # nothing changes: nothing to check
    with pytest.raises(BuildError) as refused:
        check_with_tools(files, [ALERTMANAGER_FILE])
    assert str(refused.value).startswith(f"rendered/{ALERTMANAGER_FILE}: `amtool check-config` refuses what the "
                                         f"build would write:"), str(refused.value)
    assert 'undefined receiver "nowhere"' in str(refused.value)


@pytest.mark.parametrize("value", ["verl", 'a"b', "a\\b", "x\ny", '") or vector(1) #', "ünïcode"])
def test_a_label_value_spliced_into_promql_stays_one_value(value):
    import promql_parser

    from dashgen.compiler.queries.promql import label_value

    (matcher,) = promql_parser.parse(f"up{{job={label_value(value)}}}").matchers.matchers
    assert (matcher.name, matcher.value) == ("job", value)


def test_labels_as_a_list_of_pairs_build(project):
    (project / "alerts" / "team.py").write_text(HEADER + one_alert("kl.above(1)", "labels=[['team', 'rl']]"))
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    assert "team: rl" in (project / "rendered" / "rules" / "team.yaml").read_text()


def test_a_factor_from_the_config_against_its_direction_names_the_alert_and_the_config(project):
    (project / "dashgen.yaml").write_text("load_balance: {token_runaway_sustain_factor: 0.9}\n")
    before = tree_digest(project / "rendered")
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert result.output.startswith("Error: alerts/load_balance.py: alert 'VerlBatchTokenRunaway': keep_firing_while: "
                                    ), result.output
    assert "above(0.9, times=...) holds whenever the signal is at its baseline" in result.output
    assert f"(with the values {project / 'dashgen.yaml'} sets)" in result.output
    assert tree_digest(project / "rendered") == before
