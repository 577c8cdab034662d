import hashlib
import shutil
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dashgen.cli import cli

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of this repository's definitions and rendered files, free to break; without the
    preview PNGs (a config or panel change makes them stale: see `with_preview`)."""
    for folder in ("panels", "alerts", "rendered"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "preview"))
    return tmp_path


def with_preview(project: Path) -> Path:
    """The project with this repository's committed preview PNGs; returns their folder."""
    return Path(shutil.copytree(REPO / "rendered" / "preview", project / "rendered" / "preview"))


def run(*args: str):
    """Invoke the dashgen CLI in-process; returns click's Result (exit_code, output)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def wait_until(condition, timeout: float, what: str, interval: float = 0.05):
    """Poll `condition` until it returns something true, and return that; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
