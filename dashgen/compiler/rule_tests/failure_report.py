"""What a failed generated rule test means (dashgen/compiler/rule_tests/generated_cases.py), in the words of
the alert it tests: promtool reports a failed check by its expression; this names the alert, its
module, the case and what it expected. And the branches of an any_of that no case can show
failing, because another branch always fires the alert with them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from dashgen.catalog import Catalog
from dashgen.compiler.compiled import CompiledAlert
from dashgen.compiler.rule_tests.promtool_files import GENERATED_SUFFIX, module_of_generated_test
from dashgen.compiler.rule_tests.generated_cases import BRANCH_CASE, KNOWN_GAP_PREFIX, alert_cases, branches_of
from dashgen.conditions import AllOf, AnyOf
from dashgen.config import Config
from dashgen.model import Alert


def unreachable_branches(alerts: Iterable[CompiledAlert], catalog: Catalog, config: Config) -> list[str]:
    """A line per branch of an any_of that can never fire its alert alone (another branch reading
    the same signal always holds with it): a generated case that cannot be built fails."""
    lines = []
    for compiled in alerts:
        alert = compiled.definition
        if alert.condition is None or not isinstance(alert.condition, AnyOf):
            continue
        for case in alert_cases(alert, catalog, config):
            if case.unreachable:
                lines.append(f"{compiled.module}: alert {alert.name!r}, generated case "
                             f"{_case_words(case.name, alert)!r}: {case.unreachable}")
    return lines


_FAILED_CHECK = re.compile(
    r'expr: "count\(ALERTS\{alertname=\\"([^"\\]+)\\", alertstate=\\"firing\\", experiment=\\"([^"\\]+)\\"\}\)", '
    r'time: (\S+?),\s*\n\s*exp: (.*)\n\s*got: (.*)')
_TESTED_FILE = re.compile(r"^Unit Testing:\s+(\S+)", re.MULTILINE)
_RHYTHM_SUFFIX = re.compile(r"-at-([0-9.]+)s-per-step$")


def explain_failures(promtool_output: str, alerts: dict[str, Alert]) -> list[str]:
    """A line per failed case of a generated test in promtool's output, at its first failed check:
    the alert's module, the alert, the case and what it expected, which promtool's own report (an
    expression per failed check) does not say."""
    lines, seen = [], set()
    files = [(match.start(), Path(match.group(1))) for match in _TESTED_FILE.finditer(promtool_output)]
    for match in _FAILED_CHECK.finditer(promtool_output):
        tested = [path for start, path in files if start < match.start()]
        name, experiment, at, expected, got = match.groups()
        if not tested or not tested[-1].name.endswith(GENERATED_SUFFIX) or (tested[-1], experiment) in seen:
            continue
        seen.add((tested[-1], experiment))
        case = experiment.removeprefix(f"{name}-")
        firing = expected.strip() != "nil"
        module = f"alerts/{module_of_generated_test(tested[-1].name, name)}.py"
        lines.append(f"{module}: alert {name!r}, generated case {_case_words(case, alerts.get(name))!r}: expected "
                     f"{'firing' if firing else 'not firing'} at {at} into the case's series; it was "
                     f"{'firing' if got.strip() != 'nil' else 'not'}{_likely_cause(case, firing, alerts.get(name))}")
    return lines


def _likely_cause(case: str, expected_firing: bool, alert: Alert | None) -> str:
    if case.startswith(KNOWN_GAP_PREFIX):
        return (" (a known gap it no longer has: take its entry out of KNOWN_GAPS in "
                "dashgen/compiler/rule_tests/generated_cases.py)")
    kind = _RHYTHM_SUFFIX.sub("", case)
    all_of_branch = BRANCH_CASE.fullmatch(kind) and alert is not None and isinstance(alert.condition, AllOf)
    if all_of_branch and not expected_firing:
        return " (all_of fires on this branch alone: another branch already holds on a healthy run)"
    if kind == "stays-quiet":
        return " (it fires on a healthy run: a factor on the wrong side of 1, or a ratio threshold above 1?)"
    if expected_firing and (kind == "fires" or BRANCH_CASE.fullmatch(kind)):
        return " (the crossing cannot fire it: a ratio threshold above 1?)"
    return ""


def _case_words(case: str, alert: Alert | None) -> str:
    rhythm = _RHYTHM_SUFFIX.search(case)
    base = case[:rhythm.start()] if rhythm else case
    words = base.replace("-", " ")
    branch = BRANCH_CASE.fullmatch(base)
    parts = branches_of(alert.condition) if alert is not None and alert.condition is not None else ()
    if branch and int(branch.group(1)) <= len(parts):
        combined = "all_of" if isinstance(alert.condition, AllOf) else "any_of"
        words = f"only branch {branch.group(1)} of {combined} crosses ({parts[int(branch.group(1)) - 1].describe()})"
    return f"{words}, at {rhythm.group(1)} s per step" if rhythm else words
