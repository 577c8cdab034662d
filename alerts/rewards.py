"""Rewards: a cliff (reward falls far below its recent level) and stagnation (it stops rising)."""

from dashgen_alerts._common import (RUN, RUN_NAME, SCORE, VALUE, complete_baseline_median, held_baseline, hold_group,
                                   smoothed)

from dashgen.config import Config
from dashgen.model import Alert, Recording, RuleGroup, Severity, Sustain

SCORE_BASELINE = "verl:critic_score_mean:baseline_median"
SCORE_HELD = "verl:critic_score_mean:baseline_held"
SCORE_GAIN = "verl:critic_score_mean:median_gain"


def _below(baseline: str, drop: float, floor: float) -> str:
    """The level `drop` of the baseline's magnitude below it, and at least `floor` below it."""
    return f"({baseline} - clamp_min({drop:g} * abs({baseline}), {floor:g}))"


def rules(config: Config) -> list[RuleGroup]:
    base, recent = config.reward_cliff_baseline_window, config.reward_cliff_recent_window
    drop, floor = config.reward_cliff_drop_fraction, config.reward_cliff_min_drop
    sustain_fraction = config.reward_cliff_sustain_fraction
    window = config.reward_stagnation_window
    score = smoothed(SCORE, config.signal_smoothing_window)
    baseline = Recording(
        SCORE_BASELINE, complete_baseline_median(SCORE, base, recent),
        f"Median reward (critic/score/mean) over {base}, ending {recent} ago, once that window is full")
    held = held_baseline(SCORE_BASELINE, SCORE_HELD, config, fault_raises=False)
    gain = Recording(
        SCORE_GAIN, (f"quantile_over_time(0.5, {SCORE}[{window}])\n"
                     f"  - quantile_over_time(0.5, {SCORE}[{window}] offset {window})"),
        f"How much the median reward of the last {window} is above that of the {window} before")
    cliff = Alert(
        name="VerlRewardCliff",
        severity=Severity.CRITICAL,
        expr=f"{score} < {_below(SCORE_BASELINE, drop, floor)}",
        for_=config.reward_cliff_for,
        sustain=Sustain(f"{score} < {_below(SCORE_HELD, drop * sustain_fraction, floor * sustain_fraction)}", RUN),
        summary="Reward fell far below its level of the last hour and stays there.",
        description=(f"Run {RUN_NAME}: the median of critic/score/mean over {config.signal_smoothing_window} is "
                     f"{VALUE}, more than {drop:.0%} of its magnitude (and at least {floor:g}) below its median of "
                     f"the {base} before the last {recent}."),
        meaning="A sudden, sustained reward drop: the policy has unlearned something (often after a "
                "divergent update), the reward function or its data changed, or the critic went wrong.",
        next_steps=(
            "Look at the critic value loss and explained variance first: a critic that blew up produces "
            "bad advantages and drags the policy down (PPO only; GRPO has no critic).",
            "Check VerlTrainingDivergence and the KL, grad norm and entropy panels around the same step.",
            "Check that the reward function and the data loader did not change or fail (e.g. a reward "
            "server returning zeros); compare response length and truncation.",
        ),
    )
    stagnation = Alert(
        name="VerlRewardStagnation",
        severity=Severity.INFO,
        # The gain's median over a window: reward noise around the threshold neither delays nor
        # re-fires it.
        expr=f"quantile_over_time(0.5, {SCORE_GAIN}[{window}]) < {config.reward_stagnation_min_gain:g}",
        for_=config.reward_stagnation_for,
        keep_firing_for=window,
        sustain=Sustain(f"quantile_over_time(0.5, {SCORE_GAIN}[{window}]) < "
                        f"{config.reward_stagnation_sustain_factor * config.reward_stagnation_min_gain:g}", RUN),
        summary="Reward has stopped rising.",
        description=(f"Run {RUN_NAME}: the median reward of the last {window} has been about {VALUE} above that "
                     f"of the {window} before (less than {config.reward_stagnation_min_gain:g}) "
                     f"for {config.reward_stagnation_for}."),
        meaning="Training has plateaued. Late in a run that may simply be convergence; early, it usually "
                "means too little exploration, too weak a learning signal, or a task too hard for the model.",
        next_steps=(
            "Check entropy (collapsed?) and the PPO clip fraction (are updates doing anything?).",
            "Look at the score's min/max spread: if every sample gets the same reward, GRPO advantages are "
            "zero and nothing is learned; adjust the data difficulty or the reward.",
            "Decide whether to stop the run and save the GPUs.",
        ),
    )
    return [RuleGroup("verl-rewards", (baseline, held.held, gain, cliff, stagnation)),
            hold_group("verl-rewards", [held], config)]
