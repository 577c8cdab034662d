"""Load balance: one GPU idles while the others work; batches grow out of proportion."""

from dashgen_alerts._common import RUN, RUN_NAME, VALUE, complete_baseline_median, held_baseline, smoothed

from dashgen.config import Config
from dashgen.model import Alert, Recording, RuleGroup, Severity, Sustain

TOKENS = "verl_perf_total_num_tokens{verl}"
TOKENS_BASELINE = "verl:perf_total_num_tokens:baseline_median"
TOKENS_HELD = "verl:perf_total_num_tokens:baseline_held"


def rules(config: Config) -> RuleGroup:
    if config.gpu_source == "dcgm":
        util, group, gpu_name = "DCGM_FI_DEV_GPU_UTIL{gpu}", "job", "{{ $labels.Hostname }} GPU {{ $labels.gpu }}"
    else:
        util, group = "ray_node_gpus_utilization{gpu}", "job, SessionName"
        gpu_name = "{{ $labels.ip }} GPU {{ $labels.GpuIndex }}"
    median = f"quantile by ({group}) (0.5, {util})"
    factor = config.straggler_factor
    straggler = Alert(
        name="VerlGPUStraggler",
        severity=Severity.WARNING,
        expr=(f"({util} < on({group}) group_left() {factor:g} * {median})\n"
              f"and on({group})\n"
              f"({median} >= {config.straggler_min_median_percent:g})"),
        for_=config.straggler_for,
        summary="One GPU works far less than the others of the same job.",
        description=(f"{gpu_name} is at {VALUE}% utilisation, below {factor:g}x the median of its job's GPUs "
                     f"(which is at least {config.straggler_min_median_percent:g}%)."),
        meaning="In synchronous RL training every rank waits for the slowest: a GPU that idles while the "
                "others are busy is either hung, throttled (thermal, power, a bad NVLink), or given less "
                "work than the rest.",
        next_steps=(
            "Find the GPU in the Per-rank heatmap and check whether it idles at every step or drifted.",
            "nvidia-smi -q on that node: clocks, temperature, throttle reasons, ECC errors.",
            "If it is hung, expect VerlTrainingStalled next; restart the worker or drain the node.",
        ),
    )
    window, recent = config.token_runaway_window, config.divergence_recent_window
    tokens = smoothed(TOKENS, config.signal_smoothing_window)
    baselines = (
        Recording(TOKENS_BASELINE, complete_baseline_median(TOKENS, window, recent),
                  f"Median tokens per batch over {window}, ending {recent} ago, once that window is full"),
        Recording(TOKENS_HELD, held_baseline(TOKENS_BASELINE, config.baseline_hold_window, fault_raises=True),
                  f"Lowest {TOKENS_BASELINE} of the last {config.baseline_hold_window}: the level before a runaway"),
    )
    runaway = Alert(
        name="VerlBatchTokenRunaway",
        severity=Severity.WARNING,
        expr=f"{tokens} > {config.token_runaway_factor:g} * {TOKENS_BASELINE}",
        for_=config.token_runaway_for,
        keep_firing_for=config.warning_keep_firing_for,
        sustain=Sustain(f"{tokens} > {config.token_runaway_sustain_factor:g} * {TOKENS_HELD}", RUN),
        summary="Tokens per batch have grown to more than twice their recent median.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanize }}}} tokens per batch (median of the last "
                     f"{config.signal_smoothing_window}), above {config.token_runaway_factor:g}x the median of the "
                     f"{window} before the last {recent}."),
        meaning="Responses got much longer (the policy learned to ramble or loop), which slows every step and "
                "pushes memory towards out-of-memory; sometimes a reward that favours length.",
        next_steps=(
            "Check response length mean/max and the clip ratio on the dashboard.",
            "Look at sample responses for repetition; consider a length penalty or a lower "
            "max_response_length.",
        ),
    )
    return RuleGroup("verl-load-balance", (*baselines, straggler, runaway))
