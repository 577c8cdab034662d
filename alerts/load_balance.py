"""Load balance: one GPU idles while the others work; batches grow out of proportion."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal
from dashgen.config import AreaConfig, Config, Duration, Factor, Fraction, Interval, Percent
from dashgen.gpu import RUN_SESSION_LINK, SESSION_LABEL, gpu_source, run_join
from dashgen.model import Alert, RuleGroup, Severity


@dataclass(frozen=True)
class LoadBalanceConfig(AreaConfig, area="load_balance"):
    # VerlGPUStraggler: a node's least busy GPU below this fraction of the median over its
    # Ray session's nodes...
    straggler_factor: Fraction = 0.5
    # ... while that median is at least this busy (a validation phase idles every GPU).
    straggler_min_median_percent: Percent = 30.0
    straggler_for: Duration = "15m"
    # VerlBatchTokenRunaway: tokens per batch (median over signal_smoothing_window) above this
    # multiple of their median over token_runaway_window, ending token_runaway_recent_window ago.
    token_runaway_factor: Factor = 2.0
    token_runaway_window: Interval = "1h"
    token_runaway_recent_window: Interval = "10m"
    token_runaway_for: Duration = "10m"
    # Once firing, it stays firing while tokens are above this multiple of the held baseline.
    token_runaway_sustain_factor: Factor = 1.5


def rules(config: Config) -> list[RuleGroup]:
    tunables = config.area(LoadBalanceConfig)
    gpu = gpu_source(config)
    factor = tunables.straggler_factor
    # Each node's least busy GPU (recorded by alerts/gpu.py) against the median of that value
    # over the nodes of its Ray session: like with like (one run, one phase at a time), one
    # series per node, and 128 recorded series read instead of 1024 raw ones.
    least_busy = f"{gpu.node(gpu.utilisation, 'min')}{{gpu}}"
    peers = f"quantile by ({gpu.cluster_labels}) (0.5, {least_busy})"
    lagging = (f"{least_busy} < on({gpu.cluster_labels}) group_left() "
               f"{factor:g} * ({peers} >= {tunables.straggler_min_median_percent:g})")
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
        for_=tunables.straggler_for,
        # A validation phase idles the whole session and pauses the comparison; the alert
        # holds through it instead of resolving and paging again after it.
        keep_firing_for=config.warning_keep_firing_for,
        summary="A GPU works far less than the GPUs of the other nodes of its run.",
        description=(f"{where}the least busy GPU of node {{{{ $labels.{gpu.node_label} }}}} is at {VALUE}% "
                     f"utilisation, below {factor:g}x the median of that value over {peer_name} (which is at "
                     f"least {tunables.straggler_min_median_percent:g}%)."),
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
    window, recent = tunables.token_runaway_window, tunables.token_runaway_recent_window
    tokens = Signal("perf/total_num_tokens").median_over(config.signal_smoothing_window)
    runaway = Alert(
        name="VerlBatchTokenRunaway",
        severity=Severity.WARNING,
        condition=tokens.above(tunables.token_runaway_factor, times=Baseline(window, ending=recent)),
        for_=tunables.token_runaway_for,
        keep_firing_for=config.warning_keep_firing_for,
        keep_firing_while=tokens.above(tunables.token_runaway_sustain_factor, times=Baseline.held()),
        summary="Tokens per batch have grown to more than twice their recent median.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanize }}}} tokens per batch (median of the last "
                     f"{config.signal_smoothing_window}), above {tunables.token_runaway_factor:g}x the median of the "
                     f"{window} before the last {recent}."),
        meaning="Responses got much longer (the policy learned to ramble or loop), which slows every step and "
                "pushes memory towards out-of-memory; sometimes a reward that favours length.",
        next_steps=(
            "Check response length mean/max and the clip ratio on the dashboard.",
            "Look at sample responses for repetition; consider a length penalty or a lower "
            "max_response_length.",
        ),
    )
    return RuleGroup("verl-load-balance", (straggler, runaway))
