"""Every tunable of the dashboards and rules, in one place, as a typed schema.

Defaults live here. A project's `dashgen.yaml` (at the project root, found by every command)
or a file given with `--config FILE` overrides any of them by field name. Each field's type
annotation is its schema: the base type (str, int, float, bool, Literal, tuple, ...) is
checked for every field, and the `Annotated` kinds below add a format, range or unit
(`Duration`, `Fraction`, `Bytes`, ...). A field added with a plain annotation
(`my_threshold: float = 0.3`) is checked by its type without further work.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import io
import math
import re
import textwrap
import tokenize
import types
import typing
from dataclasses import field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml

from dashgen.bounded_read import TooLarge, parse_nested, read_bounded
from dashgen.errors import BuildError, get_close_matches
from dashgen.records import record

GIB = 2**30
CONFIG_FILE_NAME = "dashgen.yaml"


class ConfigError(BuildError):
    """A field's value does not fit its schema; the message starts with the field's name."""


# --- Field kinds: what an `Annotated[...]` adds to the base type ------------------------------

# Prometheus' own syntax: units largest first, each at most once (1h30m, not 30m1h).
DURATION = re.compile(r"(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# Prometheus keeps a duration in int64 nanoseconds and refuses a longer one ("duration out of range").
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


def duration_seconds(text: str) -> float:
    if not isinstance(text, str) or not DURATION.fullmatch(text):
        raise ValueError(f"{text!r} is not a Prometheus duration")
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text))


def duration_problem(text: object) -> str | None:
    """Why Prometheus would refuse `text` as a duration (in a rule file or a PromQL range), or None."""
    if not isinstance(text, str) or not DURATION.fullmatch(text):
        return f"{text!r} is not a Prometheus duration (e.g. 90s, 10m, 1h30m: units largest first)"
    if len(text) > 3 and duration_seconds(text) > MAX_DURATION_SECONDS:  # three characters (99y) are in range
        return f"{text!r} is out of Prometheus' duration range (at most {MAX_DURATION_SECONDS / _UNITS['y']:.0f}y)"
    return None


def format_duration(seconds: float) -> str:
    """A Prometheus duration, to the millisecond, largest units first (4200 -> 1h10m, 1.5 -> 1s500ms):
    the inverse of duration_seconds, for windows derived from the config's."""
    millis, parts = round(seconds * 1000), []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if millis >= size:
            parts.append(f"{millis // size}{unit}")
            millis %= size
    return "".join(parts) or "0s"


@record
class PrometheusDuration:
    """A Prometheus duration string (90s, 10m, 1h30m)."""
    positive: bool = False
    max_seconds: float = 10 * 365 * 86400

    def describe(self) -> str:
        return "a Prometheus duration" + (", longer than 0s" if self.positive else "")

    def problem(self, value: str) -> str | None:
        try:
            seconds = duration_seconds(value)
        except ValueError:
            return f"{value!r} is not a Prometheus duration (e.g. 90s, 10m, 1h)"
        if self.positive and seconds <= 0:
            return f"{value!r} must be longer than 0s"
        if seconds > self.max_seconds:
            return f"{value!r} is longer than {self.max_seconds / 86400 / 365:g} years"
        return None


@record
class Between:
    """A number in [low, high] (an open end is excluded), in `unit`."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    unit: str = ""

    def describe(self) -> str:
        low = "" if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        high = "" if self.high is None else f"<= {self.high:g}"
        return " and ".join(filter(None, (low, high))) + (f", in {self.unit}" if self.unit else "")

    def problem(self, value: float) -> str | None:
        unit = f" {self.unit}" if self.unit else ""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return f"{value!r}{unit} must be {'greater than' if self.low_open else 'at least'} {self.low:g}{unit}"
        if self.high is not None and value > self.high:
            return f"{value!r}{unit} must be at most {self.high:g}{unit}"
        return None


@record
class Matches:
    """A string matching `pattern` in full; `example` shows the expected form."""
    pattern: str
    example: str

    def describe(self) -> str:
        return f"like {self.example}"

    def problem(self, value: str) -> str | None:
        if not re.fullmatch(self.pattern, value):
            return f"{value!r} is not valid here; expected something like {self.example}"
        return None


@record
class HostPort:
    """host:port as another process should reach it; port 1-65535."""

    def describe(self) -> str:
        return "host:port"

    def problem(self, value: str) -> str | None:
        match = re.fullmatch(r"([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})", value)
        if not match or not 1 <= int(match.group(2)) <= 65535:
            return f"{value!r} is not host:port with a port from 1 to 65535 (e.g. localhost:9464)"
        return None


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)")
_SIZE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
               "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


@record
class ByteSize:
    """A number of bytes: an integer, or a string with a unit (80GiB, 40 GB)."""

    def describe(self) -> str:
        return "bytes, or a size such as 80GiB"

    def parse(self, value: Any) -> Any:
        if isinstance(value, str):
            match = _SIZE.fullmatch(value.strip())
            if not match:
                raise ConfigError(f"{value!r} is not a size; give bytes or a number with a unit (80GiB, 40GB)")
            return round(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
        return value

    def problem(self, value: int) -> str | None:
        return None if value >= 1 else f"{value!r} bytes must be at least 1 byte"


# Named kinds used by the fields below (and by fields other modules add).
Duration = Annotated[str, PrometheusDuration()]
Interval = Annotated[str, PrometheusDuration(positive=True)]  # a window or a period: longer than 0s
Fraction = Annotated[float, Between(0.0, 1.0)]
Factor = Annotated[float, Between(0.0, None, low_open=True)]  # a multiplier: greater than 0
NonNegative = Annotated[float, Between(0.0, None)]
Percent = Annotated[float, Between(0.0, 100.0, unit="%")]
Bytes = Annotated[int, ByteSize(), Between(1, None, unit="bytes")]
StepCount = Annotated[int, Between(1, 10_000, unit="steps")]  # a window of training steps: steps(N)
JobName = Annotated[str, Matches(r"[A-Za-z_][A-Za-z0-9_.:/-]*", "verl (letters, digits, _ . : / -)")]
GrafanaUid = Annotated[str, Matches(r"[A-Za-z0-9_-]{1,40}", "dashgen-prometheus (1-40 of A-Z a-z 0-9 _ -)")]
GrafanaTime = Annotated[str, Matches(r"now(-\d+[smhdwMy])*(/[smhdwMy])?", "now-6h")]
Address = Annotated[str, HostPort()]
# Kubernetes names and labels (DNS-1123 label; label key and value syntax of the API reference).
DnsLabel = Annotated[str, Matches(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "monitoring (a DNS-1123 label: up to 63 of "
                                                                        "a-z 0-9 -, starting and ending alphanumeric)")]
# A label or annotation key: an optional DNS-1123 subdomain prefix of at most 253 characters and
# '/', then a name of at most 63.
LabelKey = Annotated[str, Matches(r"((?=[^/]{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
                                  "app.kubernetes.io/name (an optional prefix of up to 253 of a-z 0-9 - . and '/', "
                                  "then up to 63 of A-Z a-z 0-9 - _ ., starting and ending alphanumeric)")]
# A container port's name (IANA_SVC_NAME): up to 15 of a-z 0-9 -, at least one letter, no '-' at
# either end nor two in a row.
PortName = Annotated[str, Matches(r"(?=.{1,15}$)(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*",
                                  "metrics (a port name: up to 15 of a-z 0-9 -, with a letter, no '-' at either "
                                  "end nor '--')")]
LabelValue = Annotated[str, Matches(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", "kube-prometheus-stack")]


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
    # Its uid, by which the panels refer to it.
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
    # The recent window a rolling baseline ends before (see baseline_window).
    baseline_recent_window: Interval = "10m"
    # The held baseline is the lowest (for signals a fault raises) or highest (for signals it
    # lowers) rolling baseline of this window: it keeps the pre-fault level for this long
    # after a fault starts, where the rolling median absorbs the fault within about 40 minutes.
    baseline_hold_window: Interval = "24h"
    # The held baseline reads the rolling baseline's extreme of each such step (recorded by a
    # group evaluated this often), not every evaluation of it: a tenth of the samples per cycle.
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

    # --- Alertmanager and actions ---------------------------------------------------
    # Where Prometheus sends alerts (the rendered prometheus.yml's alerting section).
    alertmanager_address: Address = "localhost:9093"
    # Notifications group by run (project, experiment): how long a new group waits for more alerts.
    alertmanager_group_wait: Duration = "30s"
    # How often a group of notifications may report changes.
    alertmanager_group_interval: Interval = "5m"
    # How often a group repeats its notification while nothing changes.
    alertmanager_repeat_interval: Interval = "4h"
    # What the `page` receiver (critical alerts) delivers to, in Alertmanager's own receiver
    # syntax, e.g. {"slack_configs": [{"api_url_file": "/etc/alertmanager/slack-url",
    # "channel": "#verl"}]}. Empty: a placeholder that delivers nothing. Secrets only by *_file
    # (dashgen/compiler/targets/alertmanager.py checks these).
    alertmanager_page: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # What the `channel` receiver (warnings) delivers to, in the same syntax as alertmanager_page.
    alertmanager_channel: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Info alerts go nowhere unless this sends them to the channel too.
    alertmanager_info_to_channel: bool = False
    # Where `dashgen act` listens and Alertmanager posts to ("" renders no act receiver).
    act_address: Address | Literal[""] = "127.0.0.1:9095"
    # The file holding the bearer token `dashgen act` and Alertmanager both use.
    act_token_file: str = "/etc/dashgen/act-token"
    # Alerts routed to `dashgen act`, each with its action: log (record only), stop (the run), command.
    act_actions: dict[str, Literal["log", "stop", "command"]] = field(
        default_factory=lambda: {"VerlTrainingDivergence": "log", "VerlNaNMetrics": "log"})
    # The project of the run `dashgen act` guards; alerts of other runs are never acted on.
    act_project: str = ""
    # The experiment of the run `dashgen act` guards.
    act_experiment: str = ""
    # How `stop` stops the run: the trainer's PID file (`dashgen export --pid-file`), or else a Ray job.
    act_pid_file: str = ""
    # The Ray job's dashboard, for `stop` of a Ray job: e.g. http://127.0.0.1:8265
    act_ray_dashboard_url: str = ""
    # The Ray job's submission id, which `stop` asks that dashboard to stop.
    act_ray_submission_id: str = ""
    # The `command` action's argv (no shell); the alert is passed in DASHGEN_ALERT_* variables.
    act_command: tuple[str, ...] = ()
    # How long the `command` action may run before it is killed.
    act_command_timeout: Interval = "60s"
    # The JSON-lines file where `dashgen act` records every alert it received and what it did.
    act_audit_log: str = "dashgen-act-audit.jsonl"
    # The largest request body `dashgen act` reads from Alertmanager; a larger one is refused.
    act_max_body_bytes: Annotated[int, ByteSize(), Between(1024, None, unit="bytes")] = 1 << 20

    # --- Adoption: Grafana, runbook, packaging ---------------------------------------
    # Make the provisioned Prometheus data source Grafana's default. Off: Grafana refuses to
    # start with two default data sources, and a team's Grafana usually has one already.
    datasource_is_default: bool = False
    # Grafana as people reach it (https://grafana.example.org): the runbook links each alert to
    # the dashboard. Empty: no such links. (runbook_base_url, above, is where the runbook lives.)
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

    # --- Kubernetes --------------------------------------------------------------------
    # Also render rendered/kubernetes/ for the Prometheus Operator and Grafana's dashboard sidecar:
    # a PrometheusRule per rule file, a ConfigMap per dashboard, monitors for the exporter and Ray,
    # an AlertmanagerConfig. Off: nothing is rendered there.
    kubernetes: bool = False
    # Namespace of every rendered object (the alerts also carry it as their `namespace` label, which
    # the Operator's AlertmanagerConfig routes match on).
    kubernetes_namespace: DnsLabel = "monitoring"
    # Labels on every rendered object, e.g. the `release` label kube-prometheus-stack's Prometheus
    # selects PrometheusRules and monitors by (its Helm release name).
    kubernetes_labels: dict[LabelKey, LabelValue] = field(
        default_factory=lambda: {"release": "kube-prometheus-stack"})
    # Start of every object's name (dashgen-verl-training, dashgen-stability, ...).
    kubernetes_name_prefix: DnsLabel = "dashgen"
    # The label Grafana's dashboard sidecar looks for on ConfigMaps (kube-prometheus-stack:
    # grafana_dashboard "1").
    kubernetes_dashboard_label: LabelKey = "grafana_dashboard"
    # That label's value.
    kubernetes_dashboard_label_value: LabelValue = "1"
    # The annotation the sidecar reads each dashboard's folder from: it does so only where the
    # Grafana chart sets sidecar.dashboards.folderAnnotation to this name.
    kubernetes_dashboard_folder_annotation: LabelKey = "grafana_folder"
    # How the Operator finds `dashgen export`: a PodMonitor on pods with these labels, or a
    # ServiceMonitor on services with them; either scrapes the port of this name. The target's job
    # label is set to verl_job, so the rules and dashboards match as with a static config. Under
    # source: rl_insight (no exporter) a PodMonitor for the hub is rendered instead, and these are refused.
    kubernetes_exporter_monitor: Literal["PodMonitor", "ServiceMonitor"] = "PodMonitor"
    # The labels of the exporter's pods (PodMonitor) or services (ServiceMonitor).
    kubernetes_exporter_selector: dict[LabelKey, LabelValue] = field(
        default_factory=lambda: {"app.kubernetes.io/name": "dashgen-exporter"})
    # The name of the exporter's port the monitor scrapes.
    kubernetes_exporter_port: PortName = "metrics"
    # A PodMonitor for KubeRay's head and worker pods (label ray.io/is-ray-node: "yes", port
    # `metrics`), their job label set to ray_job. Off: Ray's metrics come from monitors of your own,
    # and ray_job must then be the job label those give them.
    kubernetes_ray_monitor: bool = True
    # The name of the Ray pods' metrics port that PodMonitor scrapes.
    kubernetes_ray_port: PortName = "metrics"
    # The `page` receiver of the AlertmanagerConfig, in the Operator's syntax, secrets as Secret
    # references: {"slackConfigs": [{"apiURL": {"name": "slack", "key": "url"}, "channel":
    # "#verl"}]}. Empty: a receiver that delivers nothing.
    kubernetes_alertmanager_page: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The `channel` receiver of the AlertmanagerConfig, in the same syntax.
    kubernetes_alertmanager_channel: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Where Alertmanager reaches `dashgen act` in the cluster (http://dashgen-act.monitoring:9095/alerts).
    # Empty: no act receiver.
    kubernetes_act_url: Annotated[str, Matches(r"(https?://\S+)?", "http://dashgen-act.monitoring:9095/alerts")] = ""
    # The Secret (name, key) holding the bearer token Alertmanager sends to `dashgen act`.
    kubernetes_act_token_secret: tuple[DnsLabel, Annotated[str, Matches(r"[-._a-zA-Z0-9]+", "token")]] = \
        ("dashgen-act-token", "token")

    # --- VictoriaMetrics ---------------------------------------------------------------
    # Also render rendered/victoriametrics/rules/: the rule files as vmalert loads them from 1.79 on
    # (Debian bookworm's), which has no keep_firing_for: each held alert reads a recording of when it
    # fired instead (docs/deploy-victoriametrics.md). Build, check and lint run `vmalert -dryRun` on them.
    # Off: nothing is rendered there, and rendered/rules/ (Prometheus') needs vmalert 1.92 or later.
    victoriametrics: bool = False

    def __post_init__(self) -> None:
        _check_fields(self)
        # The per-area sections of the config file (`stability: {...}`), read by `area()`.
        object.__setattr__(self, "_sections", {})
        object.__setattr__(self, "_areas", {})
        object.__setattr__(self, "_source", None)
        # prometheus.yml scrapes these as separate jobs; Prometheus refuses two of one name.
        scraped = {"verl_job": self.verl_job, "ray_job": self.ray_job, "rollout_job": self.rollout_job}
        for name, job in scraped.items():
            same = [other for other, other_job in scraped.items() if other_job == job and other != name]
            if same:
                raise ConfigError(f"{name} = {job!r} is also {same[0]}; each scrape job needs a name of its own")
        step = duration_seconds(self.baseline_hold_step)
        if not duration_seconds(self.rule_interval) <= step <= duration_seconds(self.baseline_hold_window):
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

    def area(self, tunables: type[A]) -> A:
        """An alert area's tunables: its defaults, overridden by the config file's `<area>:` section."""
        if tunables not in self._areas:
            _refuse_raw_text(tunables)
            values = self._sections.get(tunables.area, {})
            where = f"{self._source}: " if self._source else ""
            known = [f.name for f in dataclasses.fields(tunables)]
            for key in values:
                if key not in known:
                    close = get_close_matches(str(key), known, n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else f"; its fields: {', '.join(known)}"
                    raise ConfigError(f"{where}{tunables.area}: unknown field {key!r}{hint}")
            try:
                self._areas[tunables] = tunables(**values)
            except ConfigError as exc:
                raise ConfigError(f"{where}{tunables.area}.{exc.message}") from None
        return self._areas[tunables]

    def check_sections(self, areas: list[type["AreaConfig"]]) -> None:
        """Every section of the config file names an area, and every field in it is one of the area's."""
        by_name = {a.area: a for a in areas}
        where = f"{self._source}: " if self._source else ""
        for name in self._sections:
            if name in by_name:
                self.area(by_name[name])
                continue
            home = [a.area for a in areas if name in {f.name for f in dataclasses.fields(a)}]
            if home:
                raise ConfigError(f"{where}{name} is a field of the {home[0]!r} alert area: write it under "
                                  f"`{home[0]}:` (e.g. `{home[0]}: {{{name}: ...}}`)")
            close = get_close_matches(name, [*_core_field_names(), *by_name], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "; `dashgen config --describe` lists the fields"
            raise ConfigError(f"{where}unknown config field or area {name!r}{hint}")


class AreaConfig:
    """The tunables of one alert area (an alerts/*.py module), next to what they tune.

    Subclass it as a frozen dataclass naming the area, with a comment above each field (its
    description in `dashgen config --describe`); fields are typed and checked like Config's:

        @dataclass(frozen=True)
        class RewardsConfig(AreaConfig, area="rewards"):
            # Fraction of its baseline the reward must fall by.
            drop_fraction: Fraction = 0.5

    `dashgen.yaml` sets them under the area's name (`rewards: {drop_fraction: 0.4}`), and the
    module reads them with `config.area(RewardsConfig)`.
    """

    area: ClassVar[str] = ""

    def __init_subclass__(cls, area: str = "", **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if area:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", area):
                raise ValueError(f"{cls.__name__}: area {area!r} must be lower-case letters, digits and _")
            cls.area = area

    def __post_init__(self) -> None:
        _check_fields(self)


A = typing.TypeVar("A", bound=AreaConfig)


# --- Checking values against the annotations --------------------------------------------------

_SCHEMAS: dict[type, dict[dataclasses.Field, Any]] = {}


def _schema(cls: type = None) -> dict[dataclasses.Field, Any]:
    """Each field of a config class with its type annotation."""
    cls = cls or Config
    if cls not in _SCHEMAS:
        hints = typing.get_type_hints(cls, include_extras=True)
        _SCHEMAS[cls] = {f: hints[f.name] for f in dataclasses.fields(cls)}
    return _SCHEMAS[cls]


def _check_fields(instance: Any) -> None:
    """Check (and normalise, e.g. "80GiB" -> bytes, 1 -> 1.0) every field of a config instance."""
    for f, hint in _schema(type(instance)).items():
        value = _checked(f.name, hint, getattr(instance, f.name))
        if value is not getattr(instance, f.name):
            object.__setattr__(instance, f.name, value)


def _core_field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(Config)]


def _type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if hint is type(None):
        return "null"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint)))


def _checked(name: str, hint: Any, value: Any) -> Any:
    """`value` checked against `hint` (and normalised); ConfigError naming the field if it does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        base, kinds = args[0], args[1:]
        for kind in kinds:
            if hasattr(kind, "parse"):
                try:
                    value = kind.parse(value)
                except ConfigError as exc:
                    raise ConfigError(f"{name}: {exc.message}") from None
        value = _checked(name, base, value)
        for kind in kinds:
            problem = kind.problem(value)
            if problem:
                raise ConfigError(f"{name}: {problem}")
        return value
    if origin is Literal:
        if not any(value == a and type(value) is type(a) for a in args):
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(repr(a) for a in args)}")
        return value
    if origin in (typing.Union, types.UnionType):
        near_miss = None  # the problem of an option of the value's own type: the one worth showing
        for option in args:
            try:
                return _checked(name, option, value)
            except ConfigError as exc:
                base = typing.get_args(option)[0] if typing.get_origin(option) is Annotated else option
                if near_miss is None and isinstance(base, type) and isinstance(value, base):
                    near_miss = (option, exc.message)
        if near_miss is not None:
            others = " or ".join(_type_name(a) for a in args if a is not near_miss[0])
            raise ConfigError(f"{near_miss[1]} (or {others})")
        raise ConfigError(f"{name}: expected {_type_name(hint)}, got {_describe(value)}")
    if hint is type(None):
        if value is not None:
            raise ConfigError(f"{name}: expected null, got {_describe(value)}")
        return value
    if origin in (tuple, list, frozenset):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {_describe(value)}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise ConfigError(f"{name}: expected a list of {len(args)} items, got {len(value)}")
            return tuple(_checked(f"{name}[{i}]", a, v) for i, (a, v) in enumerate(zip(args, value)))
        items = [_checked(f"{name}[{i}]", args[0], v) for i, v in enumerate(value)] if args else list(value)
        return origin(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping, got {_describe(value)}")
        key_type, value_type = args or (Any, Any)
        return {_checked(f"{name} key", key_type, k): _checked(f"{name}[{k!r}]", value_type, v)
                for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected true or false, got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: expected an integer, got {_describe(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected a string, got {_describe(value)}")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ConfigError(f"{name}: {value!r} holds a control character (newline, tab, ...)")
        return value
    if hint is Any:
        return value
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ConfigError(f"{name}: expected {_type_name(hint)}, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "the string", list: "a list",
            dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 60 else shown[:57] + '...'}"


# --- Reading a config file ----------------------------------------------------------------------

class _UniqueKeyLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice (the second would silently win), and aliases: a
    few lines of nested aliases (an alias bomb) expand to billions of nodes, which the 1 MiB read
    limit does not bound, and a config has no need of them."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"the alias *{event.anchor} is not allowed here (nor merge keys <<: *...): write the "
                            f"value out", event.start_mark)
        return super().compose_node(parent, index)


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"field {key!r} is given twice",
                                                    key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_yaml(text: str) -> Any:
    """A user's YAML file (dashgen.yaml, metrics.yaml) as data: safe tags only, no key twice, no aliases."""
    return parse_nested(lambda each: yaml.load(each, Loader=_UniqueKeyLoader), text)


def config_path(root: Path | None, explicit: Path | None) -> Path | None:
    """The config file a command uses: `--config` if given, else the project's dashgen.yaml if any."""
    if explicit is not None:
        return explicit
    if root is not None and (root / CONFIG_FILE_NAME).is_file():
        return root / CONFIG_FILE_NAME
    return None


MAX_CONFIG_BYTES = 1 << 20


def read_overrides(path: Path) -> dict[str, Any]:
    """The field: value mapping of a config file; ConfigError naming the file and the field."""
    try:
        raw = read_bounded(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    except TooLarge as exc:
        raise ConfigError(f"{path}: config is {exc}; is it the right file?") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: config is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                          f"save it as UTF-8") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: config must be a mapping of field: value, not {_type_name(type(data))}")
    known = _core_field_names()
    for key in data:
        if not isinstance(key, str):
            raise ConfigError(f"{path}: config field {key!r} is not a name")
        if key in known or isinstance(data[key], dict):
            continue  # a field, or an alert area's section (checked once the areas are loaded)
        home = [a.area for a in default_areas() if key in {f.name for f in dataclasses.fields(a)}]
        if home:
            raise ConfigError(f"{path}: {key} is a field of the {home[0]!r} alert area now: write it under "
                              f"`{home[0]}:` (e.g. `{home[0]}: {{{key}: {data[key]!r}}}`)")
        close = get_close_matches(key, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; `dashgen config --describe` lists the fields"
        raise ConfigError(f"{path}: unknown config field {key!r}{hint}")
    return data


def load_config(path: Path | None, root: Path | None = None) -> Config:
    """Defaults, overridden by the config file `config_path(root, path)` finds, if any."""
    found = config_path(root, path)
    if found is None:
        return Config()
    try:
        return config_from(read_overrides(found), found)
    except ConfigError as exc:
        raise ConfigError(exc.message if exc.message.startswith(f"{found}: ") else f"{found}: {exc.message}") from None


def config_from(data: dict[str, Any], source: Path | None = None) -> Config:
    """A config from a mapping as dashgen.yaml holds it: top-level fields, and a section per alert
    area (`{"rule_interval": "30s", "stability": {"kl_spike_threshold": 0.2}}`)."""
    core = set(_core_field_names())
    config = Config(**{k: v for k, v in data.items() if k in core})
    object.__setattr__(config, "_sections", {k: v for k, v in data.items() if k not in core})
    object.__setattr__(config, "_source", source)
    return config


def areas_of(modules: typing.Iterable[types.ModuleType]) -> list[type[AreaConfig]]:
    """The AreaConfig classes the modules define or import, each once, in order; an area name
    claimed by two classes is an error."""
    found: dict[str, type[AreaConfig]] = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, AreaConfig) and value.area:
                _check_area_class(value)
                other = found.setdefault(value.area, value)
                if other is not value:
                    raise ConfigError(f"alert area {value.area!r} is declared twice: by {other.__qualname__} "
                                      f"({other.__module__}) and {value.__qualname__} ({value.__module__})")
    return list(found.values())


def _check_area_class(cls: type[AreaConfig]) -> None:
    """ConfigError naming the file and class if an area class cannot be read as one: not a
    dataclass, a field without a default (dashgen.yaml only overrides), a field typed `object`
    (which checks nothing), or an area named like a core field (dashgen.yaml could not tell them apart)."""
    where = f"{_defined_in(cls)}: {cls.__qualname__}"
    if not dataclasses.is_dataclass(cls):
        raise ConfigError(f"{where} (alert area {cls.area!r}) is not a dataclass: put @dataclass(frozen=True) "
                          f"above it")
    if cls.area in _core_field_names():
        raise ConfigError(f"{where}: alert area {cls.area!r} is named like a core config field, which dashgen.yaml "
                          f"sets at its top level; name the area otherwise")
    for f, hint in _schema(cls).items():
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{f.name} has no default: every tunable needs one (dashgen.yaml only "
                              f"overrides); give it the value that suits most runs")
        if hint is object:
            raise ConfigError(f"{where}.{f.name} is typed object, which checks nothing a dashgen.yaml gives; type "
                              f"it as a number kind, Duration, StepCount or a Literal (see dashgen/config.py)")


def default_areas() -> list[type[AreaConfig]]:
    """The alert areas of dashgen's default alerts (the installed dashgen_alerts package)."""
    import importlib
    import pkgutil

    import dashgen_alerts

    return areas_of(importlib.import_module(f"dashgen_alerts.{info.name}")
                    for info in pkgutil.iter_modules(dashgen_alerts.__path__) if not info.name.startswith("_"))


def _yaml_line(name: str, value: Any) -> str:
    return yaml.safe_dump({name: list(value) if isinstance(value, (tuple, frozenset)) else value},
                          default_flow_style=True, width=10**9, allow_unicode=True).strip()[1:-1]


def config_yaml(config: Config, areas: list[type[AreaConfig]] = (), overridden_in: Path | None = None,
                overridden: dict[str, Any] | None = None) -> str:
    """The effective config as YAML, one field a line (alert areas as sections), marking what a file set."""
    overridden = overridden or {}
    mark = f"  # from {overridden_in.name}" if overridden_in else ""
    lines = ["# Effective dashgen config: defaults of dashgen/config.py and the alert areas"
             + (f", overridden by {overridden_in}" if overridden_in else "") + "."]
    for f in dataclasses.fields(Config):
        lines.append(_yaml_line(f.name, getattr(config, f.name)) + (mark if f.name in overridden else ""))
    for area in areas:
        section = overridden.get(area.area) or {}
        lines.append(f"{area.area}:")
        values = config.area(area)
        for f in dataclasses.fields(area):
            lines.append("  " + _yaml_line(f.name, getattr(values, f.name)) + (mark if f.name in section else ""))
    return "\n".join(lines) + "\n"


# --- Describing the fields ------------------------------------------------------------------------

def describe_config(areas: list[type[AreaConfig]]) -> str:
    """Every field, the core config's and each alert area's: type, unit or format, default and
    description (the comment above the field in its source)."""
    out = []
    for cls, heading in ((Config, "Config (top level of dashgen.yaml)"),
                         *((a, f"{a.area}: ({a.__qualname__} in {_defined_in(a)})") for a in areas)):
        out.append(f"{heading}\n")
        docs = field_comments(cls)
        defaults = cls()
        for f, hint in _schema(cls).items():
            kind = "; ".join(k.describe() for k in _kinds(hint))
            out.append(f"  {f.name}: {_type_name(hint)}{f' ({kind})' if kind else ''}, default "
                       f"{_yaml_line('x', getattr(defaults, f.name))[3:]}\n")
            if docs.get(f.name):
                out.extend(f"      {line}\n" for line in textwrap.wrap(docs[f.name], 96, break_on_hyphens=False,
                                                                   break_long_words=False))
        out.append("\n")
    return "".join(out)


def _defined_in(cls: type) -> str:
    """Where a config class is defined: a project's file (alerts/x.py) or an installed module."""
    prefix = "dashgen_definitions."
    if cls.__module__.startswith(prefix):
        return cls.__module__[len(prefix):].replace(".", "/") + ".py"
    return cls.__module__


def _refuse_raw_text(cls: type) -> None:
    """An area's tunables reach PromQL (windows, thresholds, names in selectors), so none may be any
    text at all: a string from dashgen.yaml such as `5m]) or vector(1)` would change the rule."""
    for f, hint in _schema(cls).items():
        if _admits_raw_text(hint):
            raise BuildError(f"{_defined_in(cls)}: {cls.__qualname__}.{f.name} is typed {_type_name(hint)}, any text: "
                             f"a value from dashgen.yaml would reach PromQL as written. Type it Duration or Interval "
                             f"(a window), StepCount, a number kind (Fraction, Factor, NonNegative, float), or "
                             f"Annotated[str, Matches(pattern, example)] (a name); see dashgen/config.py")


def _admits_raw_text(hint: Any) -> bool:
    """Whether a field of this type takes any string, unchecked by a kind (Matches, PrometheusDuration, ...)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return not any(hasattr(kind, "problem") for kind in args[1:]) and _admits_raw_text(args[0])
    if origin is Literal:
        return False
    if hint is str or hint is Any:
        return True
    return any(_admits_raw_text(a) for a in args if a is not Ellipsis)


def _kinds(hint: Any) -> list[Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return [k for k in args[1:] if hasattr(k, "describe")] + _kinds(args[0])
    if origin in (typing.Union, types.UnionType):
        return [k for a in args for k in _kinds(a)]
    return []


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment lines right above its definition (and one at its end), joined; a
    field without a comment of its own has none (it does not borrow its neighbour's)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError):
        return {}
    lines = source.splitlines()
    docs: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above, line = [], node.lineno - 1
            while line >= 1 and line in comments and lines[line - 1].lstrip().startswith("#") \
                    and not comments[line].startswith("---"):
                above.insert(0, comments[line])
                line -= 1
            above += [comments[at] for at in sorted({node.lineno, node.end_lineno}) if at in comments]
            docs[node.target.id] = " ".join(above)
    return docs
