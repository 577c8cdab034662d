"""Compile a dashboard definition (dashgen.model) into Grafana dashboard JSON.

The path: check every query against the catalog -> lay panels out on Grafana's 24-column
grid -> build grafanalib objects -> normalise grafanalib's output into a modern, null-free
model (schemaVersion 39) that diffs well.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any, Iterable

import attr
import grafanalib.core as G

from dashgen.catalog import Catalog
from dashgen.compiler.dashboards.thresholds import ref_id, threshold_queries, thresholds_json, web_link
from dashgen.compiler.queries.selectors import checked_expression, dashboard_selectors, expand_selectors
from dashgen.compiler.queries.source_queries import Lacking, SourceQueries
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.model import (GRID_COLUMNS, Annotation, Dashboard, DashboardLink, Heatmap, Panel, Position, Query, Row,
                           Stat, StepChart, TimeSeries, Variable)

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_UID = re.compile(r"[A-Za-z0-9_-]{1,40}")

# grafanalib fields that are legacy, UI state or defaults Grafana fills in itself.
_LEGACY_DASHBOARD_KEYS = {"__inputs", "gnetId", "hideControls", "rows", "sharedCrosshair", "style", "version"}
_LEGACY_PANEL_KEYS = {"cacheTimeout", "editable", "error", "height", "hideTimeOverride", "interval", "maxDataPoints",
                      "maxPerRow", "minSpan", "repeat", "repeatDirection", "span", "timeFrom", "timeShift",
                      "transparent"}
_LEGACY_TARGET_KEYS = {"hide", "instant", "interval", "intervalFactor", "metric", "query", "step", "target"}
_LEGACY_VARIABLE_KEYS = {"auto", "auto_count", "auto_min", "tags", "tagsQuery", "tagValuesQuery", "useTags"}


@attr.s
class ModernHeatmap(G.Panel):
    """Grafana's heatmap panel (v10+) fed with ready-made rows: one time series per row."""

    unit = attr.ib(default="none")
    colorScheme = attr.ib(default="Viridis")
    valueMin = attr.ib(default=None)
    valueMax = attr.ib(default=None)

    def to_json_data(self):
        color = {"mode": "scheme", "scheme": self.colorScheme, "scale": "linear", "steps": 64,
                 "fill": "dark-orange", "exponent": 0.5, "reverse": False}
        if self.valueMin is not None:
            color["min"] = self.valueMin
        if self.valueMax is not None:
            color["max"] = self.valueMax
        return self.panel_json({
            "type": "heatmap",
            "fieldConfig": {"defaults": {"custom": {"hideFrom": {"legend": False, "tooltip": False, "viz": False},
                                                    "scaleDistribution": {"type": "linear"}}},
                            "overrides": []},
            "options": {
                "calculate": False,
                "cellGap": 1,
                # yAxis.unit would format the row labels; the values' unit belongs here.
                "cellValues": {"unit": self.unit},
                "color": color,
                "exemplars": {"color": "rgba(255,0,255,0.7)"},
                # The default filter hides cells <= 1e-9: an idle GPU (0%) is exactly what to see.
                "filterValues": {"le": -1e-9},
                "legend": {"show": True},
                "rowsFrame": {"layout": "auto"},
                "showValue": "never",
                "tooltip": {"mode": "single", "showColorScale": True, "yHistogram": False},
                "yAxis": {"axisPlacement": "left", "reverse": False},
            },
        })


@attr.s
class ModernStat(G.Panel):
    """Grafana's stat panel: the newest value of each series, coloured by the thresholds."""

    def to_json_data(self):
        return self.panel_json({
            "type": "stat",
            "fieldConfig": {"defaults": {"color": {"mode": "thresholds"}}, "overrides": []},
            # Just the number: on-call reads it at a glance.
            "options": {"graphMode": "none", "reduceOptions": {"calcs": ["lastNotNull"], "fields": "",
                                                                "values": False}},
        })


@attr.s
class StepXYChart(G.Panel):
    """Grafana's XY chart (v11+) drawing a value against the training step, one series per run.

    Both queries come back as tables (one row per sample, a column per label); `merge` joins
    them row by row where time and labels agree, `partitionByValues` splits the result into
    one frame per experiment, and the chart's auto mapping draws each frame with the step
    (query A's value) on x and the value (query B's) on y."""

    unit = attr.ib(default="none")
    run_label = attr.ib(default="experiment")  # the metric source's name of the label

    def to_json_data(self):
        by_name = {"id": "byName", "options": f"Value #{ref_id(0)}"}
        return self.panel_json({
            "type": "xychart",
            "fieldConfig": {"defaults": {"unit": self.unit, "custom": {"show": "lines"}}, "overrides": []},
            "options": {"mapping": "auto", "series": [{"x": {"matcher": by_name}}],
                        "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom", "calcs": []},
                        "tooltip": {"mode": "multi", "sort": "none"}},
            "transformations": [{"id": "merge", "options": {}},
                                {"id": "partitionByValues", "options": {"fields": [self.run_label],
                                                                        "naming": {"asLabels": True}}}],
        })


def compile_dashboard(definition: Dashboard, config: Config, catalog: Catalog, origin: str,
                      queries: SourceQueries | None = None) -> dict[str, Any]:
    """The dashboard's normalised JSON model; BuildError naming `origin` and the panel on any problem.
    Queries are in the metric source's names (`queries`; by default the config's); a panel reading
    a series the source lacks is left out."""
    where = f"{origin}: dashboard {definition.uid!r}"
    if not _UID.fullmatch(definition.uid):
        raise BuildError(f"{where}: uid must be 1-40 characters of letters, digits, '-' or '_'")
    selectors = dashboard_selectors(config)
    queries = queries or SourceQueries(config)

    def expr_of(text: str, panel_title: str) -> str:
        place = f"{where}, panel {panel_title!r}"
        return queries.translate(checked_expression(text, selectors, catalog, place)[0], catalog, place)

    built = _rows(definition, config, catalog, selectors, queries, expr_of, where)
    dashboard = G.Dashboard(
        title=definition.title,
        uid=definition.uid,
        description=definition.description,
        tags=list(definition.tags),
        panels=built,
        editable=False,
        graphTooltip=1,
        refresh=config.dashboard_refresh,
        schemaVersion=SCHEMA_VERSION,
        time=G.Time(config.dashboard_time_from, "now"),
        timezone="browser",
        templating=G.Templating(list=[_datasource_variable(), *(
            _query_variable(v, queries.translate(expand_selectors(v.query, selectors), catalog,
                                                 f"{where}, variable {v.name!r}", checked=False))
            for v in definition.variables)]),
    )
    raw = json.loads(json.dumps(dashboard.to_json_data(), default=_json_data))
    model = _normalise_dashboard(raw)
    # After normalisation: these are written as Grafana wants them, nothing to drop.
    model["links"] = _dashboard_links(config) + [_dashboard_link(link) for link in definition.links]
    annotations = [_annotation(a, expr_of(a.expr, f"annotation {a.name}")) for a in definition.annotations]
    if annotations:
        model["annotations"] = {"list": annotations}
    return model


def _rows(definition: Dashboard, config: Config, catalog: Catalog, selectors: dict[str, str],
          queries: SourceQueries, expr_of, where: str) -> list[Any]:
    """The dashboard's rows as grafanalib panels, each open row followed by its panels; a panel
    reading a series the metric source lacks is left out (queries.left_out says why)."""
    panels = _layout(definition, where)
    ids: dict[int, str] = {}
    built: list[Any] = []
    for row, row_y, placed in panels:
        children = []
        for panel, pos in placed:
            panel_id = _panel_id(definition.uid, row.title, panel.title)
            if panel_id in ids:
                raise BuildError(f"{where}: panels {ids[panel_id]!r} and {panel.title!r} in row {row.title!r} "
                                 f"get the same id; give them different titles")
            ids[panel_id] = panel.title
            if isinstance(panel, StepChart):
                _check_pairs_with_step(panel, selectors, catalog, where)
            query_format = "table" if isinstance(panel, StepChart) else "time_series"
            try:
                targets = [G.Target(expr=expr_of(q.expr, panel.title), legendFormat=queries.template(q.legend),
                                    refId=ref_id(i), datasource=DATASOURCE, format=query_format)
                           for i, q in enumerate((*panel.queries, *threshold_queries(panel, where)))]
            except Lacking as lack:
                queries.left_out[(definition.uid, panel.title)] = f"it reads {lack.name}: {lack.reason}"
                continue
            if not targets:
                raise BuildError(f"{where}, panel {panel.title!r}: a panel needs at least one query")
            children.append(_grafanalib_panel(panel, panel_id, targets, pos, config, queries.label("experiment")))
        row_panel = G.RowPanel(title=row.title, id=_panel_id(definition.uid, row.title, ""),
                               gridPos=G.GridPos(h=1, w=GRID_COLUMNS, x=0, y=row_y), collapsed=row.collapsed,
                               panels=children if row.collapsed else [])
        built.append(row_panel)
        if not row.collapsed:
            built.extend(children)
    return built


def _dashboard_links(config: Config) -> list[dict[str, Any]]:
    """The runbook, and every dashgen dashboard (by tag) in a drop-down, keeping time and run."""
    dashboards = {**web_link("Dashboards", ""), "type": "dashboards", "tags": ["dashgen"], "asDropdown": True,
                  "includeVars": True, "keepTime": True, "icon": "dashboard", "targetBlank": False}
    del dashboards["url"]
    return [web_link("Runbook", config.runbook_base_url), dashboards]


# The labels a StepChart's value must carry, and only those, to pair row by row with the step.
STEP_PAIRING_LABELS = frozenset({"job", "instance", "project", "experiment"})


def _check_pairs_with_step(chart: StepChart, selectors: dict[str, str], catalog: Catalog, where: str) -> None:
    place = f"{where}, panel {chart.title!r}"
    labels = checked_expression(chart.value.expr, selectors, catalog, place)[1].labels
    if labels != STEP_PAIRING_LABELS:
        raise BuildError(f"{place}: a step chart's value must carry exactly the run's labels "
                         f"({', '.join(sorted(STEP_PAIRING_LABELS))}) to pair with the step at each time; it carries "
                         f"{', '.join(sorted(labels)) or 'none'}. Aggregate the others away, e.g. "
                         f"avg by (job, instance, project, experiment) (...)\n  expr: {chart.value.expr}")


def _dashboard_link(link: DashboardLink) -> dict[str, Any]:
    """Another dashboard by uid, keeping the time range and the picked run."""
    return {**web_link(link.title, f"/d/{link.uid}"), "targetBlank": False, "includeVars": True, "keepTime": True,
            "icon": "dashboard"}


def _annotation(annotation: Annotation, expr: str) -> dict[str, Any]:
    # A Prometheus annotation query: one event per series and run of samples.
    return {"name": annotation.name, "datasource": DATASOURCE, "enable": True, "iconColor": annotation.color,
            "expr": expr, "titleFormat": annotation.title, "useValueForTime": False}


def _layout(definition: Dashboard, where: str) -> list[tuple[Row, int, list[tuple[Panel, Position]]]]:
    """Row by row: each row header, then its panels flowed left to right, wrapping at 24 columns."""
    result = []
    y = 0
    for row in definition.rows:
        row_y = y
        top = row_y + 1
        placed: list[tuple[Panel, Position]] = []
        x, line_y, line_h = 0, top, 0
        for panel in row.panels:
            if panel.position is not None:
                p = panel.position
                pos = Position(p.x, top + p.y, p.w, p.h)
            else:
                if x + panel.width > GRID_COLUMNS:
                    x, line_y, line_h = 0, line_y + line_h, 0
                pos = Position(x, line_y, panel.width, panel.height)
                x, line_h = x + panel.width, max(line_h, panel.height)
            if pos.w < 1 or pos.h < 1 or pos.x < 0 or pos.y < top or pos.x + pos.w > GRID_COLUMNS:
                raise BuildError(f"{where}, panel {panel.title!r}: does not fit the {GRID_COLUMNS}-column grid "
                                 f"(x={pos.x}, w={pos.w}, h={pos.h})")
            placed.append((panel, pos))
        _check_overlaps(placed, where, row.title)
        bottom = max((p.y + p.h for _, p in placed), default=top)
        y = top if row.collapsed else bottom
        result.append((row, row_y, placed))
    return result


def _check_overlaps(placed: list[tuple[Panel, Position]], where: str, row_title: str) -> None:
    for i, (a, pa) in enumerate(placed):
        for b, pb in placed[i + 1:]:
            if pa.x < pb.x + pb.w and pb.x < pa.x + pa.w and pa.y < pb.y + pb.h and pb.y < pa.y + pa.h:
                raise BuildError(f"{where}, row {row_title!r}: panels {a.title!r} and {b.title!r} overlap "
                                 f"({pa} and {pb}); move one with its position")


def _panel_id(uid: str, row_title: str, panel_title: str) -> int:
    # Derived from names, so adding a panel does not renumber the others (small diffs).
    return zlib.crc32(f"{uid}/{row_title}/{panel_title}".encode()) % 1_000_000 + 1


def _grafanalib_panel(panel: Panel, panel_id: int, targets: list, pos: Position, config: Config,
                      run_label: str = "experiment"):
    common = dict(title=panel.title, id=panel_id, description=panel.description or None, dataSource=DATASOURCE,
                  targets=targets, gridPos=G.GridPos(h=pos.h, w=pos.w, x=pos.x, y=pos.y))
    if isinstance(panel, Stat):
        return ModernStat(**common, extraJson=thresholds_json(panel.thresholds, config, panel.unit, len(panel.queries)))
    if isinstance(panel, TimeSeries):
        extra = thresholds_json(panel.thresholds, config, panel.unit, len(panel.queries))
        custom = extra["fieldConfig"]["defaults"].setdefault("custom", {})
        if panel.thresholds:  # drawn as lines across the graph
            custom["thresholdsStyle"] = {"mode": "line"}
        if panel.stacked:
            custom["stacking"] = {"group": "A", "mode": "normal"}
        return G.TimeSeries(**common, unit=panel.unit, valueMin=panel.min, valueMax=panel.max,
                            fillOpacity=panel.fill_opacity, legendCalcs=["lastNotNull"], tooltipMode="multi",
                            showPoints="never", spanNulls=True, overrides=_colour_overrides(panel.queries),
                            extraJson={"options": {"legend": {"showLegend": True}}, **extra})
    if isinstance(panel, StepChart):
        return StepXYChart(**common, unit=panel.unit, run_label=run_label)
    if isinstance(panel, Heatmap):
        return ModernHeatmap(**common, unit=panel.unit, colorScheme=panel.color_scheme,
                             valueMin=panel.min, valueMax=panel.max)
    raise TypeError(f"not a panel: {panel!r}")


def _colour_overrides(queries: tuple[Query, ...]) -> list[dict[str, Any]]:
    """A fixed colour for each query that names one (its series, matched by the query's refId)."""
    return [{"matcher": {"id": "byFrameRefID", "options": ref_id(i)},
             "properties": [{"id": "color", "value": {"fixedColor": q.color, "mode": "fixed"}}]}
            for i, q in enumerate(queries) if q.color]


def _datasource_variable() -> dict[str, Any]:
    return {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
            "hide": 0, "includeAll": False, "multi": False, "refresh": 1, "regex": "", "options": [],
            "current": {}}


def _query_variable(variable: Variable, query: str) -> G.Template:
    return G.Template(name=variable.name, label=variable.label, query=query, dataSource=DATASOURCE,
                      multi=variable.multi, includeAll=variable.include_all, refresh=2, sort=1,
                      allValue=variable.all_value if variable.include_all else None, default="All" if variable.include_all else None)


def _normalise_dashboard(raw: dict[str, Any]) -> dict[str, Any]:
    for key in _LEGACY_DASHBOARD_KEYS:
        raw.pop(key, None)
    raw["panels"] = [_normalise_panel(p) for p in raw["panels"]]
    raw["templating"]["list"] = [_normalise_variable(v) for v in raw["templating"]["list"]]
    # Grafana assigns the numeric id; provisioned files must not carry one.
    for key in ("id", "links", "timepicker", "annotations"):
        raw.pop(key, None)
    return _without_defaults(_drop_nulls(raw), _DASHBOARD_DEFAULTS)


# Values Grafana assumes when a key is absent (its panel plugins' defaults and the dashboard
# model's), so writing them only adds bytes for a reviewer to read past. A key is dropped
# when its value equals the default here; a mapping left empty is dropped with it. Keys the
# panel schemas require (legend placement, tooltip sort, the heatmap's colour steps...) stay.
_TIMESERIES_DEFAULTS: dict[str, Any] = {
    "fieldConfig": {"defaults": {
        "color": {"mode": "palette-classic"},
        "mappings": [],
        "unit": "none",  # the display processor formats a field without a unit as "none"
        "custom": {
            "axisBorderShow": False, "axisCenteredZero": False, "axisColorMode": "text", "axisLabel": "",
            "axisPlacement": "auto", "barAlignment": 0, "drawStyle": "line", "fillOpacity": 0,
            "gradientMode": "none", "hideFrom": {"legend": False, "tooltip": False, "viz": False},
            "insertNulls": False, "lineInterpolation": "linear", "lineWidth": 1, "pointSize": 5,
            "scaleDistribution": {"type": "linear", "log": 2}, "showPoints": "auto", "spanNulls": False,
            "stacking": {"group": "A", "mode": "none"}, "thresholdsStyle": {"mode": "off"},
        },
    }},
    "options": {"legend": {"displayMode": "list"}},
}
_HEATMAP_DEFAULTS: dict[str, Any] = {
    "fieldConfig": {"defaults": {"custom": {"hideFrom": {"legend": False, "tooltip": False, "viz": False},
                                            "scaleDistribution": {"type": "linear"}}}},
    "options": {"calculate": False, "cellGap": 1, "color": {"mode": "scheme", "scale": "exponential"},
                "rowsFrame": {"layout": "auto"}, "tooltip": {"yHistogram": False, "showColorScale": False},
                "yAxis": {"reverse": False}},
}
_STAT_DEFAULTS: dict[str, Any] = {
    "fieldConfig": {"defaults": {"color": {"mode": "thresholds"}, "mappings": []}},
    "options": {"colorMode": "value", "graphMode": "area", "justifyMode": "auto", "orientation": "auto",
                "textMode": "auto", "wideLayout": True, "showPercentChange": False,
                "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}},
}
_PANEL_DEFAULTS = {"timeseries": _TIMESERIES_DEFAULTS, "heatmap": _HEATMAP_DEFAULTS, "stat": _STAT_DEFAULTS}
# Prometheus queries: no range/instant flags means a range query; `format` is time_series.
_TARGET_DEFAULTS: dict[str, Any] = {"format": "time_series", "range": True, "instant": False, "hide": False,
                                    "legendFormat": "", "editorMode": "builder", "exemplar": False}
_VARIABLE_DEFAULTS: dict[str, Any] = {"hide": 0, "options": [], "regex": "", "current": {}, "skipUrlSync": False,
                                      "multi": False, "includeAll": False}
_DASHBOARD_DEFAULTS: dict[str, Any] = {"editable": True, "graphTooltip": 0, "timezone": "", "tags": [],
                                       "description": "", "liveNow": False, "fiscalYearStartMonth": 0,
                                       "weekStart": "", "time": {"from": "now-6h", "to": "now"}}


def _without_defaults(value: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    result = {}
    for key, item in value.items():
        default = defaults.get(key, _NO_DEFAULT)
        if item == default:
            continue
        if isinstance(item, dict) and isinstance(default, dict):
            item = _without_defaults(item, default)
            if not item:
                continue
        result[key] = item
    return result


_NO_DEFAULT = object()


def _normalise_panel(panel: dict[str, Any]) -> dict[str, Any]:
    for key in _LEGACY_PANEL_KEYS:
        panel.pop(key, None)
    for key in ("links", "transformations"):
        if not panel.get(key):
            panel.pop(key, None)
    if panel["type"] == "row":
        for key in ("datasource", "fieldConfig", "targets", "description"):
            panel.pop(key, None)
        panel["panels"] = [_normalise_panel(p) for p in panel.get("panels", [])]
        return panel
    # grafanalib's empty threshold list is not a valid threshold set; Grafana's default is.
    if not panel["fieldConfig"]["defaults"].get("thresholds", {}).get("steps"):
        panel["fieldConfig"]["defaults"].pop("thresholds", None)
    panel["targets"] = [_normalise_target(t, panel.get("datasource")) for t in panel["targets"]]
    slim = _without_defaults(panel, _PANEL_DEFAULTS.get(panel["type"], {}))
    # The schema wants both halves of a field config once there is one.
    if "fieldConfig" in slim:
        slim["fieldConfig"].setdefault("defaults", {})
        slim["fieldConfig"].setdefault("overrides", [])
    return slim


def _normalise_target(target: dict[str, Any], panel_datasource: Any) -> dict[str, Any]:
    for key in _LEGACY_TARGET_KEYS:
        target.pop(key, None)
    if target.get("datasource") == panel_datasource:
        target.pop("datasource")  # a query uses its panel's data source unless it names another
    return _without_defaults(target, _TARGET_DEFAULTS)


def _normalise_variable(variable: dict[str, Any]) -> dict[str, Any]:
    for key in _LEGACY_VARIABLE_KEYS:
        variable.pop(key, None)
    if variable["type"] == "query":
        variable["definition"] = variable["query"]
        variable["query"] = {"query": variable["query"], "refId": "PrometheusVariableQueryEditor-VariableQuery"}
        variable["current"] = ({"selected": True, "text": ["All"], "value": ["$__all"]}
                               if variable.get("includeAll") else {})
    return _without_defaults(variable, _VARIABLE_DEFAULTS)




def _drop_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        # A threshold's base step is {"color": ..., "value": null}: there null means -infinity.
        keep_null = {"value"} if set(value) == {"color", "value"} else set()
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None or k in keep_null}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _json_data(value: Any) -> Any:
    """grafanalib's objects as JSON data (what its DashboardEncoder does, without importing its CLI module)."""
    to_json_data = getattr(value, "to_json_data", None)
    if to_json_data is None:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    return to_json_data()


def metrics_used(definition: Dashboard, config: Config) -> dict[str, list[str]]:
    """Panel title -> the metric names its queries select (for `dashgen list`)."""
    from dashgen.compiler.queries.promql import metrics_in

    selectors = dashboard_selectors(config)
    return {panel.title: sorted(set().union(*(metrics_in(expand_selectors(q.expr, selectors))
                                              for q in panel.queries)))
            for row in definition.rows for panel in row.panels}


def iter_panels(model: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for panel in model.get("panels", []):
        yield panel
        yield from panel.get("panels", [])
