"""Rewards: a cliff (reward falls far below its recent level), a collapse (far below its best on each of its
last steps) and stagnation (it stops rising)."""

from dataclasses import dataclass
from typing import ClassVar

from dashgen.catalog import LOG_ROUNDING_METRIC, verl_metric_name
from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of, steps
from dashgen.config import AreaConfig, Config, Duration, Fraction, NonNegative, StepCount
from dashgen.model import Alert, RuleGroup, Severity



@dataclass(frozen=True)
class RewardsConfig(AreaConfig, area="rewards"):
    """The tunables of alerts/rewards.py: the config file's `rewards:` section."""

    retired: ClassVar[dict[str, str]] = {
        "reward_stagnation_window": "VerlRewardStagnation counts logged steps now: set reward_stagnation_steps",
        "reward_stagnation_for": "VerlRewardStagnation needs no wall time now: it fires when the gain is short "
                                 "of reward_stagnation_min_gain beyond reward_stagnation_noise_z standard errors",
        "reward_stagnation_sustain_factor": "VerlRewardStagnation stays firing until the gain is above "
                                            "reward_stagnation_sustain_gain beyond reward_stagnation_sustain_noise_z "
                                            "standard errors",
    }

    # VerlRewardCliff compares the reward with its median over this many of the run's steps,
    # ending `reward_cliff_recent_steps` ago: in steps, so that the baseline does not absorb a
    # fault before a run of 15 minutes a step has logged enough of it to move its median.
    reward_cliff_baseline_steps: StepCount = 100
    # The recent steps the reward cliff's baseline ends before, so the fall is not part of it.
    reward_cliff_recent_steps: StepCount = 30
    # It fires when the reward falls by this fraction of its baseline's magnitude...
    reward_cliff_drop_fraction: Fraction = 0.5
    # ... and by at least this much, in the reward's own units: a fraction of a baseline near 0
    # (signed rewards, +-1) shrinks to nothing. Set it to a few times the step-to-step noise of
    # critic/score/mean.
    reward_cliff_min_drop: NonNegative = 0.2
    # ... and by more than this many standard errors of the fall, read from the reward's own
    # step-to-step noise over the baseline's steps: with one prompt a step, a reward that jumps
    # across its range between consecutive steps moves its 10-step median by chance (issue 35).
    # 5 standard errors is about 2.1x the step-to-step spread for the 10 and 100 steps compared.
    reward_cliff_noise_z: NonNegative = 5.0
    # How long the fall must hold before VerlRewardCliff pages: one evaluation after the first. A
    # run of 2 s a step logs 30 steps an evaluation, and its baseline, ending 30 steps back, takes
    # the fall in from the fourth evaluation on: a longer `for` would never be reached there.
    reward_cliff_for: Duration = "1m"
    # The reward is read as its median over this many steps: a reward scored on one prompt per
    # step jumps between 0 and its maximum from step to step, and a median of minutes is a median
    # of 3 steps on a run of one step a minute. Short, because the noise margin above grows as the
    # window shrinks: a 10-step median pages 6-7 steps after a cliff (a 30-step one took 16), with
    # no more pages on the corpus' or the simulated healthy runs. Its baseline still ends
    # reward_cliff_recent_steps back, so at 1.5 s a step the fall stays visible beyond the `for`.
    reward_cliff_smoothing_steps: StepCount = 10
    # VerlRewardCollapse pages on a collapse the moment it is plain, whatever the run's age (issue 52:
    # collapses to 0 paged 7 steps late, or never on runs of 40 steps, since VerlRewardCliff's baseline
    # ends 30 steps back and needs 50 of its steps): each of the reward's last this many logged steps
    # reward_cliff_collapse_fraction of its level's magnitude (and reward_cliff_min_drop) below its
    # highest reward_cliff_smoothing_steps median of the last reward_cliff_baseline_steps, a level from
    # before the fall that exists from the run's first steps, and their median beyond
    # reward_cliff_noise_z standard errors (4.1 times the step-to-step spread for 3 and 10 steps).
    # Each step, not only their median: a heavy-tailed reward (the corpus' 2048-game run: -10.5 on 2
    # steps of 3 against a level of 1) moves a 3-step median by chance.
    reward_collapse_steps: StepCount = 3
    # The share of its level's magnitude each of those steps must have fallen: below a quarter of it,
    # deeper than VerlRewardCliff's half, since it reads fewer steps. The corpus' collapses fall
    # 94-100% (to 0.00-0.03 from 0.33-0.95); its deepest dip that recovers, 62% (0.83 to 0.26-0.31 on
    # three logged steps, back at 0.8 ten steps later), which 50% would page.
    reward_collapse_fraction: Fraction = 0.75
    # Once firing, it stays firing while the median of those steps is this fraction of the magnitude
    # (and of reward_cliff_min_drop) below VerlRewardCliff's baseline held from before the collapse:
    # back above half of it, it resolves.
    reward_collapse_sustain_fraction: Fraction = 0.5
    # Once firing, it stays firing while the reward is this fraction of the drop (and of the
    # floor) below its held baseline.
    reward_cliff_sustain_fraction: Fraction = 0.5
    # VerlRewardStagnation compares the reward's median over its last this many logged steps with
    # its median over as many steps before those: in steps, so a plateau reads the same at 1.5 s and
    # at an hour a step (a window of 30 minutes held 1,200 steps of the one and none of the other).
    reward_stagnation_steps: StepCount = 30
    # VerlRewardStagnation fires when the reward's median has gained less than this (in the
    # reward's units) over its median of the reward_stagnation_steps before.
    reward_stagnation_min_gain: NonNegative = 0.015
    # VerlRewardStagnation needs the gain short of reward_stagnation_min_gain by more than this many
    # standard errors of the gain, read from the reward's own step-to-step noise, so a gain within
    # the noise of min_gain is not read as a plateau.
    reward_stagnation_noise_z: NonNegative = 1.75
    # Once firing, VerlRewardStagnation stays firing until the reward's gain over its median of the
    # reward_stagnation_steps before is above this (in the reward's units) by more than
    # reward_stagnation_sustain_noise_z standard errors.
    reward_stagnation_sustain_gain: NonNegative = 0.02
    # Once firing, VerlRewardStagnation stays firing until the reward's gain is above
    # reward_stagnation_sustain_gain by more than this many standard errors of its noise: a plateau
    # whose gain wanders with the noise is one firing, not several.
    reward_stagnation_sustain_noise_z: NonNegative = 2.0
    # VerlNoLearningSignal, either of two, each in logged steps (a run whose groups all fail alike is
    # VerlRewardNeverPays'). Healthy small-batch GRPO has a grad
    # norm of exactly 0 on 30-60% of its steps (a step whose groups' rewards are all equal gives no
    # advantage), and a verl console log prints a healthy 0.0004 as 0.000: a zero gradient alone
    # is no fault. A grad norm this close to 0 counts as 0.
    no_signal_tolerance: NonNegative = 1e-9
    # (1) A grad norm of 0 on each of the last no_signal_broken_steps where the log proves the update
    # itself broken: either no group's completions all scored alike on them (TRL's
    # frac_reward_zero_std 0, so every group had an advantage), or the rewards differed (score std
    # above the tolerance) while the policy is still exactly the reference (KL to it 0) at step
    # no_signal_unmoved_step or later. A differing score std alone proves nothing: verl's is the
    # whole batch's, and TRL averages it over its logging_steps while the grad norm it logs is the
    # last step's, so a step whose groups each scored alike sits among steps whose rewards differ.
    no_signal_broken_steps: StepCount = 3
    # The step from which a KL to the reference of exactly 0 means no update ever took effect: a
    # healthy run whose first steps each have every group scoring alike (a third of its steps at
    # most, in the corpus' small-batch runs) gets there with a chance of (1/3)^4, about 1%.
    no_signal_unmoved_step: StepCount = 5
    # (2) A grad norm of 0 on every one of the last no_signal_dead_steps (judged once half of them
    # are logged): a healthy small-batch run has a step with a gradient among 20. It warns unless the
    # reward is saturated (VerlRewardSaturated, an info): its median over those steps at the highest
    # of its no_signal_level_steps medians over the run's last no_signal_range_steps, and above the
    # lowest of them.
    no_signal_dead_steps: StepCount = 20
    # ... and only where the policy loss was exactly 0 on each of them too: TRL with logging_steps
    # above 1 logs the last step's grad norm beside the mean of the steps' losses, and a healthy run
    # whose last steps each have every group scoring alike logs a 0 there on 17 lines in a row (the
    # corpus' rho=2.0 and rho=3.0 GSM8K runs, loss -0.12 to 0.03 beside them). A run without a
    # gradient has no advantage to make a loss of either. A log without actor/pg_loss is not judged
    # by this branch.
    # (3) A reward of exactly 0 with a grad norm of exactly 0 on each of the last
    # no_signal_zero_reward_steps, judged once half of them are logged (from the 3rd logged step of
    # a log of every step): nothing paid and nothing updated. Issue 52: a run truncating every
    # completion from step 1 (reward, grad norm and KL all 0) warned only on its 7th logged step.
    # No healthy run of the corpus has both exactly 0 on 3 logged steps in a row.
    no_signal_zero_reward_steps: StepCount = 5
    # The reward's level, read as its median over this many logged steps: its ceiling is the highest
    # such median of the last no_signal_range_steps, its floor the lowest. A reward still moving with
    # its noise then sits below its ceiling: the median of the dead steps is at most the highest median
    # of the shorter stretches they split into, and equals it only where those medians tie. It must be
    # shorter than the dead steps also on a sparse log, where a window reads back to min(N, 10) logged
    # values (dashgen/sources/step_statistics.py): the dead steps read 10 there, so at most 5.
    no_signal_level_steps: StepCount = 5
    # How far back the ceiling and the floor reach, in logged steps: a run saturated for longer than
    # this has no range left to be at the top of, and warns again.
    no_signal_range_steps: StepCount = 1000
    # VerlRewardSaturated needs a grad norm of 0 on each of the last this many logged steps (judged once
    # half of them are logged), with the reward saturated as above. Half the dead steps, so it holds
    # wherever VerlNoLearningSignal's zeros in a row meet a saturated reward. A run whose groups nearly
    # all score alike has such a stretch on most steps; a healthy small-batch run, with 30-60% steps
    # without a gradient, has one by chance on at most 0.6^10, about 0.6%, of its steps.
    saturated_zero_steps: StepCount = 10
    # The share of its ceiling by which the reward's median may sit below it (or above its floor) and
    # still be at it. A saturated reward takes the same value on nearly every step, so its median is
    # that value exactly: this allows only for the floats of a log that averages equal values.
    no_signal_level_tolerance: Fraction = 1e-6
    # Either counts a 0 only where the log prints finer than this (verl_log_rounding, the largest
    # value the log shows as 0: dashgen/formats/rounding.py): a console log's 3 decimals show 0.0004
    # as 0, and in a small-batch run whose grad norm is 1e-4 to 1e-3 most steps with a signal print
    # 0.000. A JSON log's full floats, TRL's and RL-Insight's values show a 0 as it is.
    no_signal_max_rounding: NonNegative = 1e-6
    # How long one must hold before VerlNoLearningSignal warns.
    no_signal_for: Duration = "1m"


# Where the log tells the groups whose rewards are all equal apart (prime-rl's shares of problems).
EQUAL_GROUPS = (("reward/solve_none", "failed by every completion: the tasks are too hard for the model"),
                ("reward/solve_all", "solved by every completion: the tasks are too easy for it"))


def _equal_groups(key: str, what: str) -> str:
    """The description's sentence on `key`'s share at the newest step, for a run that logs it."""
    series = verl_metric_name(key)[0]
    query = f'printf "max({series}{{project=%q, experiment=%q}})" $labels.project $labels.experiment | query'
    return (f"{{{{ with {query} }}}} {{{{ . | first | value | humanizePercentage }}}} of the newest step's problems "
            f"were {what} ({key}).{{{{ end }}}}")


def rules(config: Config) -> list[RuleGroup]:
    tunables = config.area(RewardsConfig)
    base, recent = steps(tunables.reward_cliff_baseline_steps), steps(tunables.reward_cliff_recent_steps)
    drop, floor = tunables.reward_cliff_drop_fraction, tunables.reward_cliff_min_drop
    sustain_fraction = tunables.reward_cliff_sustain_fraction
    smoothing = steps(tunables.reward_cliff_smoothing_steps)
    score = Signal("critic/score/mean").median_over(smoothing)
    plateau_steps = steps(tunables.reward_stagnation_steps)
    reward_now = Signal("critic/score/mean").median_over(plateau_steps)
    reward_before = Baseline(plateau_steps, ending=plateau_steps)
    min_gain, plateau_z = tunables.reward_stagnation_min_gain, tunables.reward_stagnation_noise_z
    sustain_gain = tunables.reward_stagnation_sustain_gain
    sustain_z = tunables.reward_stagnation_sustain_noise_z
    cliff = Alert(
        name="VerlRewardCliff",
        severity=Severity.CRITICAL,
        condition=score.falls_by(drop, of=Baseline(base, ending=recent), at_least=floor,
                                 beyond_noise=tunables.reward_cliff_noise_z),
        for_=tunables.reward_cliff_for,
        keep_firing_while=score.falls_by(drop * sustain_fraction, of=Baseline.held(),
                                         at_least=floor * sustain_fraction),
        summary="Reward fell far below its level of the run's recent steps and stays there.",
        description=(f"Run {RUN_NAME}: the median of critic/score/mean over its last {smoothing} is "
                     f"{VALUE}, more than {drop:.0%} of its magnitude (and at least {floor:g}) below its median of "
                     f"the {base} before the last {recent}, and more than {tunables.reward_cliff_noise_z:g} standard "
                     f"errors of its own step-to-step noise."),
        meaning="A sudden, sustained reward drop: the policy has unlearned something (often after a "
                "divergent update), the reward function or its data changed, or the critic went wrong.",
        healthy_runs=(f"A small-batch reward jumps across its whole range between consecutive steps, and its "
                      f"{smoothing.count}-step median wanders: the fall must be {drop:.0%} of the {base.count}-step level before the last "
                      f"{recent}, at least {floor:g}, and beyond {tunables.reward_cliff_noise_z:g} standard errors of "
                      f"the reward's own step-to-step spread; no healthy run of the corpus does that."),
        next_steps=(
            "Look at the critic value loss and explained variance first: a critic that blew up produces "
            "bad advantages and drags the policy down (PPO only; GRPO has no critic).",
            "Check VerlTrainingDivergence and the KL, grad norm and entropy panels around the same step.",
            "Check that the reward function and the data loader did not change or fail (e.g. a reward "
            "server returning zeros); compare response length and truncation.",
        ),
    )
    collapsed = steps(tunables.reward_collapse_steps)
    collapse, collapse_sustain = tunables.reward_collapse_fraction, tunables.reward_collapse_sustain_fraction
    level = Baseline.quietest(smoothing, over=base)
    collapse_median = Signal("critic/score/mean").median_over(collapsed)
    collapse_alert = Alert.when(
        "VerlRewardCollapse",
        # The median first: the description's value.
        all_of(collapse_median.falls_by(collapse, of=level, at_least=floor, beyond_noise=tunables.reward_cliff_noise_z),
               Signal("critic/score/mean").max_over(collapsed).after_half_window().falls_by(
                   collapse, of=level, at_least=floor)),
        severity=Severity.CRITICAL,
        # No `for` in time: each of its steps must have collapsed already, and a minute is 40 steps at
        # 1.5 s a step but a fraction of one at 55 s.
        # Against VerlRewardCliff's baseline held from before the collapse: at 1.5 s a step, the 100
        # steps of the best level take in the collapse within minutes.
        keep_firing_while=collapse_median.falls_by(collapse_sustain, of=Baseline.held(of=Baseline(base, ending=recent)),
                                                   at_least=floor * collapse_sustain),
        summary="Reward collapsed: each of its last steps is far below the level the run had reached.",
        description=(f"Run {RUN_NAME}: the median of critic/score/mean over its last {collapsed} is {VALUE}, and each "
                     f"of those steps is more than {collapse:.0%} of its magnitude (and at least {floor:g}) below its "
                     f"highest {smoothing.count}-step median of the last {base}; their median more than "
                     f"{tunables.reward_cliff_noise_z:g} standard errors of its own step-to-step noise below it."),
        meaning="The reward the run had learned to earn is gone on every one of its last steps: a policy destroyed "
                "by a divergent update, a reward server or tool returning nothing, a data loader feeding the "
                "wrong split. It judges a run from its first steps against the best level it reached, so it pages "
                f"once {collapsed} have collapsed, where VerlRewardCliff, whose baseline ends "
                f"{recent} back and needs half of its {base} logged, needs a median of 10 collapsed steps and a "
                "run of 80 steps.",
        healthy_runs=(f"A small-batch reward jumps across its range from step to step and a heavy-tailed one has "
                      f"outliers: each of the last {collapsed} must be below a quarter of the run's best "
                      f"{smoothing.count}-step median (and {floor:g} below it), their median beyond "
                      f"{tunables.reward_cliff_noise_z:g} standard errors of its step-to-step spread. The corpus' "
                      f"deepest dip that recovered fell 62%; no healthy run of it fires."),
        next_steps=(
            "Check VerlTrainingDivergence, the grad norm and the entropy at the step before the collapse: a "
            "divergent update destroys the policy.",
            "Check the reward function, its server or tools and the data loader: a reward that returns 0 for "
            "everything collapses the same way; compare response length and truncation.",
            "Stop the run and resume from the last checkpoint before the collapse with a lower learning rate.",
        ),
    )
    stagnation = Alert(
        name="VerlRewardStagnation",
        severity=Severity.INFO,
        condition=reward_now.gains_less_than(min_gain, of=reward_before, beyond_noise=plateau_z),
        # No `for` in time: the gain moves only when a step is logged, and the hysteresis below, in
        # steps and noise, is what keeps a plateau to one firing at any rhythm.
        keep_firing_while=reward_now.gains_less_than(sustain_gain, of=reward_before, within_noise=sustain_z),
        summary="Reward has stopped rising.",
        description=(f"Run {RUN_NAME}: the median of critic/score/mean over its last {plateau_steps} is {VALUE}, "
                     f"less than {min_gain:g} above its median of the {plateau_steps} before, by more than "
                     f"{plateau_z:g} standard errors of its own step-to-step noise."),
        meaning="Training has plateaued. Late in a run that may simply be convergence; early, it usually "
                "means too little exploration, too weak a learning signal, or a task too hard for the model. "
                f"It compares the reward's median over its last {plateau_steps} with its median over the "
                f"{plateau_steps.count} before, so a plateau reads the same at 1.5 s and at an hour a step. What it "
                f"can tell: on dashgen's simulated runs it finds 50 of 52 plateaus within an hour of their becoming "
                f"measurable (the 30-minute rule: 48; the two it misses are at 900 s a step, where that benchmark "
                f"calls a rise under 0.01 per 30 minutes a plateau). What it cannot: a reward that rises slower than "
                f"{min_gain:g} per {plateau_steps} is flat to it, and a signed reward (+-1) whose mean wanders still "
                "raises it off a plateau on 2 of 5 such simulated healthy runs (the 30-minute rule: 3). It is an "
                "info for that reason: it never pages, and Alertmanager routes it nowhere by default.",
        healthy_runs=(f"A signed or small-batch reward's median wanders with its noise: the gain must be short of "
                      f"{min_gain:g} by more than {plateau_z:g} standard errors of the two {plateau_steps.count}-step "
                      f"medians' difference, read from the reward's own step-to-step spread, and once firing it "
                      f"stays firing until the gain is above {sustain_gain:g} by more than {sustain_z:g} of them."),
        next_steps=(
            "Check entropy (collapsed?) and the PPO clip fraction (are updates doing anything?).",
            "Look at the score's min/max spread: if every sample gets the same reward, GRPO advantages are "
            "zero and nothing is learned; adjust the data difficulty or the reward.",
            "Decide whether to stop the run and save the GPUs.",
        ),
        untested=("a flat signal is a plateau, and a generated case holds each signal at a level: its fixtures "
                  "in tests/rules/rewards-test*.yaml move the reward, at 1.5 s, 60 s and 3,600 s a step"),
    )
    tolerance = tunables.no_signal_tolerance
    broken, dead = steps(tunables.no_signal_broken_steps), steps(tunables.no_signal_dead_steps)
    grad_norm = Signal("actor/grad_norm")
    fine_log = Signal(LOG_ROUNDING_METRIC).below(tunables.no_signal_max_rounding)
    dead_gradient = all_of(grad_norm.max_over(dead).after_half_window().below(tolerance),
                           Signal("actor/pg_loss").max_over(dead).below(tolerance),
                           Signal("actor/pg_loss").min_over(dead).above(-tolerance))
    zero_steps = steps(tunables.no_signal_zero_reward_steps)
    reward = Signal("critic/score/mean")
    zero_reward_and_gradient = all_of(reward.max_over(zero_steps).after_half_window().below(tolerance),
                                      reward.min_over(zero_steps).after_half_window().above(-tolerance),
                                      grad_norm.max_over(zero_steps).after_half_window().below(tolerance))
    mostly_zero = grad_norm.median_over(dead).after_half_window().below(tolerance)
    saturated_zeros = steps(tunables.saturated_zero_steps)
    # The falls and rises below compare the reward with the extremes of its own medians: its highest
    # for a fall (the ceiling), its lowest for a rise (the floor).
    level_steps, range_steps = steps(tunables.no_signal_level_steps), steps(tunables.no_signal_range_steps)
    reward_range = Baseline.quietest(level_steps, over=range_steps)
    reward_over_dead = Signal("critic/score/mean").median_over(dead)
    level_tolerance = tunables.no_signal_level_tolerance
    saturated_reward = all_of(reward_over_dead.rises_by(level_tolerance, of=reward_range),
                              reward_over_dead.does_not_fall_by(level_tolerance, of=reward_range))
    unsaturated_reward = any_of(reward_over_dead.falls_by(level_tolerance, of=reward_range),
                                reward_over_dead.does_not_rise_by(level_tolerance, of=reward_range))
    no_signal = Alert.when(
        "VerlNoLearningSignal",
        # Zero on the last few steps, and either the log proves the update broken or it has lasted
        # with a reward that is not saturated.
        all_of(grad_norm.max_over(broken).below(tolerance), fine_log,
               any_of(zero_reward_and_gradient,
                      Signal("frac_reward_zero_std").max_over(broken).below(tolerance),
                      all_of(Signal("critic/score/std").min_over(broken).above(tolerance),
                             Signal("actor/kl_loss").max_over(broken).below(tolerance),
                             Signal("training/global_step").above(tunables.no_signal_unmoved_step - 1)),
                      all_of(dead_gradient, unsaturated_reward))),
        severity=Severity.WARNING,
        for_=tunables.no_signal_for,
        keep_firing_for=config.warning_keep_firing_for,
        summary="The policy gets no learning signal: grad norm has been 0 although rewards differ, or for many "
                "steps with the reward below its best or at its lowest.",
        description=(f"Run {RUN_NAME}: the grad norm was 0 on each of the last {broken} with all groups' rewards "
                     f"unequal or the policy still the reference (step {tunables.no_signal_unmoved_step} on); with "
                     f"the reward 0 on each of the last {zero_steps}; or the policy loss 0 on each of the last "
                     f"{dead} and the reward not at its best or at its lowest; in a log "
                     f"printing 0 only for 0."
                     + "".join(_equal_groups(key, what) for key, what in EQUAL_GROUPS)),
        meaning="In GRPO, a group whose responses all get the same reward has zero advantage; when every group "
                "does (all right, all wrong, or a reward that no longer varies, e.g. after a length collapse), "
                "the gradient vanishes and the GPUs train nothing. All wrong means the tasks are too hard: the "
                "reward sits at its lowest. All right means the run has learned its data: the reward sits at the "
                "highest level it has reached, and that is VerlRewardSaturated's info, not this warning. So a "
                f"gradient and a policy loss of 0 on {dead} in a row warn only where the reward's median over "
                f"them is below its "
                f"highest {level_steps.count}-step median of the run's last {range_steps} (falling, or still "
                f"moving while nothing updates) or not above its lowest (at its floor from the start, or fallen "
                f"to it). A reward of exactly 0 with a gradient of exactly 0 on each of the last {zero_steps} "
                f"(judged once half of them are logged) warns at once: nothing paid and nothing updated. "
                f"Where the log tells all-wrong and all-right groups apart (prime-rl's reward/solve_none "
                f"and reward/solve_all), the description gives each share, and the dashboard's \"Groups with "
                f"equal rewards\" panel draws them beside TRL's frac_reward_zero_std, which counts both. The "
                f"policy loss is no sign of it: GRPO's logged loss is 0 on healthy steps too.",
        healthy_runs=(f"Healthy small-batch GRPO has a grad norm of exactly 0 on 30-60% of its steps (a step whose "
                      f"groups all score alike): it needs 0 on {broken} in a row on which no group scored alike "
                      f"(frac_reward_zero_std 0) or the policy is still exactly the reference (KL 0) from step "
                      f"{tunables.no_signal_unmoved_step} on, or 0 on {dead} in a row with the policy loss 0 on each "
                      f"(TRL logging every Nth step logs the last step's grad norm beside the mean of their losses) "
                      f"and "
                      f"the reward not saturated, or 0 with a reward of exactly 0 on {zero_steps} in a row, which no "
                      f"healthy run of the corpus has. "
                      f"A run that has learned its data has 0 on nearly every step with the reward pinned at its "
                      f"best: that is VerlRewardSaturated's info. A score std above 0 is no "
                      f"proof: verl's is the whole batch's, and TRL averages it over its logging steps while its grad "
                      f"norm is the last step's. A console log prints a healthy 0.0004 as 0.000: a 0 counts only where "
                      f"the log's own digits show it prints finer than {tunables.no_signal_max_rounding:g} "
                      f"(verl_log_rounding), as a JSON log's full floats do."),
        next_steps=(
            "Check the score's min/max spread and the response length: identical or minimal answers?",
            "Make the data harder or easier, raise the rollout temperature or n, or fix the reward.",
        ),
    )
    saturated = Alert.when(
        "VerlRewardSaturated",
        # The reward first: the description's value is the first comparison's.
        all_of(saturated_reward, grad_norm.max_over(saturated_zeros).after_half_window().below(tolerance), fine_log),
        severity=Severity.INFO,
        # Once firing, a step whose groups still differ breaks the zeros in a row, not the saturation.
        keep_firing_while=all_of(reward_over_dead.does_not_fall_by(level_tolerance, of=reward_range), mostly_zero),
        summary="The run has learned its data: the reward is at its best and the gradient 0, so it trains nothing "
                "more.",
        description=(f"Run {RUN_NAME}: the actor grad norm was 0 on each of the last {saturated_zeros}, and the "
                     f"reward's median over the last {dead}, {VALUE}, is its highest "
                     f"{level_steps.count}-step median of the last {range_steps} and above its lowest: every group's "
                     f"completions score alike at the top."
                     + _equal_groups(*EQUAL_GROUPS[1])),
        meaning="In GRPO a group whose completions all score alike has no advantage. When the policy has learned "
                "the task, every completion is right, the reward sits at the highest level the run reaches, its "
                "std within groups is 0 (TRL's frac_reward_zero_std near 1), and the grad norm is exactly 0 on "
                "step after step: the run is done, not broken; it trains nothing because nothing is left to learn "
                f"on this data. It fires where the grad norm was 0 on each of the last {saturated_zeros} (so "
                f"wherever VerlNoLearningSignal's 0 on each of {dead} meets a saturated reward) and the reward's "
                f"median over the last {dead} equals its highest {level_steps.count}-step median of the run's last {range_steps} (within a share of "
                f"{level_tolerance:g} of it, for the floats of an averaged log) and is above its lowest. A saturated "
                "reward takes one value on nearly every step, so its median is that value; a reward that still "
                f"moves with its noise sits below its best, since a {dead.count}-step median is at most the "
                f"highest median of the {level_steps.count}-step stretches it splits into. The same zeros with the reward below its best or at its lowest "
                "are VerlNoLearningSignal's warning. Once firing, it stays so while the grad norm is 0 on most of "
                f"the last {dead} and the reward at its best. It is an info: it never pages.",
        healthy_runs=("It describes a healthy run that is finished with its data; an info, routed nowhere by "
                      f"default. A run saturated for longer than its last {range_steps} has no lower level left "
                      "in that window, and VerlNoLearningSignal warns again."),
        next_steps=(
            "Stop the run, or make the data harder (filter out prompts every completion solves, as DAPO's "
            "dynamic sampling does) and continue from its last checkpoint.",
            "Check the validation score: a held-out set that still improves is worth more steps on new data.",
        ),
    )
    return RuleGroup("verl-rewards", (cliff, collapse_alert, stagnation, no_signal, saturated))
