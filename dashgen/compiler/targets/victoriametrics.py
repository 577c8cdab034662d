"""The rules on VictoriaMetrics: vmalert's dry run and the dialect older vmalerts read.

vmalert before 1.92 refuses a rule file with `keep_firing_for` ("unknown fields in rule"), so
for such a vmalert the rule files are given in the `no-keep-firing-for` dialect: the same
files without that field (alerts then resolve as soon as their condition stops holding).
Whether the installed vmalert needs it is asked of vmalert itself, by a dry run of a one-rule
file, not read from its version string (Debian's build prints none).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from dashgen.compiler.block_yaml import rule_yaml
from dashgen.errors import BuildError
from dashgen.promtool import find_binary
from dashgen.records import record

NO_KEEP_FIRING_FOR = "no-keep-firing-for"
_PROBE_RULES = "groups:\n- name: probe\n  rules:\n  - alert: Probe\n    expr: vector(1)\n    keep_firing_for: 1m\n"


def vmalert_installed() -> bool:
    try:
        find_binary("vmalert")
    except BuildError:
        return False
    return True


def reads_keep_firing_for(vmalert: str) -> bool:
    """Whether this vmalert accepts `keep_firing_for` (1.92 and later)."""
    with tempfile.TemporaryDirectory(prefix="dashgen-vmalert-probe-") as tmp:
        probe = Path(tmp) / "probe.yaml"
        probe.write_text(_PROBE_RULES)
        result = subprocess.run([vmalert, "-dryRun", f"-rule={probe}"], capture_output=True, text=True,
                                timeout=60, check=False)
    return result.returncode == 0


def without_keep_firing_for(rule_text: str) -> str:
    """A rule file in the no-keep-firing-for dialect: every rule's `keep_firing_for` removed."""
    data = yaml.safe_load(rule_text)
    for group in data.get("groups", []):
        for rule in group.get("rules", []):
            rule.pop("keep_firing_for", None)
    return rule_yaml(data)


@record
class RuleFilesForVmalert:
    """The rule files as the installed vmalert reads them, and the dialect they are in (or "")."""

    paths: list[Path]
    dialect: str


def rule_files_for(vmalert: str, paths: list[Path], folder: Path) -> RuleFilesForVmalert:
    """`paths` themselves if vmalert reads them; else copies in the no-keep-firing-for dialect in `folder`."""
    if reads_keep_firing_for(vmalert):
        return RuleFilesForVmalert(paths, "")
    copies = []
    for path in paths:
        copy = folder / path.name
        copy.write_text(without_keep_firing_for(path.read_text()))
        copies.append(copy)
    return RuleFilesForVmalert(copies, NO_KEEP_FIRING_FOR)


def dry_run(paths: list[Path]) -> tuple[subprocess.CompletedProcess, str]:
    """`vmalert -dryRun` on the rule files (in the dialect it needs); the result and a note saying
    which dialect was checked."""
    vmalert = find_binary("vmalert")
    with tempfile.TemporaryDirectory(prefix="dashgen-vmalert-") as tmp:
        files = rule_files_for(vmalert, paths, Path(tmp))
        result = subprocess.run([vmalert, "-dryRun", "-loggerLevel=ERROR", *(f"-rule={p}" for p in files.paths)],
                                capture_output=True, text=True, timeout=300, check=False)
    note = (f"vmalert -dryRun: this vmalert does not read keep_firing_for (before 1.92); checked the rule files "
            f"without it (the {NO_KEEP_FIRING_FOR} dialect)" if files.dialect else "vmalert -dryRun: checked")
    return result, note
