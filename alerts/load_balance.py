"""Load balance: one GPU idles while the others work; batches grow out of proportion."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal
from dashgen.config import AreaConfig, Config, Duration, Factor, Fraction, Interval, Percent
from dashgen.gpu import RUN_SESSION_LINK, SESSION_LABEL, SHARED_SESSIONS, gpu_source, run_join
from dashgen.model import Alert, Recording, RuleGroup, Severity


@dataclass(frozen=True)
class LoadBalanceConfig(AreaConfig, area="load_balance"):
    """The tunables of alerts/load_balance.py: the config file's `load_balance:` section."""

    # VerlGPUStraggler: a node's least busy GPU below this fraction of the median GPU of its node,
    # or of the median node of its Ray session...
    straggler_factor: Fraction = 0.5
    # ... while that median is at least this busy (a validation phase idles every GPU).
    straggler_min_median_percent: Percent = 30.0
    # How long a straggler must persist before VerlGPUStraggler warns.
    straggler_for: Duration = "15m"
    # VerlBatchTokenRunaway: tokens per batch (median over signal_smoothing_window) above this
    # multiple of their median over token_runaway_window, ending token_runaway_recent_window ago.
    token_runaway_factor: Factor = 2.0
    # The window of that median (its baseline).
    token_runaway_window: Interval = "1h"
    # How long before now that baseline window ends, so the runaway itself is not part of it.
    token_runaway_recent_window: Interval = "10m"
    # How long tokens must stay above it before VerlBatchTokenRunaway warns.
    token_runaway_for: Duration = "10m"
    # Once firing, it stays firing while tokens are above this multiple of the held baseline.
    token_runaway_sustain_factor: Factor = 1.5


def rules(config: Config) -> list[RuleGroup]:
    tunables = config.area(LoadBalanceConfig)
    gpu = gpu_source(config)
    factor, busy = tunables.straggler_factor, tunables.straggler_min_median_percent
    # Each node's least busy GPU (recorded by alerts/gpu.py) is compared with two peers, both
    # in the same phase as it: the median GPU of its own node (a GPU lagging on a single-node
    # run too), and the median of the least busy GPUs over its Ray session's nodes (a node
    # lagging as a whole). One series per node; 128 recorded series read, not 1024 raw ones.
    least_busy = f"{gpu.node(gpu.utilisation, 'min')}{{$gpu}}"
    node_median = f"{gpu.node(gpu.utilisation, 'median')}{{$gpu}}"
    within_node = f"{least_busy} < on({gpu.node_labels}) {factor:g} * ({node_median} >= {busy:g})"
    peers = f"quantile by ({gpu.cluster_labels}) (0.5, {least_busy})"
    across_nodes = f"{least_busy} < on({gpu.cluster_labels}) group_left() {factor:g} * ({peers} >= {busy:g})"
    lagging = f"{gpu.node(gpu.utilisation, 'min_lagging')}{{$gpu}}"
    if gpu.linked_to_runs:
        # Several runs in one Ray session are in different phases, and nothing says which node
        # serves which run: there a node is compared within itself only.
        across_nodes = f"({across_nodes})\nunless on({SESSION_LABEL}) {SHARED_SESSIONS}{{$verl}}"
        # Named by the run whose Ray session it serves; a shared session's nodes say so; nodes of a
        # session no run claims alert without run labels.
        expr = (f"{lagging}{run_join('verl')}\n"
                f"or\n"
                f'label_replace({lagging} and on({SESSION_LABEL}) {SHARED_SESSIONS}{{$verl}}, '
                f'"shared_session", "true", "", "")\n'
                f"or\n"
                f"({lagging} unless on({SESSION_LABEL}) {RUN_SESSION_LINK}{{$verl}} "
                f"unless on({SESSION_LABEL}) {SHARED_SESSIONS}{{$verl}})")
        where = ("{{ if $labels.project }}run {{ $labels.project }}/{{ $labels.experiment }}: "
                 "{{ else if $labels.shared_session }}Ray session {{ $labels.SessionName }}, shared by several runs "
                 "(its nodes compared within themselves only): {{ end }}")
        peer_name = ("the median GPU of its node{{ if not $labels.shared_session }}, or its node is below that "
                     "of the median node of its Ray session{{ end }}")
    else:
        expr, where = lagging, ""
        peer_name = "the median GPU of its node, or its node is below that of the median node of the job"
    lagging_nodes = Recording(
        gpu.node(gpu.utilisation, "min_lagging"), f"{within_node}\nor\n{across_nodes}",
        "Least busy GPU of each node that lags its node's other GPUs or (in a session of one run) the "
        "session's other nodes, percent")
    straggler = Alert(
        name="VerlGPUStraggler",
        severity=Severity.WARNING,
        expr=expr,
        for_=tunables.straggler_for,
        # A validation phase idles the whole session and pauses the comparison; the alert
        # holds through it instead of resolving and paging again after it.
        keep_firing_for=config.warning_keep_firing_for,
        summary="A GPU works far less than the other GPUs of its node, or a node less than the other nodes of its run.",
        description=(f"{where}the least busy GPU of node {{{{ $labels.{gpu.node_label} }}}} is at {VALUE}% "
                     f"utilisation, below {factor:g}x {peer_name} (peers at least {busy:g}% busy)."),
        meaning="In synchronous RL training every rank waits for the slowest: a GPU that idles while the "
                "others are busy is either hung, throttled (thermal, power, a bad NVLink), or given less "
                "work than the rest. A GPU is compared with the other GPUs of its node (so a single-node run "
                "is covered) and, in a Ray session of one run, its node with the session's other nodes. In a "
                "session several runs share, their phases differ and nothing tells which node serves which "
                "run, so a node is compared only within itself there: a node lagging as a whole goes "
                "unflagged, and the alert names the session, not a run.",
        healthy_runs=("Every rank of a synchronous step waits for the same collective, so healthy GPUs of a node "
                      "are busy alike; a phase that idles them all (validation, a checkpoint save, rollout waiting "
                      "on the trainer) lowers the node's median below 30% busy, where it is not judged, and a lag "
                      "must last 15m."),
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
        healthy_runs=("Healthy runs' responses grow slowly as the policy learns to reason: it needs tokens per "
                      "batch above twice their median of the hour before the last 10m, for 10m, so a growth spread "
                      "over hours moves the baseline with it."),
        next_steps=(
            "Check response length mean/max and the clip ratio on the dashboard.",
            "Look at sample responses for repetition; consider a length penalty or a lower "
            "max_response_length.",
        ),
    )
    return RuleGroup("verl-load-balance", (lagging_nodes, straggler, runaway))
