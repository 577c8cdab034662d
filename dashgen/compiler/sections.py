"""The sections of dashgen.yaml that dashgen's own code declares: the deploy targets' (each beside
the code that reads it) and the alert areas of dashgen's shipped alerts (the installed dashgen_alerts).

They are listed here, above dashgen.config, because the modules declaring them import
dashgen.config: the config package knows no section but by what it is given.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from dashgen import config as config_package
from dashgen.config import AreaConfig, Config, Section, areas_of


def deploy_sections() -> list[type[Section]]:
    """The sections of the deploy targets: alertmanager:, act:, kubernetes:."""
    from dashgen.compiler.alerting.routing import AlertmanagerSection
    from dashgen.compiler.output.targets.kubernetes import KubernetesSection
    from dashgen.model import ActSection

    return [AlertmanagerSection, ActSection, KubernetesSection]


def shipped_areas() -> list[type[AreaConfig]]:
    """The alert areas of dashgen's default alerts (the installed dashgen_alerts package)."""
    import dashgen_alerts

    return areas_of(importlib.import_module(f"dashgen_alerts.{info.name}")
                    for info in pkgutil.iter_modules(dashgen_alerts.__path__) if not info.name.startswith("_"))


def shipped_sections() -> list[type[Section]]:
    """Every section dashgen itself declares: the deploy targets', then the shipped alert areas'."""
    return [*deploy_sections(), *shipped_areas()]


def load_config(path: Path | None, root: Path | None = None) -> Config:
    """dashgen.config.load_config, naming the section of a field that dashgen.yaml sets at its top level."""
    return config_package.load_config(path, root, known_sections=shipped_sections)
