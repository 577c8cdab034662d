"""Rollout: responses cut at the length limit; rollout requests aborted."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, steps
from dashgen.config import AreaConfig, Config, Duration, Factor, Fraction, NonNegative, StepCount


@dataclass(frozen=True)
class RolloutConfig(AreaConfig, area="rollout"):
    """The tunables of alerts/rollout.py: the config file's `rollout:` section."""

    # VerlResponseTruncation: the share of responses cut at max_response_length (median of its last
    # truncation_steps) rising above this multiple of its level before the rise: the lowest such
    # median within the last truncation_level_steps (from the run's first steps on, so a run's
    # early level), by at least truncation_rise_floor and beyond truncation_noise_z standard errors
    # of its step-to-step noise.
    truncation_rise_factor: Factor = 2.0
    # The least rise of the share that counts, in the share's own units (0.03: 3 in 100 more
    # responses cut): from a level of 0, any factor is reached.
    truncation_rise_floor: Fraction = 0.03
    # Standard errors of its own noise the rise must exceed: agent runs whose share swings between
    # 30% and 60% from step to step double their 5-step median by chance.
    truncation_noise_z: NonNegative = 5.0
    # The steps each median of the share is taken over: two odd steps are no rise (a share of 1%
    # with heavy-tailed noise spikes to 5% on two steps of three now and then), three of five are.
    truncation_steps: StepCount = 5
    # The steps its level before the rise (the lowest median of truncation_level_median_steps) is
    # taken from.
    truncation_level_steps: StepCount = 1000
    # The steps each median of that level is taken over: more than the current median's, as the
    # lowest of hundreds of 5-step medians of a noisy share sits far below its level by chance
    # (the same bias as the highest of many entropy medians, issue 35).
    truncation_level_median_steps: StepCount = 20
    # How long the rise must hold before VerlResponseTruncation warns.
    truncation_for: Duration = "1m"
    # Once firing, it stays firing while the share is this fraction of the rise (and of the floor)
    # above its level: a share drifting up wavers around the onset's margins.
    truncation_sustain_fraction: Fraction = 0.5
    # VerlResponseTruncationHigh (an info): the share's median of its last truncation_steps above
    # this, whether the run has had it from its first steps (its max_response_length) or it rose.
    truncation_threshold: Fraction = 0.1
    # Once firing, the info stays firing while the share is above this fraction of the threshold,
    # so a share that wavers around it is reported once.
    truncation_high_sustain_fraction: Fraction = 0.5
    # How long the share must stay above the threshold before VerlResponseTruncationHigh fires.
    truncation_high_for: Duration = "1m"
    # VerlResponseLengthCollapse: mean response length (median of the last length_median_steps)
    # below this fraction of its highest such median within the last length_rate_steps: a fall
    # fast for the run's rhythm (305 to 14 tokens within 3 steps), from the run's first steps on.
    length_collapse_fraction: Fraction = 0.3
    # The steps each median of the response length is taken over.
    length_median_steps: StepCount = 5
    # The steps within which the fall from the highest median is judged.
    length_rate_steps: StepCount = 60
    # How long the collapse must hold before VerlResponseLengthCollapse fires: from the first
    # evaluation that sees it, since a median of 5 steps is 3 short ones already; a minute is 40
    # steps at 1.5 s a step, close to the 60 steps within which the fall is visible.
    length_collapse_for: Duration = "0s"
    # VerlRolloutAborts: share of rollout requests aborted above this.
    rollout_abort_threshold: Fraction = 0.05
    # How long the share must stay above it before VerlRolloutAborts warns.
    rollout_abort_for: Duration = "10m"
from dashgen.model import Alert, RuleGroup, Severity


def rules(config: Config) -> RuleGroup:
    tunables = config.area(RolloutConfig)
    share_steps = steps(tunables.truncation_steps)
    level_over = steps(tunables.truncation_level_steps)
    clip_ratio = Signal("response_length/clip_ratio").median_over(share_steps)
    factor, floor = tunables.truncation_rise_factor, tunables.truncation_rise_floor
    early_level = Baseline.quietest(steps(tunables.truncation_level_median_steps), over=level_over)
    sustain = tunables.truncation_sustain_fraction
    truncation = Alert.when(
        "VerlResponseTruncation",
        clip_ratio.rises_by(factor - 1, of=early_level, at_least=floor, beyond_noise=tunables.truncation_noise_z),
        severity=Severity.WARNING,
        for_=tunables.truncation_for,
        keep_firing_while=clip_ratio.rises_by((factor - 1) * sustain, of=early_level, at_least=floor * sustain),
        keep_firing_for=config.warning_keep_firing_for,
        summary="The share of responses cut at the maximum response length has risen well above the run's own "
                "level.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit max_response_length "
                     f"(median of its last {share_steps}), above {factor:g}x its lowest {early_level.window} median within the "
                     f"last {level_over}, by at least {floor:.0%} of responses and beyond "
                     f"{tunables.truncation_noise_z:g} standard errors of its step-to-step noise."),
        meaning="Truncated responses get no final answer, so they usually score zero. A share that grows during "
                "the run means the policy is drifting to longer outputs than the budget allows, or is looping; "
                "a share that was high from the run's first steps is its configuration, which "
                "VerlResponseTruncationHigh (an info) reports instead.",
        healthy_runs=("An agent or reasoning run may have 30-60% of its responses cut from its first step by its "
                      "own max_response_length: that level is VerlResponseTruncationHigh's, an info. This one needs "
                      "the 5-step median to double above the run's lowest 20-step median of the last 1000 steps, by "
                      "3 points of the share and beyond 5 standard errors of its step-to-step spread."),
        next_steps=(
            "Compare with response length mean/max: a steady rise means longer reasoning, a jump means loops.",
            "Raise data.max_response_length if the budget is too tight, or add an overlong penalty.",
        ),
    )
    threshold = tunables.truncation_threshold
    truncation_high = Alert.when(
        "VerlResponseTruncationHigh",
        clip_ratio.above(tunables.truncation_threshold),
        severity=Severity.INFO,
        for_=tunables.truncation_high_for,
        keep_firing_while=clip_ratio.above(threshold * tunables.truncation_high_sustain_fraction),
        summary="Many responses are cut at the maximum response length.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit max_response_length "
                     f"(median of its last {share_steps}; threshold {threshold:.0%})."),
        meaning="The length budget cuts many responses. A share this high from the run's first steps is the "
                "run's setup, not a fault: agent and long-reasoning runs are often published with 30-60% of "
                "their responses cut by their own max_response_length. It is an info: it never pages, and "
                "Alertmanager routes it nowhere by default. A share that rises during the run warns as "
                "VerlResponseTruncation.",
        next_steps=(
            "If the run was set up this way, nothing; otherwise raise data.max_response_length or add an "
            "overlong penalty, since cut responses usually score zero.",
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
        healthy_runs=("A healthy rollout engine aborts a request now and then (a preemption, a timeout under load): "
                      "it needs more than 5% of the requests aborted, for 10m."),
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
        healthy_runs=("Healthy runs shorten their answers as they learn a format, over tens of steps: it needs the "
                      "5-step median below 30% of its highest 5-step median within the last 60 steps, a fall to a "
                      "third in a few steps (305 to 14 tokens within 3 steps in a public run)."),
        next_steps=(
            "Read sample responses of recent steps: are they empty, one token, or a fixed string?",
            "Check the reward function for answers it scores without content; check entropy and the score "
            "spread (all equal rewards give GRPO no signal).",
        ),
    )
    return RuleGroup("verl-rollout", (truncation, truncation_high, aborts, length_collapse))
