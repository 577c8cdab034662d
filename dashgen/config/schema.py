"""The core config (`Config`: the top level of dashgen.yaml) and `AreaConfig`, the base of each
alert area's section."""

from __future__ import annotations

import copy
import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from dashgen.config.checking import _check_fields, _defined_in, _refuse_raw_text, _schema
from dashgen.config.fields import (Address, Bytes, ConfigError, Duration, GrafanaTime, GrafanaUid, Interval, JobName,
                                   Matches)
from dashgen.errors import get_close_matches
from dashgen.records import record

GIB = 2**30


@record
class Config:
    """Every field of the config file outside the alert areas' sections (`dashgen config --describe`)."""

    # --- Selectors -------------------------------------------------------------
    # Where the run's metrics come from: dashgen's exporter (`dashgen export` on verl's step log)
    # or verl's RL-Insight hub (`source: rl_insight`: gauges rl_insight_monitor_*, labels project and
    # experiment_name). Every panel and alert compiles to the source's names; an alert that needs a
    # series the source lacks is listed as unavailable by `dashgen list` and the runbook.
    source: Literal["exporter", "rl_insight"] = "exporter"
    # Scrape job of the run's metrics (`dashgen export`, or RL-Insight's hub); every verl_* query
    # and VerlMetricsAbsent use it.
    verl_job: JobName = "verl"
    # Scrape job of Ray's node metrics (per-GPU utilisation and memory).
    ray_job: JobName = "ray"
    # Where per-GPU metrics come from: Ray's node metrics or NVIDIA's DCGM exporter.
    gpu_source: Literal["ray", "dcgm"] = "ray"
    # Scrape job of the DCGM exporter, when gpu_source is "dcgm".
    dcgm_job: JobName = "dcgm"
    # Scrape job of the rollout engines' /metrics (vLLM or SGLang servers).
    rollout_job: JobName = "rollout"

    # --- Hardware --------------------------------------------------------------
    # Memory of one GPU: bytes, or a size with a unit (80GiB).
    gpu_memory_bytes: Bytes = 80 * GIB

    # --- Dashboards and Grafana ------------------------------------------------
    # How often Grafana refreshes the dashboards.
    dashboard_refresh: Interval = "30s"
    # The time range a dashboard opens with.
    dashboard_time_from: GrafanaTime = "now-6h"
    # Grafana folder the provisioned dashboards go to.
    grafana_folder: str = "verl"
    # Name of the provisioned Prometheus data source the panels query.
    datasource_name: str = "Prometheus"
    # The uid of the provisioned Prometheus data source, by which the panels refer to it.
    datasource_uid: GrafanaUid = "dashgen-prometheus"

    # --- Prometheus ------------------------------------------------------------
    # How often Prometheus scrapes the exporter; also the data source's minimum step.
    scrape_interval: Interval = "15s"
    # Where `dashgen export` listens, as Prometheus should reach it.
    exporter_address: Address = "localhost:9464"
    # Ray writes its nodes' metrics endpoints here (verl's rollout monitoring reads the same file).
    ray_service_discovery_file: str = "/tmp/ray/prom_metrics_service_discovery.json"

    # --- Rule evaluation -------------------------------------------------------
    # How often Prometheus evaluates the rule groups (those without an interval of their own).
    rule_interval: Interval = "1m"

    # --- Baselines, shared by the baseline-relative alerts ----------------------------
    # A Baseline() of the alert vocabulary (dashgen/conditions.py) with no window is the median
    # over this window, ending `baseline_recent_window` ago: the recent window a fault shows in
    # is not part of the level it is compared with.
    baseline_window: Interval = "1h"
    # The recent window a rolling baseline ends before, so that a fault showing in it is not part of
    # the level the fault is compared with.
    baseline_recent_window: Interval = "10m"
    # The held baseline is the lowest (for signals a fault raises) or highest (for signals it
    # lowers) rolling baseline of this window: it keeps the pre-fault level for this long
    # after a fault starts, where the rolling median absorbs the fault within about 40 minutes.
    baseline_hold_window: Interval = "24h"
    # The step at which the held baseline reads the rolling baseline's extreme (recorded by a group
    # evaluated this often), not every evaluation of it: a tenth of the samples per cycle.
    baseline_hold_step: Interval = "10m"
    # Single-signal conditions read the median of this window, so one odd step neither
    # fires nor resolves them.
    signal_smoothing_window: Interval = "5m"
    # Warnings stay firing this long after their condition last held: one notification per
    # episode even when the signal dips below the threshold for a step or two.
    warning_keep_firing_for: Duration = "15m"

    # --- Windows counted in steps ------------------------------------------------------
    # On: the exporter computes the step windows of the series it maps from the step log,
    # exactly, by step number (verl_step_statistic; rendered/exporter/step-statistics.yaml
    # lists them). Off, and for a source without a step log (rl_insight): they compile to
    # PromQL, one branch per band of rhythms, within 41% of N steps, at a rule cycle about
    # twice as costly (bench/scale_1024.py).
    exporter_step_windows: bool = True
    # In PromQL, a window of steps(N) is N times the run's seconds per step, measured over this
    # window from the step-log lines it holds (their times and step numbers: a log of every Nth
    # step and one without timing_s/step are measured alike).
    rhythm_window: Interval = "6h"
    # The shortest time a step window spans: in PromQL, a window of fewer scrapes holds too few
    # samples to take a median of; computed by the exporter, a run of 2 s a step logs 30 steps
    # between two evaluations, which a window or ending of 10 steps would not reach back past.
    step_window_floor: Interval = "1m"

    # --- Docs ----------------------------------------------------------------------
    # Base of every alert's runbook_url; the alert's anchor is appended.
    runbook_base_url: Annotated[str, Matches(r"\S+", "https://example.org/runbook.md")] = "rendered/docs/alerts.md"

    # --- Adoption: Grafana, runbook, packaging ---------------------------------------
    # Make the provisioned Prometheus data source Grafana's default. Off: Grafana refuses to
    # start with two default data sources, and a team's Grafana usually has one already.
    datasource_is_default: bool = False
    # Grafana as people reach it (https://grafana.example.org): the runbook links each alert to
    # the dashboard. Empty: no such links. (runbook_base_url is where the runbook lives.)
    grafana_base_url: Annotated[str, Matches(r"(https?://\S+[^/])?", "https://grafana.example.org")] = ""
    # The rollout engines' /metrics addresses, as a Prometheus file_sd targets file (JSON or YAML:
    # [{"targets": ["10.0.0.5:8000"]}]). Prometheus re-reads it on change. Keep verl's own
    # rollout.prometheus.file pointed elsewhere: verl overwrites that file with a config of its own.
    rollout_service_discovery_file: Annotated[str, Matches(r"[^*]*(\*[^/]*)?\.(json|ya?ml|JSON|YA?ML)",
                                                           "/tmp/dashgen/rollout_targets.json")] = \
        "/tmp/dashgen/rollout_targets.json"

    # --- GPU scale -------------------------------------------------------------------
    # Ray's temp dir on the trainer's node (`ray start --temp-dir`): `dashgen export` reads the
    # run's Ray session from its session_latest link, to tie the run to its GPUs' series.
    ray_temp_dir: str = "/tmp/ray"

    # --- VictoriaMetrics ---------------------------------------------------------------
    # Also render rendered/victoriametrics/rules/: the rule files as vmalert loads them from 1.79 on
    # (Debian bookworm's), which has no keep_firing_for: each held alert reads a recording of when it
    # fired instead (docs/deploy-victoriametrics.md). Build, check and lint run `vmalert -dryRun` on them.
    # Off: nothing is rendered there, and rendered/rules/ (Prometheus') needs vmalert 1.92 or later.
    victoriametrics: bool = False

    def __post_init__(self) -> None:
        _check_fields(self)
        # The sections of the config file (`stability: {...}`, `kubernetes: {...}`), read by `section()`.
        object.__setattr__(self, "_sections", {})
        object.__setattr__(self, "_section_values", {})
        object.__setattr__(self, "_source", None)
        # prometheus.yml scrapes these as separate jobs; Prometheus refuses two of one name.
        scraped = {"verl_job": self.verl_job, "ray_job": self.ray_job, "rollout_job": self.rollout_job}
        for name, job in scraped.items():
            same = [other for other, other_job in scraped.items() if other_job == job and other != name]
            if same:
                raise ConfigError(f"{name} = {job!r} is also {same[0]}; each scrape job needs a name of its own")
        if not self.rule_interval <= self.baseline_hold_step <= self.baseline_hold_window:
            raise ConfigError(f"baseline_hold_step = {self.baseline_hold_step!r} must lie between rule_interval "
                              f"({self.rule_interval}) and baseline_hold_window ({self.baseline_hold_window})")

    @property
    def config_file(self) -> Path | None:
        """The config file these values were read from; None for the defaults."""
        return self._source

    def with_source(self, source: str) -> "Config":
        """This config, its sections included, reading the metric source `source`."""
        other = copy.copy(self)
        object.__setattr__(other, "source", source)
        return other

    def section(self, tunables: type[S]) -> S:
        """A section's tunables: its defaults, overridden by the config file's `<section>:` mapping."""
        if tunables not in self._section_values:
            if issubclass(tunables, AreaConfig):
                _refuse_raw_text(tunables)
            values = self._sections.get(tunables.section, {})
            where = f"{self._source}: " if self._source else ""
            if not isinstance(values, dict):
                raise ConfigError(f"{where}{tunables.section}: expected a mapping of field: value, got {values!r}")
            known = [f.name for f in dataclasses.fields(tunables)]
            for key in values:
                if key in tunables.retired:
                    raise ConfigError(f"{where}{tunables.section}: {key} is no longer a field: "
                                      f"{tunables.retired[key]}")
                if key not in known:
                    close = get_close_matches(str(key), known, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else f"; its fields: {', '.join(known)}"
                    raise ConfigError(f"{where}{tunables.section}: unknown field {key!r}{hint}")
            try:
                self._section_values[tunables] = tunables(**values)
            except ConfigError as exc:
                raise ConfigError(f"{where}{tunables.section}.{exc.message}") from None
        return self._section_values[tunables]

    def area(self, tunables: type[A]) -> A:
        """An alert area's tunables: the section of dashgen.yaml named after the area."""
        return self.section(tunables)

    def check_sections(self, sections: list[type["Section"]]) -> None:
        """Every section of the config file is one of `sections`, and every field in it is one of its."""
        by_name = {s.section: s for s in sections}
        where = f"{self._source}: " if self._source else ""
        for name in self._sections:
            if name in by_name:
                self.section(by_name[name])
                continue
            home = [s for s in sections if name in {f.name for f in dataclasses.fields(s)}]
            if home:
                raise ConfigError(f"{where}{name} is a field of the {home[0].section!r} {home[0].kind}: write it "
                                  f"under `{home[0].section}:` (e.g. `{home[0].section}: {{{name}: ...}}`)")
            close = get_close_matches(name, [*_core_field_names(), *by_name], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "; `dashgen config --describe` lists the fields"
            raise ConfigError(f"{where}unknown config field or area {name!r}{hint}")


class Section:
    """A section of dashgen.yaml: the tunables of one concern, declared beside the code they tune
    (an alert area's rules, a deploy target's renderer), read with `config.section(cls)`.

    Subclass it as a frozen dataclass naming the section, with a comment above each field that
    stands alone as its description in `dashgen config --describe`; fields are typed and checked
    like Config's:

        @dataclass(frozen=True)
        class ActSection(Section, section="act"):
            # Where `dashgen act` listens and Alertmanager posts to.
            address: Address = "127.0.0.1:9095"

    `dashgen.yaml` sets them under the section's name (`act: {address: 0.0.0.0:9095}`).
    """

    section: ClassVar[str] = ""
    kind: ClassVar[str] = "section"  # what the section is, in messages
    # Fields the section had and no longer has, each with what took its place: a config file that
    # still sets one gets that, not a "did you mean" guess at a field of another meaning.
    retired: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, section: str = "", **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if section:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", section):
                raise ValueError(f"{cls.__name__}: {cls.kind} {section!r} must be lower-case letters, digits and _")
            cls.section = section

    def __post_init__(self) -> None:
        _check_fields(self)


class AreaConfig(Section):
    """The tunables of one alert area (an alerts/*.py module), next to what they tune: a Section
    named after the area, whose values may reach PromQL (so no field takes any text at all).

        @dataclass(frozen=True)
        class RewardsConfig(AreaConfig, area="rewards"):
            # Fraction of its baseline the reward must fall by.
            drop_fraction: Fraction = 0.5

    `dashgen.yaml` sets them under the area's name (`rewards: {drop_fraction: 0.4}`), and the
    module reads them with `config.area(RewardsConfig)`.
    """

    area: ClassVar[str] = ""
    kind: ClassVar[str] = "alert area"

    def __init_subclass__(cls, area: str = "", **kwargs) -> None:
        super().__init_subclass__(section=area, **kwargs)
        if area:
            cls.area = area


S = typing.TypeVar("S", bound=Section)
A = typing.TypeVar("A", bound=AreaConfig)


def _core_field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(Config)]


def areas_of(modules: typing.Iterable[types.ModuleType]) -> list[type[AreaConfig]]:
    """The AreaConfig classes the modules define or import, each once, in order; an area name
    claimed by two classes is an error."""
    found: dict[str, type[AreaConfig]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, AreaConfig) and value.area:
                check_section_class(value)
                other = found.setdefault(value.area, value)
                if other is not value:
                    raise ConfigError(f"alert area {value.area!r} is declared twice: by {other.__qualname__} "
                                      f"({other.__module__}) and {value.__qualname__} ({value.__module__})")
    return list(found.values())


def check_section_class(cls: type[Section]) -> None:
    """ConfigError naming the file and class if a section class cannot be read as one: not a
    dataclass, a field without a default (dashgen.yaml only overrides), a field typed `object`
    (which checks nothing), or a section named like a core field (dashgen.yaml could not tell them apart)."""
    where = f"{_defined_in(cls)}: {cls.__qualname__}"
    if not dataclasses.is_dataclass(cls):
        raise ConfigError(f"{where} ({cls.kind} {cls.section!r}) is not a dataclass: put @dataclass(frozen=True) "
                          f"above it")
    if cls.section in _core_field_names():
        raise ConfigError(f"{where}: {cls.kind} {cls.section!r} is named like a core config field, which "
                          f"dashgen.yaml sets at its top level; name the {cls.kind} otherwise")
    for f, hint in _schema(cls).items():
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{f.name} has no default: every tunable needs one (dashgen.yaml only "
                              f"overrides); give it the value that suits most runs")
        if hint is object:
            raise ConfigError(f"{where}.{f.name} is typed object, which checks nothing a dashgen.yaml gives; type "
                              f"it as a number kind, Duration, StepCount or a Literal (see dashgen/config/fields.py)")
    if issubclass(cls, AreaConfig):
        _refuse_raw_text(cls)  # said first: such a field's default may be any text
    try:
        cls()
    except ConfigError as exc:  # a default that breaks its own annotation is the module's, not dashgen.yaml's
        raise ConfigError(f"{where}.{exc.message} (the default in {_defined_in(cls)}; fix it there)") from None


