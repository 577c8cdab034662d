"""Rollout: responses cut at the length limit; rollout requests aborted."""

from dashgen_alerts._common import RUN_NAME

from dashgen.config import Config
from dashgen.model import Alert, RuleGroup, Severity


def rules(config: Config) -> RuleGroup:
    truncation = Alert(
        name="VerlResponseTruncation",
        severity=Severity.WARNING,
        expr=f"verl_response_length_clip_ratio{{verl}} > {config.truncation_threshold:g}",
        for_=config.truncation_for,
        summary="Many responses are cut at the maximum response length.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit "
                     f"max_response_length (threshold {config.truncation_threshold:.0%})."),
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
        expr=f"verl_response_aborted_ratio{{verl}} > {config.rollout_abort_threshold:g}",
        for_=config.rollout_abort_for,
        summary="Rollout requests are being aborted.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of rollout requests were aborted "
                     f"(threshold {config.rollout_abort_threshold:.0%})."),
        meaning="The rollout engine dropped requests (timeouts, preemption under KV-cache pressure, or a "
                "crashed engine replica); those samples are lost from the batch.",
        next_steps=(
            "Check the Rollout engine row: KV-cache usage near 100% and a growing waiting queue mean "
            "preemption.",
            "Check the vLLM/SGLang server logs for errors; lower gpu_memory_utilization pressure or the batch.",
        ),
    )
    return RuleGroup("verl-rollout", (truncation, aborts))
