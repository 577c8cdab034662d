"""A hand-written fixture's rule files cut to the rules its cases read, as the generated tests'
are (rule_test_files.rules_read_by).

promtool evaluates every rule of a test's rule files at every evaluation of every test group,
whatever the group checks: tests/rules/stability-test-hourly-steps.yaml checks one alert and
evaluated the 76 rules of stability.yaml and rewards.yaml 1,200 times. A rule's result depends
only on what it reads, so the others cost promtool time and change nothing a case checks. The
cut is made from the rule files as they are on disk (what the fixture names), keeping each kept
rule's group, its fields and its place among the group's kept rules. A fixture whose cases could
read a rule by a pattern (a `__name__` matcher, ALERTS without one alert's name) or that orders
the groups itself keeps its rule files whole.

The cut is per test group: promtool takes one list of rule files a test file, so a fixture whose
groups read different rules is written as several files, one per set of rules read
(tests/rules/stability-test.yaml: 16 groups, 8 files, a third of its promtool time).
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from dashgen.compiler.queries.promql import names_read, rules_reaching

# Reads that name no rule: the rules such an expression reads cannot be told from its text.
_UNNAMED_READ = re.compile(r'__name__|ALERTS(?:_FOR_STATE)?\b(?!\s*\{[^}]*alertname=~?"[\w|]+")'
                           r'|alertname=~?"[^"]*[^\w|"][^"]*"|alertname!')


def names_checked(content: dict) -> set[str] | None:
    """The alert names the fixture's alert_rule_test cases check and the names its
    promql_expr_test expressions read; None if an expression reads by a pattern."""
    names: set[str] = set()
    for group in content.get("tests") or ():
        if not isinstance(group, dict):
            continue
        for case in group.get("alert_rule_test") or ():
            if isinstance(case, dict) and isinstance(case.get("alertname"), str):
                names.add(case["alertname"])
        for case in group.get("promql_expr_test") or ():
            expr = str(case.get("expr", "")) if isinstance(case, dict) else ""
            if _UNNAMED_READ.search(expr):
                return None
            names |= names_read(expr)
    return names


def _cuts_of_groups(groups: list, documents: list[dict]) -> list[frozenset[int]] | None:
    """Per test group, the ids of the rule entries its cases read, directly or through others;
    None if one of them reads by a pattern."""
    producers: dict[str, list[dict]] = {}
    for document in documents:
        for group in document["groups"]:
            for rule in group["rules"]:
                producers.setdefault(str(rule.get("alert") or rule.get("record")), []).append(rule)
    cuts = []
    for group in groups:
        names = names_checked({"tests": [group]}) if isinstance(group, dict) else None
        needed = None if names is None else rules_reaching(names, producers, lambda rule: str(rule.get("expr", "")),
                                                           unknowable=_UNNAMED_READ)
        if needed is None:
            return None
        cuts.append(frozenset(needed))
    return cuts


def yaml_mapping(path: Path) -> dict | None:
    """The file's content if it is a YAML mapping, else None (promtool says what is wrong with it)."""
    try:
        content = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return content if isinstance(content, dict) else None


def _rule_document(path: Path) -> dict | None:
    """The rule file's content if it is a list of groups of rules, else None."""
    document = yaml_mapping(path)
    groups = document.get("groups") if document is not None else None
    if not isinstance(groups, list) or not all(isinstance(group, dict) and isinstance(group.get("rules"), list)
                                               and all(isinstance(rule, dict) for rule in group["rules"])
                                               for group in groups):
        return None
    return document


def parts_with_rules_cut(content: dict, fixture: Path, folder: Path) -> dict[Path, dict] | None:
    """The fixture's `content` as the files to write in `folder` (path: content): its test groups
    that read the same rules in one part, in their order, loading copies of its rule files, written
    beside the part, that hold only those rules. One part is written as `folder`/the fixture's name,
    several as `folder`/its stem/groups-1,3-5.yaml (the fixture's test groups each holds, counted
    from 1). None when it keeps its rule files whole (nothing to leave out, or a read by a pattern,
    a glob, a rule file that is not a list of rule groups, group_eval_order)."""
    rule_files, tests = content.get("rule_files"), content.get("tests")
    if "group_eval_order" in content or not isinstance(rule_files, list) or not isinstance(tests, list) or \
            not all(isinstance(name, str) and not re.search(r"[*?\[]", name) for name in rule_files):
        return None
    documents = [_rule_document((fixture.parent / name).resolve()) for name in rule_files]
    cuts = _cuts_of_groups(tests, documents) if all(document is not None for document in documents) else None
    if cuts is None or all(len(cut) == sum(len(group["rules"]) for document in documents
                                           for group in document["groups"]) for cut in cuts):
        return None
    groups_of_cut: dict[frozenset[int], list[int]] = {}
    for index, cut in enumerate(cuts):
        groups_of_cut.setdefault(cut, []).append(index)
    parts = {}
    for cut, indices in groups_of_cut.items():
        part = folder / fixture.name if len(groups_of_cut) == 1 else \
            folder / fixture.stem / f"groups-{_numbers_text([index + 1 for index in indices])}.yaml"
        parts[part] = {**content, "rule_files": _write_cut(documents, rule_files, cut, part),
                       "tests": [tests[index] for index in indices]}
    return parts


def _write_cut(documents: list[dict], rule_files: list[str], cut: frozenset[int], part: Path) -> list[str]:
    """Writes the rule files `documents` (named `rule_files`) less the rules not in `cut`, in a
    folder beside `part`; their paths relative to it, as promtool reads a test's rule_files, so a
    kept folder of tests (dashgen test --keep-generated) reruns where it is."""
    folder = part.parent / f"{part.stem}-rules"
    folder.mkdir(parents=True, exist_ok=True)
    loaded = []
    for index, (name, document) in enumerate(zip(rule_files, documents)):
        groups = [{**group, "rules": kept} for group in document["groups"]
                  if (kept := [rule for rule in group["rules"] if id(rule) in cut])]
        cut_file = folder / f"{index}-{Path(name).name}"
        cut_file.write_text(yaml.dump({**document, "groups": groups}, Dumper=yaml.CSafeDumper, sort_keys=False, width=1000))
        loaded.append(f"{folder.name}/{cut_file.name}")
    return loaded


def _numbers_text(numbers: list[int]) -> str:
    """Ascending numbers as runs: [1, 3, 4, 5] -> "1,3-5"."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ",".join(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)
