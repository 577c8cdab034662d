"""rendered/exporter/step-statistics.yaml: the statistics over a run's last steps that the rules read,
which `dashgen export` and a backfill compute from the step log (dashgen/sources/step_statistics.py).
Written when the metric source computes them (dashgen's exporter), whether the rules read any or not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashgen.sources.statistics_file import STEP_STATISTICS_FILE, dump_statistics

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject


def render_step_statistics(project: CompiledProject) -> dict[str, str]:
    if not project.source.computes_step_windows:
        return {}
    return {STEP_STATISTICS_FILE: dump_statistics(project.step_statistics)}
