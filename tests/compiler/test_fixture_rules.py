"""`dashgen test` runs a hand-written fixture over copies of its rule files that hold only the rules
its cases read, as it runs a generated test (rules_read_by): a file per set of its test groups that
read the same rules."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run
from dashgen.compiler.rule_tests.fixture_rules import parts_with_rules_cut
from dashgen.compiler.project import compile_project
from dashgen.compiler.rule_tests.promtool_files import rules_read_by
from dashgen.config import Config
from dashgen.promtool import find_binary

RULES = """\
groups:
  - name: base
    interval: 1m
    rules:
      - {record: "team:loss:baseline", expr: "avg_over_time(verl_loss[1h])"}
      - {record: "team:loss:unread", expr: "max(verl_loss)"}
      - {record: "team:loss:held", expr: "max_over_time(team:loss:baseline[1d])"}
  - name: alerts
    rules:
      - {alert: TeamLossHigh, expr: "verl_loss > 2 * team:loss:held", for: 5m, labels: {severity: warning}}
      - {alert: TeamOther, expr: "team:loss:unread > 1"}
      - {alert: TeamAfter, expr: 'ALERTS{alertname="TeamOther"} and up'}
"""


def fixture(tmp_path: Path, alertname: str, expr: str | None = None) -> tuple[dict, Path]:
    (tmp_path / "rules.yaml").write_text(RULES)
    path = tmp_path / "tests" / "team-test.yaml"
    path.parent.mkdir(exist_ok=True)
    group = {"interval": "1m", "input_series": [{"series": "verl_loss", "values": "1x10"}],
             "alert_rule_test": [{"eval_time": "5m", "alertname": alertname, "exp_alerts": []}]}
    if expr is not None:
        group["promql_expr_test"] = [{"expr": expr, "eval_time": "5m", "exp_samples": []}]
    return {"rule_files": ["../rules.yaml"], "evaluation_interval": "1m", "tests": [group]}, path


def loaded(part: Path, content: dict) -> list[list[tuple[str, list[str]]]]:
    """Each rule file the part loads (relative to the part, as promtool reads them): its groups' rules."""
    return [[(group["name"], [rule.get("record") or rule["alert"] for rule in group["rules"]])
             for group in yaml.safe_load((part.parent / cut).read_text())["groups"]]
            for cut in content["rule_files"]]


def kept(parts: dict[Path, dict]) -> list[tuple[str, list[str]]]:
    [(part, content)] = parts.items()
    [groups] = loaded(part, content)
    return groups


def test_a_fixture_loads_the_alerts_it_checks_and_what_they_read_in_their_groups_and_order(tmp_path):
    content, path = fixture(tmp_path, "TeamLossHigh")
    parts = parts_with_rules_cut(content, path, tmp_path / "cut")
    assert kept(parts) == [("base", ["team:loss:baseline", "team:loss:held"]), ("alerts", ["TeamLossHigh"])]
    [(part, cut)] = parts.items()
    assert part == tmp_path / "cut" / "team-test.yaml"  # one part: the fixture's own name
    [rule_file] = cut["rule_files"]
    assert not Path(rule_file).is_absolute()
    group = yaml.safe_load((part.parent / rule_file).read_text())["groups"][0]
    assert group["interval"] == "1m"
    assert cut["tests"] == content["tests"] and content["rule_files"] == ["../rules.yaml"]  # the fixture's own: as it was
    # An alert read through ALERTS, and a recording an expression test reads.
    content, path = fixture(tmp_path, "TeamAfter", expr="team:loss:baseline")
    assert kept(parts_with_rules_cut(content, path, tmp_path / "cut2")) == [
        ("base", ["team:loss:baseline", "team:loss:unread"]), ("alerts", ["TeamOther", "TeamAfter"])]


def test_a_fixture_that_reads_by_a_pattern_or_orders_groups_keeps_its_rule_files_whole(tmp_path):
    for expr in ('ALERTS{alertstate="firing"}', 'ALERTS{alertname=~"Team.*"}', '{__name__=~"team:.*"}',
                 'count(ALERTS)', 'ALERTS{alertname!="TeamOther"}'):
        content, path = fixture(tmp_path, "TeamLossHigh", expr=expr)
        assert parts_with_rules_cut(content, path, tmp_path / "cut") is None, expr
    content, path = fixture(tmp_path, "TeamLossHigh")
    assert parts_with_rules_cut({**content, "group_eval_order": ["alerts", "base"]}, path, tmp_path / "cut") is None
    assert parts_with_rules_cut({**content, "rule_files": ["../*.yaml"]}, path, tmp_path / "cut") is None
    # Every rule read: nothing to leave out.
    content["tests"][0]["alert_rule_test"] += [{"eval_time": "5m", "alertname": name, "exp_alerts": []}
                                               for name in ("TeamOther", "TeamAfter")]
    assert parts_with_rules_cut(content, path, tmp_path / "cut") is None


def test_the_hourly_stability_fixture_loads_what_its_alerts_generated_tests_load(tmp_path):
    """tests/rules/stability-test-hourly-steps.yaml checks VerlNonFiniteSteps only (1,200
    evaluations): its cut holds the rules that alert's generated tests load, no more."""
    path = REPO / "tests" / "rules" / "stability-test-hourly-steps.yaml"
    content = yaml.safe_load(path.read_text())
    assert {case["alertname"] for group in content["tests"] for case in group["alert_rule_test"]} == \
        {"VerlNonFiniteSteps"}
    [(part, cut)] = parts_with_rules_cut(content, path, tmp_path).items()
    loaded_by_file = {Path(name).name.split("-", 1)[1]: groups for name, groups in zip(cut["rule_files"],
                                                                                        loaded(part, cut))}
    files = {Path(rule_file.path).name: rule_file for rule_file in compile_project(REPO, Config()).rules.files}
    generated = {name: [(group.name, [getattr(rule, "record", None) or rule.name for rule in group.rules])
                        for group in rule_file.groups]
                 for name, rule_file in rules_read_by("VerlNonFiniteSteps", files).items()}
    assert {name: groups for name, groups in loaded_by_file.items() if groups} == generated
    assert "VerlNonFiniteSteps" in str(generated) and "VerlTrainingDivergence" not in str(loaded_by_file)


def test_a_fixture_whose_groups_read_different_rules_is_split_each_part_loading_what_its_groups_read(tmp_path):
    content, path = fixture(tmp_path, "TeamLossHigh")
    [group] = content["tests"]
    content["tests"] = [{**group, "name": f"group {number}", "alert_rule_test": [{**group["alert_rule_test"][0],
                                                                                  "alertname": alertname}]}
                        for number, alertname in enumerate(("TeamLossHigh", "TeamOther", "TeamLossHigh", "TeamAfter",
                                                            "TeamOther"), start=1)]
    parts = parts_with_rules_cut(content, path, tmp_path / "cut")
    folder = tmp_path / "cut" / "team-test"
    assert list(parts) == [folder / "groups-1,3.yaml", folder / "groups-2,5.yaml", folder / "groups-4.yaml"]
    assert [[group["name"] for group in part["tests"]] for part in parts.values()] == [
        ["group 1", "group 3"], ["group 2", "group 5"], ["group 4"]]
    assert [loaded(part, cut) for part, cut in parts.items()] == [
        [[("base", ["team:loss:baseline", "team:loss:held"]), ("alerts", ["TeamLossHigh"])]],
        [[("base", ["team:loss:unread"]), ("alerts", ["TeamOther"])]],
        [[("base", ["team:loss:unread"]), ("alerts", ["TeamOther", "TeamAfter"])]]]
    # Every group in exactly one part, in the fixture's order within it.
    assert sorted(group["name"] for part in parts.values() for group in part["tests"]) == \
        [group["name"] for group in content["tests"]]
    # The same fixture gives the same parts, and groups that all read every rule stay one file, whole.
    assert parts_with_rules_cut(content, path, tmp_path / "cut") == parts
    for group in content["tests"]:
        group["alert_rule_test"] = [{**group["alert_rule_test"][0], "alertname": name}
                                    for name in ("TeamLossHigh", "TeamOther", "TeamAfter")]
    assert parts_with_rules_cut(content, path, tmp_path / "cut") is None


@pytest.mark.heavy
def test_a_kept_folder_of_tests_reruns_with_promtool_after_dashgen_test_ends(tmp_path):
    """`dashgen test --keep-generated DIR`: the fixtures' copies in DIR load their cut rule files by
    paths relative to themselves, so each reruns there once the temporary folder is gone."""
    kept_folder = tmp_path / "kept"
    result = run("test", "--root", str(REPO), "--keep-generated", str(kept_folder), "rollout")
    assert result.exit_code == 0, result.output
    parts = sorted((kept_folder / "fixtures").rglob("*.yaml"))
    copies = [part for part in parts if not part.parent.name.endswith("-rules")]
    # one copy for each set of the fixture's test groups that read the same rules
    names = [copy.relative_to(kept_folder / "fixtures").as_posix() for copy in copies]
    assert len(names) >= 3 and all(re.fullmatch(r"rollout-test/groups-[0-9,-]+\.yaml", name) for name in names), names
    moved = shutil.move(kept_folder, tmp_path / "moved")  # and wherever the folder goes
    for copy in copies:
        rerun = subprocess.run([find_binary("promtool"), "test", "rules",
                                str(Path(moved) / copy.relative_to(kept_folder))], capture_output=True, text=True)
        assert rerun.returncode == 0 and "SUCCESS" in rerun.stdout, rerun.stdout + rerun.stderr
