"""Rollout: responses cut at the length limit; rollout requests aborted."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of, steps
from dashgen.config import AreaConfig, Config, Duration, Factor, Fraction, StepCount


@dataclass(frozen=True)
class RolloutConfig(AreaConfig, area="rollout"):
    """The tunables of alerts/rollout.py: the config file's `rollout:` section."""

    # VerlResponseTruncation: share of responses cut at max_response_length above this...
    truncation_threshold: Fraction = 0.1
    # ... or, rising early, above truncation_rise_factor times the run's own lowest hourly median
    # of the last baseline_hold_window and above truncation_rise_floor.
    truncation_rise_factor: Factor = 3.0
    # The share of truncated responses the early rise must also exceed.
    truncation_rise_floor: Fraction = 0.03
    # How long either must hold before VerlResponseTruncation warns.
    truncation_for: Duration = "15m"
    # VerlResponseLengthCollapse: mean response length (median of the last length_median_steps)
    # below this fraction of its highest such median within the last length_rate_steps: a fall
    # fast for the run's rhythm (305 to 14 tokens within 3 steps), from the run's first steps on.
    length_collapse_fraction: Fraction = 0.3
    # The steps each median of the response length is taken over.
    length_median_steps: StepCount = 5
    # The steps within which the fall from the highest median is judged.
    length_rate_steps: StepCount = 60
    # How long the collapse must hold before VerlResponseLengthCollapse fires.
    length_collapse_for: Duration = "1m"
    # VerlRolloutAborts: share of rollout requests aborted above this.
    rollout_abort_threshold: Fraction = 0.05
    # How long the share must stay above it before VerlRolloutAborts warns.
    rollout_abort_for: Duration = "10m"
from dashgen.model import Alert, RuleGroup, Severity


def rules(config: Config) -> RuleGroup:
    tunables = config.area(RolloutConfig)
    hourly = Baseline(config.baseline_window, ending=config.baseline_recent_window)
    clip_ratio = Signal("response_length/clip_ratio").median_over(config.signal_smoothing_window)
    truncation = Alert(
        name="VerlResponseTruncation",
        severity=Severity.WARNING,
        condition=any_of(
            clip_ratio.above(tunables.truncation_threshold),
            all_of(clip_ratio.above(tunables.truncation_rise_factor, times=Baseline.held(of=hourly)),
                   clip_ratio.above(tunables.truncation_rise_floor))),
        for_=tunables.truncation_for,
        summary="Many responses are cut at the maximum response length.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit "
                     f"max_response_length (median of {config.signal_smoothing_window}; threshold "
                     f"{tunables.truncation_threshold:.0%}, or {tunables.truncation_rise_factor:g}x the run's own "
                     f"lowest hourly level and at least {tunables.truncation_rise_floor:.0%})."),
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
    length_steps, length_over = steps(tunables.length_median_steps), steps(tunables.length_rate_steps)
    length = Signal("response_length/mean").median_over(length_steps)
    length_collapse = Alert.when(
        "VerlResponseLengthCollapse",
        length.below(tunables.length_collapse_fraction, times=Baseline.quietest(length_steps, over=length_over)),
        severity=Severity.WARNING,
        for_=tunables.length_collapse_for,
        keep_firing_for=config.warning_keep_firing_for,
        summary="Responses have shrunk to a small fraction of their length: the policy may be gaming the reward "
                "with minimal answers.",
        description=(f"Run {RUN_NAME}: the mean response length (median of its last {length_steps}) is {VALUE} "
                     f"tokens, below {tunables.length_collapse_fraction:.0%} of its highest such median within the "
                     f"last {length_over}."),
        meaning="A length collapse: the policy found that short (often empty or single-token) answers score, or "
                "it collapsed onto a degenerate output. The reward may stay up while the model stops solving "
                "the task (reward hacking).",
        next_steps=(
            "Read sample responses of recent steps: are they empty, one token, or a fixed string?",
            "Check the reward function for answers it scores without content; check entropy and the score "
            "spread (all equal rewards give GRPO no signal).",
        ),
    )
    return RuleGroup("verl-rollout", (truncation, aborts, length_collapse))
