"""Plausibility: values no healthy run logs, judged from a run's first line, whatever its history.

Every other alert compares a run with its own past, so a run that is broken from its first logged
step (a reference KL of 11,000 at the first log, every group's reward 0 from step 1) has no past
to differ from. These bounds need none: each is far outside what any healthy run of the corpus
(bench/realruns/) logs, and each says below where its value comes from.
"""

from dataclasses import dataclass
import math
from typing import Annotated

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of, steps
from dashgen.config import AreaConfig, Between, Config, Fraction, NonNegative, StepCount
from dashgen.model import Alert, Inhibition, RuleGroup, Severity

TokenCount = Annotated[int, Between(2, None, unit="tokens")]


@dataclass(frozen=True)
class PlausibilityConfig(AreaConfig, area="plausibility"):
    """The tunables of alerts/plausibility.py: the config file's `plausibility:` section."""

    # A KL per token, to the reference (actor/kl_loss) or to the old policy (actor/ppo_kl), above
    # this many nats: more than the log of the largest common vocabulary (Gemma 3's 262,144 tokens:
    # 12.5 nats) means the policy samples tokens the reference finds far less likely than a uniform
    # guess. verl's default estimator (low_var_kl) clamps each token's value at 10; healthy runs of
    # the corpus stay below 3.
    kl_bound: NonNegative = 15.0
    # Grad norm (before clipping) above this: 1,000 times the clip both verl (actor.grad_clip) and
    # TRL (max_grad_norm) default to, 1.0. Healthy runs of the corpus stay below 75.
    grad_norm_bound: NonNegative = 1000.0
    # Mean token entropy above this many nats: half the log of a 32,000-token vocabulary (the smallest
    # of the common families, Llama 2 and Mistral: 10.4 nats uniform), i.e. every token drawn as if
    # from ~150 equally likely ones: the text is noise. Healthy runs of the corpus stay below 2.5.
    entropy_bound: NonNegative = 5.0
    # A value is beyond its bound when each of the run's last this many logged values is (their
    # least): one logged spike that the clip absorbs is no broken run. Healthy tune runs of the
    # corpus log one pre-clip grad norm of 1,121 (validation still rising) and one KL of 29 (reward
    # unmoved), each on one step only; a run broken from its first line stays beyond. At 1.5 s a
    # step the window is the rules' floor instead (about 40 steps, all of them beyond).
    bound_steps: StepCount = 2
    # VerlRunDestroyed pages on values no run recovers from, over the same bound_steps. Entropy above
    # destroyed_entropy_fraction of the log of this vocabulary: the model's own makes the bound
    # tighter; the default is the smallest of the common families (Llama 2, Mistral: 32,000 tokens,
    # 10.4 nats uniform), so that the bound holds for any larger one (Qwen's 151,936: 11.9 nats).
    vocabulary_tokens: TokenCount = 32_000
    # Three quarters: 7.8 nats of a 32,000-token vocabulary, every token drawn as if from ~2,400 equally
    # likely ones. The corpus' healthy runs stay below 1.7 nats, its degrading runs that recovered
    # below 4.3; its failures that never did reach 5.4-8.2, and a destroyed run sits at the log of
    # its vocabulary (11.9 nats for Qwen) or at 9.4-9.8 (issue 52).
    destroyed_entropy_fraction: Fraction = 0.75
    # |Policy or value loss| above this: a policy loss per token is an advantage times a probability
    # ratio, about 1 with group-normalised advantages (at most sqrt(group size): 8 for 64 completions)
    # and the ratio clipped at 1.2 (verl's dual clip: 3), and a hand-written loop that sums over a
    # sequence's few thousand tokens stays 100x below this. The corpus' healthy runs stay within 0.9
    # on two logged steps in a row (141 on one); an unclipped run that recovered logged 64,410 and
    # then 885 (bench/realruns/custom-qwen25math-15b-grpo-noclip-200-gradnorm-bursts).
    destroyed_loss_bound: NonNegative = 1e5
    # Grad norm (before clipping) above this: 1e5 times grad_norm_bound, 1e8 times the default clip.
    # Clipped, a large norm moves the weights no further than a small one: the unclipped-surrogate
    # run above logged 6.5e7 and then 1.5e6 and recovered; its failing twin, whose loss went to
    # 2e32 and NaN, logged 2.9e8 and 4.7e8 (custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200-gradnorm-blowup).
    destroyed_grad_norm_bound: NonNegative = 1e8
    # VerlRewardNeverPays: over the last never_pays_steps logged steps, the reward nearly never paid
    # and nearly every step had every prompt group's rewards equal (score std 0); or, where the log
    # has TRL's share of such groups (frac_reward_zero_std), its median was above all_equal_share
    # and the median reward 0. Every group fails alike, so GRPO has no advantage to learn from (a
    # task too hard, a reward function that never pays). A healthy small-batch run has zero-std
    # steps too (30-60%), but steps that pay among them; a run whose groups all earn the same
    # nonzero reward is another matter (too easy, or a reward that only checks the format), not
    # this alert's.
    never_pays_steps: StepCount = 10
    # A reward below this pays nothing (0, allowing for the log's rounding).
    never_pays_below: float = 1e-9
    # A score std below this: the step's groups are all-equal.
    all_equal_std: NonNegative = 1e-9
    # The median share of all-equal groups above which next to no group has an advantage.
    all_equal_share: Fraction = 0.9
    # "Nearly never" and "nearly every": the reward's and the score std's quantile of this over the
    # never_pays_steps are below their bounds, so of 10 values at most one step paid and at most
    # one had groups whose rewards differed (interpolated as Prometheus' quantile_over_time: with a
    # floor far below 0 a second, smaller payment can hide in it). Not "never": a run whose groups
    # nearly all fail alike still pays now and then (the corpus' FP8 run that truncates every
    # completion: on 10 of its 100 steps), and 10 values logged every 5th step span 50 steps, so one
    # paying step in them hid the run. Healthy small-batch GRPO has all-equal steps on 30-60% of its
    # steps: 9 of 10 happen by chance in 1% of windows at 50%, 4.6% at 60%, and its all-equal steps
    # that pay (every completion right) spare it.
    nearly_never_quantile: Fraction = 0.8
    # VerlRewardNeverPays also warns, whatever the run's history, where the reward has just collapsed
    # to one value for every rollout: a critic/score/std of 0 on each of the last never_pays_equal_steps
    # logged steps, and their median reward never_pays_fall_fraction of its magnitude, never_pays_min_fall
    # and never_pays_fall_noise_z standard errors of its own step-to-step noise below its highest
    # never_pays_steps median of the last never_pays_level_steps: its level from before the change,
    # which exists from the run's first steps (VerlRewardCliff's baseline ends 30 steps back and
    # needs 50 of its 100 steps). A reward positive with a spread, then exactly 0 on every rollout of
    # consecutive steps, fails alike in every group (issue 35/40). The fall is VerlRewardCliff's (half,
    # at least 0.2, 5 standard errors), the guard against small-batch runs: with one or a few prompts a
    # step, every completion scores alike on 30-60% of steps and 5 in a row come by chance (0.6^5, 8%
    # of windows), but such a reward jumps across its range from step to step, and 5 standard errors
    # of its fall (5 x 1.25 x sqrt(1/5 + 1/10) = 3.4 times its step-to-step spread) exceed that range.
    # 5 steps: the margin grows as the median shortens (4.1 times the spread at 3), and half the
    # 10 steps of the other branches.
    never_pays_equal_steps: StepCount = 5
    # The steps the highest level reaches back: VerlRewardCliff's 100, so a collapse after a long
    # stretch at a lower level is judged against the level it had within them.
    never_pays_level_steps: StepCount = 100
    # The share of its magnitude each of those steps' rewards must fall from that level:
    # VerlRewardCliff's reward_cliff_drop_fraction.
    never_pays_fall_fraction: Fraction = 0.5
    # ... and at least this much in the reward's units, for a level near 0: VerlRewardCliff's
    # reward_cliff_min_drop.
    never_pays_min_fall: NonNegative = 0.2
    # ... and their median by more than this many standard errors of the reward's step-to-step
    # noise over the steps before them: VerlRewardCliff's reward_cliff_noise_z.
    never_pays_fall_noise_z: NonNegative = 5.0


def rules(config: Config) -> RuleGroup:
    tunables = config.area(PlausibilityConfig)
    within = steps(tunables.bound_steps)
    bounds = (("actor/kl_loss", tunables.kl_bound), ("actor/ppo_kl", tunables.kl_bound),
              ("actor/grad_norm", tunables.grad_norm_bound), ("actor/entropy", tunables.entropy_bound))
    implausible = Alert.when(
        "VerlImplausibleValue",
        any_of(*(Signal(key).min_over(within).above(bound) for key, bound in bounds)),
        severity=Severity.WARNING,
        keep_firing_for=config.warning_keep_firing_for,
        summary="A training signal logged a value no healthy run logs: the run is broken, from whatever step.",
        description=(f"Run {RUN_NAME}: {VALUE} or more over its last {within}, beyond its bound: KL (to the "
                     f"reference or the old policy) above {tunables.kl_bound:g} nats, grad norm above "
                     f"{tunables.grad_norm_bound:g} or entropy above {tunables.entropy_bound:g} nats."),
        meaning="The bounds hold whatever the model, task or batch size, so they judge a run from its first "
                "logged line, before any alert that compares the run with its own past can: a KL per token "
                "beyond the log of any vocabulary, a gradient 1,000 times the default clip, an entropy of "
                "uniform noise over a hundred tokens. Each bound's origin is in the tunable's comment "
                "(alerts/plausibility.py). It needs the run's last logged values beyond the bound, not one: a "
                "single spike that verl's clip absorbs can recover, and is VerlGradNormExplosion's to judge. A "
                "warning, not a page.",
        healthy_runs=("Its bounds are beyond what any healthy run logs whatever the model, task or batch size, each "
                      "with its origin beside it in alerts/plausibility.py: healthy runs of the corpus stay below 3 "
                      "nats of KL, a grad norm of 75 and an entropy of 2.5 nats."),
        next_steps=(
            "Find the first step beyond the bound in the step log; a bound broken at the first logged step "
            "points at the setup: a wrong reference or checkpoint, a tokenizer mismatch between the rollout "
            "engine and the trainer, a learning rate 100x off.",
            "Check the reward and the response length after it: a reward at 0 and every response cut at "
            "the length cap confirm the policy is producing noise; stop the run.",
        ),
    )
    destroyed = run_destroyed(config, tunables)
    reward = Signal("critic/score/mean")
    score_std = Signal("critic/score/std")
    never_steps = steps(tunables.never_pays_steps)
    nearly_never = tunables.nearly_never_quantile
    equal_steps = steps(tunables.never_pays_equal_steps)
    level_before = Baseline.quietest(never_steps, over=steps(tunables.never_pays_level_steps))
    never_pays = Alert.when(
        "VerlRewardNeverPays",
        any_of(all_of(reward.quantile_over(nearly_never, never_steps).after_half_window()
                      .below(tunables.never_pays_below),
                      score_std.quantile_over(nearly_never, never_steps).after_half_window()
                      .below(tunables.all_equal_std)),
               all_of(reward.median_over(never_steps).after_half_window().below(tunables.never_pays_below),
                      Signal("frac_reward_zero_std").median_over(never_steps).after_half_window()
                      .above(tunables.all_equal_share)),
               # Collapsed: every rollout of each of the last steps alike, each well below the run's
               # level before (their highest: a reward pinned at its ceiling, whose rare zeros leave
               # its step-to-step spread small, has a median of 5 at 0 on 3 zeros by chance), and
               # beyond its noise.
               all_of(reward.max_over(equal_steps).falls_by(
                          tunables.never_pays_fall_fraction, of=level_before, at_least=tunables.never_pays_min_fall),
                      reward.median_over(equal_steps).falls_by(
                          tunables.never_pays_fall_fraction, of=level_before,
                          at_least=tunables.never_pays_min_fall, beyond_noise=tunables.never_pays_fall_noise_z),
                      score_std.max_over(equal_steps).below(tunables.all_equal_std))),
        severity=Severity.WARNING,
        keep_firing_for=config.warning_keep_firing_for,
        summary="The reward (nearly) never pays and the prompt groups' rewards are (nearly) all equal: GRPO has "
                "nothing to learn from.",
        description=(f"Run {RUN_NAME}: over the last {never_steps}, nearly none paid and nearly all had every "
                     f"group's rewards equal (the {nearly_never:g} quantiles of the reward and of the score std below "
                     f"{tunables.never_pays_below:g} and {tunables.all_equal_std:g}), or the median reward was below "
                     f"{tunables.never_pays_below:g} while the median share of groups with equal rewards was above "
                     f"{tunables.all_equal_share:.0%}; or every rollout scored alike (score std 0) on each of the "
                     f"last {equal_steps}, each of their rewards {tunables.never_pays_fall_fraction:.0%} of its "
                     f"magnitude and at least {tunables.never_pays_min_fall:g} below its highest "
                     f"{never_steps.count}-step median of the last {tunables.never_pays_level_steps} steps, their "
                     f"median more than {tunables.never_pays_fall_noise_z:g} standard errors of its own step-to-step "
                     f"noise below it."),
        meaning="GRPO's advantage is a reward's difference from its group's mean: a group whose completions "
                "all get the same reward gives none, and a run where every group fails alike trains on nothing "
                "whatever the GPUs spend. From the first steps this is a task too hard for the model or a "
                "reward function that never pays (a parser that never matches the answer format); later, a "
                "policy collapsed onto an answer that earns nothing. Read only where the log has the score's "
                "spread within groups (TRL's reward_std, or its share of groups with equal rewards). A run that "
                f"paid and then collapses needs no {never_steps} of nothing: a reward that was positive with a "
                f"spread and is then one value for every rollout (score std exactly 0) on {equal_steps} in a row, "
                "well below the highest level the run had, warns whatever the run's age. VerlRewardCliff pages on "
                "a fall from its level of 100 steps ending 30 back, which needs 50 of them logged: it judges no "
                "run younger than 80 steps.",
        healthy_runs=("A healthy small-batch run has all-equal steps too (30-60%), but steps that pay among them: "
                      "it needs 9 of 10 logged steps without a reward above 0 and 9 of 10 all-equal (or TRL's share "
                      "of such groups above 90% and the median reward 0), judged once half the window is logged. 9 "
                      "all-equal steps of 10 happen by chance in 1% of a healthy run's windows at 50% all-equal "
                      "steps, 4.6% at 60%, and those of them that pay spare it. Not 'never' paid: a run whose groups "
                      "nearly all fail alike pays on a step now and then, and at a logging cadence of every 5th or "
                      "10th step, 10 logged values span 50 or 100 steps and hold one. Its collapse branch: a "
                      f"small-batch run has {equal_steps.count} all-equal steps in a row now and then (0.6^5, 8% of "
                      "windows, at 60%), but its reward jumps across its range from step to step: each of them must "
                      f"have fallen {tunables.never_pays_fall_fraction:.0%} of its best {never_steps.count}-step "
                      f"median and at least {tunables.never_pays_min_fall:g}, and their median beyond "
                      f"{tunables.never_pays_fall_noise_z:g} standard errors of that step-to-step spread, more than "
                      "the range of such a reward. Each, not their median: a reward pinned at its ceiling with a "
                      "rare step at 0 has a small spread, and 3 such steps among 5 would be a median at 0."),
        next_steps=(
            "Read a few completions and their rewards: does the reward function parse the answer format?",
            "Make the data easier or harder, raise the number of generations per prompt or the temperature.",
        ),
    )
    return RuleGroup("verl-plausibility", (implausible, destroyed, never_pays))


def run_destroyed(config: Config, tunables: PlausibilityConfig) -> Alert:
    """VerlRunDestroyed: a value beyond what any run comes back from, on each of its last logged steps."""
    within = steps(tunables.bound_steps)
    entropy_bound = tunables.destroyed_entropy_fraction * math.log(tunables.vocabulary_tokens)
    loss_bound, grad_norm_bound = tunables.destroyed_loss_bound, tunables.destroyed_grad_norm_bound
    policy_loss = Signal("actor/pg_loss")
    return Alert.when(
        "VerlRunDestroyed",
        # A policy loss is signed: beyond the bound on either side, on each of the steps; a value
        # loss is a squared error.
        any_of(Signal("actor/entropy").min_over(within).above(entropy_bound),
               policy_loss.min_over(within).above(loss_bound), policy_loss.max_over(within).below(-loss_bound),
               Signal("critic/vf_loss").min_over(within).above(loss_bound),
               Signal("actor/grad_norm").min_over(within).above(grad_norm_bound)),
        severity=Severity.CRITICAL,
        keep_firing_for=config.warning_keep_firing_for,
        summary="A training signal is where no run comes back from: the policy is noise or the update has blown up.",
        description=(f"Run {RUN_NAME}: {VALUE} or beyond on each of its last {within}: entropy above "
                     f"{entropy_bound:.3g} nats ({tunables.destroyed_entropy_fraction:g} of the log of a "
                     f"{tunables.vocabulary_tokens:,}-token vocabulary), a policy or value loss beyond "
                     f"{loss_bound:g} either side of 0, or a grad norm above {grad_norm_bound:g}."),
        meaning="VerlImplausibleValue's bounds are where no healthy run goes; these are orders of magnitude "
                "further, where no run of the corpus came back from whatever its history: an entropy of "
                f"{tunables.destroyed_entropy_fraction:.0%} of the log of the vocabulary (the policy samples "
                "thousands of tokens alike: the text is noise), a loss that needs the policy to put ten thousand "
                "times the rollout's probability on its tokens, a gradient 1e8 times the default clip. Every later "
                "step is wasted compute, so it pages. Each bound's origin is in its tunable's comment "
                "(alerts/plausibility.py).",
        healthy_runs=("Healthy runs of the corpus stay below 1.7 nats of entropy, within 0.9 of a zero loss and "
                      "below a grad norm of 75 on two logged steps in a row; its runs that recovered from an "
                      "instability (an entropy excursion to 4.3 nats, pre-clip grad norms of 1.5e6 and losses of "
                      "885 on two steps in a row) stay below these bounds too."),
        next_steps=(
            "Stop the run: find the first step beyond the bound in the step log and resume from the last "
            "checkpoint before it.",
            "Before resuming, lower the learning rate, check the clip settings (an unclipped surrogate blows up "
            "so) and the rollout engine's and trainer's log-probs.",
        ),
    )


def inhibitions(config: Config) -> tuple[Inhibition, ...]:
    return (
        Inhibition("VerlRunDestroyed", ("VerlImplausibleValue",),
                   why="A value beyond the page's bound is beyond the warning's too: the page is the one to act on."),
    )
