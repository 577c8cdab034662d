"""Memory: the caching allocator reserves nearly all GPU memory while fragmenting it."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME
from dashgen.config import AreaConfig, Config, Duration, Fraction, Interval
from dashgen.model import ON_RUN, Alert, RuleGroup, Severity

RESERVED = "verl_perf_max_memory_reserved_bytes{verl}"
ALLOCATED = "verl_perf_max_memory_allocated_bytes{verl}"


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


def rules(config: Config) -> RuleGroup:
    tunables = config.area(MemoryConfig)
    fraction, gap = tunables.memory_pressure_reserved_fraction, tunables.memory_pressure_gap_fraction
    near = tunables.memory_near_limit_fraction
    capacity, window = config.gpu_memory_bytes, tunables.memory_capacity_window
    # A reservation above the configured card is a configuration error, not pressure (a healthy
    # run on a 141 GB card reserves 89 GB from its first step).
    beyond_capacity = f"max_over_time({RESERVED}[{window}]) > {capacity}"
    pressure = Alert(
        name="VerlGPUMemoryPressure",
        severity=Severity.WARNING,
        # Two branches: fragmented near the limit, or at the limit whatever the fragmentation.
        expr=(f"(\n"
              f"  (\n"
              f"    ({RESERVED} > {fraction:g} * {config.gpu_memory_bytes})\n"
              f"    and on({ON_RUN})\n"
              f"    ({RESERVED} - {ALLOCATED} >= {gap:g} * {RESERVED})\n"
              f"  )\n"
              f"  or\n"
              f"  {RESERVED} > {near:g} * {config.gpu_memory_bytes}\n"
              f")\n"
              f"unless on({ON_RUN})\n"
              f"{beyond_capacity}"),
        for_=tunables.memory_pressure_for,
        summary="GPU memory reserved is near the card's limit: the next longer batch may run out of memory.",
        description=(f"Run {RUN_NAME}: peak reserved memory is {{{{ $value | humanize1024 }}}}B: above "
                     f"{fraction:.0%} of {config.gpu_memory_bytes / 2**30:g} GiB with at least {gap:.0%} of it "
                     f"reserved but not allocated (fragments), or above {near:.0%} of it."),
        meaning="Either PyTorch's caching allocator holds memory it cannot reuse for the next large tensor (the "
                "first branch: fragmentation), so the next longer batch can fail with CUDA out-of-memory although "
                "allocated memory looks fine; or the run simply uses nearly all of the card (the second branch). "
                "Common with variable sequence lengths and with vLLM/SGLang sharing the GPU with the trainer.",
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
                "as pressure. Memory pressure stays unjudged for the run until the config says the real size.",
        next_steps=(
            "Set gpu_memory_bytes in dashgen.yaml to the card's memory (e.g. 141GB), rebuild and deploy.",
        ),
    )
    return RuleGroup("verl-memory", (pressure, capacity_too_low))
