"""The exporter's statistics over steps (verl_step_statistic), derived for promtool rule tests.

Rules read a logged series' step windows from the exporter (dashgen/sources/step_statistics.py),
which computes them from every step of the log. A rule test gives a run's series a sample an
evaluation; what the exporter would serve beside them is derived here with the same code: the
generated tests' cases, and the hand-written fixtures of tests/rules/, which give the logged
series (and the run's verl_training_global_step, else one step a sample) and leave the
statistics to `dashgen test`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Mapping

import yaml

from dashgen.compiler.rule_tests.fixture_rules import parts_with_rules_cut, yaml_mapping
from dashgen.compiler.queries.promql import label_value
from dashgen.config import Config, duration_seconds
from dashgen.errors import BuildError
from dashgen.catalog import VALIDATION_LABELS
from dashgen.sources.step_statistics import FAMILIES, STEP_STATISTIC_METRIC, ServedStatistics, member_labels

GLOBAL_STEP = "verl_training_global_step"
RUN_LABELS = ("job", "instance", "project", "experiment")
MEMBER_LABELS = (*RUN_LABELS, *VALIDATION_LABELS)  # a family member's statistics carry its labels too
MAX_FIXTURE_SAMPLES = 1_000_000


def statistics_per_sample(values: list[float | None], step_of: list[int], served: ServedStatistics,
                          series: str, seconds_per_sample: float, member: tuple[str, ...] = ()) -> dict:
    """Each of `served`'s statistics of `series` (of its family member of the labels `member`, as
    dashgen.formats.verl_log.ValidationSeries less the family), at each sample: a run that logs
    every step, a step logged between two samples having the value of the sample before it (as
    Prometheus reads a series between samples) and the step a sample shows having that sample's
    value. Returns statistic -> per-sample value (None: no sample)."""
    wanted = tuple(stat for stat in served.statistics if stat.series == series)
    computed = ServedStatistics(wanted, served.floor_seconds).tracker()
    key = (series, *member) if series in FAMILIES else series
    out: dict = {stat: [] for stat in wanted}
    logged, advanced_at = 0, -1
    now = computed.values()  # they change only when a step is observed: a slow run's samples share them
    for index, step in enumerate(step_of):
        if step > logged:  # the steps since the last advance share its time
            seconds = (index - advanced_at) * seconds_per_sample / (step - logged)
            for each in range(logged + 1, step + 1):
                value = values[index] if each == step or index == 0 else values[index - 1]
                computed.observe(each, {} if value is None else {key: value}, seconds)
            logged, advanced_at = step, index
            now = computed.values()
        for stat in wanted:
            out[stat].append(now.get((stat, member_labels(key))))
    return out


def statistic_selector(stat, labels: str) -> str:
    """The input series of a statistic, with the run's (and a family member's) matchers `labels`
    (`job="verl", ...`)."""
    return (f"{STEP_STATISTIC_METRIC}{{{labels}, series={label_value(stat.series)}, "
            f"statistic={label_value(stat.name)}}}")


# --- promtool's expanding notation, read back -------------------------------------------------

_TERM = re.compile(r"^(?P<start>[-+]?(?:[0-9.]+(?:e[-+]?[0-9]+)?|Inf|NaN))"
                   r"(?:(?P<sign>[-+])(?P<by>[0-9.]+(?:e[-+]?[0-9]+)?))?(?:x(?P<times>[0-9]+))?$", re.IGNORECASE)


def expand_values(text: str, where: str) -> list[float | None]:
    """promtool's `values` (`1+1x3 _ 0.5x2 stale`) as one value a sample; None: no sample."""
    out: list[float | None] = []
    for token in str(text).split():
        if token == "stale" or token == "_":
            out.append(None)
        elif re.fullmatch(r"_x[0-9]+", token):
            out.extend([None] * int(token[2:]))
        else:
            match = _TERM.match(token)
            if match is None:
                raise BuildError(f"{where}: cannot read the value {token!r}")
            start = float(match["start"])
            step = float(match["by"] or 0) * (-1 if match["sign"] == "-" else 1)
            times = int(match["times"]) if match["times"] is not None else 0
            out.extend(start + step * i if math.isfinite(start) else start for i in range(times + 1))
        if len(out) > MAX_FIXTURE_SAMPLES:
            raise BuildError(f"{where}: more than {MAX_FIXTURE_SAMPLES:,} samples")
    return out


def _values_text(values: list[float | None]) -> str:
    return " ".join("_" if value is None else repr(value) for value in values)


def _series_labels(series: str) -> tuple[str, dict[str, str]]:
    name, _, rest = series.partition("{")
    return name.strip(), dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', rest))


def _matchers(labels: dict[str, str], names: tuple[str, ...] = RUN_LABELS) -> str:
    return ", ".join(f"{name}={label_value(labels[name])}" for name in names if name in labels)


def with_statistics(fixture: Path, served: ServedStatistics, interval: str) -> dict | None:
    """The fixture's content, each test group given the statistics of its logged series that it
    does not give itself, and its rule files as absolute paths; None if it needs none."""
    try:
        content = yaml.safe_load(fixture.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BuildError(f"{fixture}: cannot read the rule test: {exc}") from None
    if not isinstance(content, dict) or not served.statistics:
        return None
    names = {stat.series for stat in served.statistics}
    added = False
    for group_index, group in enumerate(content.get("tests") or [], start=1):
        if not isinstance(group, dict):
            continue
        where = f"{fixture}: test {group.get('name') or group_index}"
        seconds = duration_seconds(str(group.get("interval") or content.get("evaluation_interval") or interval))
        inputs = [entry for entry in group.get("input_series") or [] if isinstance(entry, dict)]
        parsed = [(entry, *_series_labels(str(entry.get("series", "")))) for entry in inputs]
        given = {(labels.get("series"), labels.get("statistic"), _matchers(labels, MEMBER_LABELS))
                 for _, name, labels in parsed if name == STEP_STATISTIC_METRIC}
        steps = {_matchers(labels): expand_values(entry.get("values", ""), where)
                 for entry, name, labels in parsed if name == GLOBAL_STEP}
        for entry, name, labels in parsed:
            if name not in names:
                continue
            run, selected = _matchers(labels), _matchers(labels, MEMBER_LABELS)
            values = expand_values(entry.get("values", ""), where)
            run_steps = steps.get(run)
            step_of = ([int(step) if step is not None else 0 for step in run_steps[:len(values)]]
                       if run_steps else list(range(1, len(values) + 1)))
            values = values[:len(step_of)]
            member = tuple(labels.get(label, "") for label in VALIDATION_LABELS) if name in FAMILIES else ()
            for stat, per_sample in statistics_per_sample(values, step_of, served, name, seconds, member).items():
                if (stat.series, stat.name, selected) in given:
                    continue
                group["input_series"].append({"series": statistic_selector(stat, selected),
                                              "values": _values_text(per_sample)})
                added = True
    if not added:
        return None
    content["rule_files"] = [str((fixture.parent / rule_file).resolve()) for rule_file in content.get("rule_files") or []]
    return content


# The runbook base the shipped fixtures expect (Config's default runbook_base_url).
DEFAULT_RUNBOOK_BASE = Config.runbook_base_url


def with_project_annotations(content: dict, base: str, derived: Mapping[str, Mapping[str, str]]) -> bool:
    """Rewrite, in place, each alert a fixture expects to carry the annotations the project gives
    it beyond what its module writes: the runbook link in the project's `base` where the fixture
    expects dashgen's default, and the links to the panel showing it (`derived`, by alert name) where
    the fixture does not state them. Whether any expectation changed."""
    changed = False
    for group in content.get("tests") or []:
        for case in (group.get("alert_rule_test") or []) if isinstance(group, dict) else []:
            name = case.get("alertname") if isinstance(case, dict) else None
            for alert in (case.get("exp_alerts") or []) if isinstance(case, dict) else []:
                annotations = alert.get("exp_annotations") if isinstance(alert, dict) else None
                if not isinstance(annotations, dict):
                    continue
                url = annotations.get("runbook_url")
                if isinstance(url, str) and base != DEFAULT_RUNBOOK_BASE and url.startswith(f"{DEFAULT_RUNBOOK_BASE}#"):
                    annotations["runbook_url"] = base + url[len(DEFAULT_RUNBOOK_BASE):]
                    changed = True
                for key, value in (derived.get(name) or {}).items():
                    if key not in annotations:
                        annotations[key] = value
                        changed = True
    return changed


def fixtures_with_statistics(fixtures: list[Path], statistics: ServedStatistics, rule_interval: str,
                             folder: Path, runbook_base_url: str = DEFAULT_RUNBOOK_BASE,
                             derived: Mapping[str, Mapping[str, str]] | None = None) -> list[Path]:
    """The fixtures, each that reads a logged series' step windows without giving the exporter's
    statistics of it, or whose rule files hold rules its cases do not read, replaced by copies in
    `folder` that have them and load only the rules read: one copy, or one for each set of its
    test groups that read the same rules (fixture_rules.parts_with_rules_cut); `statistics`: those
    the project's rules read. The copies expect the project's own runbook links (`runbook_base_url`)
    where a fixture expects dashgen's default, and the panel links of each alert (`derived`), so the
    fixtures state only what the alert modules write."""
    out = []
    for fixture in fixtures:
        content = with_statistics(fixture, statistics, rule_interval)
        whole = content or yaml_mapping(fixture)
        if whole is not None and with_project_annotations(whole, runbook_base_url, derived or {}) and content is None:
            whole["rule_files"] = [str((fixture.parent / rule_file).resolve())
                                   for rule_file in whole.get("rule_files") or []]
            content = whole
        parts = parts_with_rules_cut(whole, fixture, folder) if whole is not None else None
        if parts is None and content is not None:
            parts = {folder / fixture.name: content}
        if parts is None:
            out.append(fixture)
            continue
        for path, part in parts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(yaml.dump(part, Dumper=yaml.CSafeDumper, sort_keys=False, width=1000))
            out.append(path)
    return out
