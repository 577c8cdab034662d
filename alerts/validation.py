"""Validation: the training reward rising while the run's own validation score falls (reward hacking)."""

from dataclasses import dataclass

from dashgen.catalog import VALIDATION_FAMILIES
from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of, steps
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

    # VerlRewardHacking reads each validation score as its highest value over this many training
    # steps: every validation point the window holds must have fallen (the one held at its start
    # among them), at least two of them as long as the run validates at least every 79 steps, so
    # one bad validation is no fall; a run that validates less often is judged on its latest point
    # alone. (In PromQL, where the exporter computes no step windows, the window is a band's 57-113
    # steps, and two points need a validation every 56.)
    hacking_validation_steps: StepCount = 80
    # Its level before the fall: the highest median of the score over this many steps (two or more
    # validation points, so one lucky evaluation sets no level) ...
    hacking_validation_level_median_steps: StepCount = 100
    # ... within this many steps.
    hacking_validation_level_steps: StepCount = 300
    # The validation score must fall below that level by this fraction of its magnitude...
    hacking_validation_fall_fraction: Fraction = 0.25
    # ... and by at least this much, in the score's own units: a validation of a few hundred prompts
    # moves its accuracy by 0.02-0.03 between evaluations, so one evaluation that a run validating
    # rarely holds for the whole window falls 0.1 only by a 4-sigma chance (and a fraction of a
    # score near 0 is nothing).
    hacking_validation_min_fall: NonNegative = 0.1
    # ... or, for a score near 0, to below this (its highest value of those steps) by the fraction
    # alone: a validation going from 0.4% to 0% while the training reward climbs 0.08 -> 0.8 (issue 52)
    # falls a few thousandths, far short of the least fall above, yet keeps nothing of its level.
    # 1%: a score below it on a validation set of a few hundred prompts is a handful of answers.
    hacking_validation_near_zero: NonNegative = 0.01
    # The training reward (critic/score/mean) is read as its median over this many steps...
    hacking_reward_steps: StepCount = 20
    # ... and compared with its median over this many steps ending hacking_validation_steps ago:
    # before the steps whose validation points fell, so both are judged over the same span.
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
    # them, since both read windows of steps already, and at 2 s a step the reward's baseline
    # (ending 20 steps ago) takes a rise in within a minute.
    hacking_for: Duration = "0s"


def rules(config: Config) -> RuleGroup:
    tunables = config.area(ValidationConfig)
    val_steps = steps(tunables.hacking_validation_steps)
    level_steps = steps(tunables.hacking_validation_level_median_steps)
    val_over = steps(tunables.hacking_validation_level_steps)
    validation = VALIDATION.max_over(val_steps)
    # For a score a fault lowers, the quietest median is the highest: its level before the fall.
    level = Baseline.quietest(level_steps, over=val_over)
    fall, floor = tunables.hacking_validation_fall_fraction, tunables.hacking_validation_min_fall
    sustain = tunables.hacking_sustain_fraction
    reward_steps = steps(tunables.hacking_reward_steps)
    reward_before = steps(tunables.hacking_reward_baseline_steps)
    reward = REWARD.median_over(reward_steps)
    rise = tunables.hacking_reward_rise_fraction
    hacking = Alert.when(
        "VerlRewardHacking",
        # The validation score first: the alert carries its data_source, variable and metric.
        all_of(any_of(validation.falls_by(fall, of=level, at_least=floor),
                      all_of(validation.falls_by(fall, of=level),
                             validation.below(tunables.hacking_validation_near_zero))),
               reward.rises_by(rise, of=Baseline(reward_before, ending=val_steps),
                               beyond_noise=tunables.hacking_reward_noise_z)),
        severity=Severity.WARNING,
        for_=tunables.hacking_for,
        keep_firing_while=validation.falls_by(fall * sustain, of=level, at_least=floor * sustain),
        keep_firing_for=config.warning_keep_firing_for,
        summary="The training reward rises while the run's own validation score falls: the policy may be "
                "gaming the reward.",
        description=(f"Run {RUN_NAME}: validation {{{{ $labels.data_source }}}} {{{{ $labels.variable }}}}/"
                     f"{{{{ $labels.metric }}}} (its highest value of the last {val_steps}) is {VALUE}, more than "
                     f"{fall:.0%} (and at least {floor:g}, or to below {tunables.hacking_validation_near_zero:g}) "
                     f"below its highest median of {level_steps} within the last {val_over}, while "
                     f"critic/score/mean's median of its last {reward_steps} rose more than {rise:.0%} above its "
                     f"median of the {reward_before} before the last {val_steps}, beyond "
                     f"{tunables.hacking_reward_noise_z:g} "
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
                "trainer.test_freq steps): every point of the last 80 steps must have fallen, at least two "
                "of them for a run that validates every 79 steps or more often, so one bad validation is no "
                "fall; a run that validates less often is judged on its latest point alone. A sudden fall is "
                "seen about 80 steps after it; a gradual one once the points of those steps are a quarter "
                "below the level.",
        healthy_runs=("Validation scores are noisy and come every few dozen steps: it needs every validation point "
                      "of the last 80 steps a quarter (and 0.1) below the run's highest 100-step median of "
                      "validation within 300 steps, so one bad evaluation is no fall, while the training reward "
                      "rose beyond its own noise above its level from before those 80 steps."),
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
