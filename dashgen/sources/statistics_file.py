"""The step statistics a build lists for the exporter and the backfill: rendered/exporter/step-statistics.yaml,
written by `dashgen build` and read back, refused with the file and entry named when it is malformed."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from dashgen.bounded_read import TooLarge, parse_nested, read_bounded
from dashgen.errors import BuildError
from dashgen.sources.step_statistics import ServedStatistics, StepStatistic

# Where the build writes the list, under its output directory.
STEP_STATISTICS_FILE = "exporter/step-statistics.yaml"


def dump_statistics(served: ServedStatistics) -> str:
    """The rendered list, as YAML the exporter reads back."""
    entries = []
    for stat in served.statistics:
        entry = {"series": stat.series, "reduction": stat.reduction, "steps": stat.steps}
        if stat.ending:
            entry["ending"] = stat.ending
        if stat.of_median:
            entry["of_median"] = stat.of_median
        if stat.half_logged:
            entry["half_logged"] = True
        if stat.fully_logged:
            entry["fully_logged"] = True
        entries.append(entry)
    header = ("# Rendered by `dashgen build`; do not edit. The statistics over a run's last steps that the rules\n"
              "# read as verl_step_statistic: `dashgen export` and `dashgen backtest` compute them from the step log.\n"
              "# floor_seconds: no window or ending is shorter than this much of the log's own clock.\n")
    return header + yaml.safe_dump({"floor_seconds": served.floor_seconds, "statistics": entries}, sort_keys=False)


MAX_STATISTICS = 1_000
# The list's size on disk that many statistics fit in as `dashgen build` writes them (a few hundred
# bytes each): a larger file is refused before it is parsed, which would cost seconds and memory.
MAX_STATISTICS_BYTES = MAX_STATISTICS * 1024
_FIELDS = {"series", "reduction", "steps", "ending", "of_median", "half_logged", "fully_logged"}


def load_statistics(path: Path) -> ServedStatistics:
    """The statistics listed in a rendered file; BuildError naming the file and entry if it is malformed."""
    try:
        data = parse_nested(yaml.safe_load, read_bounded(path, MAX_STATISTICS_BYTES).decode())
    except TooLarge as exc:
        raise BuildError(f"{path}: the step statistics list is {exc}, more than {MAX_STATISTICS:,} statistics take "
                         f"(is it the file `dashgen build` wrote?)") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BuildError(f"{path}: cannot read the step statistics: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("statistics"), list):
        raise BuildError(f"{path}: expected a mapping with a list under 'statistics' (as `dashgen build` writes it)")
    floor = data.get("floor_seconds", 0.0)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < math.inf:
        raise BuildError(f"{path}: floor_seconds {floor!r}: expected a number of seconds, 0 or more")
    if len(data["statistics"]) > MAX_STATISTICS:
        raise BuildError(f"{path}: {len(data['statistics']):,} statistics; at most {MAX_STATISTICS:,} (each is "
                         f"computed at every step of every run the exporter follows)")
    out = []
    for index, entry in enumerate(data["statistics"], start=1):
        if not isinstance(entry, dict) or set(entry) - _FIELDS or not {"series", "reduction", "steps"} <= set(entry):
            raise BuildError(f"{path}: statistics entry {index}: expected series, reduction, steps and optionally "
                             f"ending, of_median, half_logged, fully_logged")
        try:
            out.append(StepStatistic(**entry))
        except (TypeError, ValueError) as exc:
            raise BuildError(f"{path}: statistics entry {index}: {exc}") from None
    return ServedStatistics(tuple(out), float(floor))


def statistics_path(root: Path) -> Path:
    """Where a project's build lists its step windows (dashgen/compiler/output/build.py's rendered/)."""
    return root / "rendered" / STEP_STATISTICS_FILE


def rendered_statistics(root: Path) -> ServedStatistics | None:
    """The statistics the project's last build listed; None if it has no such file (not built,
    or built for another source)."""
    path = statistics_path(root)
    return load_statistics(path) if path.is_file() else None
