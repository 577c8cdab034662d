"""Memory: the caching allocator reserves nearly all GPU memory while fragmenting it."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME
from dashgen.config import AreaConfig, Config, Duration, Fraction
from dashgen.model import ON_RUN, Alert, RuleGroup, Severity

RESERVED = "verl_perf_max_memory_reserved_bytes{verl}"
ALLOCATED = "verl_perf_max_memory_allocated_bytes{verl}"


@dataclass(frozen=True)
class MemoryConfig(AreaConfig, area="memory"):
    # VerlGPUMemoryPressure: peak reserved memory above this fraction of gpu_memory_bytes...
    memory_pressure_reserved_fraction: Fraction = 0.92
    # ... while at least this fraction of it is reserved but not allocated (fragments).
    memory_pressure_gap_fraction: Fraction = 0.2
    memory_pressure_for: Duration = "5m"


def rules(config: Config) -> RuleGroup:
    tunables = config.area(MemoryConfig)
    fraction, gap = tunables.memory_pressure_reserved_fraction, tunables.memory_pressure_gap_fraction
    pressure = Alert(
        name="VerlGPUMemoryPressure",
        severity=Severity.WARNING,
        expr=(f"({RESERVED} > {fraction:g} * {config.gpu_memory_bytes})\n"
              f"and on({ON_RUN})\n"
              f"({RESERVED} - {ALLOCATED} >= {gap:g} * {RESERVED})"),
        for_=tunables.memory_pressure_for,
        summary="GPU memory reserved is near the card's limit while much of it is unused fragments.",
        description=(f"Run {RUN_NAME}: peak reserved memory is {{{{ $value | humanize1024 }}}}B, above "
                     f"{fraction:.0%} of {config.gpu_memory_bytes / 2**30:g} GiB, and at least {gap:.0%} "
                     f"of it is reserved but not allocated."),
        meaning="PyTorch's caching allocator holds memory it cannot reuse for the next large tensor; the next "
                "longer batch can fail with CUDA out-of-memory although allocated memory looks fine. Common "
                "with variable sequence lengths and with vLLM/SGLang sharing the GPU with the trainer.",
        next_steps=(
            "Compare the Memory timeline's allocated and reserved curves: a widening gap is fragmentation.",
            "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, lower the rollout engine's "
            "gpu_memory_utilization, or reduce ppo_max_token_len_per_gpu / micro-batch size.",
        ),
    )
    return RuleGroup("verl-memory", (pressure,))
