"""`dashgen init DIR`: a team's project that builds on the verl defaults shipped in the wheel.

The project imports the defaults rather than copying them (dashgen_panels, dashgen_alerts),
so a dashgen upgrade brings their fixes; it adds its own rows, alerts and metrics beside them.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from dashgen.compiler.output.rendering import templates
from dashgen.errors import BuildError
from dashgen.sources.chosen import SOURCES
from dashgen.sources.exporter import EXPORTER

# The project's labelled runs, which `dashgen review` backtests by default.
LABELLED_RUNS_DIR = "runs"
# Files of the default set that are not definition modules.
_NOT_DEFINITIONS = ("_", "__")


def default_modules(package: str) -> list[str]:
    """Names of the definition modules an installed defaults package holds (helpers skipped)."""
    return sorted(entry.name[:-3] for entry in resources.files(package).iterdir()
                  if entry.name.endswith(".py") and not entry.name.startswith(_NOT_DEFINITIONS))


def definition_names(module: str) -> list[str]:
    """What a project's alerts/<module>.py must import from the default module to be it: its rules,
    its inhibitions and the alert area tunables it defines."""
    from dashgen.config import AreaConfig

    default = importlib.import_module(f"dashgen_alerts.{module}")
    names = [name for name in ("rules", "inhibitions") if callable(getattr(default, name, None))]
    return names + sorted(name for name, value in vars(default).items()
                          if isinstance(value, type) and issubclass(value, AreaConfig) and value.area
                          and value.__module__ == default.__name__)


def project_files(source: str = EXPORTER.name) -> dict[str, str]:
    """Relative path -> content of a new project reading `source`'s series."""
    template_dir = resources.files("dashgen").joinpath("templates/project")
    files = {
        # The metric source it reads (`dashgen init --source`), as its dashgen.yaml sets it.
        "dashgen.yaml": template_dir.joinpath("dashgen.yaml").read_text() + SOURCES[source].init_config,
        "metrics.yaml": template_dir.joinpath("metrics.yaml").read_text(),
        "Makefile": template_dir.joinpath("Makefile").read_text(),
        ".gitignore": template_dir.joinpath("gitignore").read_text(),
        "panels/verl_training.py": template_dir.joinpath("verl_training.py").read_text(),
        "panels/compare_runs.py": template_dir.joinpath("compare_runs.py").read_text(),
        f"{LABELLED_RUNS_DIR}/README.md": template_dir.joinpath("runs-README.md").read_text(),
    }
    alert_module = templates().get_template("project/alerts_module.py.j2")
    for module in default_modules("dashgen_alerts"):
        files[f"alerts/{module}.py"] = alert_module.render(module=module, names=definition_names(module))
    for fixture in resources.files("dashgen_rule_tests").iterdir():
        if fixture.name.endswith(".yaml"):
            files[f"tests/rules/{fixture.name}"] = fixture.read_text()
    return files


def init_project(directory: Path, source: str = EXPORTER.name) -> list[str]:
    """Write a new project into `directory` (created if missing); refuses to overwrite anything
    and to write through a symlink that leads out of it.

    Every file is written into a staging folder inside `directory` first and moved into place
    once all are written, so a failed write (a full disk, a size limit) leaves no half project."""
    files = project_files(source)
    try:
        _refuse_unsafe_target(directory, files)
    except OSError as exc:  # a name too long, a folder on the way that cannot be looked into
        raise BuildError(f"{directory}: cannot be the project folder: {exc.strerror or exc}") from None
    except RuntimeError:  # Path.resolve() of a symlink that leads back to itself
        raise BuildError(f"{directory}: cannot be the project folder: a symlink on the way leads back to "
                         f"itself (a loop); give another folder") from None
    created: list[Path] = []  # the project folder and the folders above it that were missing
    try:
        for folder in (*reversed(directory.parents), directory):
            if not folder.is_dir():
                folder.mkdir()
                created.append(folder)
        staging = Path(tempfile.mkdtemp(prefix=".dashgen-init-", dir=directory))
    except OSError as exc:
        for folder in reversed(created):
            _remove_if_empty(folder)
        raise BuildError(f"{directory}: cannot create the project folder: {exc.strerror or exc}; nothing was "
                         f"left behind") from None
    placed: list[Path] = []
    made: list[Path] = []
    try:
        for rel, content in sorted(files.items()):
            staged = staging / rel
            staged.parent.mkdir(parents=True, exist_ok=True)
            _write(staged, directory / rel, content)
        for rel in sorted(files):
            made += _make_parents(directory, Path(rel).parent)
            os.rename(staging / rel, directory / rel)
            placed.append(directory / rel)
    except BaseException as exc:
        for path in reversed(placed):
            path.unlink(missing_ok=True)
        for folder in reversed(made):
            _remove_if_empty(folder)
        shutil.rmtree(staging, ignore_errors=True)
        for folder in reversed(created):
            _remove_if_empty(folder)
        if isinstance(exc, OSError):
            raise BuildError(f"{directory}: cannot write the project ({exc.strerror or exc}); nothing was "
                             f"left behind") from None
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return sorted(files)


def _refuse_unsafe_target(directory: Path, files: dict[str, str]) -> None:
    """BuildError if `directory` or a folder on the way to a file is a symlink that does not lead
    to a folder inside the project, or if any file is there already (a dangling link included)."""
    if directory.is_symlink() and not directory.is_dir():
        raise BuildError(f"{directory}: a symlink to {os.readlink(directory)}, which is not a folder; give the "
                         f"project's folder")
    if directory.exists() and not directory.is_dir():
        raise BuildError(f"{directory}: not a folder; dashgen init writes a project into a new or empty folder")
    root = directory.resolve()
    folders = sorted({parent for rel in files for parent in Path(rel).parents if parent != Path(".")})
    for folder in folders:
        path = directory / folder
        if path.is_symlink() and not (path.is_dir() and path.resolve().is_relative_to(root)):
            raise BuildError(f"{path}: a symlink to {os.readlink(path)}, outside the project (or to nothing); "
                             f"dashgen init does not write through it. Remove it, or init another folder")
        if path.exists() and not path.is_dir():
            raise BuildError(f"{path}: not a folder, where the project needs one; remove it, or init another folder")
    for rel in sorted(files):
        if (directory / rel).is_symlink():
            raise BuildError(f"{directory / rel}: a symlink to {os.readlink(directory / rel)}; dashgen init does "
                             f"not write through it. Remove it, or init another folder")
    existing = sorted(rel for rel in files if (directory / rel).exists())
    if existing:
        raise BuildError(f"{directory}: already holds {', '.join(existing)}; dashgen init writes only into "
                         f"a new or empty project folder")


def _write(path: Path, shown: Path, content: str) -> None:
    try:
        with open(path, "x") as handle:
            handle.write(content)
    except OSError as exc:
        raise OSError(exc.errno, f"{shown}: {exc.strerror or exc}") from None


def _make_parents(directory: Path, folder: Path) -> list[Path]:
    """Create directory/folder and the folders above it that are missing; the ones it created."""
    missing = [directory / part for part in reversed([folder, *folder.parents]) if part != Path(".")]
    made = []
    for path in missing:
        if not path.is_dir():
            path.mkdir()
            made.append(path)
    return made


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass
