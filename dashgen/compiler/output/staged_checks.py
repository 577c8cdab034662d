"""The final guard before rendered/ is replaced: the rule files and the Alertmanager config a
build is about to write pass `promtool check rules` and `amtool check-config`, as Prometheus'
and Alertmanager's reload would check them.

The compiler's own checks (dashgen/compiler/rules/rule_files.py, rule_format.py, promql.py) catch the
known mistakes first, with the module and the alert named; the tools catch what those miss.
Only files that change are given to the tools: a file rendered/ already holds passed them when it
was written, and `dashgen build` with nothing changed stays as fast as the tools are not run
(bench/build_time.py). The two run side by side (about 50 ms each).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from dashgen.compiler.output.targets.alertmanager import ALERTMANAGER_FILE
from dashgen.errors import BuildError
from dashgen.promtool import find_binary

RULES_PREFIX = "rules/"
TIMEOUT_SECONDS = 120
# The first line of a rendered rule file names its module (dashgen/compiler/output/targets/prometheus.py).
_SOURCE = re.compile(r"# Rendered by `dashgen build` from (\S+);")


def check_with_tools(files: dict[str, str], changed: list[str], rendered: str = "rendered") -> None:
    """BuildError naming the module (and what the tool says: group, alert) when promtool or amtool
    refuses a changed rule file or the changed Alertmanager config. A tool not installed is skipped
    with a note on stderr."""
    rule_files = [rel for rel in changed if rel.startswith(RULES_PREFIX) and rel.endswith((".yaml", ".yml"))]
    checks: list[tuple[str, list[str], list[str]]] = []  # (tool, its arguments, the files it reads)
    if rule_files:
        checks.append(("promtool", ["check", "rules"], rule_files))
    if ALERTMANAGER_FILE in changed:
        checks.append(("amtool", ["check-config"], [ALERTMANAGER_FILE]))
    if not checks:
        return
    with tempfile.TemporaryDirectory(prefix="dashgen-staged-") as tmp:
        for rel in {rel for _, _, read in checks for rel in read}:
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[rel])
        running = []
        for tool, args, read in checks:
            try:
                binary = find_binary(tool)
            except BuildError:
                print(f"dashgen: {tool} not found; {', '.join(read)} checked by dashgen alone, not by {tool}",
                      file=sys.stderr)
                continue
            try:
                process = subprocess.Popen([binary, *args, *read], cwd=tmp, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, env={**os.environ, "TMPDIR": tmp})
            except OSError as exc:
                raise BuildError(f"cannot run {tool} ({binary}): {exc.strerror or exc}") from None
            running.append((tool, args, read, process))
        failures = []
        for tool, args, read, process in running:
            try:
                output, _ = process.communicate(timeout=TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                raise BuildError(f"{tool} {' '.join(args)} did not finish within {TIMEOUT_SECONDS} s") from None
            if process.returncode != 0:
                failures.append(_failure(tool, args, read, output, files, rendered))
    if failures:
        raise BuildError("\n".join(failures) + f"\n{rendered}/ was left as it was")


def _failure(tool: str, args: list[str], read: list[str], output: str, files: dict[str, str], rendered: str) -> str:
    """What failed, each refused file named by the module it was rendered from."""
    refused = []
    for line in (line.strip() for line in output.splitlines()):
        if line.startswith("Checking ") and "FAILED" in line:  # amtool: Checking 'file'  FAILED: why
            refused.append(f"{line.split()[1].strip(chr(39))}: {line.split('FAILED', 1)[1].lstrip(': ')}")
        elif line and not line.startswith(("Checking ", "SUCCESS", "FAILED", "Found:", "- ")):
            refused.append(line)
    modules = [_named(rel, files, rendered) for rel in read if any(rel in line for line in refused) or len(read) == 1]
    where = ", ".join(modules) or ", ".join(f"{rendered}/{rel}" for rel in read)
    return f"{where}: `{tool} {' '.join(args)}` refuses what the build would write:\n  " + "\n  ".join(refused)


def _named(rel: str, files: dict[str, str], rendered: str) -> str:
    """`alerts/team.py (rendered/rules/team.yaml)` for a rule file; the path alone for another file."""
    match = _SOURCE.match(files[rel])
    return f"{match.group(1)} ({rendered}/{rel})" if match else f"{rendered}/{rel}"
