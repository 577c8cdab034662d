"""A panel's thresholds in Grafana's JSON: the field config's steps, a link to the runbook of each alert
behind one, and for a threshold the run's own data sets (`Threshold.query`), the query that sets it and
the "Config from query results" transformation that makes its newest value the threshold. Also the
refIds and web links the dashboard's other panels share."""

from __future__ import annotations

from typing import Any

from dashgen.compiler.output.rendering import runbook_anchor
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.model import Panel, Query, Stat, Threshold, TimeSeries


def ref_id(index: int) -> str:
    """A target's refId: A, B, ..., Z, AA, ..."""
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(ord("A") + rem) + letters
    return letters


def web_link(title: str, url: str) -> dict[str, Any]:
    """A link to a web page, with every field Grafana's link model requires."""
    return {"title": title, "type": "link", "url": url, "targetBlank": True, "icon": "external link",
            "tooltip": "", "tags": [], "asDropdown": False, "includeVars": False, "keepTime": False}


def threshold_queries(panel: Panel, where: str) -> tuple[Query, ...]:
    """The queries that set a panel's thresholds, queried after its own (refIds following theirs)."""
    thresholds = panel.thresholds if isinstance(panel, (Stat, TimeSeries)) else ()
    queried = tuple(t.query for t in thresholds if t.query is not None)
    if queried and len(thresholds) > 1:
        raise BuildError(f"{where}, panel {panel.title!r}: a threshold set by a query must be the panel's only "
                         f"threshold (Grafana's config from query results sets the first one)")
    return queried


def thresholds_json(thresholds: tuple[Threshold, ...], config: Config, unit: str, queries: int) -> dict[str, Any]:
    """Field config for a panel's thresholds, links to the runbook of the alerts behind them, and for a
    threshold set by a query (the target after the panel's `queries`), the transformation that sets it."""
    extra: dict[str, Any] = {"fieldConfig": {"defaults": {"unit": unit}}}
    if not thresholds:
        return extra
    steps = [{"color": "green", "value": None},
             *({"color": t.color, "value": t.value} for t in sorted(thresholds, key=lambda t: t.value))]
    extra["fieldConfig"]["defaults"]["thresholds"] = {"mode": "absolute", "steps": steps}
    links = [web_link(f"Runbook: {t.alert}", f"{config.runbook_base_url}#{runbook_anchor(t.alert)}")
             for t in thresholds if t.alert]
    if links:
        extra["links"] = links
    queried = [t for t in thresholds if t.query is not None]
    if queried:
        # The threshold query's frame configures the panel's others: its newest value (the mapping's default
        # reducer) becomes the first step above the base, and the frame itself is not drawn.
        extra["transformations"] = [{"id": "configFromData", "options": {
            "configRefId": ref_id(queries),
            "mappings": [{"fieldName": queried[0].query.legend, "handlerKey": "threshold1"}]}}]
    return extra
