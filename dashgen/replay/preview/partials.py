"""Where a preview PNG is drawn before it replaces the committed one.

Each is drawn to a hidden file beside its final path, named with the drawing process' PID, and
renamed over the final path only once every dashboard is drawn and good; a failed or interrupted
preview removes its partials, and one killed outright (SIGKILL) leaves them to the next preview,
which removes those whose process is gone.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_PARTIAL = re.compile(r"\..+\.png\.(\d+)\.partial")


def partial_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.partial")


def remove_abandoned_partials(folder: Path) -> None:
    for path in folder.glob(".*.partial"):
        match = _PARTIAL.fullmatch(path.name)
        if match and not _alive(int(match.group(1))):
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
