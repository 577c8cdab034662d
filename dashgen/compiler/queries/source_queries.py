"""Queries in the chosen metric source's names (dashgen/sources/metric_source.py).

Definitions are checked in the catalog's names first, as for every source; then each query is
translated to the source's series and run labels and checked again, against the source's
catalog. A query that reads a series the source lacks raises `Lacking`: its alert is listed as
unavailable, its panel left out, its recording lacking in turn for whatever reads it.
"""

from __future__ import annotations

from dashgen.catalog import Catalog
from dashgen.compiler.queries.promql import QueryError, check_expression, metrics_in
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.model import Recording
from dashgen.sources.chosen import metric_source
from dashgen.sources.metric_source import Lacking, MetricSource

__all__ = ["Lacking", "SourceQueries"]


class SourceQueries:
    """The chosen source for one build: what it lacks grows as recordings built on a lacking series
    are met."""

    def __init__(self, config: Config):
        self.config = config
        self.source: MetricSource = metric_source(config)
        self.lacking: dict[str, str] = {}  # recordings that read a series the source lacks -> why
        self.left_out: dict[tuple[str, str], str] = {}  # (dashboard uid, panel title) -> why
        self._catalogs: dict[int, tuple[Catalog, Catalog]] = {}
        self._derived = self.source.derived(config)
        self._recording_reads: dict[str, frozenset[str]] = {}  # recording -> rebuilt series it reads

    def catalog(self, catalog: Catalog) -> Catalog:
        """The source's catalog of `catalog` (the catalog's names plus recordings)."""
        if id(catalog) not in self._catalogs:
            self._catalogs[id(catalog)] = (catalog, self.source.catalog(catalog, self.config))
        return self._catalogs[id(catalog)][1]

    def translate(self, expr: str, catalog: Catalog, where: str, checked: bool = True) -> str:
        """A checked query (catalog names) in the source's names, checked against its catalog
        (unless `checked` is False: a Grafana variable's label_values(...), not PromQL)."""
        if self.source.is_catalog:
            return expr
        out = self.source.translate(expr, catalog, self.config, self.lacking)
        if not checked:
            return out
        try:
            check_expression(out, self.catalog(catalog))
        except QueryError as exc:
            raise BuildError(f"{where}: in the names of source {self.source.name!r}: {exc}\n  expr: {out}") from None
        return out

    def template(self, text: str) -> str:
        return self.source.translate_template(text)

    def label(self, name: str) -> str:
        return self.source.label(name)

    def labels_of(self, names: str) -> str:
        """A comma-separated list of labels (an on(...) clause's) in the source's."""
        return ", ".join(self.label(name.strip()) for name in names.split(","))

    def derived_recordings(self, catalog: Catalog) -> tuple[Recording, ...]:
        """The source's recordings that rebuild catalog series from its own, checked."""
        recordings = []
        for derived in self._derived:
            try:
                check_expression(derived.expr, self.catalog(catalog))
            except QueryError as exc:
                raise BuildError(f"source {self.source.name!r}: recording {derived.record!r}: {exc}") from None
            recordings.append(Recording(derived.record, derived.expr, derived.help))
        return tuple(recordings)

    def rebuilt_read(self, expr: str) -> frozenset[str]:
        """The rebuilt (derived) series a query in catalog names reads, also through recordings."""
        if not self._derived:
            return frozenset()
        read = metrics_in(expr)
        meanings = {d.meaning for d in self._derived}
        return frozenset({m for m in read if m in meanings}.union(*(self._recording_reads.get(m, ()) for m in read)))

    def remember(self, record: str, expr: str) -> None:
        """A recording (catalog names), so what reads it is known to read what it reads."""
        if self._derived:
            self._recording_reads[record] = self.rebuilt_read(expr)

    def losses(self, expr: str) -> tuple[str, ...]:
        """What the rebuilt series a query reads lose against the exporter's, for its runbook."""
        read = self.rebuilt_read(expr)
        return tuple(d.loses for d in self._derived if d.meaning in read and d.loses)

    def input_series(self, selector: str, catalog: Catalog) -> str | None:
        """A promtool input series (catalog names) in the source's; None for one the source records itself."""
        if self.source.is_catalog:
            return selector
        derived = {d.record for d in self._derived}
        out = self.source.translate(selector, catalog, self.config)
        return None if out.split("{", 1)[0] in derived else out
