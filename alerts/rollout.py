"""Rollout: responses cut at the length limit; rollout requests aborted."""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of, steps
from dashgen.config import AreaConfig, Config, Duration, Factor, Fraction, NonNegative, StepCount
from dashgen.model import Alert, RuleGroup, Severity


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
    # VerlResponseTruncationSaturating, a high share saturating: the share's median of its last
    # truncation_steps risen by at least this much, in the share's own units, above the same level as
    # VerlResponseTruncation's (and beyond truncation_noise_z), to above truncation_saturated_share. A
    # share of 0.6 cannot double; 0.6 to 0.9, then 1.0 for 185 steps, is a run whose every answer is
    # cut (issue 52).
    truncation_saturation_rise: Fraction = 0.25
    # The share that rise must reach: 4 in 5 responses cut.
    truncation_saturated_share: Fraction = 0.8
    # VerlResponseTruncationHigh (an info): the share's median of its last truncation_steps above
    # this, whether the run has had it from its first steps (its max_response_length) or it rose.
    truncation_threshold: Fraction = 0.1
    # Once firing, the info stays firing while the share is above this fraction of the threshold,
    # so a share that wavers around it is reported once.
    truncation_high_sustain_fraction: Fraction = 0.5
    # How long the share must stay above the threshold before VerlResponseTruncationHigh fires.
    truncation_high_for: Duration = "1m"
    # VerlResponseTruncationFlatReward: the share's median over truncation_flat_steps above this
    # while the reward is flat at its floor: nearly half of the answers cut. The corpus' healthy and
    # degrading agent runs hold 0.2-0.42 (tune: verl-qwen25-3b-opd-truncation-*); issue 52's failed
    # run 0.50-0.58 from its first step.
    truncation_flat_reward_share: Fraction = 0.45
    # The steps the share's level and the reward's median are taken over.
    truncation_flat_steps: StepCount = 20
    # A reward is flat when its median has risen less than this fraction of its magnitude above its
    # lowest such median of the run: a noisy flat reward's median sits about a third above its lowest
    # of many medians by chance, a learning run's (the healthy TRL minesweeper run: -5.3 to +3 with
    # 80-99% cut) far more.
    truncation_flat_reward_rise_fraction: Fraction = 0.5
    # The reward must not have risen that much above its median of this many steps ending this many
    # steps ago either, which exists once half of them are logged: a young run is at its floor by
    # definition, and a learning run's reward may take 100 steps to leave it (the minesweeper run,
    # logged every 10th step, was within a third of it until step 110).
    truncation_flat_reward_history_steps: StepCount = 100
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
    # Its second branch, a fall with the reward falling: the length's median of its last
    # length_fast_steps below this fraction of the same highest median, while the reward falls. Healthy
    # runs shorten their answers while the reward climbs (305 to 35 tokens in 5 steps, tune:
    # custom-qwen25math-15b-grpo-masked-normalize-200); failed ones while it falls (1759 to 623 tokens
    # with the reward -0.68 to -0.97, tune: verl-qwen3-4b-opd-len1-collapse).
    length_fall_fraction: Fraction = 0.6
    # The steps each median of that branch is taken over, the length's and the reward's: three, so a
    # fall is read on its third step, and one odd step is no fall.
    length_fast_steps: StepCount = 3
    # Standard errors of the length's own step-to-step noise that fall must exceed: a small-batch run's
    # length swings from 90 to 400 tokens between steps, and its 3-step median halves by chance (tune:
    # unsloth-llama31-8b-gsm8k-grpo, at 3 standard errors; unsloth-gptoss-20b-2048-game-grpo-stopped-432).
    length_fall_noise_z: NonNegative = 5.0
    # The reward's fall: its median of the last length_fast_steps this fraction below its highest
    # length_median_steps median within the last length_rate_steps.
    length_reward_fall_fraction: Fraction = 0.1
    # Standard errors of the reward's own step-to-step noise the fall must exceed.
    length_reward_noise_z: NonNegative = 3.0
    # VerlRolloutAborts: share of rollout requests aborted above this.
    rollout_abort_threshold: Fraction = 0.05
    # How long the share must stay above it before VerlRolloutAborts warns.
    rollout_abort_for: Duration = "10m"


def rules(config: Config) -> RuleGroup:
    tunables = config.area(RolloutConfig)
    share_steps = steps(tunables.truncation_steps)
    level_over = steps(tunables.truncation_level_steps)
    clip_ratio = Signal("response_length/clip_ratio").median_over(share_steps)
    factor, floor = tunables.truncation_rise_factor, tunables.truncation_rise_floor
    early_level = Baseline.quietest(steps(tunables.truncation_level_median_steps), over=level_over)
    sustain = tunables.truncation_sustain_fraction
    noise_z = tunables.truncation_noise_z
    truncation = Alert.when(
        "VerlResponseTruncation",
        clip_ratio.rises_to(factor, of=early_level, at_least=floor, beyond_noise=noise_z),
        severity=Severity.WARNING,
        for_=tunables.truncation_for,
        keep_firing_while=clip_ratio.rises_by((factor - 1) * sustain, of=early_level, at_least=floor * sustain),
        keep_firing_for=config.warning_keep_firing_for,
        summary="The share of responses cut at the maximum response length has risen well above the run's own "
                "level.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit max_response_length "
                     f"(median of its last {share_steps}), above {factor:g}x its lowest {early_level.window} median within the "
                     f"last {level_over}, by at least {floor:.0%} of responses and beyond "
                     f"{noise_z:g} standard errors of its step-to-step noise."),
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
    saturation_rise, saturated = tunables.truncation_saturation_rise, tunables.truncation_saturated_share
    # A rise by saturation_rise of the share is also that fraction of any level below 1: the floor
    # binds, not the fraction.
    truncation_saturating = Alert.when(
        "VerlResponseTruncationSaturating",
        all_of(clip_ratio.rises_by(saturation_rise, of=early_level, at_least=saturation_rise, beyond_noise=noise_z),
               clip_ratio.above(saturated)),
        severity=Severity.WARNING,
        for_=tunables.truncation_for,
        keep_firing_while=all_of(
            clip_ratio.rises_by(saturation_rise * sustain, of=early_level, at_least=saturation_rise * sustain),
            clip_ratio.above(saturated * sustain)),
        keep_firing_for=config.warning_keep_firing_for,
        summary="A high share of responses cut at the maximum response length has risen to nearly all of them.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit max_response_length "
                     f"(median of its last {share_steps}), by at least {saturation_rise:.0%} of responses above its "
                     f"lowest {early_level.window} median within the last {level_over}, beyond {noise_z:g} standard "
                     f"errors of its step-to-step noise, to above {saturated:.0%}."),
        meaning="A run that started with many answers cut (its budget) now has nearly every answer cut: a share "
                "of 60% cannot double, so VerlResponseTruncation does not see it, but 60% to 90% and then 100% "
                "leaves the policy no complete answer to learn from.",
        healthy_runs=(f"An agent run's share swings between 30% and 60% from step to step; a healthy TRL run holds "
                      f"80-99% from its first step: it needs the 5-step median to rise by {saturation_rise:.0%} of "
                      f"responses above the run's lowest 20-step median, beyond {noise_z:g} standard errors of its "
                      f"step-to-step spread, to above {saturated:.0%}."),
        next_steps=(
            "Compare with response length mean/max and the reward: answers growing into the cap, or looping?",
            "Raise data.max_response_length, or add an overlong penalty.",
        ),
        untested=("a generated case moves a share from one healthy level to one crossed level, and a rise by 25 "
                  "points to above 80% needs a high level to start from: its fixture in tests/rules/rollout-test.yaml "
                  "rises from 60% to 95%"),
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
    flat_steps = steps(tunables.truncation_flat_steps)
    flat_share = tunables.truncation_flat_reward_share
    flat_rise = tunables.truncation_flat_reward_rise_fraction
    history = steps(tunables.truncation_flat_reward_history_steps)
    reward = Signal("critic/score/mean").median_over(flat_steps).after_half_window()
    truncation_flat_reward = Alert.when(
        "VerlResponseTruncationFlatReward",
        all_of(Signal("response_length/clip_ratio").median_over(flat_steps).after_half_window().above(flat_share),
               reward.does_not_rise_by(flat_rise, of=Baseline.quietest(flat_steps, over=level_over)),
               reward.does_not_rise_by(flat_rise, of=Baseline(history, ending=history))),
        severity=Severity.WARNING,
        for_=tunables.truncation_for,
        keep_firing_for=config.warning_keep_firing_for,
        summary="Many responses are cut at the maximum response length while the reward stays flat at its floor.",
        description=(f"Run {RUN_NAME}: {{{{ $value | humanizePercentage }}}} of responses hit max_response_length "
                     f"(median of its last {flat_steps}; threshold {flat_share:.0%}) while the reward's median over "
                     f"them has risen less than {flat_rise:.0%} above its lowest such median within the last "
                     f"{level_over} and above its median of the {history} before the last {history}."),
        meaning="The length budget cuts nearly half the answers or more, and the run does not learn: cut answers "
                "score nothing, so the budget, not the task, sets the reward. A high share with a rising reward "
                "is a run learning within its budget (VerlResponseTruncationHigh, an info).",
        healthy_runs=(f"Agent runs are published with 20-40% of their answers cut, and a healthy TRL run has 80-99% "
                      f"cut while its reward rises from -14 to +8: it needs the share's {flat_steps.count}-step median "
                      f"above {flat_share:.0%} and the reward's not {flat_rise:.0%} above its lowest level of the run nor "
                      f"above its median of the {history.count} steps before the last {history.count}, judged once "
                      f"half of those are logged."),
        next_steps=(
            "Raise data.max_response_length (the reasoning does not fit the budget), or add an overlong penalty "
            "or a shorter output format.",
            "Read sample responses of recent steps: looping, or reasoning cut before its answer?",
        ),
        untested=("a flat reward is the fault and a generated case holds each signal at a level, taking that for "
                  "healthy: its fixture in tests/rules/rollout-test.yaml holds the reward flat, and rising, for 200 "
                  "steps"),
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
    longest = Baseline.quietest(length_steps, over=length_over)
    fast_steps = steps(tunables.length_fast_steps)
    length_falling_with_reward = all_of(
        Signal("response_length/mean").median_over(fast_steps).falls_to(
            tunables.length_fall_fraction, of=longest, beyond_noise=tunables.length_fall_noise_z),
        Signal("critic/score/mean").median_over(fast_steps).falls_by(
            tunables.length_reward_fall_fraction, of=Baseline.quietest(length_steps, over=length_over),
            beyond_noise=tunables.length_reward_noise_z))
    length_collapse = Alert.when(
        "VerlResponseLengthCollapse",
        any_of(length.below(tunables.length_collapse_fraction, times=longest), length_falling_with_reward),
        severity=Severity.WARNING,
        for_=tunables.length_collapse_for,
        keep_firing_for=config.warning_keep_firing_for,
        summary="Responses have shrunk to a small fraction of their length: the policy may be gaming the reward "
                "with minimal answers.",
        description=(f"Run {RUN_NAME}: the mean response length (median of its last {length_steps}) is {VALUE} "
                     f"tokens, below {tunables.length_collapse_fraction:.0%} of its highest such median within the "
                     f"last {length_over}; or its median of the last {fast_steps} below "
                     f"{tunables.length_fall_fraction:.0%} of it, beyond {tunables.length_fall_noise_z:g} standard "
                     f"errors of its noise, while the reward's median of its last {fast_steps} fell "
                     f"{tunables.length_reward_fall_fraction:.0%} below its highest {length_steps} median within the "
                     f"last {length_over}, beyond {tunables.length_reward_noise_z:g} standard errors of its noise."),
        meaning="A length collapse: the policy found that short (often empty or single-token) answers score, or "
                "it collapsed onto a degenerate output. The reward may stay up while the model stops solving "
                "the task (reward hacking).",
        healthy_runs=("Healthy runs shorten their answers as they learn a format, over tens of steps: it needs the "
                      "5-step median below 30% of its highest 5-step median within the last 60 steps, a fall to a "
                      "third in a few steps (305 to 14 tokens within 3 steps in a public run); or the 3-step median "
                      "below 60% of it, beyond 5 standard errors of the length's noise, while the reward's 3-step "
                      "median falls by 10% beyond 3 standard errors of its own: healthy runs shorten their answers "
                      "while the reward climbs."),
        next_steps=(
            "Read sample responses of recent steps: are they empty, one token, or a fixed string?",
            "Check the reward function for answers it scores without content; check entropy and the score "
            "spread (all equal rewards give GRPO no signal).",
        ),
    )
    return RuleGroup("verl-rollout", (truncation, truncation_saturating, truncation_high, truncation_flat_reward, aborts,
                                      length_collapse))
