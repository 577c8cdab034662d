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
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from dashgen.compiler.promql import names_read, rules_reaching

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


def _rules_needed(names: set[str], documents: list[dict]) -> set[int] | None:
    """ids of the rule entries that produce `names` or what they read, directly or through
    others; None if one of them reads by a pattern."""
    producers: dict[str, list[dict]] = {}
    for document in documents:
        for group in document["groups"]:
            for rule in group["rules"]:
                producers.setdefault(str(rule.get("alert") or rule.get("record")), []).append(rule)
    return rules_reaching(names, producers, lambda rule: str(rule.get("expr", "")), unknowable=_UNNAMED_READ)


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


def with_rules_cut(content: dict, fixture: Path, folder: Path) -> dict | None:
    """The fixture's `content` loading copies of its rule files in `folder` that hold only the
    rules its cases read; None when it keeps them whole (nothing to leave out, or a read by a
    pattern, a glob, a rule file that is not a list of rule groups, group_eval_order)."""
    rule_files = content.get("rule_files")
    if "group_eval_order" in content or not isinstance(rule_files, list) or \
            not all(isinstance(name, str) and not re.search(r"[*?\[]", name) for name in rule_files):
        return None
    paths = [(fixture.parent / name).resolve() for name in rule_files]
    documents = [_rule_document(path) for path in paths]
    names = names_checked(content)
    if names is None or any(document is None for document in documents):
        return None
    needed = _rules_needed(names, documents)
    if needed is None or len(needed) == sum(len(group["rules"]) for document in documents
                                            for group in document["groups"]):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    cut_files = []
    for index, (path, document) in enumerate(zip(paths, documents)):
        groups = [{**group, "rules": kept} for group in document["groups"]
                  if (kept := [rule for rule in group["rules"] if id(rule) in needed])]
        cut = folder / f"{index}-{path.name}"
        cut.write_text(yaml.safe_dump({**document, "groups": groups}, sort_keys=False, width=1000))
        cut_files.append(str(cut))
    return {**content, "rule_files": cut_files}
