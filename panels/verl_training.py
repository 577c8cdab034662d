"""The verl RL training dashboard: the four rows on-call reads first (stability, losses, per-rank heatmap,
memory), then rewards, the stage timeline, step time, throughput and the rollout engine, collapsed.

Every verl key of the catalog is on a panel here or in LEFT_OUT with the reason
(`dashgen list --unused` shows what no panel reads; tests/authoring/test_signals.py pins it).

`{$run}` selects the run picked in the dashboard's job/project/experiment variables; `{$gpu}`,
`{$node}` and `{$rollout, $run_labels}` the scrape jobs named in the config (see dashgen/model.py).
"""

from dashgen_alerts.memory import MemoryConfig
from dashgen_alerts.mismatch import MismatchConfig
from dashgen_alerts.progress import STALL_LIMIT, ProgressConfig
from dashgen_alerts.stability import StabilityConfig

from dashgen.catalog import CATALOG
from dashgen.config import Config
from dashgen.gpu import HOST_MEMORY_FULLEST, RUN_SESSION_LINK, SESSION_LABEL, gpu_source, run_join
from dashgen.model import (Annotation, Dashboard, DashboardLink, Heatmap, LeftOut, Panel, Query, Row, Stat,
                           Threshold, TimeSeries, Variable)

# Units Grafana has no id for are written as a plain name after the value.
NATS = "suffix: nats"  # KL and entropy: verl computes both with natural logarithms
REWARD = "suffix: reward"  # scores, rewards, returns, values, advantages: the task's reward scale
TOKENS = "suffix: tokens"
TOKENS_PER_SECOND = "suffix: tokens/s"

# verl keys the catalog knows that no panel shows, each with the reason.
LEFT_OUT = (
    LeftOut("perf/time_per_step", "the same wall time as timing_s/step, which the step-time panels show"),
    LeftOut("critic/score/std", "TRL's reward_std, which verl does not log; VerlNoLearningSignal and "
                                "VerlRewardNeverPays read it"),
    *(LeftOut(key, "TRL's importance-sampling correction, which verl does not log; the train/rollout gap panel "
                   "shows its mean log-prob gap")
      for key in ("sampling/sampling_logp_difference/max", *(f"sampling/importance_sampling_ratio/{stat}"
                                                              for stat in ("min", "mean", "max")))),
)

# The run picker every verl dashboard shares: `{$run}` reads these three. They list the runs that
# have logged a step (the global step is a series every metric source publishes).
RUN_VARIABLES = (
    Variable("job", "Job", "label_values(verl_training_global_step, job)"),
    Variable("project", "Project", 'label_values(verl_training_global_step{job=~"$job"}, project)'),
    Variable("experiment", "Experiment",
             'label_values(verl_training_global_step{job=~"$job", project=~"$project"}, experiment)'),
)
COMPARE_RUNS = DashboardLink("Compare runs by step", "verl-compare-runs")

# --- At a glance (on-call's first look) ---------------------------------------------

current_step = Stat(
    "Current step",
    (Query("max by (project, experiment) (verl_training_global_step{$run})", "{{experiment}}"),),
)
firing_alerts = Stat(
    "Firing alerts",
    (Query('count(ALERTS{$run, alertstate="firing", severity=~"critical|warning"}) or vector(0)', "firing"),),
    description="Warnings and criticals firing now for the selected runs (infos are not counted: a healthy run has "
                "some); the red marks on the graphs show when each alert began.",
    thresholds=(Threshold(1),),
)


# One firing a key, as the alerts judge it (neither has a `for`, so none is ever pending). The exporter's
# two counts of steps without a key would need two run selectors: beyond the panel's share of 1,200 B.
signals_missing = Stat(
    "Signals missing",
    (Query('count(ALERTS{$run, alertname=~"VerlSignal(Stopped|NeverLogged)"}) or vector(0)', "missing"),),
    description="Keys the run stopped logging, or never logged.",
    thresholds=(Threshold(1, "VerlSignalStopped"),),
)


# verl's core validation results (val-core/...); a run that logs only val-aux/... (a custom
# validation, or a log whose lines were cut before their val-core keys) shows its means instead.
# `on (instance)` matches the run exactly; the experiment alone scopes the lookup (and keeps the
# dashboard within its 1,200 B a panel).
VALIDATION_SCORES = ('verl_val_core{$run} or verl_val_aux{$run, metric=~"mean@.*"} '
                     'unless on (instance) verl_val_core{experiment=~"$experiment"}')
latest_validation = Stat(
    "Latest validation score",
    (Query(VALIDATION_SCORES, "{{data_source}} {{variable}} {{metric}}"),),
    description="verl's core validation results (val-core/..., else val-aux means) of the latest test step.",
    width=8,
)
validation_score = TimeSeries(
    "Validation score",
    (Query(VALIDATION_SCORES, "{{experiment}} {{data_source}} {{metric}}"),),
    unit=REWARD,
    description="verl's core validation results (else val-aux means), one line per data source and metric, "
                "flat between test steps (trainer.test_freq).",
    width=12,
    height=7,
)
validation_aux = TimeSeries(
    "Validation, auxiliary metrics",
    (Query("verl_val_aux{$run}", "{{experiment}} {{data_source}} {{variable}} {{metric}}"),),
    unit=REWARD,
    description="verl's other validation results (val-aux/...: best@N, std@N, per-variable means) of the "
                "latest test step.",
    width=12,
    height=7,
)


def _seconds_since_step(config: Config) -> Stat:
    return Stat(
        "Seconds since the last step",
        (Query("time() - max by (project, experiment) (verl_exporter_last_step_timestamp_seconds{$run})",
               "{{experiment}}"),),
        unit="s",
        description="Red past the silence VerlTrainingStalled allows this run.",
        thresholds=(Threshold(config.area(ProgressConfig).stall_min_silence.seconds, "VerlTrainingStalled",
                              query=Query(f"{STALL_LIMIT}{{$run}}", "stall limit")),),
    )


# --- Training stability ------------------------------------------------------------


def _spread(title: str, metric: str, unit: str, description: str, width: int = 6) -> TimeSeries:
    """Mean, max and min of one of verl's batch statistics (`<metric>_mean`, `_max`, `_min`)."""
    return TimeSeries(title, tuple(Query(f"{metric}_{stat}{{$run}}", f"{stat} {{{{experiment}}}}")
                                   for stat in ("mean", "max", "min")), unit=unit, description=description,
                      width=width)


reward = TimeSeries(
    "Reward (score)",
    (Query("verl_critic_score_mean{$run}", "mean {{experiment}}"),
     Query("verl_critic_score_min{$run}", "min {{experiment}}"),
     Query("verl_critic_score_max{$run}", "max {{experiment}}")),
    unit=REWARD,
    description="Sequence-level score of the step's batch (critic/score/*): the reward before any KL penalty.",
    width=6,
)
def _kl(config: Config) -> TimeSeries:
    # Only the KL VerlKLSpike reads, under its threshold: the KL to the reference (a TRL run's only KL)
    # drawn under the same 0.1 line would read as a spike it is not. It is on the Losses row ("KL loss").
    return TimeSeries(
        "PPO KL (old vs new policy)",
        (Query("verl_actor_ppo_kl{$run}", "{{experiment}}"),),
        unit=NATS,
        description="actor/ppo_kl: drift within one PPO update. The KL to the reference policy is the Losses "
                    "row's KL loss.",
        width=6,
        # VerlKLSpike's bound; it also asks the median of 10 steps to have risen from the run's quieter level.
        thresholds=(Threshold(config.area(StabilityConfig).kl_spike_threshold, "VerlKLSpike"),),
    )


def _entropy(config: Config) -> TimeSeries:
    stability = config.area(StabilityConfig)
    collapse, over = stability.entropy_collapse_fraction, stability.entropy_level_steps
    ending = stability.entropy_median_steps
    return TimeSeries(
        "Policy entropy",
        (Query("verl_actor_entropy{$run}", "{{experiment}}"),
         Query(f"{collapse:g} * verl:actor_entropy:baseline_median_{over}steps_ending{ending}{{$run}}", "collapse below {{experiment}}")),
        unit=NATS,
        description=f"Mean token entropy. A slow decline is normal, and so is a level low from the start; a fall "
                    f"below the dashed line (a fraction of its {over}-step median before the last {ending}) is "
                    f"mode collapse (VerlEntropyCollapse).",
        width=6,
    )


grad_norm = TimeSeries(
    "Actor grad norm",
    (Query("verl_actor_grad_norm{$run}", "{{experiment}}"),),
    description="Gradient norm before clipping; spikes together with KL are the classic divergence signature.",
    width=6,
)
clip_fraction = TimeSeries(
    "PPO clip fraction",
    (Query("verl_actor_pg_clipfrac{$run}", "clipped {{experiment}}"),
     Query("verl_actor_pg_clipfrac_lower{$run}", "dual-clip lower {{experiment}}")),
    unit="percentunit",
    width=6,
)
response_length = _spread("Response length", "verl_response_length", TOKENS, "Tokens per response.")
response_clip_ratio = TimeSeries(
    "Response length clip ratio",
    (Query("verl_response_length_clip_ratio{$run}", "{{experiment}}"),),
    unit="percentunit",
    description="Responses cut at max_response_length; a rise from the run's early level warns.",
    width=6,
    thresholds=(Threshold(alert="VerlResponseTruncationHigh"),),
)
aborted_ratio = TimeSeries(
    "Rollout aborted ratio",
    (Query("verl_response_aborted_ratio{$run}", "{{experiment}}"),),
    unit="percentunit",
    description="Fraction of rollout requests aborted (verl 0.6+).",
    width=6,
    thresholds=(Threshold(alert="VerlRolloutAborts"),),
)

# --- Train/rollout mismatch -----------------------------------------------------------


def _train_rollout_gap(config: Config) -> TimeSeries:
    return TimeSeries(
        "Train/rollout gap",
        (Query("verl_training_rollout_probs_diff_mean{run}", "p {{experiment}}"),
         Query("verl_sampling_sampling_logp_difference_mean{run}", "log-p {{experiment}}")),
        description="Mean |gap| of trainer vs rollout token (log-)probabilities; the line: verl-omni's gate.",
        width=24,
        thresholds=(Threshold(config.area(MismatchConfig).probs_diff_gate, "VerlTrainRolloutGapBeyondGate"),),
    )


probs_gap = TimeSeries(
    "Probability gap per token",
    (Query("verl_training_rollout_probs_diff_mean{run}", "mean {{experiment}}"),
     Query("verl_training_rollout_probs_diff_std{run}", "std {{experiment}}"),
     Query("verl_training_rollout_probs_diff_max{run}", "max {{experiment}}")),
    description="|p_rollout - p_trainer| per response token.",
    width=12,
)
rollout_correction = TimeSeries(
    "Rollout correction divergences",
    (Query("verl_rollout_corr_kl{run}", "KL {{experiment}}"),
     Query("verl_rollout_corr_log_ppl_abs_diff{run}", "log-ppl {{experiment}}"),
     Query("verl_rollout_corr_chi2_token{run}", "chi2 {{experiment}}")),
    description="rollout_corr/*: |KL| above 0.1 is a significant off-policy gap, chi2 above 1 a severe shift.",
    width=12,
)

# --- Rewards, advantages, values ---------------------------------------------------

equal_reward_groups = TimeSeries(
    "Groups with equal rewards",
    (Query("verl_frac_reward_zero_std{run}", "equal {{experiment}}"),
     Query("verl_reward_solve_none{run}", "too hard {{experiment}}"),
     Query("verl_reward_solve_all{run}", "too easy {{experiment}}")),
    unit="percentunit",
    description="Groups whose rewards are all equal: no GRPO advantage.",
    width=24,
)


_CRITIC_FREE = " Empty on critic-free runs (GRPO, RLOO, REINFORCE++)."

rewards = _spread("Reward after KL penalty", "verl_critic_rewards", REWARD,
                  "critic/rewards/*: the reward the advantages are computed from, after the KL penalty "
                  "(use_kl_in_reward); the score without it.")
advantages = _spread("Advantages", "verl_critic_advantages", REWARD,
                     "Spread of the batch's advantages (critic/advantages/*); GRPO's are normalised per group, "
                     "so a max and min near 0 means every response of a prompt scored alike.")
returns = _spread("Returns", "verl_critic_returns", REWARD, "Spread of the batch's returns (critic/returns/*).")
values = TimeSeries(
    "Critic values",
    (Query("verl_critic_values_mean{$run}", "mean {{experiment}}"),
     Query("verl_critic_values_max{$run}", "max {{experiment}}"),
     Query("verl_critic_values_min{$run}", "min {{experiment}}"),
     Query("verl_critic_vpred_mean{$run}", "vpred mean {{experiment}}")),
    unit=REWARD,
    description="The critic's value estimates (critic/values/*, critic/vpred_mean)." + _CRITIC_FREE,
    width=6,
)

# --- Losses ------------------------------------------------------------------------

policy_loss = TimeSeries("Actor policy loss", (Query("verl_actor_pg_loss{$run}", "{{experiment}}"),), width=6)
kl_loss = TimeSeries(
    "KL loss",
    (Query("verl_actor_kl_loss{$run}", "{{experiment}}"),
     Query("verl_actor_reward_kl_penalty{$run}", "reward {{experiment}}")),
    description="KL to the reference as a loss (use_kl_loss) or in the reward (use_kl_in_reward).",
    width=6,
)
value_loss = TimeSeries(
    "Critic value loss",
    (Query("verl_critic_vf_loss{$run}", "{{experiment}}"),),
    description="Value-function loss of the critic." + _CRITIC_FREE,
    width=6,
)
explained_variance = TimeSeries(
    "Critic explained variance",
    (Query("verl_critic_vf_explained_var{$run}", "{{experiment}}"),),
    description="How much of the returns' variance the critic's values explain (1 is perfect)." + _CRITIC_FREE,
    width=6,
)
value_clip_fraction = TimeSeries(
    "Critic value clip fraction",
    (Query("verl_critic_vf_clipfrac{$run}", "{{experiment}}"),),
    unit="percentunit",
    description="Fraction of value predictions clipped (critic/vf_clipfrac)." + _CRITIC_FREE,
    width=6,
)
critic_grad_norm = TimeSeries(
    "Critic grad norm",
    (Query("verl_critic_grad_norm{$run}", "{{experiment}}"),),
    description="Critic gradient norm before clipping." + _CRITIC_FREE,
    width=6,
)
learning_rate = TimeSeries(
    "Learning rate",
    (Query("verl_actor_lr{$run}", "actor {{experiment}}"), Query("verl_critic_lr{$run}", "critic {{experiment}}")),
    description="actor/lr and critic/lr: the optimiser's rate after warm-up and decay.",
    width=6,
)
kl_coefficient = TimeSeries(
    "KL coefficient",
    (Query("verl_actor_kl_coef{$run}", "{{experiment}}"),
     Query("verl_actor_reward_kl_penalty_coeff{$run}", "reward {{experiment}}")),
    description="Weights of the KL terms in effect (adaptive KL control moves them).",
    width=6,
)

# --- Per-rank heatmap --------------------------------------------------------------

token_imbalance = TimeSeries(
    "Data-parallel token imbalance",
    (Query("verl_global_seqlen_max{$run}", "max rank tokens {{experiment}}"),
     Query("verl_global_seqlen_min{$run}", "min rank tokens {{experiment}}"),
     Query("verl_global_seqlen_balanced_max{$run}", "max after balancing {{experiment}}"),
     Query("verl_global_seqlen_balanced_min{$run}", "min after balancing {{experiment}}"),
     Query("verl_global_seqlen_mean{$run}", "mean {{experiment}}"),
     Query("verl_global_seqlen_minmax_diff{$run}", "max - min {{experiment}}")),
    unit=TOKENS,
    description="Tokens per data-parallel rank before and after sequence balancing (trainer.balance_batch).",
    width=24,
    height=7,
)

# --- Memory timeline ---------------------------------------------------------------



def _peak_memory(config: Config) -> TimeSeries:
    pressure = config.area(MemoryConfig).memory_pressure_reserved_fraction * config.gpu_memory_bytes
    return TimeSeries(
        "Peak GPU memory per step",
        (Query("verl_perf_max_memory_allocated_bytes{$run}", "allocated {{experiment}}"),
         Query("verl_perf_max_memory_reserved_bytes{$run}", "reserved {{experiment}}")),
        unit="bytes",
        description="torch.cuda max_memory_allocated vs max_memory_reserved during the actor update.",
        thresholds=(Threshold(pressure, "VerlGPUMemoryPressure"),),
    )


allocator_gap = TimeSeries(
    "Reserved - allocated gap",
    (Query("verl_perf_max_memory_reserved_bytes{$run} - verl_perf_max_memory_allocated_bytes{$run}",
           "{{experiment}}"),),
    unit="bytes",
    description="Memory the caching allocator holds but does not use: a widening gap is fragmentation.",
)
kv_cache = TimeSeries(
    "Rollout KV-cache usage",
    (Query("vllm:kv_cache_usage_perc{$rollout, $run_labels}", "vLLM {{instance}} engine {{engine}}"),
     Query("sglang:token_usage{$rollout, $run_labels}", "SGLang {{instance}}")),
    unit="percentunit",
    min=0,
    max=1,
    width=12,
)
# --- Stage timeline (where a step's time goes) ----------------------------------------

# verl's stages in the order a step runs them (ray_trainer.fit), each with its colour on every
# dashboard: the stack reads bottom-up as the step runs, and a stage keeps its colour.
STAGE_COLOURS = (
    ("gen", "#1f77b4"), ("gen_max", "#aec7e8"), ("reward", "#ff7f0e"), ("old_log_prob", "#2ca02c"),
    ("ref", "#98df8a"), ("values", "#9467bd"), ("adv", "#c5b0d5"), ("update_critic", "#8c564b"),
    ("update_actor", "#d62728"), ("update_weights", "#e377c2"), ("testing", "#7f7f7f"),
    ("save_checkpoint", "#bcbd22"),
)
_PER_TOKEN_STAGES = ("gen", "ref", "values", "adv", "update_critic", "update_actor")

stage_timeline = TimeSeries(
    "Step time by stage",
    tuple(Query(f"verl_timing_{stage}_seconds{{$run}}", f"{stage} {{{{experiment}}}}", colour)
          for stage, colour in STAGE_COLOURS),
    unit="s",
    description="Each step's wall time split into verl's stages (timing_s/*), stacked in the order they run: the "
                "top of the stack is the step time, the widest band the bottleneck. testing and save_checkpoint "
                "appear only on validation and checkpoint steps.",
    width=16,
    height=9,
    fill_opacity=70,
    stacked=True,
)
per_token_time = TimeSeries(
    "Time per token by stage",
    tuple(Query(f"verl_timing_per_token_{stage}_seconds{{$run}}", f"{stage} {{{{experiment}}}}", colour)
          for stage, colour in STAGE_COLOURS if stage in _PER_TOKEN_STAGES),
    unit="s",
    description="timing_per_token_ms/*: a stage's time divided by the tokens it processed; a stage slower per "
                "token is slower work, not just a longer batch.",
    width=8,
    height=9,
)

# --- Progress, throughput, rollout ------------------------------------------------------

step_time = TimeSeries(
    "Step time",
    (Query("verl_timing_step_seconds{$run}", "{{experiment}}"),),
    unit="s",
    description="timing_s/step: the whole step's wall time.",
    width=6,
)
time_since_step = TimeSeries(
    "Time since the last step",
    (Query("time() - verl_exporter_last_step_timestamp_seconds{$run}", "{{experiment}}"),),
    unit="s",
    description="Grows without bound when training hangs: compare with the step time.",
    width=6,
)
global_step = TimeSeries("Global step and epoch", (Query("verl_training_global_step{$run}", "step {{experiment}}"),
                                                    Query("verl_training_epoch{$run}", "epoch {{experiment}}")),
                         width=12)

throughput = TimeSeries(
    "Throughput per GPU",
    (Query("verl_perf_throughput{$run}", "{{experiment}}"),),
    unit=TOKENS_PER_SECOND,
    description="Tokens per second per GPU (perf/throughput).",
    width=5,
)
mfu = TimeSeries(
    "Model FLOPs utilisation",
    (Query("verl_perf_mfu_actor{$run}", "actor {{experiment}}"),
     Query("verl_perf_mfu_critic{$run}", "critic {{experiment}}")),
    unit="percentunit",
    width=5,
)
batch_tokens = TimeSeries(
    "Tokens per step",
    (Query("verl_perf_total_num_tokens{$run}", "{{experiment}}"),),
    unit="short",
    description="Prompt and response tokens of the step's batch (perf/total_num_tokens).",
    width=5,
)
prompt_length = _spread("Prompt length", "verl_prompt_length", TOKENS, "Tokens per prompt (prompt_length/*).",
                        width=5)
prompt_clip_ratio = TimeSeries(
    "Prompt length clip ratio",
    (Query("verl_prompt_length_clip_ratio{$run}", "{{experiment}}"),),
    unit="percentunit",
    description="Fraction of prompts cut at max_prompt_length.",
    width=4,
)

# The rollout engines carry the run's project and experiment from their targets file (see
# docs/connect-a-run.md, "verl versions"), so `run_labels` keeps to the picked runs' engines.
vllm_requests = TimeSeries(
    "vLLM requests",
    (Query("sum by (instance) (vllm:num_requests_running{$rollout, $run_labels})", "running {{instance}}"),
     Query("sum by (instance) (vllm:num_requests_waiting{$rollout, $run_labels})", "waiting {{instance}}")),
    unit="short",
)
generation_rate = TimeSeries(
    "Generation tokens/s",
    (Query("sum by (instance) (rate(vllm:generation_tokens_total{$rollout, $run_labels}[$__rate_interval]))",
           "vLLM {{instance}}"),
     Query("sum by (instance) (rate(sglang:generation_tokens_total{$rollout, $run_labels}[$__rate_interval]))",
           "SGLang {{instance}}")),
    unit="short",
)
time_to_first_token = TimeSeries(
    "Time to first token p90",
    (Query("histogram_quantile(0.9, sum by (le, instance) "
           "(rate(vllm:time_to_first_token_seconds_bucket{$rollout, $run_labels}[$__rate_interval])))",
           "vLLM {{instance}}"),
     Query("histogram_quantile(0.9, sum by (le, instance) "
           "(rate(sglang:time_to_first_token_seconds_bucket{$rollout, $run_labels}[$__rate_interval])))",
           "SGLang {{instance}}")),
    unit="s",
)


def _gpu_panels(config: Config) -> tuple[tuple[Panel, ...], TimeSeries, tuple[Variable, ...]]:
    """GPU panels read per-node recordings (alerts/gpu.py); only the Node drill-down reads raw per-GPU series."""
    gpu = gpu_source(config)
    # Ray's series name their session, which the run's link ties to a project and experiment.
    # The 128-row heatmaps keep the selected runs' nodes by the Ray session variable (a join per
    # step of a 24 h range costs more than the rest of the dashboard); the per-run series join
    # the link for its project and experiment. DCGM's series have no session: every GPU of the job.
    join = run_join("run") if gpu.linked_to_runs else ""
    per_node = f'{{$gpu, {SESSION_LABEL}=~"$session"}}' if gpu.linked_to_runs else "{$gpu}"
    one_node = f'{{$gpu, {gpu.node_label}=~"$node"}}'
    memory_unit = CATALOG[gpu.memory_used].unit  # the exporters report MiB: Grafana scales it, no query arithmetic
    node_utilisation = Heatmap(
        "Least busy GPU per node",
        (Query(f"{gpu.node(gpu.utilisation, 'min')}{per_node}", f"{{{{{gpu.node_label}}}}}"),),
        unit="percent",
        min=0,
        max=100,
        height=12,
        description="One row per node: the utilisation of its least busy GPU. A dark row among bright ones holds "
                    "a straggler or a hung worker; pick that node in the Node variable to see its GPUs below."
                    + (" Only Ray sessions that one picked run claims are shown: runs sharing a Ray session cannot "
                       "be told apart, so that session's nodes are left out (its straggler alerts name the session, "
                       "not a run)." if gpu.linked_to_runs else ""),
    )
    node_memory = Heatmap(
        "Fullest GPU's memory per node",
        (Query(f"{gpu.node(gpu.memory_used, 'max')}{per_node}", f"{{{{{gpu.node_label}}}}}"),),
        unit=memory_unit,
        color_scheme="Oranges",
        height=12,
        description="One row per node: the memory used on its fullest GPU.",
    )
    node_gpus = Heatmap(
        "GPU utilisation, node $node",
        (Query(f"{gpu.utilisation}{one_node}", gpu.gpu_legend),),
        unit="percent",
        min=0,
        max=100,
        description="Every GPU of the node picked in the Node variable, at full resolution.",
    )
    node_gpu_memory = TimeSeries(
        "GPU memory used, node $node",
        (Query(f"{gpu.memory_used}{one_node}", gpu.gpu_legend),),
        unit=memory_unit,
        width=12,
        description="Every GPU of the node picked in the Node variable.",
    )
    memory_timeline = TimeSeries(
        "GPU memory used, fullest GPU",
        (Query(f"{gpu.cluster(gpu.memory_used, 'max')}{{$gpu}}{join}",
               "fullest GPU " + ("{{experiment}}" if gpu.linked_to_runs else "{{job}}")),),
        unit=memory_unit,
        description="The most memory any one of the run's GPUs uses; the Per-rank row shows each node and GPU.",
    )
    node_of = f"{gpu.node(gpu.utilisation, 'min')}{{$gpu}}"
    variables: tuple[Variable, ...] = ()
    if gpu.linked_to_runs:
        # All means exactly the sessions the selected runs claim (no ".*"), so the node list is theirs.
        variables = (Variable("session", "Ray session", f"label_values({RUN_SESSION_LINK}{{$run}}, {SESSION_LABEL})",
                              all_value=None),)
        node_of = f'{gpu.node(gpu.utilisation, "min")}{{$gpu, {SESSION_LABEL}=~"$session"}}'
    variables += (Variable("node", "Node", f"label_values({node_of}, {gpu.node_label})", multi=False,
                           include_all=False),)
    return (node_utilisation, node_memory, node_gpus, node_gpu_memory), memory_timeline, variables


def _host_memory(config: Config) -> TimeSeries:
    # Ray's node metrics always carry the session, whatever the GPU source; the drill-down
    # follows the Node variable when it names Ray's nodes (by ip).
    node = '{$node, ip=~"$node"}' if gpu_source(config).node_label == "ip" else "{$node}"
    return TimeSeries(
        "Host memory",
        (Query("verl_perf_cpu_memory_used_bytes{$run}", "actor node (verl) {{experiment}}"),
         Query(f"{HOST_MEMORY_FULLEST}{{$node}}{run_join('run')}", "fullest node {{experiment}}"),
         Query(f"ray_node_mem_used{node}", "used {{ip}}"),
         Query(f"ray_node_mem_total{node}", "total {{ip}}")),
        unit="bytes",
        width=12,
    )


def dashboard(config: Config) -> Dashboard:
    per_rank_gpu, gpu_memory_timeline, gpu_variables = _gpu_panels(config)
    return Dashboard(
        uid="verl-training",
        title="verl RL training",
        description="One verl PPO/GRPO run: stability, losses, per-GPU load and memory. Rendered by dashgen.",
        tags=("verl", "rl", "dashgen"),
        variables=(*RUN_VARIABLES, *gpu_variables),
        links=(COMPARE_RUNS,),
        left_out=LEFT_OUT,
        annotations=(
            Annotation("Firing alerts", 'ALERTS{$run, alertstate="firing"}', "{{alertname}} {{experiment}}"),
            # verl logs these two timings only on the steps that validate or save a checkpoint.
            Annotation("Validation steps", "verl_timing_testing_seconds{$run}", "validation {{experiment}}",
                       color="green"),
            Annotation("Checkpoints", "verl_timing_save_checkpoint_seconds{$run}", "checkpoint {{experiment}}",
                       color="yellow"),
            # The global step went back: the run restarted or resumed from a checkpoint.
            Annotation("Run restarts", "verl_training_global_step{$run} < verl_training_global_step{$run} offset 1m",
                       "restart {{experiment}}", color="blue"),
        ),
        rows=(
            Row("At a glance", (current_step, _seconds_since_step(config), firing_alerts, signals_missing,
                                latest_validation, validation_score, validation_aux)),
            # The design's four rows, open: on-call reads them first.
            Row("Training stability", (reward, _kl(config), _entropy(config), grad_norm,
                                       clip_fraction, response_length, response_clip_ratio, aborted_ratio,
                                       _train_rollout_gap(config))),
            Row("Losses", (policy_loss, kl_loss, value_loss, explained_variance,
                           value_clip_fraction, critic_grad_norm, learning_rate, kl_coefficient)),
            Row("Per-rank heatmap", (*per_rank_gpu, token_imbalance)),
            Row("Memory timeline", (_peak_memory(config), allocator_gap, gpu_memory_timeline, kv_cache,
                                    _host_memory(config))),
            # The rest is collapsed: Grafana queries a collapsed row's panels only once it is opened.
            Row("Train/rollout mismatch", (probs_gap, rollout_correction), collapsed=True),
            Row("Rewards, advantages and values", (rewards, advantages, returns, values, equal_reward_groups),
                collapsed=True),
            Row("Stage timeline", (stage_timeline, per_token_time), collapsed=True),
            Row("Step time and progress", (step_time, time_since_step, global_step), collapsed=True),
            Row("Throughput and MFU", (throughput, mfu, batch_tokens, prompt_length, prompt_clip_ratio),
                collapsed=True),
            Row("Rollout engine", (vllm_requests, generation_rate, time_to_first_token), collapsed=True),
        ),
    )
