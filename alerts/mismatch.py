"""Train/rollout mismatch: the trainer's token probabilities part from the rollout engine's.

verl samples with a rollout engine (vLLM, SGLang) and trains with another stack (FSDP, Megatron);
the same weights give slightly different probabilities in each (kernels, precision, a weight
sync). verl logs the gap by default (training/rollout_probs_diff_*, since
rollout.calculate_log_probs became True), its rollout correction logs rollout_corr/*, TRL
logs sampling/sampling_logp_difference/* with its importance-sampling correction on. A gap that
grows turns on-policy RL into off-policy RL without anyone deciding so.
"""

from dataclasses import dataclass

from dashgen.conditions import RUN_NAME, VALUE, Baseline, Signal, any_of, steps
from dashgen.config import AreaConfig, Config, Factor, NonNegative, StepCount
from dashgen.model import Alert, RuleGroup, Severity

PROBS_DIFF = Signal("training/rollout_probs_diff_mean")  # verl: mean |p_rollout - p_trainer| per token
LOGP_DIFF = Signal("sampling/sampling_logp_difference/mean")  # TRL, slime: mean |log p_trainer - log p_rollout|
LOG_PPL_DIFF = Signal("rollout_corr/log_ppl_abs_diff")  # verl's rollout correction, per sequence
ROLLOUT_KL = Signal("rollout_corr/kl")
CHI2_TOKEN = Signal("rollout_corr/chi2_token")


@dataclass(frozen=True)
class MismatchConfig(AreaConfig, area="mismatch"):
    """The tunables of alerts/mismatch.py: the config file's `mismatch:` section."""

    # VerlTrainRolloutMismatch reads each gap as its median over this many logged steps: one batch
    # of unusual prompts is no change of the stack.
    rise_steps: StepCount = 5
    # ... and compares it with its level before the rise: the lowest median of gap_level_steps within
    # the last rise_over_steps, which a rise cannot move (a gap growing slowly is still seen).
    gap_level_steps: StepCount = 10
    # The steps that level is taken from.
    rise_over_steps: StepCount = 200
    # The gap must rise above this multiple of that level...
    rise_factor: Factor = 3.0
    # ... beyond this many standard errors of its own step-to-step noise...
    rise_noise_z: NonNegative = 5.0
    # ... and by at least this much, in each gap's units: verl's mean probability gap is 0.002-0.003
    # in a healthy bf16 run; a rise of 0.005 is twice that, half verl-omni's gate of 0.01 (below).
    probs_diff_min_rise: NonNegative = 0.005
    # The mean log-prob gap (TRL, slime): a fifth of slime's gate of 0.1 (below).
    logp_diff_min_rise: NonNegative = 0.02
    # verl's rollout correction's log-perplexity gap per sequence.
    log_ppl_diff_min_rise: NonNegative = 0.02
    # VerlTrainRolloutGapBeyondGate: the median over this many logged steps beyond a published gate.
    # Three steps: a single odd batch passes, a gap that holds does not (verl-omni judges every step
    # after two warm-up steps).
    gate_steps: StepCount = 3
    # verl's mean probability gap: verl-omni's CI fails a run whose training/rollout_probs_diff_mean
    # exceeds 0.01 at any step after two warm-up steps.
    probs_diff_gate: NonNegative = 0.01
    # The mean log-prob gap: slime's CI asserts train/train_rollout_logprob_abs_diff <= 0.1.
    logp_diff_gate: NonNegative = 0.1
    # rollout_corr/kl: verl's rollout-correction guide (docs/algo/rollout_corr.md) reads |KL| > 0.1 as
    # "a significant off-policy gap".
    rollout_kl_gate: NonNegative = 0.1
    # rollout_corr/chi2_token: the same guide reads more than 1.0 as "severe distribution shift".
    chi2_token_gate: NonNegative = 1.0


def rules(config: Config) -> RuleGroup:
    tunables = config.area(MismatchConfig)
    rise_steps, level_steps = steps(tunables.rise_steps), steps(tunables.gap_level_steps)
    level = Baseline.quietest(level_steps, over=steps(tunables.rise_over_steps))
    factor, z = tunables.rise_factor, tunables.rise_noise_z
    rises = ((PROBS_DIFF, tunables.probs_diff_min_rise), (LOGP_DIFF, tunables.logp_diff_min_rise),
             (LOG_PPL_DIFF, tunables.log_ppl_diff_min_rise))
    mismatch = Alert.when(
        "VerlTrainRolloutMismatch",
        any_of(*(gap.median_over(rise_steps).rises_to(factor, of=level, at_least=floor, beyond_noise=z)
                 for gap, floor in rises)),
        severity=Severity.WARNING,
        keep_firing_for=config.warning_keep_firing_for,
        summary="The gap between the trainer's and the rollout engine's token probabilities has grown: the run "
                "is training off-policy.",
        description=(f"Run {RUN_NAME}: a train/rollout gap (training/rollout_probs_diff_mean, "
                     f"sampling/sampling_logp_difference/mean or rollout_corr/log_ppl_abs_diff), its median over "
                     f"the last {rise_steps}, is {VALUE}: above {factor:g}x its lowest {level_steps} median within "
                     f"the last {steps(tunables.rise_over_steps)}, beyond {z:g} standard errors of its step-to-step "
                     f"noise and by at least {tunables.probs_diff_min_rise:g} (probabilities), "
                     f"{tunables.logp_diff_min_rise:g} (log-probs) or {tunables.log_ppl_diff_min_rise:g} "
                     f"(log perplexity)."),
        meaning="PPO and GRPO assume the tokens were sampled by the policy being trained. The rollout engine and "
                "the trainer never agree exactly (kernels, bf16), and a run settles at its own level early on; "
                "a gap several times that level means something in the stack changed: a rollout engine version, "
                "a precision or quantisation setting (FP8 rollout), a weight sync that failed or sends stale "
                "weights, a tokenizer or chat template that differs between the two. Off-policy updates make the "
                "importance ratios wrong; left alone, a growing mismatch is a known cause of collapse "
                "(verl docs/algo/rollout_corr.md). It compares each gap with its own early level and noise, so "
                "it holds whatever the model's or the precision's usual gap.",
        healthy_runs=("A healthy run's gap is set by its stack and stays within a narrow band (verl's mean "
                      "probability gap 0.002-0.003 in bf16), with single odd batches: it needs the 5-step median 3x the lowest 10-step median of "
                      "the last 200 steps, beyond 5 standard errors of its step-to-step spread and by at least "
                      "twice the bf16 level."),
        next_steps=(
            "Check what changed at the step the gap rose: a restart on another image (vLLM or SGLang version), "
            "a precision, quantisation or attention-backend setting, the weight-sync path.",
            "Compare training/rollout_probs_diff_max and the response length: a gap confined to long responses "
            "points at the rollout's KV cache or precision, one on every response at stale weights.",
            "Turn on verl's rollout correction (algorithm.rollout_correction, docs/algo/rollout_corr.md) while "
            "the cause is found, and resume from a checkpoint before the rise if the reward has suffered.",
        ),
    )
    gate_steps = steps(tunables.gate_steps)
    gates = ((PROBS_DIFF, tunables.probs_diff_gate), (LOGP_DIFF, tunables.logp_diff_gate),
             (ROLLOUT_KL, tunables.rollout_kl_gate), (CHI2_TOKEN, tunables.chi2_token_gate))
    beyond_gate = Alert.when(
        "VerlTrainRolloutGapBeyondGate",
        any_of(*(gap.median_over(gate_steps).after_half_window().above(gate) for gap, gate in gates)),
        severity=Severity.WARNING,
        keep_firing_for=config.warning_keep_firing_for,
        summary="The trainer and the rollout engine disagree beyond the gates other RL frameworks' CI enforces.",
        description=(f"Run {RUN_NAME}: a train/rollout gap's median over the last {gate_steps} is {VALUE}: "
                     f"training/rollout_probs_diff_mean above {tunables.probs_diff_gate:g}, "
                     f"sampling/sampling_logp_difference/mean above {tunables.logp_diff_gate:g}, rollout_corr/kl "
                     f"above {tunables.rollout_kl_gate:g} or rollout_corr/chi2_token above "
                     f"{tunables.chi2_token_gate:g}."),
        meaning="A gap no healthy stack shows, judged from a run's first steps, before any level of its own "
                "exists. Each bound is a published gate: verl-omni's CI fails a run whose "
                "training/rollout_probs_diff_mean exceeds 0.01 after two warm-up steps; slime's CI asserts a "
                "mean absolute log-prob gap (train/train_rollout_logprob_abs_diff, TRL's "
                "sampling/sampling_logp_difference/mean) of at most 0.1; verl's rollout-correction guide reads "
                "|rollout_corr/kl| above 0.1 as a significant off-policy gap and rollout_corr/chi2_token above "
                "1.0 as a severe distribution shift. A stack whose gap is by design larger (an FP8 rollout "
                "without correction) raises the gate in its config (mismatch: probs_diff_gate).",
        healthy_runs=("The gates are other frameworks' own CI thresholds, each far above what a healthy bf16 stack "
                      "shows (verl's mean probability gap 0.002-0.003), and it needs the median of 3 logged steps beyond one."),
        next_steps=(
            "A gap beyond the gate from the first steps points at the setup: rollout and trainer on different "
            "dtypes or checkpoints, a tokenizer or chat template that differs, a rollout engine that is not "
            "receiving the trainer's weights.",
            "Compare a few sampled tokens' log-probs from both sides (verl logs rollout_log_probs with "
            "rollout.calculate_log_probs=True); turn on rollout correction until they agree.",
        ),
    )
    return RuleGroup("verl-mismatch", (mismatch, beyond_gate))
