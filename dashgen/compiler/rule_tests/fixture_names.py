"""Which hand-written rule fixtures (tests/rules/*.yaml) `dashgen test` runs under a source other
than dashgen's exporter.

The rule files are then in the source's names (`rl_insight_monitor_actor_ppo_kl`, label
`experiment_name`), so a fixture that feeds the exporter's (`verl_actor_ppo_kl`) feeds series no
rule reads: its alerts stay silent, and a case that expects none passes whatever the rules do.
dashgen's own fixtures, which `dashgen init` copies, are in the exporter's names and left out (the
alerts they test are also tested in the source's names by their generated tests); a team's fixture
in the exporter's names is refused, naming the file and series; one in the source's names runs.
"""

from __future__ import annotations

import glob
from importlib import resources
from pathlib import Path

import yaml

from dashgen.bounded_read import NotText, TooLarge, Unparseable, parse_nested, read_bounded, read_text
from dashgen.catalog import Catalog
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.sources.metric_source import MetricSource

# A fixture larger than this is no hand-written test (promtool would read it whole too).
MAX_FIXTURE_BYTES = 16 << 20


def shipped_fixture_names() -> frozenset[str]:
    """The file names of dashgen's own fixtures, as `dashgen init` copies them into tests/rules/."""
    return frozenset(path.name for path in resources.files("dashgen_rule_tests").iterdir()
                     if path.name.endswith(".yaml"))


def fixtures_for_source(fixtures: list[Path], source: MetricSource, catalog: Catalog,
                        config: Config) -> tuple[list[Path], list[Path]]:
    """(the fixtures to run, dashgen's own left out) under `source`; BuildError for a fixture of
    the project's own that feeds a series in the exporter's names (`catalog`: the exporter's)."""
    if source.is_catalog:
        return fixtures, []
    shipped = shipped_fixture_names()
    served = source.series_map(catalog, config)
    run, left_out = [], []
    for path in fixtures:
        if path.name in shipped:
            left_out.append(path)
            continue
        for name in _input_series_names(path):
            reason = source.lacking_reason(name, catalog, config)
            if reason is None and served.get(name, name) == name:
                continue
            given = (f"{source.name} serves it as {served[name]}" if reason is None else
                     f"{source.name} never serves it ({reason})")
            raise BuildError(
                f"{path}: input series {name} is in the exporter's names, and with source: {source.name} no rule "
                f"reads it ({given}), so its cases would pass whatever the rules do. Write the fixture in the "
                f"source's names (series and labels: {_labels(source)}), or move it out of tests/rules/")
        run.append(path)
    return run, left_out


def readable_fixtures(folder: Path) -> list[Path]:
    """The fixtures in `folder` (*.yaml, sorted), each read as bytes first: BuildError naming the
    first that is binary, not UTF-8, larger than MAX_FIXTURE_BYTES, a folder or unreadable, before
    anything parses one (a UnicodeDecodeError or PermissionError traceback otherwise)."""
    fixtures = sorted(folder.glob("*.yaml"))
    for path in fixtures:
        try:
            read_text(path, MAX_FIXTURE_BYTES)
        except (TooLarge, NotText) as exc:
            raise BuildError(f"{path}: {exc}; a rule test is a YAML text file (or move it out of {folder})") from None
        except OSError as exc:
            raise BuildError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    return fixtures


def refuse_missing_rule_files(fixtures: list[Path]) -> None:
    """BuildError naming the first fixture whose rule_files entry matches no file. promtool would only
    warn and then fail every case with `got: nil`; it happens to a project whose rendered/ is not
    built yet (a fresh `dashgen init`)."""
    for path in fixtures:
        data = _fixture(path)
        for pattern in (data.get("rule_files") if isinstance(data, dict) else None) or ():
            if isinstance(pattern, str) and not glob.glob(str(path.parent / pattern)):
                raise BuildError(f"{path}: its rule file {pattern} matches no file ({(path.parent / pattern).resolve()}). "
                                 f"The fixtures test the rendered rules: run `dashgen build` first")


def _fixture(path: Path):
    """A fixture's YAML; None if it cannot be read (promtool says why)."""
    try:
        return parse_nested(yaml.safe_load, read_bounded(path, MAX_FIXTURE_BYTES).decode(errors="replace"))
    except (OSError, TooLarge, Unparseable, yaml.YAMLError, ValueError):
        return None


def _input_series_names(path: Path) -> list[str]:
    """The metric names of a fixture's input series; none if it cannot be read."""
    data = _fixture(path)
    names = []
    for test in (data.get("tests") if isinstance(data, dict) else None) or ():
        for item in (test.get("input_series") if isinstance(test, dict) else None) or ():
            series = item.get("series") if isinstance(item, dict) else None
            if isinstance(series, str) and series.split("{", 1)[0].strip():
                names.append(series.split("{", 1)[0].strip())
    return names


def _labels(source: MetricSource) -> str:
    renamed = ", ".join(f"{label} as {other}" for label, other in sorted(source.labels.items()))
    return renamed or "as the source names them"
