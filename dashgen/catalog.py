"""The metric catalog: every metric a dashboard panel or a rule may query.

It is the contract between the exporter (which produces the verl_* series) and the
queries (which are checked against it at build time). Names of verl's per-step
metrics follow one pinned rule, `verl_metric_name`.

verl's keys (_VERL_KEYS) were last checked against verl 0.9.1's source: tests/data/verl-0.9.1-keys.txt
lists what it logs, with the file and function each key comes from, and tests/compiler/test_verl_keys.py
checks every verl metric here is read under a key it logs (or says why not: another framework's key,
or one only older versions log). A key a newer verl renames is added as an alias, after the first.
"""

from __future__ import annotations

import enum
import re
from typing import Iterable, Mapping

from dashgen.model import RUN_MATCH_LABELS
from dashgen.records import record


class MetricType(str, enum.Enum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"


class Origin(str, enum.Enum):
    """Where a catalog metric comes from: which exporter or engine publishes it, or a rule that records it."""

    VERL = "verl exporter"
    RAY = "Ray node metrics"
    DCGM = "DCGM exporter"
    VLLM = "vLLM"
    SGLANG = "SGLang"
    PROMETHEUS = "Prometheus"
    RECORDING_RULE = "recording rule"
    PROJECT = "the project's metrics.yaml"


# Labels Prometheus attaches to every scraped series.
TARGET_LABELS = frozenset({"job", "instance"})
VERL_LABELS = frozenset(RUN_MATCH_LABELS)  # a run's series: its exporter's target, its project and experiment
RAY_NODE_LABELS = TARGET_LABELS | {"ip", "SessionName", "Version", "IsHeadNode", "RayNodeType"}
RAY_GPU_LABELS = RAY_NODE_LABELS | {"GpuIndex", "GpuDeviceName", "GpuUuid"}
DCGM_LABELS = TARGET_LABELS | {"gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id", "GPU_I_PROFILE",
                               "GPU_I_ID", "namespace", "pod", "container"}
# The rollout engines' targets file names each engine's run (project, experiment), as file_sd labels.
ROLLOUT_TARGET_LABELS = TARGET_LABELS | {"project", "experiment"}
VLLM_LABELS = ROLLOUT_TARGET_LABELS | {"model_name", "engine"}
SGLANG_LABELS = ROLLOUT_TARGET_LABELS | {"model_name", "engine_type", "tp_rank", "pp_rank", "dp_rank", "moe_ep_rank"}

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# Series the exporter derives itself (not from one log key), named here once.
RUN_STATE_METRIC = "verl_run_state"
EXIT_CODE_METRIC = "verl_run_exit_code"
NONFINITE_STREAK_METRIC = "verl_nonfinite_streak_steps"
# The loss alone, as a number: VictoriaMetrics drops NaN samples, so `loss != loss` can never fire there.
NONFINITE_LOSS_STREAK_METRIC = "verl_nonfinite_loss_streak_steps"
LAST_STEP_METRIC = "verl_exporter_last_step_timestamp_seconds"
# dashgen/formats/rounding.py: the largest value the step log prints as 0.
LOG_ROUNDING_METRIC = "verl_log_rounding"
# dashgen/sources/step_statistics.py: the step windows the exporter computes from the step log,
# and the digest of which it computes.
STEP_STATISTIC_METRIC = "verl_step_statistic"
# dashgen/sources/series_arrival.py: a series the run logged on every line and stopped logging.
SERIES_UNLOGGED_METRIC = "verl_exporter_series_unlogged_steps"
# dashgen/sources/expected_keys.py: a series the run's framework logs on every step and the run never logged.
SERIES_NEVER_LOGGED_METRIC = "verl_exporter_series_never_logged_steps"
# dashgen/compiler/rules/signal_needs.py: each logged series with the alerts blind without it, recorded by the build.
SERIES_READERS_METRIC = "dashgen:series_readers"
STEP_WINDOWS_INFO_METRIC = "verl_exporter_step_windows_info"
STEPS_METRIC = "verl_exporter_steps_total"
PARSE_ERRORS_METRIC = "verl_exporter_parse_errors_total"
DROPPED_LINES_METRIC = "verl_exporter_dropped_lines_total"
DROPPED_KEYS_METRIC = "verl_exporter_dropped_keys_total"
KEY_COLLISIONS_METRIC = "verl_exporter_key_collisions_total"
# verl logs validation results only on test steps, as `val-core/<data_source>/<variable>/<metric>`
# (and val-aux/...); they are served as one labelled gauge per section (see verl_log.py).
VALIDATION_FAMILIES = {"val-core": "verl_val_core", "val-aux": "verl_val_aux"}
VALIDATION_LABELS = ("data_source", "variable", "metric")
# What the exporter counts of the step log it reads, in the order it serves them: counters, whose
# OpenMetrics family is the name without _total (counter_family).
EXPORTER_COUNTERS = (STEPS_METRIC, PARSE_ERRORS_METRIC, DROPPED_LINES_METRIC, DROPPED_KEYS_METRIC,
                     KEY_COLLISIONS_METRIC)
# The run's own series: what `dashgen export` (dashgen/runtime/exporter.py) serves, and a backfill of
# the same log (dashgen/replay/backfill.py) writes, beside the logged keys' gauges.
EXPORTER_SERIES = (LAST_STEP_METRIC, *EXPORTER_COUNTERS, RUN_STATE_METRIC, EXIT_CODE_METRIC, NONFINITE_STREAK_METRIC,
                   NONFINITE_LOSS_STREAK_METRIC, LOG_ROUNDING_METRIC, SERIES_UNLOGGED_METRIC, SERIES_NEVER_LOGGED_METRIC,
                   STEP_WINDOWS_INFO_METRIC, STEP_STATISTIC_METRIC,
                   *VALIDATION_FAMILIES.values())


def counter_family(name: str) -> str:
    """The OpenMetrics family of a counter's samples (`verl_exporter_steps` of `verl_exporter_steps_total`)."""
    return name.removesuffix("_total")


@record
class Metric:
    """A series dashgen knows: its name, type, unit and where it comes from."""

    name: str
    type: MetricType
    unit: str  # a Grafana unit id: "s", "bytes", "percent", "percentunit", "short", "none"
    help: str
    labels: frozenset[str]
    origin: Origin
    # verl log keys this metric is read from, in order of preference (version aliases).
    verl_keys: tuple[str, ...] = ()
    # Multiply the logged value by this to get the metric's base unit.
    scale: float = 1.0


# --- The naming rule for verl's per-step keys ---------------------------------------

_NOT_NAME_CHAR = re.compile(r"[^a-z0-9]+")


def _sanitise(text: str) -> str:
    return _NOT_NAME_CHAR.sub("_", text.lower())


def verl_metric_name(key: str) -> tuple[str, float]:
    """Prometheus name and scale factor for a verl log key (pinned contract).

    `actor/ppo_kl` -> `verl_actor_ppo_kl`; `timing_s/gen` -> `verl_timing_gen_seconds`;
    `timing_per_token_ms/gen` -> `verl_timing_per_token_gen_seconds` (x 1e-3);
    `perf/max_memory_reserved_gb` -> `verl_perf_max_memory_reserved_bytes` (x 2^30).
    """
    if key.startswith("timing_s/"):
        return f"verl_timing_{_sanitise(key[len('timing_s/'):])}_seconds", 1.0
    if key.startswith("timing_per_token_ms/"):
        return f"verl_timing_per_token_{_sanitise(key[len('timing_per_token_ms/'):])}_seconds", 1e-3
    if key.startswith("perf/") and key.endswith("_gb"):
        return f"verl_{_sanitise(key[:-len('_gb')])}_bytes", float(2**30)
    return f"verl_{_sanitise(key)}", 1.0


# --- verl's per-step metrics ---------------------------------------------------------
# (key or keys, Grafana unit, help). Every one is a gauge holding the newest step's value.

_TIMING_STAGES = {
    "step": "whole training step",
    "gen": "rollout generation",
    "gen_max": "the greedy baseline rollout (REMAX; verl 0.9.1 times it within gen)",
    "reward": "reward computation",
    "old_log_prob": "recomputing old log-probs",
    "ref": "reference policy log-probs",
    "values": "critic value estimation",
    "adv": "advantage estimation",
    "update_critic": "critic update",
    "update_actor": "actor update",
    "update_weights": "weight sync from trainer to rollout engine",
    "testing": "validation",
    "save_checkpoint": "checkpoint saving",
}
_PER_TOKEN_STAGES = ("gen", "ref", "values", "adv", "update_critic", "update_actor")

_STATS = ("mean", "max", "min")

_VERL_KEYS: list[tuple[tuple[str, ...], str, str]] = [
    (("training/global_step",), "none", "Global training step"),
    (("training/epoch",), "none", "Training epoch"),
    # Actor (policy) update
    (("actor/ppo_kl",), "none", "Approximate KL between the old and the current policy within the PPO update"),
    # verl 0.9.1 logs actor/entropy when it recomputes the old log-probs and actor/entropy_loss within the update
    # (where it computes entropy); versions before 0.4 logged only actor/entropy_loss.
    (("actor/entropy", "actor/entropy_loss"), "none", "Mean token entropy of the policy (actor/entropy_loss before verl 0.4)"),
    (("actor/grad_norm",), "none", "Actor gradient norm before clipping"),
    (("actor/pg_loss",), "none", "Policy-gradient (actor) loss"),
    (("actor/pg_clipfrac",), "percentunit", "Fraction of tokens whose ratio was clipped by the PPO clip"),
    (("actor/pg_clipfrac_lower",), "percentunit", "Fraction of tokens clipped by the dual-clip lower bound"),
    (("actor/kl_loss",), "none", "KL loss against the reference policy (use_kl_loss)"),
    (("actor/kl_coef",), "none", "KL coefficient in effect"),
    # The KL penalty in the reward (algorithm.use_kl_in_reward) and its coefficient: critic/kl and
    # critic/kl_coeff before verl 0.4 (ray_trainer.apply_kl_penalty).
    (("actor/reward_kl_penalty", "critic/kl"), "none",
     "KL to the reference policy taken off the reward (algorithm.use_kl_in_reward; critic/kl before verl 0.4)"),
    (("actor/reward_kl_penalty_coeff", "critic/kl_coeff"), "none",
     "Coefficient of the KL penalty in the reward (critic/kl_coeff before verl 0.4)"),
    (("actor/lr",), "none", "Actor learning rate"),
    # Train/rollout mismatch: the trainer's log-probs of the sampled tokens against the rollout
    # engine's (verl logs the first three by default since rollout.calculate_log_probs became True).
    *[((f"training/rollout_probs_diff_{stat}",), "none",
       f"{stat.capitalize()} over the batch's response tokens of |p_rollout - p_trainer|, the gap between the "
       f"rollout engine's and the trainer's probability of each sampled token")
      for stat in ("mean", "max", "std")],
    (("rollout_corr/kl",), "none",
     "KL(rollout || trainer) per token from their log-probs (verl's rollout correction); can be slightly negative"),
    (("rollout_corr/log_ppl_abs_diff",), "none",
     "Mean absolute difference of the rollout engine's and the trainer's log perplexity per sequence "
     "(verl's rollout correction)"),
    (("rollout_corr/chi2_token",), "none",
     "Chi-squared divergence of the trainer from the rollout engine per token: mean(ratio^2) - 1 "
     "(verl's rollout correction)"),
    # TRL's (vLLM importance-sampling correction): slime logs the same mean as train/train_rollout_logprob_abs_diff.
    (("sampling/sampling_logp_difference/mean", "train/train_rollout_logprob_abs_diff"), "none",
     "Mean over completion tokens of |log p_trainer - log p_rollout| (TRL; slime's train_rollout_logprob_abs_diff)"),
    (("sampling/sampling_logp_difference/max",), "none",
     "Largest |log p_trainer - log p_rollout| of a completion token (TRL)"),
    *[((f"sampling/importance_sampling_ratio/{stat}",), "none",
       f"{stat.capitalize()} of the importance-sampling ratio p_trainer / p_rollout TRL corrects the loss with")
      for stat in ("min", "mean", "max")],
    (("frac_reward_zero_std",), "percentunit",
     "Share of prompt groups whose rewards are all equal (TRL's GRPO): they give no advantage to learn from"),
    # The same groups told apart, where the log says which (prime-rl's orchestrator logs both).
    (("reward/solve_none",), "percentunit",
     "Share of problems none of whose completions earned the reward (prime-rl): too hard, no advantage"),
    (("reward/solve_all",), "percentunit",
     "Share of problems all of whose completions earned the reward (prime-rl): too easy, no advantage"),
    # Critic (absent on critic-free GRPO runs) and data metrics
    (("critic/score/std",), "none",
     "Spread of the score within prompt groups (TRL's reward_std, the mean of each group's standard deviation): "
     "0 when every group's rewards are equal"),
    (("critic/vf_loss",), "none", "Critic value-function loss"),
    (("critic/vf_clipfrac",), "percentunit", "Fraction of value predictions clipped"),
    (("critic/vpred_mean",), "none", "Mean value prediction"),
    (("critic/vf_explained_var",), "none", "Explained variance of the returns by the critic's values"),
    (("critic/grad_norm",), "none", "Critic gradient norm before clipping"),
    (("critic/lr",), "none", "Critic learning rate"),
    *[((f"critic/{group}/{stat}",), "none", f"{stat.capitalize()} of the batch's sequence-level {what}")
      for group, what in (("score", "score (reward before KL penalty)"), ("rewards", "reward (after KL penalty)"),
                          ("advantages", "advantage"), ("returns", "return"), ("values", "value"))
      for stat in _STATS],
    *[((f"response_length/{stat}",), "none", f"{stat.capitalize()} response length in tokens") for stat in _STATS],
    (("response_length/clip_ratio",), "percentunit", "Fraction of responses cut at the maximum response length"),
    *[((f"prompt_length/{stat}",), "none", f"{stat.capitalize()} prompt length in tokens") for stat in _STATS],
    (("prompt_length/clip_ratio",), "percentunit", "Fraction of prompts cut at the maximum prompt length"),
    (("response/aborted_ratio",), "percentunit", "Fraction of rollout requests aborted"),
    # Timing
    # verl before 0.2 (its getting-started notebook, TinyZero and its forks) logged timing/<stage>, in seconds too.
    *[((f"timing_s/{stage}", f"timing/{stage}"), "s", f"Wall time of {what}") for stage, what in _TIMING_STAGES.items()],
    *[((f"timing_per_token_ms/{stage}",), "s", f"Wall time per token of {_TIMING_STAGES[stage]}")
      for stage in _PER_TOKEN_STAGES],
    # Throughput and memory
    (("perf/total_num_tokens",), "short", "Tokens (prompt + response) in the step's batch"),
    (("perf/time_per_step",), "s", "Wall time of the step"),
    (("perf/throughput",), "short", "Tokens per second per GPU"),
    # mfu/<role> before verl 0.3; the worker's own <role>/mfu since 0.7.
    (("perf/mfu/actor", "actor/mfu", "mfu/actor"), "percentunit", "Model FLOPs utilisation of the actor update"),
    (("perf/mfu/critic", "critic/mfu", "mfu/critic"), "percentunit", "Model FLOPs utilisation of the critic update"),
    # verl 0.8+ prefixes the worker's memory keys with its role (actor/perf/...).
    (("perf/max_memory_allocated_gb", "actor/perf/max_memory_allocated_gb"), "bytes",
     "Peak GPU memory allocated by PyTorch during the actor update"),
    (("perf/max_memory_reserved_gb", "actor/perf/max_memory_reserved_gb"), "bytes",
     "Peak GPU memory reserved by PyTorch's caching allocator during the actor update"),
    (("perf/cpu_memory_used_gb", "actor/perf/cpu_memory_used_gb"), "bytes",
     "Host memory in use on the actor's node (whole node, not the process)"),
    # Data-parallel balance
    *[((f"global_seqlen/{stat}",), "short", f"Per data-parallel rank token count: {stat.replace('_', ' ')}")
      for stat in ("min", "max", "mean", "minmax_diff", "balanced_min", "balanced_max")],
]


def _verl_metrics() -> Iterable[Metric]:
    for keys, unit, help_text in _VERL_KEYS:
        name, scale = verl_metric_name(keys[0])
        yield Metric(name, MetricType.GAUGE, unit, help_text, VERL_LABELS, Origin.VERL, keys, scale)
    exporter = [
        (LAST_STEP_METRIC, MetricType.GAUGE, "dateTimeAsIso", "Unix time at which the exporter read the newest step"),
        (STEPS_METRIC, MetricType.COUNTER, "short", "Steps read from the log"),
        (PARSE_ERRORS_METRIC, MetricType.COUNTER, "short", "Log lines skipped as unparseable"),
        (DROPPED_LINES_METRIC, MetricType.COUNTER, "short",
         "Log lines dropped for being longer than the exporter's line limit"),
        (DROPPED_KEYS_METRIC, MetricType.COUNTER, "short",
         "Logged keys not exported because the run has reached the exporter's series limit"),
        (KEY_COLLISIONS_METRIC, MetricType.COUNTER, "short",
         "Logged keys not exported because another key already exports the same metric name"),
    ]
    for name, mtype, unit, help_text in exporter:
        yield Metric(name, mtype, unit, help_text, VERL_LABELS, Origin.VERL)
    # The run's lifecycle (dashgen/lifecycle.py), one series per state, 1 for the current one.
    yield Metric(RUN_STATE_METRIC, MetricType.GAUGE, "none",
                 "1 for the run's current state (running, finished, crashed, stopped, exited_without_steps), "
                 "0 for the others",
                 VERL_LABELS | {"state"}, Origin.VERL)
    yield Metric(EXIT_CODE_METRIC, MetricType.GAUGE, "none",
                 "Exit code of the supervised trainer (negative: killed by that signal); absent while it runs",
                 VERL_LABELS, Origin.VERL)
    # dashgen/runtime/ray_link.py: which Ray session (cluster) runs this run's GPUs; dashgen/gpu.py joins on it.
    yield Metric("verl_run_ray_session_info", MetricType.GAUGE, "none",
                 "Always 1; links the run (project, experiment) to the Ray session whose nodes run it",
                 VERL_LABELS | {"SessionName"}, Origin.VERL)
    yield Metric(NONFINITE_STREAK_METRIC, MetricType.GAUGE, "short",
                 "Consecutive steps, up to the newest, that logged a NaN or infinite loss, grad norm, KL or entropy",
                 VERL_LABELS, Origin.VERL)
    yield Metric(NONFINITE_LOSS_STREAK_METRIC, MetricType.GAUGE, "short",
                 "Consecutive steps, up to the newest, that logged a NaN or infinite policy or value loss",
                 VERL_LABELS, Origin.VERL)
    yield Metric(LOG_ROUNDING_METRIC, MetricType.GAUGE, "short",
                 "The largest value the step log prints as 0, from the digits its newest line's numbers keep: "
                 "0.0005 for verl's console (3 decimals), about 1e-17 for full floats",
                 VERL_LABELS, Origin.VERL)
    # dashgen/sources/step_statistics.py: windows counted in steps, computed from the step log.
    yield Metric(STEP_WINDOWS_INFO_METRIC, MetricType.GAUGE, "none",
                 "Always 1; digest: the fingerprint of the step windows the exporter computes "
                 "(rendered/exporter/step-statistics.yaml as it read it)",
                 VERL_LABELS | {"digest"}, Origin.VERL)
    yield Metric(STEP_STATISTIC_METRIC, MetricType.GAUGE, "none",
                 "A statistic of a logged series over the run's last logged steps (series: the metric, statistic: "
                 "e.g. median_30steps), as rendered/exporter/step-statistics.yaml lists them",
                 VERL_LABELS | {"series", "statistic"}, Origin.VERL)
    yield Metric(SERIES_UNLOGGED_METRIC, MetricType.GAUGE, "short",
                 "Training lines logged since the series last arrived, for a series the run had logged on every line "
                 "and stopped logging (absent while it arrives)",
                 VERL_LABELS | {"series"}, Origin.VERL)
    yield Metric(SERIES_NEVER_LOGGED_METRIC, MetricType.GAUGE, "short",
                 "Training lines the run has logged, for a series its framework logs on every step by default and "
                 "the run has not logged yet (absent once it arrives, and for a run of no known framework); "
                 "logged_as: a key the run logs that no series reads and that looks like the series' own",
                 VERL_LABELS | {"series", "logged_as"}, Origin.VERL)
    yield Metric(SERIES_READERS_METRIC, MetricType.GAUGE, "none",
                 "Always 1; one per series the step log gives: its log key, and the alerts every way of firing of "
                 "which reads it (recorded by the build)",
                 frozenset({"series", "key", "alerts"}), Origin.RECORDING_RULE)
    yield Metric(VALIDATION_FAMILIES["val-core"], MetricType.GAUGE, "none",
                 "verl's core validation results (val-core/<data_source>/<variable>/<metric>) of the latest test step",
                 VERL_LABELS | set(VALIDATION_LABELS), Origin.VERL)
    yield Metric(VALIDATION_FAMILIES["val-aux"], MetricType.GAUGE, "none",
                 "verl's auxiliary validation results (val-aux/...) of the latest test step",
                 VERL_LABELS | set(VALIDATION_LABELS), Origin.VERL)


def _other_metrics() -> Iterable[Metric]:
    G, C, H = MetricType.GAUGE, MetricType.COUNTER, MetricType.HISTOGRAM
    rows = [
        ("up", G, "none", "1 if the last scrape of the target succeeded", TARGET_LABELS, Origin.PROMETHEUS),
        # Prometheus' record of its alerts; dashgen's alerts on a run carry the run's labels.
        ("ALERTS", G, "none", "1 for each pending or firing alert", VERL_LABELS | {"alertname", "alertstate",
                                                                                 "severity"}, Origin.PROMETHEUS),
        # Ray node metrics: GPU memory in MiB whatever their help text says (Grafana unit mbytes = MiB).
        ("ray_node_gpus_utilization", G, "percent", "GPU utilisation", RAY_GPU_LABELS, Origin.RAY),
        ("ray_node_gram_used", G, "mbytes", "GPU memory used, in MiB", RAY_GPU_LABELS, Origin.RAY),
        ("ray_node_gram_available", G, "mbytes", "GPU memory available, in MiB", RAY_GPU_LABELS, Origin.RAY),
        ("ray_node_mem_used", G, "bytes", "Host memory used", RAY_NODE_LABELS, Origin.RAY),
        ("ray_node_mem_total", G, "bytes", "Host memory in total", RAY_NODE_LABELS, Origin.RAY),
        ("ray_node_cpu_utilization", G, "percent", "Host CPU utilisation", RAY_NODE_LABELS, Origin.RAY),
        # DCGM exporter
        ("DCGM_FI_DEV_GPU_UTIL", G, "percent", "GPU utilisation", DCGM_LABELS, Origin.DCGM),
        ("DCGM_FI_DEV_FB_USED", G, "mbytes", "Framebuffer memory used, in MiB", DCGM_LABELS, Origin.DCGM),
        ("DCGM_FI_DEV_FB_FREE", G, "mbytes", "Framebuffer memory free, in MiB", DCGM_LABELS, Origin.DCGM),
        # vLLM V1
        ("vllm:kv_cache_usage_perc", G, "percentunit", "KV-cache usage, 0 to 1", VLLM_LABELS, Origin.VLLM),
        ("vllm:num_requests_running", G, "short", "Requests being processed", VLLM_LABELS, Origin.VLLM),
        ("vllm:num_requests_waiting", G, "short", "Requests waiting to be scheduled", VLLM_LABELS, Origin.VLLM),
        ("vllm:num_preemptions_total", C, "short", "Requests preempted", VLLM_LABELS, Origin.VLLM),
        ("vllm:prompt_tokens_total", C, "short", "Prefill tokens processed", VLLM_LABELS, Origin.VLLM),
        ("vllm:generation_tokens_total", C, "short", "Generation tokens produced", VLLM_LABELS, Origin.VLLM),
        ("vllm:time_to_first_token_seconds", H, "s", "Time to first token", VLLM_LABELS, Origin.VLLM),
        ("vllm:inter_token_latency_seconds", H, "s", "Time between output tokens", VLLM_LABELS, Origin.VLLM),
        ("vllm:e2e_request_latency_seconds", H, "s", "End-to-end request latency", VLLM_LABELS, Origin.VLLM),
        # SGLang
        ("sglang:token_usage", G, "percentunit", "KV-cache token usage, 0 to 1", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:num_running_reqs", G, "short", "Requests being processed", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:num_queue_reqs", G, "short", "Requests waiting in the queue", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:gen_throughput", G, "short", "Generation throughput, tokens/s", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:cache_hit_rate", G, "percentunit", "Prefix-cache hit rate", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:prompt_tokens_total", C, "short", "Prefill tokens processed", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:generation_tokens_total", C, "short", "Generation tokens produced", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:time_to_first_token_seconds", H, "s", "Time to first token", SGLANG_LABELS, Origin.SGLANG),
        ("sglang:e2e_request_latency_seconds", H, "s", "End-to-end request latency", SGLANG_LABELS, Origin.SGLANG),
    ]
    for name, mtype, unit, help_text, labels, source in rows:
        yield Metric(name, mtype, unit, help_text, labels, source)


class Catalog(Mapping[str, Metric]):
    """Metrics by name; also resolves a histogram's `_bucket`, `_sum` and `_count` series."""

    def __init__(self, metrics: Iterable[Metric]):
        self._metrics: dict[str, Metric] = {}
        for metric in metrics:
            if metric.name in self._metrics:
                raise ValueError(f"metric {metric.name} is declared twice in the catalog")
            self._metrics[metric.name] = metric

    def __getitem__(self, name: str) -> Metric:
        return self._metrics[name]

    def __iter__(self):
        return iter(self._metrics)

    def __len__(self) -> int:
        return len(self._metrics)

    def with_metrics(self, metrics: Iterable[Metric]) -> "Catalog":
        return Catalog([*self._metrics.values(), *metrics])

    def resolve(self, series_name: str) -> tuple[Metric, str] | None:
        """The metric a series name belongs to, and its histogram suffix ('' otherwise)."""
        if series_name in self._metrics:
            return self._metrics[series_name], ""
        for suffix in HISTOGRAM_SUFFIXES:
            base = series_name[: -len(suffix)]
            if series_name.endswith(suffix) and self._metrics.get(base, None) is not None:
                if self._metrics[base].type is MetricType.HISTOGRAM:
                    return self._metrics[base], suffix
        return None

    def verl_key_map(self) -> dict[str, Metric]:
        """verl log key -> metric, for every key (aliases included) the catalog knows."""
        return {key: m for m in self._metrics.values() for key in m.verl_keys}


CATALOG = Catalog([*_verl_metrics(), *_other_metrics()])
