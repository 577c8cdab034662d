"""dashgen's own exporter (`dashgen export`, dashgen/runtime/exporter.py): the default source.

It publishes the catalog's names as they are (`verl_<key with / and - as _>`, dashgen/catalog.py's
`verl_metric_name`), labelled `project` and `experiment`, under the scrape job `verl_job`, with
the series only it derives: the step timestamp, the run state, the non-finite streaks.
"""

from dashgen.sources.metric_source import MetricSource

EXPORTER = MetricSource(
    name="exporter",
    title="dashgen's exporter (`dashgen export` following verl's step log)",
    computes_step_windows=True,
)
