"""A recorded run backfilled into a temporary Prometheus, and the dashboards' queries over it.

The run goes through the same path as a backtest (dashgen/replay/backtest/engine.py): read and placed
on the clock by dashgen/replay/backfill.py, written as the exporter's scrapes, turned into blocks by
promtool and served by a query-only Prometheus. The project's rules are evaluated over the run
first, as the backtest evaluates them, and the alerts that fired are written as Prometheus'
`ALERTS` series, so the firing-alerts panel and annotation show them. Every panel's queries are
then evaluated as Grafana would over the whole run: a range query per target, the run's labels
in the template variables, `$__rate_interval` from the scrape interval.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path
from typing import Any, Iterator

from dashgen.catalog import Catalog, Origin
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.queries.promql import metrics_in, substitute_variables
from dashgen.config import Config
from dashgen.promtool import find_binary
from dashgen.records import record
from dashgen.replay.backfill import RecordedRun, Timing, create_blocks, read_run, run_labels
from dashgen.replay.openmetrics import write_openmetrics
from dashgen.replay.backtest.alert_series import alerts_openmetrics
from dashgen.replay.backtest.engine import evaluate_rules, serve_tsdb
from dashgen.replay.backtest.evaluation import query_range
from dashgen.replay.backtest.rule_sets import RuleSet, served_statistics
from dashgen.replay.prometheus_server import PrometheusServer
from dashgen.replay.work_dir import work_dir

# About as many points as a 1000-pixel-wide Grafana panel asks for.
POINTS_PER_PANEL = 300
_LEGEND_LABEL = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


@record
class Series:
    ref_id: str  # the query it came from
    name: str  # its legend: the query's legendFormat with the series' labels filled in
    labels: dict[str, str]
    times: tuple[float, ...]  # Unix seconds
    values: tuple[float, ...]


@record(frozen=False)
class PanelResult:
    title: str = ""  # with the variables filled in, as Grafana shows it
    series: list[Series] = field(default_factory=list)
    reads_verl: bool = False  # it queries the verl exporter's series: the run's own data

    @property
    def has_data(self) -> bool:
        return any(s.values for s in self.series)


@record
class PreviewRun:
    run: RecordedRun
    start: float
    end: float
    step: float  # seconds between the points of each query


@contextmanager
def backfilled(path: Path, config: Config, catalog: Catalog, timing: Timing,
               rules: RuleSet | None = None) -> Iterator[tuple[PrometheusServer, PreviewRun]]:
    """A query-only Prometheus holding the run at `path`; removed when the block ends.

    The rules are evaluated over the run as a backtest does (`evaluate_rules`): the recordings'
    results and the `ALERTS` series of the alerts that fired are in the TSDB beside the run's, and the
    statistics over steps they read are the run's as the exporter would serve them."""
    find_binary("promtool")
    find_binary("prometheus")
    rules = rules or RuleSet([], [])
    recordings, alerts = rules.recordings, rules.alerts
    wanted = served_statistics([rules], config.step_window_floor.seconds)
    run = read_run(path, run_labels(path, config.verl_job), timing, catalog=catalog, step_statistics=wanted)
    start, end = run.times[0] - timing.scrape_interval, run.served_until
    step = max(timing.scrape_interval, round((end - start) / POINTS_PER_PANEL / timing.scrape_interval)
               * timing.scrape_interval)
    with work_dir("preview") as tmp:
        workdir = tmp
        scraped = workdir / "run.om"
        with open(scraped, "w") as handle:
            write_openmetrics([run], handle, timing.scrape_interval)
        create_blocks(scraped, workdir / "tsdb", run.end - run.times[0])
        if recordings or alerts:
            per_alert, _ = evaluate_rules(workdir, list(recordings), list(alerts), [run])
            fired = alerts_openmetrics(list(alerts), per_alert, [run], timing.scrape_interval)
            if fired:
                (workdir / "alerts.om").write_text(fired)
                create_blocks(workdir / "alerts.om", workdir / "tsdb", run.end - run.times[0])
        # A scrape marks a series stale once a step stops logging it (testing, save_checkpoint);
        # blocks cannot, so the lookback is cut to two scrapes to show the same gaps.
        lookback = f"--query.lookback-delta={2 * timing.scrape_interval:g}s"
        with serve_tsdb(workdir, (lookback,)) as server:
            yield server, PreviewRun(run, start, end, step)


def template_values(model: dict[str, Any], preview: PreviewRun, scrape_interval: float) -> dict[str, str]:
    """Each variable of the dashboard set to the run (an unknown one to `.*`), and Grafana's intervals."""
    values = {variable["name"]: ".*" for variable in model.get("templating", {}).get("list", [])}
    values.update({name: regex_literal(value) for name, value in preview.run.labels.items() if name in values})
    rate_interval = max(4 * scrape_interval, preview.step + scrape_interval)
    values.update({"__rate_interval": f"{rate_interval:.0f}s", "__interval": f"{preview.step:.0f}s",
                   "__range": f"{preview.end - preview.start:.0f}s"})
    return values


_REGEX_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")


def regex_literal(value: str) -> str:
    """`value` as a regular expression matching only itself, inside a PromQL double-quoted string
    (as Grafana writes a picked value into `=~"$var"`): each regex escape's backslash doubled."""
    return _REGEX_SPECIAL.sub(r"\\\\\1", value).replace('"', '\\"')


def legend(template: str, labels: dict[str, str]) -> str:
    if not template:
        return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__") + "}"
    return _LEGEND_LABEL.sub(lambda m: labels.get(m.group(1), ""), template).strip()


def evaluate(server: PrometheusServer, expr: str, preview: PreviewRun, where: str) -> list[dict]:
    span = (round(preview.start * 1000), round(preview.end * 1000))
    return query_range(server, expr, span, round(preview.step * 1000), where)


def preview_data(server: PrometheusServer, model: dict[str, Any], preview: PreviewRun, catalog: Catalog,
                 scrape_interval: float, origin: str) -> tuple[dict[int, PanelResult], dict[str, list[float]]]:
    """Panel id -> what its queries returned; annotation name -> the times its events begin."""
    values = template_values(model, preview, scrape_interval)
    results: dict[int, PanelResult] = {}
    for panel in iter_panels(model):
        if panel.get("type") == "row":
            continue
        # In a title a variable shows its value: the run's label, or nothing for an unpicked one.
        result = PanelResult(substitute_variables(panel["title"], {**{k: "" for k in values}, **preview.run.labels}))
        for target in panel.get("targets", []):
            expr = substitute_variables(target["expr"], values, ".*")
            origins = {catalog[name].origin for name in metrics_in(expr) if name in catalog}
            result.reads_verl |= Origin.VERL in origins
            for found in evaluate(server, expr, preview, f"{origin}, panel {panel['title']!r}"):
                labels = found["metric"]
                result.series.append(Series(target["refId"], legend(target.get("legendFormat", ""), labels), labels,
                                            tuple(float(at) for at, _ in found["values"]),
                                            tuple(float(value) for _, value in found["values"])))
        results[panel["id"]] = result
    events: dict[str, list[float]] = {}
    for annotation in model.get("annotations", {}).get("list", []):
        expr = substitute_variables(annotation["expr"], values, ".*")
        starts: list[float] = []
        for found in evaluate(server, expr, preview, f"{origin}, annotation {annotation['name']!r}"):
            # A scraped series vanishes between the steps that log it; a backfilled one is held for
            # Prometheus' lookback (see dashgen/replay/backfill.py), so a new value starts an event too.
            previous = None
            for at, value in found["values"]:
                if previous is None or at - previous[0] > preview.step * 1.5 or value != previous[1]:
                    starts.append(float(at))
                previous = (at, value)
        events[annotation["name"]] = sorted(starts)
    return results, events
