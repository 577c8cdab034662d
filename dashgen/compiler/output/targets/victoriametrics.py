"""rendered/victoriametrics/rules/: the rule files as vmalert loads them, and vmalert's dry run.

vmalert before 1.92 (Debian bookworm's is 1.79) refuses a rule file with `keep_firing_for`
("unknown fields in rule"). The files rendered for it hold an alert in the query instead. Beside
the alert, a recording of when it fired: its condition held at each of the evaluations its
`for` needs (a subquery of the condition at the group's interval, so the recording does not
wait for an earlier one to be written back). The alert then reads

    (condition) or last_over_time(dashgen:<alert>:fired[keep_firing_for + interval])

so once fired it stays firing until keep_firing_for after its condition last held, as in
Prometheus (to the evaluation), and a blip shorter than `for` is held by nothing. One difference:
a return of the condition shorter than `for` during the hold does not restart the hold (in
Prometheus it does). The hold reads no ALERTS series, so vmalert's replay, which evaluates a rule
over the whole range before writing its ALERTS, holds it in one pass as live vmalert does.
Everything else is rendered/rules/ as it is, so every vmalert from 1.79 on loads these files.
"""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from dashgen.compiler.output.block_yaml import rule_yaml
from dashgen.compiler.rules.definition_checks import fired_recording
from dashgen.config import duration_seconds, format_duration
from dashgen.errors import BuildError
from dashgen.promtool import find_binary, run_tool

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject

VMALERT_RULES_DIR = "victoriametrics/rules"
def vmalert_installed() -> bool:
    """Whether vmalert is on PATH; BuildError if $VMALERT names something that is not an executable
    file (a check asked for is not skipped in silence)."""
    try:
        find_binary("vmalert")
    except BuildError:
        if os.environ.get("VMALERT"):
            raise
        return False
    return True


def held_alert(rule: dict, interval: str) -> list[dict]:
    """An alerting rule with keep_firing_for as the two rules vmalert 1.79 reads: the recording of
    when it fired, then the alert held on it. Other rules are returned as they are."""
    hold = rule.get("keep_firing_for")
    if "alert" not in rule or hold is None:
        return [rule]
    name, condition, step = rule["alert"], rule["expr"], duration_seconds(interval)
    # `for: F` fires at the evaluation that finds the condition true for the ceil(F/step) + 1th time in a row.
    evaluations = math.ceil(duration_seconds(rule.get("for", "0s")) / step) + 1
    # The condition's own value, so the alert's $value while held is the last one it fired with.
    fired = condition if evaluations == 1 else (
        f"(\n{_indented(condition)}\n)\nand\ncount_over_time((\n{_indented(condition)}\n)"
        f"[{format_duration(evaluations * step)}:{interval}]) >= {evaluations}")
    window = format_duration(duration_seconds(hold) + step)  # the hold counts from the first evaluation without
    held = {key: value for key, value in rule.items() if key != "keep_firing_for"}
    held["expr"] = f"(\n{_indented(condition)}\n)\nor\nlast_over_time({fired_recording(name)}[{window}])"
    return [{"record": fired_recording(name), "expr": fired}, held]


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def render_victoriametrics(project: CompiledProject) -> dict[str, str]:
    """rendered/victoriametrics/rules/<area>.yaml for each rule file rendered/rules/<area>.yaml holds, as
    vmalert 1.79 and later load it (see the module's docstring); none unless config.victoriametrics."""
    from dashgen.compiler.output.targets.prometheus import rule_file_header, rule_file_model

    if not project.config.victoriametrics:
        return {}
    out = {}
    for rule_file in sorted(project.rules.files, key=lambda rule_file: rule_file.path):
        model = rule_file_model(rule_file, project.config, project.alert_panels)
        for group in model["groups"]:
            group["rules"] = [kept for rule in group["rules"] for kept in held_alert(rule, group["interval"])]
        out[f"{VMALERT_RULES_DIR}/{rule_file.name}.yaml"] = rule_file_header(rule_file) + rule_yaml(model)
    return out


def dry_run(paths: list[Path]) -> subprocess.CompletedProcess:
    """`vmalert -dryRun` on the rule files, as they are."""
    return run_tool("vmalert", ["-dryRun", "-loggerLevel=ERROR", *(f"-rule={p}" for p in paths)])


def check_with_vmalert(files: dict[str, str], where: str) -> bool:
    """`vmalert -dryRun` of the files rendered for it (path under `where` -> text), before they are
    written; BuildError with vmalert's words if it refuses them. False if vmalert is not installed."""
    rules = {rel: text for rel, text in files.items() if rel.startswith(f"{VMALERT_RULES_DIR}/")}
    if not rules or not vmalert_installed():
        return False
    with tempfile.TemporaryDirectory(prefix="dashgen-vmalert-") as tmp:
        paths = []
        for rel, text in sorted(rules.items()):
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            paths.append(path)
        result = dry_run(paths)
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().replace(f"{tmp}/", f"{where}/")
        raise BuildError(f"vmalert -dryRun rejects the rule files rendered for VictoriaMetrics "
                         f"({where}/{VMALERT_RULES_DIR}/):\n{output}")
    return True
