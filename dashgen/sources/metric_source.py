"""A metric source: where a project's dashboards and alerts read a run's metrics from.

Definitions (panels/, alerts/) are written once, in the catalog's names (dashgen/catalog.py:
`verl_actor_ppo_kl`, labels `project` and `experiment`). A source maps that one catalog of
meanings onto the series it publishes: each metric's series name, its run labels, and, for a
series it does not publish (the exporter's step timestamp, run state, NaN streaks), either a
recording rule that rebuilds the meaning from what it has, or the reason it cannot. The
compiler asks the chosen source (`source:` in dashgen.yaml) to translate every checked query,
and checks the translation against the source's own catalog.
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Callable, Mapping

from dashgen.catalog import Catalog, Metric, Origin
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.records import record


class Lacking(ValueError):
    """A query reads a series the source neither publishes nor rebuilds."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason


@record
class Derived:
    """A catalog series the source rebuilds from its own series, as a recording rule."""

    meaning: str  # the catalog metric it stands for
    record: str  # the recorded series' name
    expr: str  # in the source's own names and labels
    help: str
    # What the rebuilt series loses against the exporter's, for the runbook of each alert reading it.
    loses: str = ""


@record
class MetricSource:
    """One source's mapping onto the catalog (an instance per module under dashgen/sources/)."""

    name: str
    # One line for `dashgen config --describe`, the runbook and the scrape config's comment.
    title: str
    # verl log key -> series name; None for the exporter, whose names are the catalog's own.
    series_of_key: Callable[[str], str] | None = None
    # Label renames, catalog name -> the source's (experiment -> experiment_name).
    labels: Mapping[str, str] = field(default_factory=dict)
    # Catalog series the source does not publish, with the reason, unless `derived` rebuilds them.
    lacking: Mapping[str, str] = field(default_factory=dict)
    # Alerts whose meaning the source cannot give although their series translate, with the reason.
    unavailable_alerts: Mapping[str, str] = field(default_factory=dict)
    # How a source's own series differ from one value per step, for the runbook.
    caveat: str = ""
    # What its rules lose when vmalert evaluates them on VictoriaMetrics, said by a build for it.
    victoriametrics_caveat: str = ""
    # Under Kubernetes, the labels of the pods that serve its series, which a PodMonitor scrapes at
    # exporter_address's port; empty for dashgen's exporter, whose pods kubernetes_exporter_* name.
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    # Whether it computes the statistics over steps the rules read from the step log itself
    # (verl_step_statistic, dashgen/sources/step_statistics.py); where not, step windows compile to PromQL.
    computes_step_windows: bool = False
    # What `dashgen init --source NAME` adds to a new project's dashgen.yaml to read this source.
    init_config: str = ""

    @property
    def is_catalog(self) -> bool:
        """Whether the source publishes the catalog's own names (dashgen's exporter)."""
        return self.series_of_key is None

    def derived(self, config: Config) -> tuple[Derived, ...]:
        """The catalog series this source rebuilds from its own, as recording rules (none by default)."""
        return ()

    def label(self, name: str) -> str:
        return self.labels.get(name, name)

    def series_map(self, catalog: Catalog, config: Config) -> dict[str, str]:
        """Catalog name -> the source's name, for every series that translates."""
        if self.is_catalog:
            return {}
        names = {m.name: self.series_of_key(m.verl_keys[0]) for m in catalog.values()
                 if m.origin is Origin.VERL and m.verl_keys and m.scale == 1.0}
        names.update({d.meaning: d.record for d in self.derived(config)})
        return names

    def catalog(self, catalog: Catalog, config: Config) -> Catalog:
        """The source's catalog: its series, its derived recordings, and the other sources' metrics
        (Ray, DCGM, the rollout engines, recordings), all with its run labels."""
        if self.is_catalog:
            return catalog
        names = self.series_map(catalog, config)
        metrics: dict[str, tuple[Metric, Metric]] = {}  # the source's name -> (its metric, the catalog's)

        def add(made: Metric, meaning: Metric) -> None:
            if made.name in metrics:
                raise BuildError(self._collision(made.name, metrics[made.name][1], meaning))
            metrics[made.name] = (made, meaning)

        for metric in catalog.values():
            labels = frozenset(self.label(label) for label in metric.labels)
            if metric.origin is Origin.VERL and metric.verl_keys and metric.scale != 1.0:
                # As logged, in the key's own unit; the catalog's meaning is a recording that rescales it.
                add(Metric(self.series_of_key(metric.verl_keys[0]), metric.type, "none",
                           f"{metric.help} ({metric.verl_keys[0]}, as logged)", labels, metric.origin,
                           metric.verl_keys), metric)
            if metric.origin is Origin.VERL and metric.name not in names:
                continue
            add(Metric(names.get(metric.name, metric.name), metric.type, metric.unit, metric.help, labels,
                       metric.origin, metric.verl_keys, 1.0), metric)
        return Catalog(made for made, _ in metrics.values())

    def _collision(self, name: str, first: Metric, second: Metric) -> str:
        """Two of the catalog's metrics whose keys the source names alike (`team/x` and `team_x`)."""
        def shown(metric: Metric) -> str:
            return f"{metric.name} (key {metric.verl_keys[0]!r})" if metric.verl_keys else metric.name
        return (f"the project's metrics.yaml: {shown(first)} and {shown(second)} are both {name} under "
                f"`source: {self.name}`, which writes each '/' of a logged key as '_': both keys land in one "
                f"gauge, so leave the project's one out of metrics.yaml")

    def lacking_reason(self, name: str, catalog: Catalog, config: Config) -> str | None:
        """Why the source cannot give the catalog series `name`; None if it can (or `name` is not one)."""
        if self.is_catalog:
            return None
        metric = catalog.get(name)
        if metric is None or metric.origin is not Origin.VERL or name in self.series_map(catalog, config):
            return None
        return self.lacking.get(name, f"{self.title} does not publish it")

    def translate(self, expr: str, catalog: Catalog, config: Config,
                  also_lacking: Mapping[str, str] | None = None) -> str:
        """A checked query in the catalog's names, in the source's names; Lacking if it reads a
        series the source cannot give (or one of `also_lacking`, recordings built on such)."""
        if self.is_catalog:
            return expr
        names = self.series_map(catalog, config)

        def replace(token: str) -> str:
            if also_lacking and token in also_lacking:
                raise Lacking(token, also_lacking[token])
            reason = self.lacking_reason(token, catalog, config)
            if reason is not None:
                raise Lacking(token, reason)
            return names.get(token) or self.labels.get(token) or token

        return map_identifiers(expr, replace)

    def translate_template(self, text: str) -> str:
        """Grafana legends ({{experiment}}) and alert templates ($labels.experiment) in the source's labels."""
        for old, new in self.labels.items():
            text = re.sub(r"(\{\{\s*|\$labels\.)" + re.escape(old) + r"\b", lambda m: m.group(1) + new, text)
        return text


_IDENTIFIER = re.compile(r"(?<![A-Za-z0-9_:.$])[A-Za-z_:][A-Za-z0-9_:]*")


def map_identifiers(expr: str, replace) -> str:
    """`expr` with every identifier outside quoted strings (metric and label names, functions,
    keywords) passed through `replace`."""
    out, i = [], 0
    while i < len(expr):
        quote = min((p for p in (expr.find(q, i) for q in "\"'`") if p >= 0), default=len(expr))
        out.append(_IDENTIFIER.sub(lambda m: replace(m.group(0)), expr[i:quote]))
        if quote == len(expr):
            break
        end = quote + 1
        while end < len(expr) and expr[end] != expr[quote]:
            end += 2 if expr[end] == "\\" and expr[quote] != "`" else 1
        out.append(expr[quote:end + 1])
        i = end + 1
    return "".join(out)
