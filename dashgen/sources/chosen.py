"""The metric source a project chose (`source:` in dashgen.yaml), by name."""

from dashgen.config import Config
from dashgen.sources.exporter import EXPORTER
from dashgen.sources.metric_source import MetricSource
from dashgen.sources.rl_insight import RL_INSIGHT

SOURCES = {source.name: source for source in (EXPORTER, RL_INSIGHT)}


def metric_source(config: Config) -> MetricSource:
    return SOURCES[config.source]
