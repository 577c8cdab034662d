"""Every tunable of the dashboards and rules, as a typed schema, by concern.

Defaults live in the schema. A project's `dashgen.yaml` (at the project root, found by every
command) or a file given with `--config FILE` overrides any of them by field name. Each field's
type annotation is its schema: the base type (str, int, float, bool, Literal, tuple, ...) is
checked for every field, and the `Annotated` kinds of `fields` add a format, range or unit
(`Duration`, `Fraction`, `Bytes`, ...). A field added with a plain annotation
(`my_threshold: float = 0.3`) is checked by its type without further work.

  duration   Prometheus durations: parsing, formatting, the range Prometheus accepts
  fields     the field kinds (`Duration`, `Fraction`, `JobName`, ...) and ConfigError
  checking   checking a config class's values against its annotations
  schema     the core `Config` and `AreaConfig`, the base of each area's section
  loading    reading dashgen.yaml into a Config
  describe   `dashgen config` and `dashgen config --describe`
"""

from dashgen.config.checking import _schema
from dashgen.config.describe import config_yaml, describe_config, field_comments
from dashgen.config.duration import (DURATION, MAX_DURATION_SECONDS, PrometheusDuration, duration_problem, duration_seconds,
                                     format_duration)
from dashgen.config.fields import (Address, Between, ByteSize, Bytes, ConfigError, DnsLabel, Duration, DurationRange,
                                   Factor, Fraction, GrafanaTime, GrafanaUid, HostPort, Interval, JobName, LabelKey,
                                   LabelValue, Matches, NonNegative, Percent, PortName, StepCount)
from dashgen.config.loading import (CONFIG_FILE_NAME, MAX_CONFIG_BYTES, MOVED_TO_SECTIONS, config_from, config_path,
                                    load_config, load_yaml, moved_field_problem, read_overrides)
from dashgen.config.schema import GIB, AreaConfig, Config, Section, areas_of, check_section_class

__all__ = [
    "Address", "AreaConfig", "Between", "ByteSize", "Bytes", "CONFIG_FILE_NAME", "Config", "ConfigError",
    "DURATION", "DnsLabel", "Duration", "DurationRange", "Factor", "Fraction", "GIB", "GrafanaTime", "GrafanaUid",
    "HostPort", "Interval", "JobName", "LabelKey", "LabelValue", "MAX_CONFIG_BYTES", "MAX_DURATION_SECONDS",
    "MOVED_TO_SECTIONS", "Matches", "NonNegative", "Percent", "PortName", "PrometheusDuration", "Section",
    "StepCount", "_schema", "areas_of", "check_section_class", "config_from", "config_path", "config_yaml",
    "describe_config", "duration_problem", "duration_seconds", "field_comments", "format_duration", "load_config",
    "load_yaml", "moved_field_problem", "read_overrides",
]
