"""Memory: the caching allocator reserves nearly all GPU memory while fragmenting it."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME
from dashgen.config import AreaConfig, Config, Duration, Fraction, Interval, format_duration
from dashgen.gpu import SESSION_LABEL, gpu_source, run_join
from dashgen.model import ON_RUN, Alert, Recording, RuleGroup, Severity

RESERVED = "verl_perf_max_memory_reserved_bytes{$verl}"
ALLOCATED = "verl_perf_max_memory_allocated_bytes{$verl}"
CAPACITY = "run:gpu_memory_capacity_bytes:min"
# The smallest card's MiB per Ray session (DCGM: of the whole cluster), read at the slow interval.
SESSION_CARD, CLUSTER_CARD = "session:gpu_memory_capacity_mib:min", "cluster:gpu_memory_capacity_mib:min"
PEAK_RESERVED = "run:verl_perf_max_memory_reserved_bytes:max"
MIB = 2**20


@dataclass(frozen=True)
class MemoryConfig(AreaConfig, area="memory"):
    """The tunables of alerts/memory.py: the config file's `memory:` section."""

    # VerlGPUMemoryPressure: peak reserved memory above this fraction of gpu_memory_bytes...
    memory_pressure_reserved_fraction: Fraction = 0.92
    # ... while at least this fraction of it is reserved but not allocated (fragments).
    memory_pressure_gap_fraction: Fraction = 0.2
    # How long that must hold before VerlGPUMemoryPressure warns.
    memory_pressure_for: Duration = "5m"
    # ... or, fragmented or not, reserved above this fraction of gpu_memory_bytes: near out-of-memory.
    memory_near_limit_fraction: Fraction = 0.97
    # A run that has reserved more than gpu_memory_bytes within this window is on a larger card
    # than configured: VerlGPUMemoryCapacityTooLow says so, and pressure is not judged. A run
    # reserves what it reserves from its first steps; a day of samples cost 12 ms a cycle at 15 runs.
    memory_capacity_window: Interval = "1h"
    # How often the card's size is read from the per-GPU memory series (two series a GPU: 2,048 at
    # 1024 GPUs, 27 ms a cycle read every minute); it does not change while a node lives. A run on
    # a node Prometheus has not read yet is judged against gpu_memory_bytes until it is read.
    memory_card_size_interval: Interval = "10m"


def capacity_recordings(config: Config) -> tuple[Recording, Recording]:
    """Each run's card size: the smallest of its GPUs as Ray (through the run's session) or DCGM
    (the whole cluster's: DCGM's series name no run) reports it, else gpu_memory_bytes. The first
    recording reads the per-GPU series, at memory_card_size_interval; the second, every
    evaluation, the last value the first had within two of its intervals."""
    gpu = gpu_source(config)
    total = f"({gpu.memory_used}{{$gpu}} + {gpu.memory_free}{{$gpu}})"
    runs = f"max by (project, experiment) ({RESERVED}) * 0"
    held = f"[{format_duration(2 * config.area(MemoryConfig).memory_card_size_interval.seconds)}]"
    if gpu.linked_to_runs:
        # Per Ray session first: the join then reads a series a session, not one a GPU.
        card = Recording(SESSION_CARD, f"min by ({SESSION_LABEL}) {total}",
                         "GPU memory of the smallest card of each Ray session, in MiB (Ray's used + available)")
        measured = (f"min by (project, experiment) (\n  min by ({SESSION_LABEL}) (last_over_time({SESSION_CARD}{held}))"
                    f"{run_join('verl')}\n) * {MIB}")
    else:
        card = Recording(CLUSTER_CARD, f"min({total})",
                         "GPU memory of the cluster's smallest card, in MiB (DCGM's used + free)")
        measured = f"{runs} + on() group_left() (min(last_over_time({CLUSTER_CARD}{held})) * {MIB})"
    return card, Recording(
        CAPACITY, f"{measured}\nor on(project, experiment)\n{runs} + {config.gpu_memory_bytes}",
        "GPU memory of the run's smallest card, in bytes: Ray's or DCGM's used + free where they are scraped "
        "(read every memory_card_size_interval), otherwise the config's gpu_memory_bytes")


def rules(config: Config) -> list[RuleGroup]:
    tunables = config.area(MemoryConfig)
    fraction, gap = tunables.memory_pressure_reserved_fraction, tunables.memory_pressure_gap_fraction
    near = tunables.memory_near_limit_fraction
    capacity, window = config.gpu_memory_bytes, tunables.memory_capacity_window
    of_capacity = "on(project, experiment) group_left()"
    card = f"the card's memory (Ray's or DCGM's where scraped, else gpu_memory_bytes: {capacity / 2**30:g} GiB)"
    # A reservation above the card is a configuration error, not pressure (a healthy run on a
    # 141 GB card reserves 89 GB from its first step): it is possible only when the size comes
    # from the config.
    peak = Recording(PEAK_RESERVED, f"max_over_time({RESERVED}[{window}])",
                     f"The run's highest reserved GPU memory of the last {window}")
    beyond_capacity = f"{PEAK_RESERVED} > {of_capacity} {CAPACITY}"
    pressure = Alert(
        name="VerlGPUMemoryPressure",
        severity=Severity.WARNING,
        # Two branches: fragmented near the limit, or at the limit whatever the fragmentation.
        expr=(f"(\n"
              f"  (\n"
              f"    ({RESERVED} > {of_capacity} ({fraction:g} * {CAPACITY}))\n"
              f"    and on({ON_RUN})\n"
              f"    ({RESERVED} - {ALLOCATED} >= {gap:g} * {RESERVED})\n"
              f"  )\n"
              f"  or\n"
              f"  {RESERVED} > {of_capacity} ({near:g} * {CAPACITY})\n"
              f")\n"
              f"unless on({ON_RUN})\n"
              f"{beyond_capacity}"),
        for_=tunables.memory_pressure_for,
        summary="GPU memory reserved is near the card's limit: the next longer batch may run out of memory.",
        description=(f"Run {RUN_NAME}: peak reserved memory is {{{{ $value | humanize1024 }}}}B: above "
                     f"{fraction:.0%} of {card} with at least {gap:.0%} of it reserved but not allocated "
                     f"(fragments), or above {near:.0%} of it."),
        meaning="Either PyTorch's caching allocator holds memory it cannot reuse for the next large tensor (the "
                "first branch: fragmentation), so the next longer batch can fail with CUDA out-of-memory although "
                "allocated memory looks fine; or the run simply uses nearly all of the card (the second branch). "
                "Common with variable sequence lengths and with vLLM/SGLang sharing the GPU with the trainer.",
        healthy_runs=("A healthy run reserves what it reserves from its first steps and keeps most of it allocated: "
                      "it needs 92% of the card reserved with a fifth of that unallocated, or 97% reserved, for 5m. "
                      "A run on a larger card than gpu_memory_bytes says is not judged (VerlGPUMemoryCapacityTooLow "
                      "says so)."),
        next_steps=(
            "Compare the Memory timeline's allocated and reserved curves: a widening gap is fragmentation.",
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, lower the rollout engine's "
            "gpu_memory_utilization, or reduce ppo_max_token_len_per_gpu / micro-batch size.",
        ),
    )
    capacity_too_low = Alert(
        name="VerlGPUMemoryCapacityTooLow",
        severity=Severity.INFO,
        expr=beyond_capacity,
        summary="The run reserves more GPU memory than the configured card holds: gpu_memory_bytes is wrong.",
        description=(f"Run {RUN_NAME}: peak reserved memory reached {{{{ $value | humanize1024 }}}}B within "
                     f"{window}, more than gpu_memory_bytes ({capacity / 2**30:g} GiB); VerlGPUMemoryPressure is "
                     f"not judged for this run."),
        meaning="A configuration error, not a fault of the run: the cards are larger than gpu_memory_bytes says "
                "(e.g. 141 GB H200 or 96 GB cards with the 80 GiB default), so every fraction of it would read "
                "as pressure. It is raised only where neither Ray's nor DCGM's GPU memory is scraped for the "
                "run, which would give the real size. Memory pressure stays unjudged for the run until the "
                "config says the real size.",
        next_steps=(
            "Scrape Ray's node metrics (or DCGM) beside the exporter, or set gpu_memory_bytes in dashgen.yaml to "
            "the card's memory (e.g. 141GB); rebuild and deploy.",
        ),
    )
    card, capacity = capacity_recordings(config)
    return [RuleGroup("verl-memory", (capacity, peak, pressure, capacity_too_low)),
            RuleGroup("verl-memory-card", (card,), interval=tunables.memory_card_size_interval)]
