"""The one way dashgen runs the Prometheus project's binaries (promtool, prometheus, amtool,
alertmanager): find, run, report."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from dashgen.errors import BuildError
from dashgen.parent_death import die_with_parent_hook

# The Debian package of each binary; Debian installs Alertmanager's server as prometheus-alertmanager.
_PACKAGE = {"amtool": "prometheus-alertmanager", "alertmanager": "prometheus-alertmanager",
            "victoria-metrics": "victoria-metrics", "vmalert": "victoria-metrics"}
_ALSO_CALLED = {"alertmanager": ("prometheus-alertmanager",)}


def install_hint(package: str) -> str:
    return f"sudo apt-get update && sudo apt-get install -y --no-install-recommends {package}"


INSTALL_HINT = install_hint("prometheus")


def find_binary(name: str) -> str:
    """Path of `promtool`, `prometheus`, `amtool`, `alertmanager`, `vmalert` or `victoria-metrics`:
    $PROMTOOL, ..., $VICTORIA_METRICS if set, else PATH."""
    variable = name.upper().replace("-", "_")
    override = os.environ.get(variable)
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BuildError(f"${variable} is set to {override!r}, which is not an executable file")
        return override
    for candidate in (name, *_ALSO_CALLED.get(name, ())):
        found = shutil.which(candidate)
        if found is not None:
            return found
    package = _PACKAGE.get(name, "prometheus")
    raise BuildError(f"{name} not found on PATH. Install it (Debian package {package}) with:\n  "
                     f"{install_hint(package)}\nor point ${variable} at the binary.")


def run_promtool(args: Sequence[str], cwd: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run promtool and return its result; the caller shows stdout/stderr and keeps the exit status."""
    return run_tool("promtool", args, cwd, timeout)


def run_tool(name: str, args: Sequence[str], cwd: str | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    """Run one of the binaries, with a temporary folder of its own as $TMPDIR (promtool's `test rules`
    makes TSDB head folders there), removed when it ends, also when it is interrupted."""
    binary = find_binary(name)
    with tempfile.TemporaryDirectory(prefix=f"dashgen-{name}-") as tmp:
        try:
            return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                                  check=False, env={**os.environ, "TMPDIR": tmp}, preexec_fn=die_with_parent_hook())
        except OSError as exc:
            raise BuildError(f"cannot run {name} ({binary}): {exc.strerror or exc}") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"{name} {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None


# How long one file's `promtool test rules` may take: a stuck promtool is stopped and named, but a
# file of generated cases at 3,600 s a step under `source: rl_insight` (every step window banded
# in PromQL) takes two minutes of a core alone, and several on a loaded machine.
TEST_RULES_TIMEOUT_SECONDS = 900


def run_rule_tests(files: list[Path]) -> tuple[str, str, bool]:
    """`promtool test rules` of each file in a process of its own, as many at once as there are
    cores: one promtool evaluates its files one after another on one core, and the generated tests
    at 3,600 s a step made that minutes. Their output in the files' order, and whether any failed."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(files), os.cpu_count() or 1))) as pool:
        results = list(pool.map(lambda path: run_tool("promtool", ["test", "rules", str(path)],
                                                      timeout=TEST_RULES_TIMEOUT_SECONDS), files))
    return ("".join(r.stdout for r in results), "".join(r.stderr for r in results),
            any(r.returncode != 0 for r in results))
