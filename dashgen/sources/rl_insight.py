"""verl's RL-Insight (`trainer.logger=['console','rl_insight']`, package `rl-insight` >= 0.3.0).

verl's RLInsightLogger publishes every scalar it logs through `rl_insight.metric_gauge`, the key
with "/" replaced by "_", and the job's hub serves it as a Prometheus gauge under the namespace
`rl_insight_monitor`: `actor/ppo_kl` -> `rl_insight_monitor_actor_ppo_kl`, labelled `project`
and `experiment_name` (rl_insight.init's labels). Values are as logged: `timing_s/gen` in
seconds, `timing_per_token_ms/*` in milliseconds, `*_gb` in GiB; those this source rescales
to the catalog's base units with recording rules.

What the gauges lose against the exporter's series: a gauge holds the newest logged value and
Prometheus keeps one per scrape, so a step shorter than the scrape interval is never seen, and
no series carries when a step was logged. The exporter's own series are rebuilt from the
global-step gauge where that means the same (`derived`), or lacking, with the reason.
"""

from __future__ import annotations

import re

from dashgen.catalog import (DROPPED_KEYS_METRIC, DROPPED_LINES_METRIC, EXIT_CODE_METRIC, KEY_COLLISIONS_METRIC,
                             LAST_STEP_METRIC, LOG_ROUNDING_METRIC, NONFINITE_LOSS_STREAK_METRIC, NONFINITE_STREAK_METRIC,
                             PARSE_ERRORS_METRIC, RUN_STATE_METRIC, STEPS_METRIC, VALIDATION_FAMILIES)
from dashgen.config import Config
from dashgen.gpu import RUN_SESSION_INFO
from dashgen.lifecycle import RunPhase
from dashgen.model import RUN_MATCH_LABELS
from dashgen.sources.metric_source import Derived, MetricSource

NAMESPACE = "rl_insight_monitor"
LABELS = {"experiment": "experiment_name"}
ON_RUN = ", ".join(LABELS.get(label, label) for label in RUN_MATCH_LABELS)
# verl >= 0.9 (which RLInsightLogger needs) logs the worker's memory under the role's prefix.
_NEWEST_KEY = {"perf/max_memory_allocated_gb": "actor/perf/max_memory_allocated_gb",
               "perf/max_memory_reserved_gb": "actor/perf/max_memory_reserved_gb",
               "perf/cpu_memory_used_gb": "actor/perf/cpu_memory_used_gb"}
_RECORDED = "rl_insight:run:"


_NOT_NAME_CHAR = re.compile(r"[^a-zA-Z0-9_:]")


def series_name(key: str) -> str:
    """The gauge RL-Insight serves for a verl log key: RLInsightLogger.log replaces "/" by "_", the
    hub prefixes its namespace, and prometheus_client's text format writes any other character a
    legacy name cannot hold as "_" (`mean@4` -> `mean_4`)."""
    return _NOT_NAME_CHAR.sub("_", f"{NAMESPACE}_{_NEWEST_KEY.get(key, key).replace('/', '_')}")


_NO_STATE = ("RL-Insight publishes no run state: a run's series end with its Ray job, so a run that finished "
             "and one that crashed look alike")
_LACKING = {
    RUN_SESSION_INFO: "RL-Insight does not link a run to the Ray session whose GPUs run it (`dashgen export` "
                      "does, from Ray's session_latest)",
    EXIT_CODE_METRIC: _NO_STATE,
    STEPS_METRIC: "an exporter's count of step-log lines; RL-Insight reads no log",
    PARSE_ERRORS_METRIC: "an exporter's count of unreadable step-log lines; RL-Insight reads no log",
    DROPPED_LINES_METRIC: "an exporter's count of dropped step-log lines; RL-Insight reads no log",
    DROPPED_KEYS_METRIC: "an exporter's count of keys over its series limit; RL-Insight has no limit",
    KEY_COLLISIONS_METRIC: "an exporter's count of keys sharing a name; RL-Insight reads no log",
    **{family: "RL-Insight serves each validation key as a gauge of its own (val-core/openai/gsm8k/reward/mean@4 "
               "-> rl_insight_monitor_val_core_openai_gsm8k_reward_mean_4), not as one family labelled by data "
               "source, variable and metric; name the ones you want in metrics.yaml"
       for family in VALIDATION_FAMILIES.values()},
}


class _RLInsight(MetricSource):
    def derived(self, config: Config) -> tuple[Derived, ...]:
        step = series_name("training/global_step")
        # Every sample of the last evaluation (plus one scrape), read once a scrape.
        seen = config.rule_interval + config.scrape_interval
        every_scrape = config.scrape_interval
        last_step = f"{_RECORDED}last_step_timestamp_seconds"
        keep = 3 * config.rule_interval

        def nonfinite(keys: tuple[str, ...]) -> str:
            signals = "\n      or ".join(f"{series_name(k)} != {series_name(k)} or abs({series_name(k)}) == +Inf"
                                          for k in keys)
            return (f"clamp_max(count by ({ON_RUN}) (count_over_time((\n      {signals}\n    )[{seen}:{every_scrape}])), 1)\n"
                    f"or on({ON_RUN}) 0 * group by ({ON_RUN}) ({step})")

        rescaled = [Derived(f"verl_timing_per_token_{stage}_seconds", f"{_RECORDED}timing_per_token_{stage}:seconds",
                            f"{series_name(f'timing_per_token_ms/{stage}')} / 1000",
                            f"timing_per_token_ms/{stage} in seconds")
                    for stage in ("gen", "ref", "values", "adv", "update_critic", "update_actor")]
        rescaled += [Derived(f"verl_perf_{what}_bytes", f"{_RECORDED}perf_{what}:bytes",
                             f"{series_name(f'perf/{what}_gb')} * {2 ** 30}", f"perf/{what}_gb in bytes")
                     for what in ("max_memory_allocated", "max_memory_reserved", "cpu_memory_used")]
        return (
            Derived(LAST_STEP_METRIC, last_step,
                    f"(timestamp({step}) and on({ON_RUN}) (changes({step}[{seen}]) > 0))\n"
                    f"or on({ON_RUN})\n"
                    f"(last_over_time({last_step}[{keep}]) and on({ON_RUN}) {step})\n"
                    f"or on({ON_RUN})\n"
                    f"timestamp({step})",
                    "Unix time of the scrape at which the run's global step last moved (to one evaluation), or at "
                    "which it was first seen; only while the hub serves the run",
                    f"there is no step timestamp: the time a step was logged is the scrape at which the global "
                    f"step gauge moved, known to one rule evaluation ({config.rule_interval}); what reads it in "
                    f"another rule group reads it up to one evaluation late"),
            Derived(RUN_STATE_METRIC, f"{_RECORDED}state",
                    f'label_replace(group by ({ON_RUN}) ({step}), "state", "{RunPhase.RUNNING.value}", "", "")',
                    "1, state running, while the hub serves the run's global step",
                    "the run state is only ever running: a run's series end with its Ray job, so an ended "
                    "run has none and is not judged"),
            Derived(NONFINITE_LOSS_STREAK_METRIC, f"{_RECORDED}nonfinite_loss",
                    nonfinite(("actor/pg_loss", "critic/vf_loss")),
                    "1 if a scrape of the last evaluation read a NaN or infinite policy or value loss, else 0",
                    "a NaN loss is seen through Prometheus' own comparison (x != x) once a scrape, not once a "
                    "step: a NaN step shorter than the scrape interval is missed"),
            Derived(LOG_ROUNDING_METRIC, f"{_RECORDED}log_rounding", f"0 * group by ({ON_RUN}) ({step})",
                    "0: the hub publishes the values the trainer computed, not a printed text of them"),
            Derived(NONFINITE_STREAK_METRIC, f"{_RECORDED}nonfinite_update",
                    nonfinite(("actor/grad_norm", "actor/ppo_kl", "actor/entropy")),
                    "1 if a scrape of the last evaluation read a NaN or infinite grad norm, KL or entropy, else 0",
                    "steps are not counted: a non-finite grad norm, KL or entropy reads 1 however many steps "
                    "in a row logged it, so two consecutive non-finite steps (VerlNaNMetrics' second branch) "
                    "cannot be told from one, and VerlNonFiniteSteps counts episodes, not steps"),
            *rescaled,
        )


RL_INSIGHT = _RLInsight(
    name="rl_insight",
    title="verl's RL-Insight hub (trainer.logger=['console','rl_insight'])",
    init_config="source: rl_insight\nexporter_address: localhost:9092  # RL-Insight's hub (metrics_report_port)\n",
    series_of_key=series_name,
    labels=LABELS,
    lacking=_LACKING,
    unavailable_alerts={
        "VerlRunCrashed": _NO_STATE,
        "VerlMetricsAbsent": "RL-Insight's hub belongs to the Ray job and goes away when the run ends, however it "
                             "ends; a hub that stops answering cannot be told from a run that finished",
        "VerlStepWindowsNotServed": "no exporter computes step windows here: they compile to PromQL, from the "
                                    "run's rhythm",
    },
    caveat="RL-Insight's gauges hold the newest logged value, read once a scrape: a step shorter than the "
           "scrape interval is never seen, and no series says when a step was logged.",
    # KubeRay's label of a RayCluster's head pod, where the job's driver, and with it the hub, runs.
    pod_labels={"ray.io/node-type": "head"},
    victoriametrics_caveat="VerlNaNMetrics, VerlNonFiniteStep and VerlNonFiniteSteps see a NaN loss, grad norm, KL "
                           "or entropy as x != x, which VictoriaMetrics never matches (it drops NaN samples): under "
                           "vmalert they fire on infinities only. Run the rules on Prometheus to page on NaN",
)
