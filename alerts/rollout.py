"""Rollout: responses cut at the length limit; rollout requests aborted."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, Signal
from dashgen.config import AreaConfig, Config, Duration, Fraction


@dataclass(frozen=True)
class RolloutConfig(AreaConfig, area="rollout"):
    # VerlResponseTruncation: share of responses cut at max_response_length above this.
    truncation_threshold: Fraction = 0.1
    truncation_for: Duration = "15m"
    # VerlRolloutAborts: share of rollout requests aborted above this.
    rollout_abort_threshold: Fraction = 0.05
    rollout_abort_for: Duration = "10m"
from dashgen.model import Alert, RuleGroup, Severity


def rules(config: Config) -> RuleGroup:
    tunables = config.area(RolloutConfig)
    truncation = Alert(
        name="VerlResponseTruncation",
        severity=Severity.WARNING,
        condition=Signal("response_length/clip_ratio").above(tunables.truncation_threshold),
        for_=tunables.truncation_for,
        summary="Many responses are cut at the maximum response length.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit "
                     f"max_response_length (threshold {tunables.truncation_threshold:.0%})."),
        meaning="Truncated responses get no final answer, so they usually score zero; if the share grows, the "
                "policy is drifting to longer outputs than the budget allows, or is looping.",
        next_steps=(
            "Compare with response length mean/max: a steady rise means longer reasoning, a jump means loops.",
            "Raise data.max_response_length if the budget is too tight, or add an overlong penalty.",
        ),
    )
    aborts = Alert(
        name="VerlRolloutAborts",
        severity=Severity.WARNING,
        condition=Signal("response/aborted_ratio").above(tunables.rollout_abort_threshold),
        for_=tunables.rollout_abort_for,
        summary="Rollout requests are being aborted.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of rollout requests were aborted "
                     f"(threshold {tunables.rollout_abort_threshold:.0%})."),
        meaning="The rollout engine dropped requests (timeouts, preemption under KV-cache pressure, or a "
                "crashed engine replica); those samples are lost from the batch.",
        next_steps=(
            "Check the Rollout engine row: KV-cache usage near 100% and a growing waiting queue mean "
            "preemption.",
            "Check the vLLM/SGLang server logs for errors; lower gpu_memory_utilization pressure or the batch.",
        ),
    )
    return RuleGroup("verl-rollout", (truncation, aborts))
