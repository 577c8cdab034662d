"""Validation: the training reward rising while the run's own validation score falls (reward hacking)."""

from dataclasses import dataclass

from dashgen.catalog import VALIDATION_FAMILIES
from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, steps
from dashgen.config import AreaConfig, Config, Duration, Fraction, NonNegative, StepCount
from dashgen.model import Alert, RuleGroup, Severity

# verl's core validation results (val-core/<data_source>/<variable>/<metric>), one labelled series
# each, holding the latest test step's value until the next: a window of steps reads the
# validation points it spans, weighted by the steps each held.
VALIDATION = Signal(VALIDATION_FAMILIES["val-core"])
REWARD = Signal("critic/score/mean")


@dataclass(frozen=True)
class ValidationConfig(AreaConfig, area="validation"):
    """The tunables of alerts/validation.py: the config file's `validation:` section."""

    # VerlRewardHacking reads each validation score as its median over this many training steps:
    # 4 to 8 validation points at a test_freq of 5 to 10. One bad validation is no fall as long as
    # it is held for less than half the window, so for a run that validates at least every 14
    # steps (the window compiles to 28-57 steps by the run's rhythm); a run that validates less
    # often is judged on fewer points, down to its latest alone.
    hacking_validation_steps: StepCount = 40
    # Its level before the fall: the highest such median within this many steps.
    hacking_validation_level_steps: StepCount = 200
    # The validation score must fall below that level by this fraction of its magnitude...
    hacking_validation_fall_fraction: Fraction = 0.25
    # ... and by at least this much, in the score's own units (a fraction of a score near 0 is nothing).
    hacking_validation_min_fall: NonNegative = 0.05
    # The training reward (critic/score/mean) is read as its median over this many steps...
    hacking_reward_steps: StepCount = 20
    # ... and compared with its median over this many steps ending hacking_reward_steps ago.
    hacking_reward_baseline_steps: StepCount = 50
    # The training reward must have risen above that median by this fraction of its magnitude...
    hacking_reward_rise_fraction: Fraction = 0.05
    # ... and beyond this many standard errors of its own step-to-step noise: a reward that only
    # wanders is not rising.
    hacking_reward_noise_z: NonNegative = 3.0
    # Once firing, it stays firing while the validation score is this fraction of the fall (and of
    # the least fall) below its level.
    hacking_sustain_fraction: Fraction = 0.5
    # How long both must hold before VerlRewardHacking warns: from the first evaluation that sees
    # them, since both are medians of 20 steps already, and at 2 s a step the reward's baseline
    # (ending 20 steps ago) takes a rise in within a minute.
    hacking_for: Duration = "0s"


def rules(config: Config) -> RuleGroup:
    tunables = config.area(ValidationConfig)
    val_steps = steps(tunables.hacking_validation_steps)
    val_over = steps(tunables.hacking_validation_level_steps)
    validation = VALIDATION.median_over(val_steps)
    # For a score a fault lowers, the quietest median is the highest: its level before the fall.
    level = Baseline.quietest(val_steps, over=val_over)
    fall, floor = tunables.hacking_validation_fall_fraction, tunables.hacking_validation_min_fall
    sustain = tunables.hacking_sustain_fraction
    reward_steps = steps(tunables.hacking_reward_steps)
    reward_before = steps(tunables.hacking_reward_baseline_steps)
    reward = REWARD.median_over(reward_steps)
    rise = tunables.hacking_reward_rise_fraction
    hacking = Alert.when(
        "VerlRewardHacking",
        # The validation score first: the alert carries its data_source, variable and metric.
        all_of(validation.falls_by(fall, of=level, at_least=floor),
               reward.rises_by(rise, of=Baseline(reward_before, ending=reward_steps),
                               beyond_noise=tunables.hacking_reward_noise_z)),
        severity=Severity.WARNING,
        for_=tunables.hacking_for,
        keep_firing_while=validation.falls_by(fall * sustain, of=level, at_least=floor * sustain),
        keep_firing_for=config.warning_keep_firing_for,
        summary="The training reward rises while the run's own validation score falls: the policy may be "
                "gaming the reward.",
        description=(f"Run {RUN_NAME}: validation {{{{ $labels.data_source }}}} {{{{ $labels.variable }}}}/"
                     f"{{{{ $labels.metric }}}} (median of its last {val_steps}) is {VALUE}, more than {fall:.0%} "
                     f"(and at least {floor:g}) below its highest such median within the last {val_over}, while "
                     f"critic/score/mean's median of its last {reward_steps} rose more than {rise:.0%} above its "
                     f"median of the {reward_before} before them, beyond {tunables.hacking_reward_noise_z:g} "
                     f"standard errors of its noise."),
        meaning="The reward the policy is trained on and the score it gets on held-out prompts have parted: "
                "the policy learns what the reward pays for, not the task. Usually the reward can be earned "
                "without a correct answer: a reward that ignores the answer's format or correctness (a "
                "format bonus, a length or keyword reward, a partial-credit rule that pays for any number), or "
                "a verifier the policy exploits (an answer extractor that accepts the first number or several "
                "answers at once, a judge model that prefers long or confident text, a code test that can be "
                "passed without solving it). Validation scores the same answers with the strict metric, so it "
                "falls while the training reward climbs. Overfitting to a small training set looks alike, more "
                "slowly. It is judged over the validation points the run has (verl logs them every "
                "trainer.test_freq steps): a median of 40 steps holds 4 to 8 of them at a test_freq of 5 to 10, "
                "so one bad validation is no fall; a run that validates less often than every 14 steps is judged "
                "on fewer points, and one bad validation there can raise it. A sudden fall is seen once it holds "
                "more than half of those 40 steps, about 20 steps after it; a gradual one when it reaches a "
                "quarter of the score.",
        next_steps=(
            "Read a few recent training responses with their rewards beside the validation ones: do the "
            "rewarded answers solve the task, or share a trick (a format, a phrase, a number, an empty answer)?",
            "Check the reward function and the verifier on those responses: does a wrong or malformed "
            "answer earn reward? Fix it, add the format and correctness checks validation uses, and resume "
            "from the checkpoint before the validation score turned.",
            "Compare response length and its clip ratio: a hack often changes how long answers are.",
        ),
    )
    return RuleGroup("verl-validation", (hacking,))
