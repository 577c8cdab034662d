"""The small typed definitions dashboard authors write (see panels/).

Authors state what differs between panels: title, queries, unit, size. The compiler
(dashgen/compiler/dashboards/dashboard_json.py) owns layout, ids, refIds, datasource references and selector
substitution.

In expressions, a `$name` inside a selector's braces stands for a set of matchers the
compiler fills in from the config:

- `$run`      the run picked in the dashboard: `job=~"$job", project=~"$project", experiment=~"$experiment"`
- `$gpu`      the per-GPU metrics' scrape job (Ray node metrics or the DCGM exporter)
- `$node`     Ray's node metrics job
- `$rollout`  the rollout engines' scrape job
- `$run_labels` the picked run's project and experiment alone, for series of another job that carry them
              (the rollout engines, labelled by their targets file): `{$rollout, $run_labels}`

e.g. `verl_actor_ppo_kl{$run}` or `ray_node_gpus_utilization{$gpu, GpuIndex="0"}`; in an f-string the
selector's braces are doubled and the name is not a field: `f"{metric}{{$run}}"`. (The name without
`$`, `{run}`, is read the same way, as projects written before `$` have it.)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

from dashgen.config import Address, Between, ByteSize, Interval, Section
from dashgen.records import record

if TYPE_CHECKING:
    from dashgen.conditions import Condition, Steps

GRID_COLUMNS = 24


@record
class Query:
    """A PromQL query of a panel, with its legend and an optional fixed colour."""

    expr: str
    legend: str = ""
    color: str = ""  # a fixed colour for this query's series (a Grafana colour name or #rrggbb); "": the palette's


@record
class Position:
    """Explicit placement inside a row (x, y relative to the row's first line); rarely needed."""

    x: int
    y: int
    w: int
    h: int


@record
class Threshold:
    """A line (time series) or colour step (stat) at `value`; `alert` names the alert that
    watches it, so the panel links to that alert's runbook section. Without a value, the
    alert's own threshold is drawn (an alert whose condition compares one signal with a number).
    With a `query`, the run's own data sets it: the query's newest value replaces `value` (Grafana's
    "Config from query results"), which stays as what the panel shows before the query has data;
    such a threshold is its panel's only one."""

    value: float | None = None
    alert: str = ""
    color: str = "red"
    query: Query | None = None


@record
class TimeSeries:
    """A time series panel: one line per series of its queries."""

    title: str
    queries: tuple[Query, ...]
    unit: str = "none"
    description: str = ""
    width: int = 8
    height: int = 8
    min: float | None = None
    max: float | None = None
    fill_opacity: int = 10
    position: Position | None = None
    thresholds: tuple[Threshold, ...] = ()
    stacked: bool = False  # the series stacked on each other (parts of a whole, e.g. a step's stages)


@record
class Heatmap:
    """One heatmap row per series (e.g. per GPU), time across, colour = the series' value."""

    title: str
    queries: tuple[Query, ...]
    unit: str = "none"  # unit of the cell values
    description: str = ""
    width: int = 12
    height: int = 9
    min: float | None = None
    max: float | None = None
    color_scheme: str = "Viridis"  # a d3 scheme name: Viridis, Oranges, Turbo, ...
    position: Position | None = None


@record
class Stat:
    """One big number per series: the newest value, coloured by its thresholds."""

    title: str
    queries: tuple[Query, ...]
    unit: str = "none"
    description: str = ""
    width: int = 4
    height: int = 4
    thresholds: tuple[Threshold, ...] = ()
    position: Position | None = None


# The x axis of a StepChart: verl's own step counter, one series per run.
TRAINING_STEP = Query("verl_training_global_step{$run}")


@record
class StepChart:
    """One value of each selected run plotted against its training step (Grafana's XY chart),
    so runs started at different times overlay as wandb or TensorBoard show them.

    `value` must carry the run's labels (job, instance, project, experiment) and no others, so
    each of its samples pairs with the step the run logged at the same time. Its legend is unused:
    the chart names each line by its experiment."""

    title: str
    value: Query
    unit: str = "none"
    description: str = ""
    width: int = 12
    height: int = 8
    position: Position | None = None

    @property
    def queries(self) -> tuple[Query, ...]:
        return (TRAINING_STEP, self.value)


Panel = TimeSeries | Heatmap | Stat | StepChart


@record
class Annotation:
    """Marks on every time panel wherever `expr` returns a series (e.g. firing alerts)."""

    name: str
    expr: str  # may use `run`-style selectors
    title: str  # legend-style template: {{alertname}}
    color: str = "red"


@record
class Row:
    """A row of panels under a title; collapsed rows open on a click."""

    title: str
    panels: tuple[Panel, ...]
    collapsed: bool = False


@record
class DashboardLink:
    """A link in the dashboard's header to another dashgen dashboard, keeping the time range and run."""

    title: str
    uid: str


@record
class Variable:
    """A query template variable over label values (multi-select with All)."""

    name: str
    label: str
    query: str  # label_values(...) text; may use `run`-style selectors
    multi: bool = True
    include_all: bool = True
    # What All stands for: ".*" matches any value; None lists the values the query returned.
    all_value: str | None = ".*"


@record
class LeftOut:
    """A verl key the catalog knows that the dashboard shows nowhere on purpose, and why
    (`dashgen list --unused` lists the keys no panel reads, with these reasons)."""

    verl_key: str
    reason: str


@record
class Dashboard:
    """One Grafana dashboard: its rows, template variables, annotations and links."""

    uid: str
    title: str
    rows: tuple[Row, ...]
    description: str = ""
    tags: tuple[str, ...] = ()
    variables: tuple[Variable, ...] = field(default_factory=tuple)
    annotations: tuple[Annotation, ...] = ()
    links: tuple[DashboardLink, ...] = ()
    left_out: tuple[LeftOut, ...] = ()


# --- Rules (see alerts/) ----------------------------------------------------------------
# In rule expressions, `{$verl}` stands for the exporter's scrape job and `{$gpu}`, `{$node}`,
# `{$rollout}` for the others, as above; there is no `$run`: rules see every run at once.
# `{$step_windows}` is the digest of the step windows the rules read (verl_exporter_step_windows_info).


class Severity(str, enum.Enum):
    """In order, most urgent first."""
    CRITICAL = "critical"  # page someone: the run is wasting GPUs now
    WARNING = "warning"  # look today
    INFO = "info"  # worth knowing; never pages

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


@record
class Sustain:
    """Hysteresis: once an alert fires it stays firing while this weaker condition holds.

    Rendered as `(expr) or ((sustain) and on(<on>) ALERTS{alertname="...", alertstate="firing"})`:
    Prometheus' own record of the alert carries the state, so a baseline that has started to
    absorb the fault, or noise around the threshold, does not resolve or re-fire it.
    """

    expr: str
    on: str  # labels shared by the condition's series and the alert's, e.g. "job, instance, project, experiment"


@record
class Alert:
    """An alerting rule: either a `condition` of the alert vocabulary (dashgen/conditions.py;
    `Alert.when(...)`), which the compiler turns into PromQL, baselines, hysteresis and tests,
    or a PromQL `expr` written by hand."""

    name: str  # CamelCase, unique across all alerts
    expr: str = ""
    severity: Severity | None = None
    summary: str = ""  # plain text, one line
    # Prometheus template: {{ $labels.experiment }}, {{ $value | humanize }}. Generated from the
    # condition when empty.
    description: str = ""
    # How long the condition must hold before the alert fires: a duration, or (with condition=)
    # steps(N): at every evaluation over the run's last N steps, whatever a step lasts.
    for_: str | Steps = "0s"
    # Keep firing this long after the condition last held: bridges single-evaluation dips
    # so that one fault episode notifies once.
    keep_firing_for: str = "0s"
    sustain: Sustain | None = None
    meaning: str = ""  # runbook: what it usually means in RL training
    next_steps: tuple[str, ...] = ()  # runbook: what to look at next, in order
    # runbook: why a healthy run does not trip it (the noise, warm-up or phase it is built to pass)
    healthy_runs: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    condition: Condition | None = None
    # Hysteresis in the vocabulary: once firing, stay firing while this (weaker) condition holds.
    keep_firing_while: Condition | None = None
    # Why this alert has no generated rule test (its fixtures in tests/rules/ test it), or no rule
    # test at all; `dashgen test` fails on an untested alert without a reason.
    untested: str = ""

    @classmethod
    def when(cls, name: str, condition: Condition, **fields) -> "Alert":
        return cls(name, condition=condition, **fields)

    def __post_init__(self) -> None:
        """A condition's thresholds, factors and windows are checked here, where the alert is
        written, so a mistake is named with the alert (and the loader adds the file and line)."""
        from dashgen.condition_checks import condition_problem
        from dashgen.errors import DefinitionError

        for name, condition in (("condition", self.condition), ("keep_firing_while", self.keep_firing_while)):
            problem = condition_problem(condition) if condition is not None else None
            if problem:
                raise DefinitionError(f"alert {self.name!r}: {name}: {problem}")


@record
class Recording:
    """A recording rule: `expr` evaluated and stored as the series `record`."""

    record: str  # level:metric:operations
    expr: str
    help: str


@record
class RuleGroup:
    """Rules Prometheus evaluates together, in order, every `interval`."""

    name: str
    rules: tuple[Alert | Recording, ...]
    interval: str | None = None  # default: the config's rule_interval


# --- Inhibition (see alerts/; rendered into Alertmanager's inhibit_rules) -----------------
# An alert module may define `inhibitions(config)` next to its `rules(config)`.

RUN_LABELS = ("project", "experiment")
EXPORTER_LABELS = ("job", "instance")  # the one exporter serving a run; all that VerlMetricsAbsent carries
# The labels that identify one training run's series: signals of one alert are matched on all of them.
RUN_MATCH_LABELS = (*EXPORTER_LABELS, *RUN_LABELS)
ON_RUN = ", ".join(RUN_MATCH_LABELS)  # as PromQL's on(...) and by(...) take them
# The path Alertmanager posts the alerts it routes to `dashgen act` to: the rendered receiver
# dashgen-act posts there, and dashgen/runtime/act.py serves it.
ACT_PATH = "/alerts"


@dataclass(frozen=True)
class ActSection(Section, section="act"):
    """The config file's `act:` section: where `dashgen act` listens and what it does with an alert.

    The compiler routes alerts to `dashgen act` by it (dashgen/compiler/alerting/routing.py, the Kubernetes
    target) and dashgen/runtime/act.py acts by it; it stands here, beside ACT_PATH, because
    neither of the two imports the other."""

    # Where `dashgen act` listens and Alertmanager posts to; empty renders no act receiver.
    address: Address | Literal[""] = "127.0.0.1:9095"
    # The file holding the bearer token that `dashgen act` and Alertmanager both use.
    token_file: str = "/etc/dashgen/act-token"
    # The alerts routed to `dashgen act`, each with its action: log (record only), stop (the run) or command.
    actions: dict[str, Literal["log", "stop", "command"]] = field(
        default_factory=lambda: {"VerlTrainingDivergence": "log", "VerlNaNMetrics": "log"})
    # The project of the run `dashgen act` guards; alerts of other runs are never acted on.
    project: str = ""
    # The experiment of the run `dashgen act` guards; alerts of other runs are never acted on.
    experiment: str = ""
    # The trainer's PID file (`dashgen export --pid-file`) by which the `stop` action stops the run;
    # empty: `stop` stops the Ray job of ray_submission_id instead.
    pid_file: str = ""
    # The Ray dashboard that the `stop` action asks to stop a Ray job, e.g. http://127.0.0.1:8265.
    ray_dashboard_url: str = ""
    # The submission id of the Ray job that the `stop` action asks the Ray dashboard to stop.
    ray_submission_id: str = ""
    # The argv (no shell) of the `command` action, which gets the alert in DASHGEN_ALERT_* variables.
    command: tuple[str, ...] = ()
    # How long the `command` action may run before it is killed.
    command_timeout: Interval = "60s"
    # The JSON-lines file where `dashgen act` records every alert it received and what it did.
    audit_log: str = "dashgen-act-audit.jsonl"
    # The largest request body `dashgen act` reads from Alertmanager; a larger one is refused.
    max_body_bytes: Annotated[int, ByteSize(), Between(1024, None, unit="bytes")] = 1 << 20


@record
class Inhibition:
    """While `source` fires, Alertmanager holds back `targets` that carry the same `equal` labels:
    the source explains them, so one notification says it all."""

    source: str
    targets: tuple[str, ...]
    why: str  # one line for the runbook
    equal: tuple[str, ...] = RUN_LABELS
