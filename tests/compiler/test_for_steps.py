"""`for_=steps(N)`: an alert's `for` counted in the run's steps, compiled into its expression."""

import pytest

from conftest import run
from dashgen.compiler.project import compile_project
from dashgen.compiler.queries.promql import metrics_in
from dashgen.compiler.rules.promql_lines import alert_sizes
from dashgen.config import config_from

pytestmark = pytest.mark.heavy

TEAM_MODULE = '''
from dashgen.conditions import Signal, steps
from dashgen.model import Alert, RuleGroup, Severity


def rules(config):
    return RuleGroup("team-grad", (Alert.when(
        "TeamGradNormHigh", Signal("actor/grad_norm"){reduced}.above({threshold}), for_={for_},
        severity=Severity.WARNING, summary="Grad norm stayed high."),))
'''


@pytest.mark.parametrize("reduced, compiled", [
    # A logged series above a number: the exporter's lowest of its last 5 values, once all 5 are logged.
    ("", "(verl:actor_grad_norm:min_5steps_fully_logged > 5)"),
    # Anything else: the condition's truth recorded at each evaluation, read over the run's rhythm.
    (".median_over(steps(3))", "record: dashgen:TeamGradNormHigh:condition_holds"),
])
def test_for_in_steps_compiles_into_the_expression_and_its_generated_tests_pass_at_every_rhythm(
        project, reduced, compiled):
    (project / "alerts" / "team.py").write_text(TEAM_MODULE.format(reduced=reduced, threshold=5, for_="steps(5)"))
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    rules = (project / "rendered" / "rules" / "team.yaml").read_text()
    assert "for:" not in rules  # Prometheus' `for` is a duration; the steps are in the expression
    assert compiled in rules
    assert ("step_band" in rules) == bool(reduced)
    docs = (project / "rendered" / "docs" / "alerts.md").read_text()
    assert "**for:** 5 steps" in docs
    # The generated cases (at 1.5, 60 and 3,600 s a step) check it is not firing just before the 5
    # steps have passed, and firing after.
    tested = run("test", "--root", str(project), "team")
    assert tested.exit_code == 0, tested.output
    assert "at-3600s-per-step" in tested.output or "SUCCESS" in tested.output


def test_for_in_steps_needs_the_vocabulary(project):
    (project / "alerts" / "team.py").write_text('''
from dashgen.conditions import steps
from dashgen.model import Alert, RuleGroup, Severity


def rules(config):
    return RuleGroup("team-grad", (Alert("TeamGradNormHigh", expr='verl_actor_grad_norm{verl} > 5', for_=steps(5),
                                         severity=Severity.WARNING, summary="s", description="d"),))
''')
    result = run("build", "--root", str(project))
    assert result.exit_code != 0
    assert "alerts/team.py: alert 'TeamGradNormHigh': for_=steps(N) counts the steps of a condition=" in result.output


def test_a_for_beyond_any_sensible_count_of_steps_is_refused_before_its_test_runs_for_minutes(project):
    """Issue 38: for_=steps(3000) built, and its generated test replayed 3,000 steps at 300 s a step (5 minutes)."""
    (project / "alerts" / "team.py").write_text(TEAM_MODULE.format(reduced="", threshold=5, for_="steps(500)"))
    assert run("build", "--root", str(project)).exit_code == 0
    before = (project / "rendered" / "rules" / "team.yaml").read_text()
    (project / "alerts" / "team.py").write_text(TEAM_MODULE.format(reduced="", threshold=5, for_="steps(3000)"))
    for command in ("build", "test"):
        result = run(command, "--root", str(project))
        assert result.exit_code != 0
        assert ("alerts/team.py: alert 'TeamGradNormHigh': for_=steps(3000) holds the alert back more than 500 "
                "steps: a condition held that long is a level") in result.output, result.output
    assert (project / "rendered" / "rules" / "team.yaml").read_text() == before



def test_a_one_line_condition_held_for_steps_compiles_to_a_few_lines_of_promql(team):
    """Issue 53: `mean > 921.6 for 5 steps` took 105 lines (a recording of 13 band branches, an alert
    of 2 x 10 rhythm branches, the rhythm's recordings); what the rule view shows is now under 20."""
    module = TEAM_MODULE.format(reduced="", threshold=921.6, for_="steps(5)")
    (team / "alerts" / "team.py").write_text(module.replace("actor/grad_norm", "response_length/mean"))
    rules = compile_project(team, config_from({})).rules
    [size] = [size for size in alert_sizes(rules) if size.alert == "TeamGradNormHigh"]
    assert size.lines < 20 and size.recordings == 1, size
    [alert] = [rule for rule in rules.alert_rules if rule.name == "TeamGradNormHigh"]
    [read] = [rule for rule in rules.recording_rules if rule.record in metrics_in(alert.expr)]
    assert read.expr.endswith('series="verl_response_length_mean", statistic="min_5steps_fully_logged"})')
