"""Load balance: one GPU idles while the others work; batches grow out of proportion."""

from dashgen_alerts._common import RUN, RUN_NAME, VALUE, complete_baseline_median, held_baseline, hold_group, smoothed

from dashgen.config import Config
from dashgen.gpu import RUN_SESSION_LINK, SESSION_LABEL, gpu_source, run_join
from dashgen.model import Alert, Recording, RuleGroup, Severity, Sustain

TOKENS = "verl_perf_total_num_tokens{verl}"
TOKENS_BASELINE = "verl:perf_total_num_tokens:baseline_median"
TOKENS_HELD = "verl:perf_total_num_tokens:baseline_held"


def rules(config: Config) -> list[RuleGroup]:
    gpu = gpu_source(config)
    factor = config.straggler_factor
    # Each node's least busy GPU (recorded by alerts/gpu.py) against the median of that value
    # over the nodes of its Ray session: like with like (one run, one phase at a time), one
    # series per node, and 128 recorded series read instead of 1024 raw ones.
    least_busy = f"{gpu.node(gpu.utilisation, 'min')}{{gpu}}"
    peers = f"quantile by ({gpu.cluster_labels}) (0.5, {least_busy})"
    lagging = (f"{least_busy} < on({gpu.cluster_labels}) group_left() "
               f"{factor:g} * ({peers} >= {config.straggler_min_median_percent:g})")
    if gpu.linked_to_runs:
        # Named by the run whose Ray session it serves; nodes of a session no run claims still alert.
        expr = (f"({lagging}){run_join('verl')}\n"
                f"or\n"
                f"({lagging} unless on({SESSION_LABEL}) {RUN_SESSION_LINK}{{verl}})")
        where = "{{ if $labels.project }}run {{ $labels.project }}/{{ $labels.experiment }}: {{ end }}"
        peer_name = "its Ray session's nodes"
    else:
        expr, where, peer_name = lagging, "", "the job's nodes"
    straggler = Alert(
        name="VerlGPUStraggler",
        severity=Severity.WARNING,
        expr=expr,
        for_=config.straggler_for,
        # A validation phase idles the whole session and pauses the comparison; the alert
        # holds through it instead of resolving and paging again after it.
        keep_firing_for=config.warning_keep_firing_for,
        summary="A GPU works far less than the GPUs of the other nodes of its run.",
        description=(f"{where}the least busy GPU of node {{{{ $labels.{gpu.node_label} }}}} is at {VALUE}% "
                     f"utilisation, below {factor:g}x the median of that value over {peer_name} (which is at "
                     f"least {config.straggler_min_median_percent:g}%)."),
        meaning="In synchronous RL training every rank waits for the slowest: a GPU that idles while the "
                "others are busy is either hung, throttled (thermal, power, a bad NVLink), or given less "
                "work than the rest.",
        next_steps=(
            "Pick the node in the dashboard's Node variable: its per-GPU heatmap shows which GPU lags and "
            "whether it idles at every step or drifted (a whole node idling is a hung or slow worker).",
            "nvidia-smi -q on that node: clocks, temperature, throttle reasons, ECC errors.",
            "If it is hung, expect VerlTrainingStalled next; restart the worker or drain the node.",
        ),
    )
    window, recent = config.token_runaway_window, config.divergence_recent_window
    tokens = smoothed(TOKENS, config.signal_smoothing_window)
    held = held_baseline(TOKENS_BASELINE, TOKENS_HELD, config, fault_raises=True)
    baselines = (
        Recording(TOKENS_BASELINE, complete_baseline_median(TOKENS, window, recent),
                  f"Median tokens per batch over {window}, ending {recent} ago, once that window is full"),
        held.held,
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
    return [RuleGroup("verl-load-balance", (*baselines, straggler, runaway)),
            hold_group("verl-load-balance", [held], config)]
