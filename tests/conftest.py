import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dashgen.cli import cli
from support import Exporter, start_exporter, wait_until  # noqa: F401  wait_until: tests import it from here

REPO = Path(__file__).resolve().parent.parent

# How far the heap of the Go tools the tests start (promtool, Prometheus, Alertmanager, vmalert,
# VictoriaMetrics) grows between collections, in percent (Go's default: 100). At 400 their garbage
# collection costs a fifth less processor (the promtool fixtures: 36 s of CPU down to 29), for a
# heap up to five times what is live (promtool's largest: 75 MB to 180 MB), as the backtest's query
# server already runs (dashgen/replay/backtest/server.py).
GO_GARBAGE_COLLECTION_PERCENT = "400"
os.environ.setdefault("GOGC", GO_GARBAGE_COLLECTION_PERCENT)

# The test modules with a module-scoped fixture (a backtest of sample runs, transformers' import):
# xdist's default distribution spreads a module's tests over the workers, and each worker that
# draws one of them makes the fixture again (up to four times in `make test`).
SHARED_FIXTURE_MODULES = frozenset(path.relative_to(REPO).as_posix() for path in (REPO / "tests").rglob("test_*.py")
                                   if 'scope="module"' in path.read_text())
# The modules whose tests draw PNGs: each worker that draws imports matplotlib and loads its fonts
# first (half a second of processor).
DRAWING_MODULES = frozenset({"tests/replay/test_preview.py", "tests/replay/test_backtest_plot.py"})


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collect with bytecode writing on, whatever PYTHONDONTWRITEBYTECODE says: pytest rewrites each
    test module's asserts before importing it and keeps the result in tests/**/__pycache__ (ignored
    by git) only where bytecode may be written. Without it every worker of every run rewrote the
    whole suite again: 1.4 s of the 3 s a worker took to collect. Off again for the tests, which
    import the modules of projects they check file by file."""
    writing_before, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = writing_before


@pytest.hookimpl(optionalhook=True)  # xdist's hook: pytest -p no:xdist does not know it
def pytest_xdist_make_scheduler(config, log):
    """Under xdist's default distribution, each module of SHARED_FIXTURE_MODULES and DRAWING_MODULES
    goes to one worker whole and every other test on its own (xdist's loadgroup would do it by
    marker, but xdist 3.8 cannot name a group under pytest 9)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in SHARED_FIXTURE_MODULES or module in DRAWING_MODULES else nodeid

    return SharedFixtureScheduling(config, log)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of this repository's definitions and rendered files, free to break; without the
    preview PNGs (a config or panel change makes them stale: see `with_preview`)."""
    for folder in ("panels", "alerts", "rendered"):
        if (REPO / folder).exists():
            shutil.copytree(REPO / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__", "preview"))
    return tmp_path


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """A new project as `dashgen init` makes it, for a team's own alerts and panels."""
    project = tmp_path / "team"
    assert run("init", str(project)).exit_code == 0
    return project


def with_preview(project: Path) -> Path:
    """The project with this repository's committed preview PNGs; returns their folder."""
    return Path(shutil.copytree(REPO / "rendered" / "preview", project / "rendered" / "preview"))


def run(*args: str):
    """Invoke the dashgen CLI in-process; returns click's Result (exit_code, output)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def exporters():
    """`start_exporter` (support.py) for this test; every exporter it started is killed at the end."""
    started: list[Exporter] = []

    def start(log: Path, *options: str, **kwargs) -> Exporter:
        started.append(start_exporter(log, *options, **kwargs))
        return started[-1]

    yield start
    for exporter in started:
        exporter.kill()
