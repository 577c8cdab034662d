"""The registry of metric sources: every source a project may read (`source:` in dashgen.yaml), by
name, and the one a project chose. A new source is a module of dashgen/sources/ listed here."""

from dashgen.config import Config
from dashgen.sources.exporter import EXPORTER
from dashgen.sources.metric_source import MetricSource
from dashgen.sources.rl_insight import RL_INSIGHT

SOURCES = {source.name: source for source in (EXPORTER, RL_INSIGHT)}
# What a recorded run is replayed as: a backfill writes the series dashgen's exporter serves, so a
# backtest or preview judges the rules and panels built for it, whatever source the project reads live.
REPLAYED_SOURCE = EXPORTER


def metric_source(config: Config) -> MetricSource:
    return SOURCES[config.source]
