"""`dashgen init DIR`: a team's project that builds on the verl defaults shipped in the wheel.

The project imports the defaults rather than copying them (dashgen_panels, dashgen_alerts),
so a dashgen upgrade brings their fixes; it adds its own rows, alerts and metrics beside them.
"""

from __future__ import annotations

import importlib
from importlib import resources
from pathlib import Path

from dashgen.compiler.rendering import templates
from dashgen.errors import BuildError

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


# The metric source a new project reads (`dashgen init --source`), as its dashgen.yaml sets it.
SOURCE_LINES = {
    "exporter": "",
    "rl_insight": "source: rl_insight\nexporter_address: localhost:9092  # RL-Insight's hub (metrics_report_port)\n",
}


def project_files(source: str = "exporter") -> dict[str, str]:
    """Relative path -> content of a new project reading `source`'s series."""
    template_dir = resources.files("dashgen").joinpath("templates/project")
    files = {
        "dashgen.yaml": template_dir.joinpath("dashgen.yaml").read_text() + SOURCE_LINES[source],
        "metrics.yaml": template_dir.joinpath("metrics.yaml").read_text(),
        "Makefile": template_dir.joinpath("Makefile").read_text(),
        ".gitignore": template_dir.joinpath("gitignore").read_text(),
        "panels/verl_training.py": template_dir.joinpath("verl_training.py").read_text(),
        "panels/compare_runs.py": template_dir.joinpath("compare_runs.py").read_text(),
    }
    alert_module = templates().get_template("project/alerts_module.py.j2")
    for module in default_modules("dashgen_alerts"):
        files[f"alerts/{module}.py"] = alert_module.render(module=module, names=definition_names(module))
    for fixture in resources.files("dashgen_rule_tests").iterdir():
        if fixture.name.endswith(".yaml"):
            files[f"tests/rules/{fixture.name}"] = fixture.read_text()
    return files


def init_project(directory: Path, source: str = "exporter") -> list[str]:
    """Write a new project into `directory` (created if missing); refuses to overwrite anything."""
    files = project_files(source)
    existing = sorted(rel for rel in files if (directory / rel).exists())
    if existing:
        raise BuildError(f"{directory}: already holds {', '.join(existing)}; dashgen init writes only into "
                         f"a new or empty project folder")
    for rel, content in sorted(files.items()):
        path = directory / rel
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        except OSError as exc:
            raise BuildError(f"{path}: cannot write: {exc.strerror or exc}") from None
    return sorted(files)
