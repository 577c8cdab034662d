"""Training stability: divergence of the policy update, KL spikes, entropy collapse, NaNs."""

from dataclasses import dataclass
from typing import ClassVar

from dashgen.catalog import NONFINITE_LOSS_STREAK_METRIC, NONFINITE_STREAK_METRIC
from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of, steps
from dashgen.config import AreaConfig, Config, Duration, Factor, Fraction, NonNegative, StepCount
from dashgen.model import Alert, Inhibition, RuleGroup, Severity

STREAK = f"{NONFINITE_STREAK_METRIC}{{$verl}}"
KL, GRAD_NORM, ENTROPY = Signal("actor/ppo_kl"), Signal("actor/grad_norm"), Signal("actor/entropy")
KL_REF = Signal("actor/kl_loss")  # KL to the reference policy, where KL is a loss term (GRPO, TRL)
REWARD = Signal("critic/score/mean")


@dataclass(frozen=True)
class StabilityConfig(AreaConfig, area="stability"):
    """The tunables of alerts/stability.py: the config file's `stability:` section."""

    retired: ClassVar[dict[str, str]] = {
        "reference_kl_rise_factor": "VerlReferenceKLBlowUp's rise is reference_kl_rise_multiple now, the multiple "
                                    "of the quiet level it names: the old factor 9 meant 10x, so write 10 for it",
    }

    # VerlTrainingDivergence compares each signal with its quietest level within this many logged
    # steps (the lowest median over divergence_smoothing_steps for KL and grad norm, the highest
    # for entropy), from a run's first steps on: a young run is held against its own first steps,
    # so a divergence in its first hour pages too. Steps, not time: 60 steps are an hour at a
    # minute a step and 60 hours at an hour a step, and a slow run's hour holds one step.
    divergence_baseline_steps: StepCount = 60
    # The steps of those medians: one noisy step sets no level.
    divergence_smoothing_steps: StepCount = 5
    # The last steps within which grad norm and entropy must cross their factors.
    divergence_recent_steps: StepCount = 10
    # PPO KL is read as its median over this many steps: a single step's KL of 7 in a healthy
    # off-policy run (bench/realruns/custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200) is no divergence.
    divergence_kl_median_steps: StepCount = 3
    # PPO KL must rise above this multiple of its baseline...
    divergence_kl_factor: Factor = 4.0
    # ... and by at least this much: verl's early console logs print KL to 3 decimals, so its
    # quietest level reads 0 and any 0.001 would be "4x" it.
    divergence_kl_min_rise: NonNegative = 0.01
    # Grad norm must rise above this multiple of its baseline.
    divergence_grad_norm_factor: Factor = 4.0
    # Entropy must fall below this multiple of its baseline...
    divergence_entropy_factor: Factor = 0.5
    # ... and still be falling, together with KL and grad norm: its median of the last
    # divergence_entropy_fall_steps below its level just before them (the median of the
    # divergence_smoothing_steps before them: the shortest level one odd step does not set), by this
    # fraction and beyond divergence_noise_z standard errors of its step-to-step noise. A run
    # converging halves its entropy within 60 steps too (0.5 to 0.07 over steps 35-64 of
    # bench/realruns/custom-qwen25math-15b-grpo-noclip-200-gradnorm-bursts): below half its 60-step
    # high, but flat at that level when a later pre-clip grad norm burst comes, which is no divergence.
    # A divergence that takes 60 steps to develop still falls several percent a step.
    divergence_entropy_fall_fraction: Fraction = 0.1
    # The steps of entropy's current median.
    divergence_entropy_fall_steps: StepCount = 3
    # Standard errors of their own step-to-step noise PPO KL's rise and entropy's fall must exceed:
    # PPO KL of a small-batch run swings from 0 to 0.05 between steps
    # (bench/realruns/custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200-gradnorm-blowup), and a 3-step
    # median of it rises 4x above its quietest 5-step median by chance.
    divergence_noise_z: NonNegative = 3.0
    # How long all three must hold before it pages: from the first evaluation that sees them, since
    # each reads steps already (KL's median of 3 is 2 high steps). A wait in wall time would be 40
    # steps at 1.5 s a step, longer than the baseline of divergence_baseline_steps takes to absorb a
    # lasting fault; the keep-firing condition holds it from then on. Entropy "still falling" holds
    # only while it falls (about divergence_entropy_fall_steps steps), so a wait longer than that never pages.
    divergence_for: Duration = "0s"
    # Once firing, it stays firing while any one signal is still far from its held baseline (see
    # baseline_hold_window): a weaker condition than the onset's, so the alert neither resolves
    # while the run is still diverged nor flaps around the threshold. PPO KL this multiple of it, ...
    divergence_sustain_kl_factor: Factor = 2.0
    # ... grad norm this multiple of its held baseline, ...
    divergence_sustain_grad_norm_factor: Factor = 2.0
    # ... or entropy this multiple of it (below 1: entropy falls when the policy diverges).
    divergence_sustain_entropy_factor: Factor = 0.5
    # VerlKLSpike: PPO KL, its median of the last kl_spike_steps logged steps, above this. KL between
    # the policy before and after an update is in nats per token whatever the model or batch: the
    # PPO paper's adaptive-KL targets are 0.003 to 0.03, and 0.1 is an update far beyond the trust
    # region its clip intends.
    kl_spike_threshold: NonNegative = 0.1
    # The steps of that median: more than half of the last 10 updates above the threshold, so a lone
    # off-policy step (a KL of 7 in a healthy run) or one high step in four is no spike. Judged once
    # 5 of them are logged.
    kl_spike_steps: StepCount = 10
    # ... and a rise: that median at least this multiple of its quietest such median within the last
    # kl_spike_over_steps, beyond kl_spike_noise_z standard errors of its step-to-step noise. A GRPO
    # warm-up starts high and falls (0.3 fading over 10 steps; 0.15, 0.04, 0.03 in a real run): its
    # median is its own quietest, so a warm-up is no spike, where a KL that climbs from 0.01 is.
    kl_spike_rise_factor: Factor = 2.0
    # The steps its quietest median is taken from.
    kl_spike_over_steps: StepCount = 100
    # Standard errors of KL's step-to-step noise the rise must exceed.
    kl_spike_noise_z: NonNegative = 3.0
    # VerlEntropyCollapse: entropy (median of the last entropy_median_steps) below this fraction
    # of its highest such median within the last entropy_rate_steps, while the reward has not
    # risen. Entropy alone cannot tell a collapse from a policy becoming sure of what works: a
    # healthy run's entropy falls 10x within 50 steps while its reward rises from 0.28 to 0.78
    # (bench/realruns/cs336sz_grpo_onpolicy_200_healthy), and 40x over a few hundred once the
    # reward has plateaued. The same fall with the reward flat or falling is a collapse.
    entropy_collapse_fraction: Fraction = 0.1
    # ... and by more than this many standard errors of entropy's own step-to-step noise: a
    # small-batch run's entropy swings from 0.001 to 1.0 between steps, and its 10-step medians
    # wander 10x by chance.
    entropy_collapse_noise_z: NonNegative = 3.0
    # How long the collapse must hold before VerlEntropyCollapse fires: at the first evaluation that
    # sees it, as its noise guard, not a hold, keeps chance out. At 2 s a step an evaluation is 30
    # steps, and the level before the fall takes it in within two.
    entropy_collapse_for: Duration = "0s"
    # The steps each median of entropy is taken over (also for VerlEntropyExplosion's level).
    entropy_median_steps: StepCount = 10
    # The steps within which entropy's fall from its highest median is judged.
    entropy_rate_steps: StepCount = 60
    # The steps of entropy's level before a fall: their median, ending entropy_median_steps ago.
    entropy_level_steps: StepCount = 50
    # A slower collapse (an e-fold every 50 steps) counts only with the reward falling: below this
    # fraction of the highest median within the last entropy_slow_rate_steps.
    entropy_slow_collapse_fraction: Fraction = 0.2
    # The steps within which the slower collapse is judged.
    entropy_slow_rate_steps: StepCount = 150
    # The reward "has risen" when its median of the last entropy_reward_steps is above its lowest
    # such median within the last entropy_rate_steps (the span of the entropy fall) by this fraction
    # of its magnitude and beyond entropy_reward_noise_z standard errors of its own noise.
    entropy_reward_rise_fraction: Fraction = 0.05
    # For the slower collapse it "has fallen" when that median is below its level from before the
    # entropy fell (the median of entropy_slow_reward_steps ending entropy_slow_reward_ending_steps
    # ago) by this fraction and beyond the noise: the noise guard keeps a converged run's wander
    # out; the fraction keeps a reward whose noise is near 0 from "falling" by a hair.
    entropy_reward_fall_fraction: Fraction = 0.05
    # Standard errors of the reward's noise its fall must exceed for the slower collapse: an entropy
    # 5x lower than 150 steps ago is what a converged run shows too, so the reward must say more.
    entropy_slow_reward_noise_z: NonNegative = 5.0
    # The steps the reward's current median is taken over.
    entropy_reward_steps: StepCount = 10
    # The steps of the earlier reward median a slower collapse compares with...
    entropy_slow_reward_steps: StepCount = 50
    # ... and how long ago they end: the reward's level from before the entropy fell, as a slower
    # collapse takes 100 steps to reach a fifth of its level (an e-fold every 50 steps).
    entropy_slow_reward_ending_steps: StepCount = 100
    # Standard errors of the reward's own noise a rise or fall must exceed.
    entropy_reward_noise_z: NonNegative = 3.0
    # VerlEntropyExplosion: entropy (median of the last entropy_explosion_steps) above this multiple
    # of its level before the rise (the lowest entropy_median_steps median within the last
    # entropy_explosion_over_steps), by at least entropy_explosion_min_rise nats, and beyond
    # entropy_explosion_noise_z standard errors of its own step-to-step noise. Against the level
    # before the change, not a trailing peak: entropy doubling every 12 steps keeps a recent peak
    # within 3x, but leaves its level before the rise far behind.
    entropy_explosion_factor: Factor = 3.0
    # The steps entropy's current median is taken over: 5, so that two odd steps of a run whose
    # entropy swings across an order of magnitude from step to step are no rise.
    entropy_explosion_steps: StepCount = 5
    # The steps the level before the rise is taken from.
    entropy_explosion_over_steps: StepCount = 200
    # The least rise, in nats: a converged policy's entropy moves between 0.02 and 0.12 (6x), a
    # small-batch run's from 0.001 to 1.0 between steps; an explosion gains whole nats (0.76 to 9.8).
    entropy_explosion_min_rise: NonNegative = 1.0
    # A run whose per-step entropy swings from 0.001 to 1.0 (completions of 40 tokens) rises 3x by chance.
    entropy_explosion_noise_z: NonNegative = 5.0
    # Fires at the first evaluation that sees it: at 2 s a step the level catches up within a minute.
    entropy_explosion_for: Duration = "0s"
    # VerlGradNormExplosion: grad norm (median of the last grad_norm_explosion_steps) above this
    # multiple of its level before the rise (the lowest grad_norm_level_steps median within the
    # last grad_norm_explosion_over_steps), by at least grad_norm_explosion_min_rise and beyond
    # grad_norm_explosion_noise_z standard errors of its noise. A lone explosion (grad norm at most
    # 4.6 for 20 steps, then 34, 80, 292) with KL and entropy still normal: a warning, since the
    # clip absorbs some and validation may still rise for a while; VerlTrainingDivergence pages
    # when the three break away together.
    grad_norm_explosion_factor: Factor = 10.0
    # The steps grad norm's current median is taken over.
    grad_norm_explosion_steps: StepCount = 3
    # The steps each median of its level is taken over.
    grad_norm_level_steps: StepCount = 10
    # The steps its level (the lowest such median) is taken from.
    grad_norm_explosion_over_steps: StepCount = 100
    # The least rise, in grad norm's units: healthy PPO runs move between 0.2 and 70.
    grad_norm_explosion_min_rise: NonNegative = 10.0
    # Standard errors of its step-to-step noise the rise must exceed.
    grad_norm_explosion_noise_z: NonNegative = 5.0
    # VerlReferenceKLBlowUp: KL to the reference policy (actor/kl_loss; TRL's kl), its median of
    # the last reference_kl_steps, above this multiple of its quietest such median within the
    # last reference_kl_over_steps, and by at least reference_kl_min_rise. It rises smoothly by
    # design under a KL penalty (0 to 0.2 over 200 steps) and spikes for a step in healthy runs.
    reference_kl_rise_multiple: Factor = 10.0
    # The least rise of reference KL, in its own units, that counts.
    reference_kl_min_rise: NonNegative = 0.3
    # The steps each median of reference KL is taken over.
    reference_kl_steps: StepCount = 10
    # The steps its quietest median is taken from.
    reference_kl_over_steps: StepCount = 200
    # Standard errors of its step-to-step noise the rise must exceed, as grad norm's: a one-prompt
    # run's KL to the reference swings over an order of magnitude from one step to the next.
    reference_kl_noise_z: NonNegative = 5.0
    # How long the rise must hold before VerlReferenceKLBlowUp fires.
    reference_kl_for: Duration = "1m"
    # VerlReferenceKLBlowUp also warns on a KL to the reference still climbing after the reward has
    # nothing left to give (issue 52: KL 0.38 to 1.0 while the reward sat at 0.99 with its spread
    # near 0 warned 15 steps late): its median of the last reference_kl_steps above this multiple of
    # its median of as many steps ending reference_kl_saturated_ending_steps ago (and by
    # reference_kl_min_rise, beyond reference_kl_noise_z), while the reward's median of those steps
    # is within reward_saturated_tolerance of its highest such median of the last
    # reference_kl_over_steps, and its spread within groups (critic/score/std,
    # median of those steps) is below reward_saturated_spread. A run still learning has a spread;
    # a saturated one whose KL climbs drifts for nothing.
    reference_kl_saturated_multiple: Factor = 2.0
    # The steps back that earlier median ends: a doubling within 30 steps.
    reference_kl_saturated_ending_steps: StepCount = 20
    # A share of the reward's magnitude: 0.99 against a best of 1.0 is at its best.
    reward_saturated_tolerance: Fraction = 0.02
    # A score std below this: nearly every completion of every group scores alike (0.05 of a 0/1
    # reward is about one completion in 400 that differs).
    reward_saturated_spread: NonNegative = 0.05
    # VerlEntropyExplosion also fires, before entropy's noise can be read, when its median of the
    # last entropy_explosion_fast_steps is this multiple of its level before the rise (10x), by at
    # least entropy_explosion_fast_min_rise nats: the spread needs three logged values before the
    # window, which a run logged every 5th step (a minute of its clock per window) has only at its
    # 7th line, while its entropy climbs 0.24, 2.8, 3.5 on lines 3-5
    # (bench/realruns/trl-qwen25-7b-gsm8k-grpo-rho030-entropy-blowup). Twice the largest such
    # multiple of a healthy run of the corpus (5x, 0.53 nats: rho100-seed44-cap-excursion).
    entropy_explosion_fast_factor: Factor = 10.0
    # The steps of that median: two high of three, so one odd step is no explosion.
    entropy_explosion_fast_steps: StepCount = 3
    # The least rise in nats for it: 1.4x the largest of a healthy run of the corpus (0.53), and below
    # the slower branch's entropy_explosion_min_rise, so that a 10x rise of a small entropy (0.08 to 0.8)
    # fires by this branch alone.
    entropy_explosion_fast_min_rise: NonNegative = 0.75
    # VerlEntropyExplosion also fires, whatever the level before, where that 3-step median is above
    # this many nats: every token drawn as if from ~20 equally likely ones (e^3), text that is no
    # longer language. 1.8x the highest 3-step median of a healthy run of the corpus (1.65:
    # trl-gptoss-20b-minesweeper-grpo-zero-gradnorm; the others stay below 1.25); the corpus'
    # explosions pass it on their way to 5.4-8.1 nats (custom-qwen25math-15b-grpo-e16-entropy-blowup:
    # 0.85 to 2.4, 4.3 in three steps, which the relative branches read only two steps later), and two
    # degrading runs' bursts reach 3.8-3.9, which a warning may name.
    entropy_explosion_ceiling: NonNegative = 3.0
    # Once firing, VerlGradNormExplosion stays firing while the grad norm's median of the last
    # grad_norm_explosion_steps is still this multiple of its level before the rise (3x), and
    # resolves once it is not: a spike that has passed. Kept firing 15 minutes instead, two spikes
    # of 15 against 2 at steps 34-35 of a 57 s step hid the blow-up that began at step 41 for 21
    # steps (bench/realruns/custom-qwen25math-15b-grpo-offpolicy-e2-tb256-200-gradnorm-blowup).
    grad_norm_explosion_sustain_factor: Factor = 3.0
    # Non-finite steps that verl skipped: more than this many within the last nonfinite_steps logged
    # steps warns (VerlNonFiniteSteps); a single one is VerlNonFiniteStep, an info.
    nonfinite_rate_max: NonNegative = 3
    # The logged steps the skipped ones are counted within: more than 3 of 100 is more than 3% of the
    # updates lost, where an isolated bf16 overflow every few hundred steps, or two a few steps
    # apart, never makes 4. 100 and not fewer: the count reads the exporter's streak, scraped every
    # 15 s, and at 1.5 s a step 100 steps are the 10 scrapes it takes to tell 4 skips apart.
    nonfinite_steps: StepCount = 100
    # VerlNonFiniteStepsClose pages on a second non-finite step within this many logged steps of
    # another, in a row or not: a fifth of the updates lost, where a healthy bf16 run overflows once
    # every few hundred steps (the simulated healthy runs' isolated skips are 490 and 1,200 steps
    # apart); a run that keeps skipping every 12 steps or more is VerlNonFiniteSteps' to warn on.
    nonfinite_page_steps: StepCount = 10


def rules(config: Config) -> list[RuleGroup]:
    tunables = config.area(StabilityConfig)
    base, recent = steps(tunables.divergence_baseline_steps), steps(tunables.divergence_recent_steps)
    smoothing = steps(tunables.divergence_smoothing_steps)
    # The quietest level, not a median: a warm-up's decaying KL (GRPO with small groups) or grad
    # norm would lift a median of the young run's history above a divergence's own level.
    baseline = Baseline.quietest(smoothing, over=base)
    held = Baseline.held(of=Baseline(base, ending=recent))
    fall_steps = steps(tunables.divergence_entropy_fall_steps)
    entropy_before = Baseline(smoothing, ending=fall_steps)
    divergence = Alert(
        name="VerlTrainingDivergence",
        severity=Severity.CRITICAL,
        condition=all_of(
            KL.median_over(steps(tunables.divergence_kl_median_steps)).rises_to(
                tunables.divergence_kl_factor, of=baseline, at_least=tunables.divergence_kl_min_rise,
                beyond_noise=tunables.divergence_noise_z),
            GRAD_NORM.max_over(recent).above(tunables.divergence_grad_norm_factor, times=baseline),
            ENTROPY.min_over(recent).below(tunables.divergence_entropy_factor, times=baseline),
            ENTROPY.median_over(fall_steps).falls_by(
                tunables.divergence_entropy_fall_fraction, of=entropy_before,
                beyond_noise=tunables.divergence_noise_z)),
        for_=tunables.divergence_for,
        # Still diverged is judged on the recent median: after a recovery, one noisy step is no reason
        # to keep paging.
        keep_firing_while=any_of(
            KL.median_over(recent).above(tunables.divergence_sustain_kl_factor, times=held),
            GRAD_NORM.median_over(recent).above(tunables.divergence_sustain_grad_norm_factor, times=held),
            # Entropy against its best level just before its fall (the onset's), which exists from a
            # run's first steps: the onset holds only while entropy is still falling, and a
            # divergence in a run's first 40 steps has no held level of 60 steps yet.
            ENTROPY.median_over(recent).below(tunables.divergence_sustain_entropy_factor,
                                              times=Baseline.held(of=entropy_before))),
        summary="KL, grad norm and entropy broke away from their baselines together: the policy is diverging.",
        description=(f"Run {RUN_NAME}: PPO KL's median of its last {tunables.divergence_kl_median_steps} steps rose above "
                     f"{tunables.divergence_kl_factor:g}x and grad norm within the last {recent} above "
                     f"{tunables.divergence_grad_norm_factor:g}x their lowest median over {smoothing} within the last {base}, "
                     f"while entropy fell below {tunables.divergence_entropy_factor:g}x its highest and is still "
                     f"falling: its median of the last {fall_steps} is {tunables.divergence_entropy_fall_fraction:.0%} "
                     f"or more below its median of the {smoothing} before them (KL's rise and entropy's fall "
                     f"beyond {tunables.divergence_noise_z:g} standard errors of their step-to-step noise). It stays "
                     f"firing while any of them is still "
                     f"{tunables.divergence_sustain_kl_factor:g}x / {tunables.divergence_sustain_grad_norm_factor:g}x / "
                     f"{tunables.divergence_sustain_entropy_factor:g}x away from its level before the fault."),
        meaning="The three classic symptoms of a policy update that has left the trust region, seen at once: "
                "the new policy moves far from the old one (KL), gradients blow up (grad norm), and the policy "
                "collapses onto a few tokens (entropy). One of them alone is routine noise; all three breaking "
                "away together usually precede a reward collapse and rarely recover on their own. Together means "
                "entropy is still falling, against its level of the steps just before, when KL and grad norm "
                "break: a run converging halves its entropy over tens of steps, and a pre-clip grad norm burst "
                "after entropy has levelled off is no divergence. A lone gradient explosion warns "
                "(VerlGradNormExplosion), and so does entropy exploding (VerlEntropyExplosion): a real run "
                "recovered from entropy x40 with KL and grad norm up within 7 steps.",
        healthy_runs=("One of the three alone is routine: a lone KL spike (a 3-step median reads it, so one step of "
                      "KL 7 in a healthy off-policy run is none), a grad norm spike, an entropy dip. It needs all "
                      f"three beyond their factors against the run's quietest level of its last {base}, and PPO KL "
                      "to rise by 0.01 too (early console logs print it to 3 decimals). A converging run's entropy "
                      "halves within 60 steps and then levels off while pre-clip grad norm bursts x1e4-x1e8 and KL's "
                      f"3-step median reads 4x its quiet level: it needs entropy's median of the last {fall_steps} "
                      f"below its median of the {smoothing} just before, by "
                      f"{tunables.divergence_entropy_fall_fraction:.0%}, and KL's rise and entropy's fall beyond "
                      f"{tunables.divergence_noise_z:g} standard errors of their step-to-step spread."),
        next_steps=(
            "Open the dashboard's Training stability row for this experiment and find the step where the "
            "three curves turned; compare with the PPO clip fraction at that step.",
            "Check the response length and its clip ratio: a sudden switch to very long or truncated answers "
            "often drives the blow-up.",
            "Stop or roll back to the last checkpoint before the turn; retry with a lower actor learning rate, "
            "a stronger KL penalty (kl_loss_coef) or tighter clipping (clip_ratio).",
        ),
    )
    kl_steps, kl_over = steps(tunables.kl_spike_steps), steps(tunables.kl_spike_over_steps)
    kl_median = KL.median_over(kl_steps).after_half_window()
    kl_spike = Alert(
        name="VerlKLSpike",
        severity=Severity.WARNING,
        # Judged once half of its steps are logged: a GRPO run's first update moves the policy by 0.15
        # (bench/realruns/custom-qwen25math-15b-grpo-clip-asym-200), then 0.04, 0.03, ...
        condition=all_of(kl_median.above(tunables.kl_spike_threshold),
                         kl_median.rises_to(tunables.kl_spike_rise_factor,
                                            of=Baseline.quietest(kl_steps, over=kl_over),
                                            beyond_noise=tunables.kl_spike_noise_z)),
        keep_firing_for=config.warning_keep_firing_for,
        summary="PPO KL has stayed above its threshold: updates move the policy too far per step.",
        description=(f"Run {RUN_NAME}: the median of actor/ppo_kl over its last {kl_steps} is {VALUE} "
                     f"(threshold {tunables.kl_spike_threshold:g}): more than half of those updates moved the "
                     f"policy that far, and it is {tunables.kl_spike_rise_factor:g}x its quietest such median "
                     f"within the last {kl_over} or more, beyond {tunables.kl_spike_noise_z:g} standard errors of "
                     f"its noise."),
        meaning="Each PPO update changes the policy more than usual. Common causes: learning rate too high, "
                "too many PPO epochs or mini-batches over the same data, or stale rollouts (off-policy data). "
                f"It compares the median of PPO KL over the run's last {tunables.kl_spike_steps} logged steps "
                f"with {tunables.kl_spike_threshold:g}, at any rhythm (15 s at 1.5 s a step, 10 hours at an hour "
                "a step), and with its own quietest level of the last "
                f"{tunables.kl_spike_over_steps} steps. KL between consecutive policies is in nats per token "
                "whatever the model, so a fixed bound travels between runs; a healthy run's KL sits near 0.01 "
                "with single-step spikes (a lone off-policy step reaches 7), and a median of 10 steps moves only "
                "when most of them are high. A GRPO warm-up starts above the bound and falls: a rise from the "
                "run's quieter level is asked too, so the warm-up is not a spike.",
        healthy_runs=("A GRPO run's first update moves the policy by 0.15 and then settles, and an off-policy run "
                      "has a lone step of high KL: it needs the median of the last 10 logged steps above 0.1, "
                      "judged once 5 of them are logged, and twice its quietest 10-step median of the last 100 "
                      "steps beyond 3 standard errors of its step-to-step spread."),
        next_steps=(
            "Compare with actor/pg_clipfrac: a high clip fraction confirms the updates hit the clip range.",
            "Lower the actor learning rate or ppo_epochs; check that rollout and actor weights are in sync.",
        ),
    )
    entropy_median = steps(tunables.entropy_median_steps)
    recent_steps = steps(tunables.entropy_rate_steps)
    entropy_level = Baseline(steps(tunables.entropy_level_steps), ending=entropy_median)
    reward_now = REWARD.median_over(steps(tunables.entropy_reward_steps))
    noise = tunables.entropy_reward_noise_z
    slow_steps = steps(tunables.entropy_slow_rate_steps)
    slow_reward = steps(tunables.entropy_slow_reward_steps)
    slow_reward_ending = steps(tunables.entropy_slow_reward_ending_steps)
    entropy_collapse = Alert.when(
        "VerlEntropyCollapse",
        any_of(all_of(ENTROPY.median_over(entropy_median).falls_to(
                          tunables.entropy_collapse_fraction, of=entropy_level,
                          beyond_noise=tunables.entropy_collapse_noise_z),
                      reward_now.does_not_rise_by(tunables.entropy_reward_rise_fraction,
                                                  of=Baseline.quietest(steps(tunables.entropy_reward_steps),
                                                                       over=recent_steps), beyond_noise=noise)),
               all_of(ENTROPY.median_over(entropy_median).falls_to(
                          tunables.entropy_slow_collapse_fraction,
                          of=Baseline.quietest(entropy_median, over=slow_steps),
                          beyond_noise=tunables.entropy_collapse_noise_z),
                      reward_now.falls_by(tunables.entropy_reward_fall_fraction,
                                          of=Baseline(slow_reward, ending=slow_reward_ending),
                                          beyond_noise=tunables.entropy_slow_reward_noise_z))),
        for_=tunables.entropy_collapse_for,
        keep_firing_for=config.warning_keep_firing_for,
        severity=Severity.WARNING,
        summary="Policy entropy fell fast while the reward did not rise: the model is collapsing onto a few answers.",
        description=(f"Run {RUN_NAME}: the median of actor/entropy over its last {entropy_median} is {VALUE}, below "
                     f"{tunables.entropy_collapse_fraction:.0%} of its median over the {entropy_level.window} before "
                     f"them (beyond {tunables.entropy_collapse_noise_z:g} standard errors of its noise) while the reward has not risen above its lowest {reward_now.window} median "
                     f"within the last {recent_steps}, or below {tunables.entropy_slow_collapse_fraction:.0%} of it within the last "
                     f"{slow_steps} while the reward fell below its median of the {slow_reward} ending {slow_reward_ending} "
                     f"ago (by {tunables.entropy_reward_rise_fraction:.0%} and {tunables.entropy_reward_fall_fraction:.0%} "
                     f"of the reward's magnitude, and beyond {noise:g} and "
                     f"{tunables.entropy_slow_reward_noise_z:g} standard errors of its noise)."),
        meaning="Mode collapse: the policy samples nearly deterministically, so exploration stops and reward "
                "usually plateaus. Entropy levels differ by model and task by orders of magnitude, and a healthy "
                "run's entropy falls 10x within 50 steps while it learns, so the alert reads the fall in the "
                "run's own steps and asks the reward too: entropy falling while the reward rises is a policy "
                "becoming sure of what works (convergence), the same fall with the reward flat or falling is a "
                "collapse. The slower collapse is judged once the reward has 75 logged steps.",
        healthy_runs=("A healthy run's entropy falls 10x within 50 steps while its reward climbs, and 40x over a "
                      "few hundred once the reward has plateaued; a small-batch run's swings across three decades "
                      "from step to step. So the fall is measured from the median of the 50 steps before the last "
                      "10 (not the highest of many medians, which noise alone puts 10x above the median), beyond 3 "
                      "standard errors of its step-to-step spread, and only with the reward not rising; a slower "
                      "fall needs the reward falling beyond 5."),
        next_steps=(
            "Look at sample responses of recent steps: are they identical or repetitive?",
            "Raise the entropy bonus (entropy_coeff) or lower the KL penalty; consider a higher rollout "
            "temperature.",
        ),
    )
    explosion_steps, explosion_over = steps(tunables.entropy_explosion_steps), steps(tunables.entropy_explosion_over_steps)
    entropy_before_rise = Baseline.quietest(entropy_median, over=explosion_over)
    fast_steps, fast_factor = steps(tunables.entropy_explosion_fast_steps), tunables.entropy_explosion_fast_factor
    entropy_explosion = Alert.when(
        "VerlEntropyExplosion",
        any_of(ENTROPY.median_over(explosion_steps).rises_to(
                   tunables.entropy_explosion_factor, of=entropy_before_rise,
                   at_least=tunables.entropy_explosion_min_rise, beyond_noise=tunables.entropy_explosion_noise_z),
               ENTROPY.median_over(fast_steps).rises_to(
                   fast_factor, of=entropy_before_rise, at_least=tunables.entropy_explosion_fast_min_rise),
               ENTROPY.median_over(fast_steps).above(tunables.entropy_explosion_ceiling)),
        for_=tunables.entropy_explosion_for,
        keep_firing_for=config.warning_keep_firing_for,
        severity=Severity.WARNING,
        summary="Policy entropy rose several-fold above its level before the rise: the policy is turning to noise.",
        description=(f"Run {RUN_NAME}: the median of actor/entropy over its last {explosion_steps} is {VALUE}, above "
                     f"{tunables.entropy_explosion_factor:g}x its lowest {entropy_median} median within the last "
                     f"{explosion_over}, by at least {tunables.entropy_explosion_min_rise:g} nats and beyond "
                     f"{tunables.entropy_explosion_noise_z:g} standard errors of its step-to-step noise; or its "
                     f"median over its last {fast_steps} is above {fast_factor:g}x that level, by at least "
                     f"{tunables.entropy_explosion_fast_min_rise:g} nats; or that median is above "
                     f"{tunables.entropy_explosion_ceiling:g} nats, whatever the level before."),
        meaning="The opposite failure of a collapse: the policy's token distribution flattens, responses fill "
                "with noise and run to the length cap, and the reward falls. Usually an update that left the "
                "trust region (learning rate, stale rollouts, a numerics problem between the rollout engine "
                "and the trainer).",
        healthy_runs=("Entropy rises a little as a run explores and swings across orders of magnitude in "
                      "small-batch runs: it needs the 5-step median 3x above the lowest 10-step median of the last "
                      "200 steps, by a whole nat, and beyond 5 standard errors of its step-to-step spread; or, "
                      "before that spread can be read (three logged values before the window), the 3-step median "
                      "10x that level and 0.75 nats above it (a healthy run of the corpus: at most 5x and 0.53 nats); or the "
                      "3-step median above 3 nats, which no healthy run of the corpus reaches (1.65 at most)."),
        next_steps=(
            "Check the response length and its clip ratio, and read a few recent responses.",
            "Compare the rollout engine's and the trainer's log-probs (a mismatch after a version change), "
            "lower the learning rate, and resume from the checkpoint before the rise.",
        ),
    )
    grad_steps, grad_over = steps(tunables.grad_norm_explosion_steps), steps(tunables.grad_norm_explosion_over_steps)
    grad_level = Baseline.quietest(steps(tunables.grad_norm_level_steps), over=grad_over)
    grad_norm_explosion = Alert.when(
        "VerlGradNormExplosion",
        GRAD_NORM.median_over(grad_steps).rises_to(
            tunables.grad_norm_explosion_factor, of=grad_level, at_least=tunables.grad_norm_explosion_min_rise,
            beyond_noise=tunables.grad_norm_explosion_noise_z),
        # Against the level held from before the fault (the lowest median of grad_over steps, read back
        # baseline_hold_window): a lasting fault, which the quietest level of the last 100 steps takes in
        # within 150 s at 1.5 s a step, stays firing.
        keep_firing_while=GRAD_NORM.median_over(grad_steps).rises_to(
            tunables.grad_norm_explosion_sustain_factor, of=Baseline.held(of=Baseline(grad_over, ending=grad_steps))),
        severity=Severity.WARNING,
        summary="The gradient norm exploded far above its own level: the update is becoming unstable.",
        description=(f"Run {RUN_NAME}: the median of actor/grad_norm over its last {grad_steps} is {VALUE}, above "
                     f"{tunables.grad_norm_explosion_factor:g}x its lowest {grad_level.window} median within the last "
                     f"{grad_over}, by at least {tunables.grad_norm_explosion_min_rise:g} and beyond "
                     f"{tunables.grad_norm_explosion_noise_z:g} standard errors of its noise. It resolves once "
                     f"that median is back below {tunables.grad_norm_explosion_sustain_factor:g}x the level."),
        meaning="Gradients an order of magnitude above the run's own quiet level, for several steps: the loss "
                "surface has turned steep (an off-policy batch, a learning rate too high for this phase, "
                "unclipped ratios, a numerics problem). The clip keeps each update bounded, and validation may "
                "still rise for a while, so it warns; KL and entropy breaking away with it page "
                "(VerlTrainingDivergence).",
        healthy_runs=("Healthy PPO grad norms move between 0.2 and 70 and spike for a step: it needs the 3-step "
                      "median 10x above the lowest 10-step median of the last 100 steps, by at least 10, and beyond "
                      "5 standard errors of its step-to-step spread, and resolves as soon as that median is back "
                      "below 3x the level: a spike that passed is no reason to keep warning."),
        next_steps=(
            "Compare with PPO KL, the clip fraction and entropy on the Training stability row.",
            "Lower the learning rate or tighten the clip ratio; resume from the checkpoint before the rise "
            "if the reward follows it down.",
        ),
    )
    kl_ref_steps = steps(tunables.reference_kl_steps)
    kl_ref_over = steps(tunables.reference_kl_over_steps)
    ending = steps(tunables.reference_kl_saturated_ending_steps)
    reward_range = Baseline.quietest(kl_ref_steps, over=kl_ref_over)
    tolerance, spread = tunables.reward_saturated_tolerance, tunables.reward_saturated_spread
    reward_saturated = all_of(REWARD.median_over(kl_ref_steps).does_not_fall_by(tolerance, of=reward_range),
                              Signal("critic/score/std").median_over(kl_ref_steps).below(spread))
    reference_kl = Alert.when(
        "VerlReferenceKLBlowUp",
        any_of(KL_REF.median_over(kl_ref_steps).rises_to(
                   tunables.reference_kl_rise_multiple, of=Baseline.quietest(kl_ref_steps, over=kl_ref_over),
                   at_least=tunables.reference_kl_min_rise, beyond_noise=tunables.reference_kl_noise_z),
               all_of(KL_REF.median_over(kl_ref_steps).rises_to(
                          tunables.reference_kl_saturated_multiple, of=Baseline(kl_ref_steps, ending=ending),
                          at_least=tunables.reference_kl_min_rise, beyond_noise=tunables.reference_kl_noise_z),
                      reward_saturated)),
        for_=tunables.reference_kl_for,
        keep_firing_for=config.warning_keep_firing_for,
        severity=Severity.WARNING,
        summary="KL to the reference policy has blown up: the policy is leaving what it was trained from.",
        description=(f"Run {RUN_NAME}: the median of actor/kl_loss (KL to the reference) over its last "
                     f"{kl_ref_steps} is {VALUE}: above {tunables.reference_kl_rise_multiple:g}x its quietest "
                     f"such median within the last {kl_ref_over}, at least {tunables.reference_kl_min_rise:g} "
                     f"above it, and beyond {tunables.reference_kl_noise_z:g} standard errors of its step-to-step noise; "
                     f"or above {tunables.reference_kl_saturated_multiple:g}x its median of {kl_ref_steps} ending "
                     f"{ending} ago, as far and beyond as much noise, while the reward is at its best (within "
                     f"{tolerance:.0%}) with a score std below {spread:g}."),
        meaning="KL to the reference (not to the old policy, which is actor/ppo_kl and VerlKLSpike's) grows "
                "smoothly under a KL penalty by design and spikes for single steps in healthy runs; a sustained "
                "rise by an order of magnitude means the KL term no longer holds the policy: a KL coefficient too "
                "small for the learning rate, reward hacking, or an update that has gone unstable (grad norm "
                "spikes usually come with it). Once the reward is saturated (every completion right, no spread "
                "within groups) GRPO has no advantage to learn from, so a KL that still climbs is drift the reward "
                "does not pay for: a smaller rise warns then.",
        healthy_runs=("KL to the reference grows smoothly under a KL penalty by design (0 to 0.2 over 200 steps) "
                      "and spikes for single steps, and a one-prompt run's swings over an order of magnitude between "
                      "steps: it needs the 10-step median 10x its quietest 10-step median of the last 200 steps, 0.3 "
                      "above it, and beyond 5 standard errors of its step-to-step spread. A KL that doubles within 30 "
                      "steps warns only once the reward has saturated: at its best, with next to no spread between "
                      "completions, a learning run has nothing left to buy with it."),
        next_steps=(
            "Compare with the grad norm and the reward: a KL rise without a reward gain is drift, not learning.",
            "Raise the KL coefficient (kl_loss_coef; TRL's beta) or lower the learning rate; resume from the "
            "checkpoint before the rise.",
        ),
    )
    # Every sample of the last evaluation interval (plus one scrape): a step shorter than the
    # interval is still seen, whatever the step length.
    seen = config.rule_interval + config.scrape_interval
    # A non-finite loss is read from the exporter's loss streak, a number, not as `loss != loss`:
    # VictoriaMetrics drops NaN samples at ingestion, so a NaN comparison could never fire there.
    fatal_losses = (f'label_replace(max_over_time({NONFINITE_LOSS_STREAK_METRIC}{{$verl}}[{seen}]) >= 1, '
                    f'"metric", "{NONFINITE_LOSS_STREAK_METRIC}", "", "")')
    nan = Alert(
        name="VerlNaNMetrics",
        severity=Severity.CRITICAL,
        expr=(f"{fatal_losses}\nor\n"
              f'label_replace(max_over_time({STREAK}[{seen}]) >= 2, "metric", "{NONFINITE_STREAK_METRIC}", "", "")'),
        keep_firing_for=config.warning_keep_firing_for,
        summary="A training loss is NaN, or updates have been NaN on consecutive steps: the weights are likely "
                "corrupted.",
        description=(f"Run {RUN_NAME}: {{{{ $labels.metric }}}} shows a non-finite loss or at least two consecutive "
                     f"non-finite steps."),
        meaning="NaN in the loss, or a NaN/infinite grad norm, KL or entropy on consecutive steps, means an "
                "overflow or a division by zero in the update; once NaN reaches the weights every later step is "
                "wasted compute. (verl skips the optimizer step when the grad norm is not finite, so one such "
                "step alone is VerlNonFiniteStep, an info.)",
        healthy_runs=("verl skips the optimizer step of a non-finite grad norm, and a healthy run has such a step "
                      "now and then (VerlNonFiniteStep, an info): it needs a non-finite loss, or non-finite updates "
                      "on consecutive steps, which no healthy run of the corpus logs."),
        next_steps=(
            "Find the first NaN step in the step log; check grad norm and KL just before it.",
            "Resume from the last good checkpoint; with bf16/fp16 check loss scaling, lower the learning rate, "
            "and look for empty or zero-length responses in that batch.",
        ),
    )
    nonfinite_step = Alert(
        name="VerlNonFiniteStep",
        severity=Severity.INFO,
        expr=f"max_over_time({STREAK}[{seen}]) == 1",
        summary="One step logged a NaN or infinite grad norm, KL or entropy; verl skipped its update.",
        description=f"Run {RUN_NAME}: a single step had non-finite update statistics; the next one was finite.",
        meaning="An isolated overflow: verl does not apply an update whose grad norm is not finite, so training "
                "goes on unharmed; routine with bf16 and large batches. VerlNonFiniteSteps warns when they "
                "become frequent, VerlNaNMetrics pages when two come in a row.",
        next_steps=(
            "Nothing, unless it recurs: check how often on the dashboard's grad norm panel (gaps are NaN steps).",
        ),
    )
    counted, rate_max = steps(tunables.nonfinite_steps), tunables.nonfinite_rate_max
    streak = Signal(NONFINITE_STREAK_METRIC)
    nonfinite_steps = Alert.when(
        "VerlNonFiniteSteps",
        # Each skipped step raises the streak to 1 and the next finite step sets it back: two changes,
        # so more than rate_max skips is more than 2 * rate_max changes (the newest skip, not yet
        # followed by a finite step, counts one). Consecutive NaN steps are VerlNaNMetrics' to page,
        # not skips to count.
        all_of(streak.changes_over(counted).above(2 * rate_max),
               streak.max_over(counted).below(2)),
        keep_firing_for=config.warning_keep_firing_for,
        severity=Severity.WARNING,
        summary="verl keeps skipping updates with a NaN or infinite grad norm.",
        description=(f"Run {RUN_NAME}: the non-finite streak changed {VALUE} times within the last {counted} "
                     f"logged: more than {rate_max:g} steps with non-finite update statistics (two changes each), "
                     f"none of them consecutive; each was skipped."),
        meaning="Isolated overflows that have become frequent: each one is a wasted step, and a rising rate "
                "often comes before consecutive NaNs (VerlNaNMetrics). It counts the skipped steps within the "
                f"run's last {tunables.nonfinite_steps} logged steps, at any rhythm (150 s at 1.5 s a step, four "
                f"days at an hour a step), and warns on more than {rate_max:g}. A healthy bf16 run skips a step "
                "now and then (one every few hundred steps, or two close together once), which never makes four "
                f"within {tunables.nonfinite_steps}. It reads the exporter's streak twice a step: at steps "
                "shorter than the scrape interval, a skip no scrape falls on is not counted, and two skips "
                "between the same two scrapes count once.",
        untested=("its generated cases hold each signal at a level, and a count of changes needs a streak that "
                  "moves: tests/rules/stability-test.yaml tests it at 1.5 s, 60 s and 3,600 s a step"),
        healthy_runs=("verl skips the optimizer step of a non-finite grad norm, and a bf16 run overflows now and "
                      "then: it needs more than 3 isolated skips within the last 100 logged steps (more than 3% of "
                      "the updates lost); an occasional skip is VerlNonFiniteStep, an info."),
        next_steps=(
            "Look at the grad norm and the loss scale around the skipped steps (gaps on the grad norm panel).",
            "Lower the learning rate, check bf16/fp16 settings, and look for degenerate (empty) responses.",
        ),
    )
    close, close_steps = steps(tunables.nonfinite_page_steps), tunables.nonfinite_page_steps
    nonfinite_close = Alert.when(
        "VerlNonFiniteStepsClose",
        # Two skips make at least three changes (four once the newer is followed by a finite step);
        # consecutive ones are VerlNaNMetrics' to page.
        all_of(streak.changes_over(close).above(2), streak.max_over(close).below(2)),
        keep_firing_for=config.warning_keep_firing_for,
        severity=Severity.CRITICAL,
        summary="Two of the last few steps logged a NaN or infinite grad norm, KL or entropy: the update is breaking.",
        description=(f"Run {RUN_NAME}: the non-finite streak changed {VALUE} times within the last {close}: at "
                     f"least two steps with non-finite update statistics among them, not in a row."),
        meaning="verl skips an update whose grad norm is not finite, so one such step is an overflow it survives "
                f"(VerlNonFiniteStep). Two within {close_steps} logged steps are a fifth of the updates lost and "
                "a numerics problem that has taken hold, not a rare overflow: a run whose entropy climbs to noise "
                "logs NaN grad norms every few steps before it logs them in a row. It pages whether or not they "
                "are consecutive (consecutive ones are VerlNaNMetrics'). It reads the exporter's streak twice a "
                "step: at steps shorter than the scrape interval, a skip no scrape falls on is not counted.",
        untested=("its generated cases hold each signal at a level, and a count of changes needs a streak that "
                  "moves: tests/rules/stability-test.yaml tests it"),
        healthy_runs=(f"A healthy bf16 run overflows once every few hundred steps: it needs two non-finite steps "
                      f"within {close_steps} logged steps, which no healthy run of the corpus or of the simulated "
                      "benchmark logs."),
        next_steps=(
            "Find the non-finite steps in the step log; check grad norm, KL and entropy just before the first.",
            "Resume from the last good checkpoint; with bf16/fp16 check loss scaling, lower the learning rate, "
            "and look for empty or zero-length responses in those batches.",
        ),
    )
    return [RuleGroup("verl-stability", (divergence, kl_spike, entropy_collapse, entropy_explosion, grad_norm_explosion,
                                         reference_kl, nan, nonfinite_step, nonfinite_steps, nonfinite_close))]


def inhibitions(config: Config) -> tuple[Inhibition, ...]:
    return (
        Inhibition("VerlTrainingDivergence", ("VerlKLSpike", "VerlEntropyCollapse", "VerlEntropyExplosion",
                                              "VerlRewardCliff", "VerlRewardCollapse"),
                   why="A diverging policy spikes KL, collapses entropy and then loses reward; the divergence "
                       "is the one thing to act on."),
        Inhibition("VerlNonFiniteStepsClose", ("VerlNonFiniteSteps", "VerlNonFiniteStep"),
                   why="The skips the page counts are the ones the warning and the info report."),
    )
