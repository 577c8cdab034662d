"""Losses: a policy or value loss blowing up against the run's own level and noise, in steps.

A hand-written GRPO loop's loss can jump from a median of 0.18 to 1e6 while its reward still
holds (issue 52): the grad norm it comes with may not be logged, and the KL follows many steps
later. A loss's level differs by framework, normalisation and task by orders of magnitude, and a
policy loss is signed and sits near 0, so the change is judged against the loss's own quiet level
and its own step-to-step noise, with a floor in loss units for a loss whose noise is nothing.
"""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, any_of, steps
from dashgen.config import AreaConfig, Config, Factor, NonNegative, StepCount
from dashgen.model import Alert, RuleGroup, Severity

POLICY_LOSS = Signal("actor/pg_loss")  # verl's; TRL's and a custom loop's `loss` are read as it
VALUE_LOSS = Signal("critic/vf_loss")


@dataclass(frozen=True)
class LossesConfig(AreaConfig, area="losses"):
    """The tunables of alerts/losses.py: the config file's `losses:` section."""

    # VerlLossExplosion: a loss's median over its last loss_explosion_steps logged steps: 2 of 3
    # beyond, so that one step's spike is none (a healthy off-policy run of the corpus logs a policy
    # loss of 141 on one step against 0.01: custom-qwen25math-15b-grpo-offpolicy-e4-tb128-40-clipped-spike).
    loss_explosion_steps: StepCount = 3
    # Its level before the change: the quietest median over loss_level_steps within the last
    # loss_explosion_over_steps (the lowest for a rise, the highest for a fall), as
    # VerlGradNormExplosion's level.
    loss_level_steps: StepCount = 10
    # The steps that level is taken from.
    loss_explosion_over_steps: StepCount = 100
    # The change, as a multiple of the level's magnitude: 10, an order of magnitude of the loss's own
    # level (a level near 0, as a policy loss has, leaves the floor and the noise to judge).
    loss_explosion_change_multiple: Factor = 10.0
    # The least change, in the loss's units: a policy loss per token is an advantage times a
    # probability ratio, about 1 in magnitude with group-normalised advantages. The corpus' healthy
    # runs change by at most 0.06 beyond their noise (a loss exactly 0 on most steps has none, and a
    # change of 0.01 is "beyond" it), 17 times below.
    loss_explosion_min_change: NonNegative = 1.0
    # Standard errors of the loss's step-to-step noise the change must exceed, as for the grad norm's
    # and entropy's explosions.
    loss_explosion_noise_z: NonNegative = 5.0


def rules(config: Config) -> RuleGroup:
    tunables = config.area(LossesConfig)
    current, over = steps(tunables.loss_explosion_steps), steps(tunables.loss_explosion_over_steps)
    level = Baseline.quietest(steps(tunables.loss_level_steps), over=over)
    change = dict(of=level, at_least=tunables.loss_explosion_min_change, beyond_noise=tunables.loss_explosion_noise_z)
    multiple = tunables.loss_explosion_change_multiple
    explosion = Alert.when(
        "VerlLossExplosion",
        # A policy loss is signed and blows up to either side; a value loss is a squared error.
        any_of(POLICY_LOSS.median_over(current).rises_by(multiple, **change),
               POLICY_LOSS.median_over(current).falls_by(multiple, **change),
               VALUE_LOSS.median_over(current).rises_by(multiple, **change)),
        keep_firing_for=config.warning_keep_firing_for,
        severity=Severity.WARNING,
        summary="A training loss blew up far beyond its own level: the update is breaking.",
        description=(f"Run {RUN_NAME}: the median of the policy or value loss over its last {current} is {VALUE}: "
                     f"away from its quietest {level.window} median within the last {over} by more than "
                     f"{multiple:g} times that level's magnitude, at least {tunables.loss_explosion_min_change:g}, "
                     f"and beyond {tunables.loss_explosion_noise_z:g} standard errors of its step-to-step noise."),
        meaning="A loss orders of magnitude beyond its own level on most of the last steps: probability ratios "
                "far from 1 (an off-policy or unclipped update, a learning rate too high, a numerics problem "
                "between the rollout engine and the trainer). The reward can still hold for many steps while it "
                "does, and the KL follows later. Read on verl's actor/pg_loss and critic/vf_loss, TRL's `loss` and "
                "a hand-written loop's loss (read as actor/pg_loss); a policy loss sits near 0 and is signed, so "
                "a blow-up to either side counts, judged against the loss's own noise with a floor of "
                f"{tunables.loss_explosion_min_change:g}. Beyond VerlRunDestroyed's bound, the run pages.",
        healthy_runs=(f"A healthy loss spikes for a step (141 against 0.01 in a public run) and a policy loss "
                      f"near 0 has almost no noise: it needs the {current.count}-step median {multiple:g} times "
                      f"its level's magnitude away from the quietest {level.window.count}-step median of the last "
                      f"{over.count} steps, by at least {tunables.loss_explosion_min_change:g} and beyond "
                      f"{tunables.loss_explosion_noise_z:g} standard errors of its step-to-step spread; the corpus' "
                      "healthy runs change by at most 0.06 so."),
        next_steps=(
            "Compare with the grad norm, the PPO clip fraction and the KL on the Training stability row: a loss "
            "that blows up with them is an update leaving its trust region.",
            "Lower the learning rate or restore the ratio clip; resume from the checkpoint before the rise if "
            "the reward or validation follows it down.",
        ),
    )
    return RuleGroup("verl-losses", (explosion,))
