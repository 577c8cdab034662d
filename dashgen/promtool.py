"""The one way dashgen runs Prometheus' binaries (promtool, prometheus): find, run, report."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Sequence

from dashgen.errors import BuildError

INSTALL_HINT = "sudo apt-get update && sudo apt-get install -y --no-install-recommends prometheus"


def find_binary(name: str) -> str:
    """Path of `promtool` or `prometheus`: $PROMTOOL / $PROMETHEUS if set, else PATH."""
    override = os.environ.get(name.upper())
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BuildError(f"${name.upper()} is set to {override!r}, which is not an executable file")
        return override
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"{name} not found on PATH. Install Prometheus' tools with:\n  {INSTALL_HINT}\n"
                         f"or point ${name.upper()} at the binary.")
    return found


def run_promtool(args: Sequence[str], cwd: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run promtool and return its result; the caller shows stdout/stderr and keeps the exit status.

    promtool gets a temporary folder of its own as $TMPDIR (`test rules` makes TSDB head
    folders there), removed when it ends, also when it is interrupted.
    """
    binary = find_binary("promtool")
    with tempfile.TemporaryDirectory(prefix="dashgen-promtool-") as tmp:
        try:
            return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                                  check=False, env={**os.environ, "TMPDIR": tmp})
        except OSError as exc:
            raise BuildError(f"cannot run promtool ({binary}): {exc.strerror or exc}") from None
        except subprocess.TimeoutExpired:
            raise BuildError(f"promtool {' '.join(args[:2])} did not finish within {timeout:.0f} s") from None
