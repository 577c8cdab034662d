"""Training stability: divergence of the policy update, KL spikes, entropy collapse, NaNs."""

from dataclasses import dataclass

from dashgen.catalog import NONFINITE_LOSS_STREAK_METRIC, NONFINITE_STREAK_METRIC
from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, all_of, any_of
from dashgen.config import (AreaConfig, Config, Duration, Factor, Fraction, Interval, NonNegative, duration_seconds,
                            format_duration)
from dashgen.model import ON_RUN, Alert, Inhibition, RuleGroup, Severity

STREAK = f"{NONFINITE_STREAK_METRIC}{{verl}}"
KL, GRAD_NORM, ENTROPY = Signal("actor/ppo_kl"), Signal("actor/grad_norm"), Signal("actor/entropy")


@dataclass(frozen=True)
class StabilityConfig(AreaConfig, area="stability"):
    """The tunables of alerts/stability.py: the config file's `stability:` section."""

    # VerlTrainingDivergence compares each signal with its quietest level of this window (the
    # lowest median over signal_smoothing_window for KL and grad norm, the highest for entropy);
    # a signal breaks away if it crosses its factor at some point within the recent window.
    divergence_baseline_window: Interval = "1h"
    divergence_recent_window: Interval = "10m"
    # PPO KL must rise above this multiple of its baseline.
    divergence_kl_factor: Factor = 4.0
    # Grad norm must rise above this multiple of its baseline.
    divergence_grad_norm_factor: Factor = 4.0
    # Entropy must fall below this multiple of its baseline.
    divergence_entropy_factor: Factor = 0.5
    # How long all three must hold before it pages.
    divergence_for: Duration = "1m"
    # Once firing, it stays firing while any one signal is still this far from its held
    # baseline (see baseline_hold_window): a weaker condition than the onset's, so the alert
    # neither resolves while the run is still diverged nor flaps around the threshold.
    divergence_sustain_kl_factor: Factor = 2.0
    divergence_sustain_grad_norm_factor: Factor = 2.0
    divergence_sustain_entropy_factor: Factor = 0.5
    # VerlKLSpike: PPO KL (median over signal_smoothing_window) above this, for kl_spike_for.
    kl_spike_threshold: NonNegative = 0.1
    kl_spike_for: Duration = "10m"
    # A young run is watched from this much history on, against the quietest level of its own
    # first steps (a divergence in the first hour pages too).
    divergence_min_history: Interval = "10m"
    # The level a young run's divergence is held against until its baseline window is full: the
    # median of its own history once this much of it exists (the first minutes of warm-up are no
    # level to hold a fault against for a day).
    divergence_hold_min_history: Interval = "30m"
    # VerlEntropyCollapse: entropy (median over signal_smoothing_window) below this fraction of the
    # run's own highest hourly median of the last baseline_hold_window. A healthy run's entropy
    # about halves over its life; a collapse falls by e-folds within hours.
    entropy_collapse_fraction: Fraction = 0.4
    entropy_collapse_for: Duration = "3m"
    # Non-finite steps that verl skipped: more than this many in nonfinite_rate_window warns
    # (VerlNonFiniteSteps); a single one is VerlNonFiniteStep, an info.
    nonfinite_rate_max: NonNegative = 3
    nonfinite_rate_window: Interval = "1h"


def rules(config: Config) -> list[RuleGroup]:
    tunables = config.area(StabilityConfig)
    base, recent = tunables.divergence_baseline_window, tunables.divergence_recent_window
    smoothing = config.signal_smoothing_window
    # The quietest level, not a median: a warm-up's decaying KL (GRPO with small groups) or grad
    # norm would lift a median of the young run's history above a divergence's own level.
    baseline = Baseline.quietest(smoothing, over=base, min_history=tunables.divergence_min_history)
    held = Baseline.held(of=Baseline(base, ending=recent, min_history=tunables.divergence_hold_min_history))
    divergence = Alert(
        name="VerlTrainingDivergence",
        severity=Severity.CRITICAL,
        condition=all_of(
            KL.max_over(recent).above(tunables.divergence_kl_factor, times=baseline),
            GRAD_NORM.max_over(recent).above(tunables.divergence_grad_norm_factor, times=baseline),
            ENTROPY.min_over(recent).below(tunables.divergence_entropy_factor, times=baseline)),
        for_=tunables.divergence_for,
        # Still diverged is judged on the recent median: after a recovery, one noisy step is no reason
        # to keep paging.
        keep_firing_while=any_of(
            KL.median_over(recent).above(tunables.divergence_sustain_kl_factor, times=held),
            GRAD_NORM.median_over(recent).above(tunables.divergence_sustain_grad_norm_factor, times=held),
            ENTROPY.median_over(recent).below(tunables.divergence_sustain_entropy_factor, times=held)),
        summary="KL, grad norm and entropy broke away from their baselines together: the policy is diverging.",
        description=(f"Run {RUN_NAME}: within the last {recent}, PPO KL rose above "
                     f"{tunables.divergence_kl_factor:g}x and grad norm above {tunables.divergence_grad_norm_factor:g}x "
                     f"their lowest {smoothing} median of the last {base}, while entropy fell below "
                     f"{tunables.divergence_entropy_factor:g}x its highest. It stays firing while any of them is still "
                     f"{tunables.divergence_sustain_kl_factor:g}x / {tunables.divergence_sustain_grad_norm_factor:g}x / "
                     f"{tunables.divergence_sustain_entropy_factor:g}x away from its level before the fault."),
        meaning="The three classic symptoms of a policy update that has left the trust region, seen at once: "
                "the new policy moves far from the old one (KL), gradients blow up (grad norm), and the policy "
                "collapses onto a few tokens (entropy). One of them alone is routine noise; all three together "
                "usually precede a reward collapse and rarely recover on their own.",
        next_steps=(
            "Open the dashboard's Training stability row for this experiment and find the step where the "
            "three curves turned; compare with the PPO clip fraction at that step.",
            "Check the response length and its clip ratio: a sudden switch to very long or truncated answers "
            "often drives the blow-up.",
            "Stop or roll back to the last checkpoint before the turn; retry with a lower actor learning rate, "
            "a stronger KL penalty (kl_loss_coef) or tighter clipping (clip_ratio).",
        ),
    )
    kl_spike = Alert(
        name="VerlKLSpike",
        severity=Severity.WARNING,
        condition=KL.median_over(smoothing).above(tunables.kl_spike_threshold),
        for_=tunables.kl_spike_for,
        keep_firing_for=config.warning_keep_firing_for,
        summary="PPO KL has stayed above its threshold: updates move the policy too far per step.",
        description=(f"Run {RUN_NAME}: the median of actor/ppo_kl over {smoothing} is {VALUE} "
                     f"(threshold {tunables.kl_spike_threshold:g})."),
        meaning="Each PPO update changes the policy more than usual. Common causes: learning rate too high, "
                "too many PPO epochs or mini-batches over the same data, or stale rollouts (off-policy data).",
        next_steps=(
            "Compare with actor/pg_clipfrac: a high clip fraction confirms the updates hit the clip range.",
            "Lower the actor learning rate or ppo_epochs; check that rollout and actor weights are in sync.",
        ),
    )
    entropy_collapse = Alert(
        name="VerlEntropyCollapse",
        severity=Severity.WARNING,
        condition=ENTROPY.median_over(smoothing).below(
            tunables.entropy_collapse_fraction, times=Baseline.held(of=Baseline(base, ending=recent))),
        for_=tunables.entropy_collapse_for,
        keep_firing_for=config.warning_keep_firing_for,
        summary="Policy entropy has fallen far below the run's own level: the model is collapsing onto a few "
                "answers.",
        description=(f"Run {RUN_NAME}: the median of actor/entropy over {smoothing} is {VALUE}, below "
                     f"{tunables.entropy_collapse_fraction:.0%} of the run's highest hourly median of the last "
                     f"{config.baseline_hold_window}."),
        meaning="Mode collapse: the policy samples nearly deterministically, so exploration stops and reward "
                "usually plateaus. Entropy levels differ by model and task by orders of magnitude, so the alert "
                "compares the run with itself: a slow decline (a healthy run's entropy about halves over its "
                "life) is normal, and so is a level that has been low from the start; a fall by e-folds within "
                "hours is not. A collapse that lasts longer than baseline_hold_window becomes the run's level "
                "and resolves.",
        next_steps=(
            "Look at sample responses of recent steps: are they identical or repetitive?",
            "Raise the entropy bonus (entropy_coeff) or lower the KL penalty; consider a higher rollout "
            "temperature.",
        ),
    )
    # Every sample of the last evaluation interval (plus one scrape): a step shorter than the
    # interval is still seen, whatever the step length.
    seen = format_duration(duration_seconds(config.rule_interval) + duration_seconds(config.scrape_interval))
    # A non-finite loss is read from the exporter's loss streak, a number, not as `loss != loss`:
    # VictoriaMetrics drops NaN samples at ingestion, so a NaN comparison could never fire there.
    fatal_losses = (f'label_replace(max_over_time({NONFINITE_LOSS_STREAK_METRIC}{{verl}}[{seen}]) >= 1, '
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
    rate_window, rate_max = tunables.nonfinite_rate_window, tunables.nonfinite_rate_max
    nonfinite_steps = Alert(
        name="VerlNonFiniteSteps",
        severity=Severity.WARNING,
        # Each skipped step raises the streak to 1 and the next finite step sets it back: two changes.
        # Consecutive NaN steps are VerlNaNMetrics' to page, not skips to count.
        expr=(f"ceil(changes({STREAK}[{rate_window}]) / 2) > {rate_max:g}\n"
              f"unless on({ON_RUN})\n"
              f"max_over_time({STREAK}[{rate_window}]) >= 2"),
        keep_firing_for=config.warning_keep_firing_for,
        summary="verl keeps skipping updates with a NaN or infinite grad norm.",
        description=(f"Run {RUN_NAME}: {VALUE} steps with non-finite update statistics in the last "
                     f"{rate_window} (more than {rate_max:g}); each was skipped."),
        meaning="Isolated overflows that have become frequent: each one is a wasted step, and a rising rate "
                "often comes before consecutive NaNs (VerlNaNMetrics).",
        next_steps=(
            "Look at the grad norm and the loss scale around the skipped steps (gaps on the grad norm panel).",
            "Lower the learning rate, check bf16/fp16 settings, and look for degenerate (empty) responses.",
        ),
    )
    return [RuleGroup("verl-stability", (divergence, kl_spike, entropy_collapse, nan, nonfinite_step,
                                         nonfinite_steps))]


def inhibitions(config: Config) -> tuple[Inhibition, ...]:
    return (
        Inhibition("VerlTrainingDivergence", ("VerlKLSpike", "VerlEntropyCollapse", "VerlRewardCliff"),
                   why="A diverging policy spikes KL, collapses entropy and then loses reward; the divergence "
                       "is the one thing to act on."),
    )
