"""A composite's generated tests try each branch alone: under all_of one branch crossing must not
fire the alert, under any_of it must. A wrong branch fails `dashgen test`, which names the alert,
the case and what it expected, and keeps the generated file to rerun."""

import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import run
from dashgen.compiler.project import compile_project
from dashgen.compiler.rule_tests.failure_report import explain_failures
from dashgen.compiler.rule_tests.promtool_files import write_generated_tests
from dashgen.config import config_from
from dashgen.promtool import run_tool

pytestmark = pytest.mark.heavy

COMPOSITE = '''\
from dashgen.conditions import Baseline, Signal, all_of, any_of
from dashgen.model import Alert, RuleGroup, Severity

KL, GRAD = Signal("actor/ppo_kl").max_over("5m"), Signal("actor/grad_norm").max_over("5m")
CLIP = Signal("response_length/clip_ratio").median_over("5m")  # a share of responses, 0 to 1


def rules(config):
    b = Baseline("1h")
    return RuleGroup("team", (Alert.when(
        "TeamComposite", {condition}, for_="5m", severity=Severity.WARNING,
        summary="A composite written by a team."),))
'''


def write_alert(project: Path, condition: str) -> None:
    (project / "alerts" / "team.py").write_text(COMPOSITE.replace("{condition}", condition))


def kept_folder(output: str) -> Path:
    match = re.search(r"the generated tests are kept in (\S+)", output)
    assert match, output
    return Path(match.group(1))


def test_a_branch_that_holds_on_a_healthy_run_fails_the_case_where_the_other_crosses_alone(team, tmp_path):
    """The issue's composite with KL's factor 0.2 where 5 was meant: KL above 0.2x its baseline holds
    on any healthy run, so the composite is grad norm alone. The cases that move both signals
    together pass; only the case where grad norm crosses alone catches it. (The build refuses
    `above(0.2, times=...)` as written, so the wrong factor is put into the rendered rule.)"""
    write_alert(team, "all_of(KL.above(5, times=b), GRAD.above(3, times=b))")
    config = config_from({})
    project = compile_project(team, config)
    [test_file] = [path for path in write_generated_tests(tmp_path, project.rules, project.alerts, config)
                   if path.name == "team-TeamComposite-generated-test.yaml"]
    names = [case["name"] for case in yaml.safe_load(test_file.read_text())["tests"]]
    assert names == ["TeamComposite: fires", "TeamComposite: stays quiet", "TeamComposite: only branch 1 crosses",
                     "TeamComposite: only branch 2 crosses"]
    assert run_tool("promtool", ["test", "rules", str(test_file)]).returncode == 0

    rule_file = tmp_path / "team-TeamComposite-rules" / "team.yaml"
    right = rule_file.read_text()
    assert right.count("> 5 * verl:actor_ppo_kl:baseline_median") == 1
    rule_file.write_text(right.replace("> 5 * verl:actor_ppo_kl:baseline_median", "> 0.2 * verl:actor_ppo_kl:baseline_median"))
    result = run_tool("promtool", ["test", "rules", str(test_file)])
    output = result.stdout + result.stderr
    assert result.returncode == 1
    failed = set(re.findall(r'experiment=\\"TeamComposite-([a-z0-9-]+)\\"', output))
    assert failed == {"only-branch-2-crosses"}, output
    [line] = explain_failures(output, {alert.name: alert.definition for alert in project.alerts})
    assert line == ("alerts/team.py: alert 'TeamComposite', generated case 'only branch 2 of all_of crosses (the "
                    "highest value of actor/grad_norm over 5m is above 3x its median of the 1h before the recent "
                    "window)': expected not firing at 1h33m into the case's series; it was firing (all_of fires on "
                    "this branch alone: another branch already holds on a healthy run)")


# The single-branch mistakes a build accepts, each inside a composite: a branch that can never
# hold, or one that always holds, under all_of and under any_of. The ratio thresholds are written
# as percentages (10 for 10%), which no share of responses ever exceeds and every share is below.
MISTAKES = {
    "all_of, a branch that always holds": (
        "all_of(GRAD.above(3, times=b), CLIP.below(50))", "all_of(GRAD.above(3, times=b), CLIP.below(0.5))",
        "only branch 1 of all_of crosses", "expected not firing"),
    "all_of, a branch that never holds": (
        "all_of(GRAD.above(3, times=b), CLIP.above(10))", "all_of(GRAD.above(3, times=b), CLIP.above(0.1))",
        "fires", "expected firing"),
    "any_of, a branch that always holds": (
        "any_of(GRAD.above(3, times=b), CLIP.below(50))", "any_of(GRAD.above(3, times=b), CLIP.below(0.5))",
        "stays quiet", "expected not firing"),
    "any_of, a branch that never holds": (
        "any_of(GRAD.above(3, times=b), CLIP.above(10))", "any_of(GRAD.above(3, times=b), CLIP.above(0.1))",
        "only branch 2 of any_of crosses", "expected firing"),
}


@pytest.mark.parametrize("mistake", MISTAKES.values(), ids=MISTAKES.keys())
def test_each_single_branch_mistake_fails_dashgen_test_naming_the_alert_and_case(team, mistake):
    wrong, right, case, expected = mistake
    write_alert(team, right)
    assert run("build", "--root", str(team)).exit_code == 0
    passed = run("test", "--root", str(team), "team")
    assert passed.exit_code == 0, passed.output
    assert "kept in" not in passed.output

    write_alert(team, wrong)
    assert run("build", "--root", str(team)).exit_code == 0
    result = run("test", "--root", str(team), "team")
    assert result.exit_code == 1
    # A line per failed case, at its first failed check.
    explained = [line for line in result.output.splitlines() if line.startswith("alerts/team.py: alert 'TeamComposite'")]
    assert len(explained) == len(set(re.findall(r"generated case '([^(']*)", result.output))), result.output
    assert any(f"generated case '{case}" in line and f"': {expected} at " in line for line in explained), result.output
    # The generated file is kept, and fails the same way when promtool runs it again.
    kept = kept_folder(result.output) / "team-TeamComposite-generated-test.yaml"
    try:
        assert kept.is_file()
        assert run_tool("promtool", ["test", "rules", str(kept)]).returncode == 1
    finally:
        shutil.rmtree(kept.parent)


def test_a_branch_another_always_crosses_first_fails_dashgen_test(team):
    """KL 5x alone, or KL 3x with grad norm 3x: written with 1.5 where 5 was meant, the first
    branch holds whenever the second does, so the second never fires the alert on its own. No
    promtool case can show it (the alert fires either way); the search for its levels does."""
    write_alert(team, "any_of(KL.above(5, times=b), all_of(KL.above(3, times=b), GRAD.above(3, times=b)))")
    assert run("build", "--root", str(team)).exit_code == 0
    passed = run("test", "--root", str(team), "team")
    assert passed.exit_code == 0, passed.output

    write_alert(team, "any_of(KL.above(1.5, times=b), all_of(KL.above(3, times=b), GRAD.above(3, times=b)))")
    assert run("build", "--root", str(team)).exit_code == 0
    result = run("test", "--root", str(team), "team")
    assert result.exit_code == 1
    assert ("alerts/team.py: alert 'TeamComposite', generated case 'only branch 2 of any_of crosses (the highest "
            "value of actor/ppo_kl over 5m is above 3x its median of the 1h before the recent window; and the highest "
            "value of actor/grad_norm over 5m is above 3x its median of the 1h before the recent window)': branch 2 "
            "of any_of cannot fire without another: at every level of the signals it shares, another branch crosses "
            "first") in result.output, result.output
