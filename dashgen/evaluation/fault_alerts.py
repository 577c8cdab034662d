"""Which alerts each simulated fault is judged on (dashgen/evaluation/simulate.py draws the faults,
dashgen/evaluation/scoring.py scores the alerts a backtest of them raised)."""

# The one place that names the alerts each fault is judged on; rename an alert here.
# A fault that cuts more responses at the length cap may raise these: the rise warns, as do a high
# share saturating and a share at the cap with a flat reward; the high share is an info.
TRUNCATION = frozenset({"VerlResponseTruncation", "VerlResponseTruncationHigh", "VerlResponseTruncationSaturating",
                        "VerlResponseTruncationFlatReward"})
# fault kind -> (alerts that must fire, alerts it may also raise)
FAULT_ALERTS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "divergence": (frozenset({"VerlTrainingDivergence"}),
                   frozenset({"VerlKLSpike", "VerlEntropyCollapse", "VerlRewardCliff", "VerlRewardCollapse",
                              "VerlRewardStagnation", "VerlBatchTokenRunaway"}) | TRUNCATION),
    "kl_spike": (frozenset({"VerlKLSpike"}), frozenset()),
    "entropy_collapse": (frozenset({"VerlEntropyCollapse"}), frozenset({"VerlRewardStagnation"})),
    "reward_cliff": (frozenset({"VerlRewardCliff"}), frozenset({"VerlRewardCollapse", "VerlRewardStagnation"})),
    "reward_hacking": (frozenset({"VerlBatchTokenRunaway"}), TRUNCATION),
    "truncation": (frozenset({"VerlResponseTruncation"}), frozenset({"VerlResponseTruncationHigh"})),
    # The held last step is a flat reward; Alertmanager inhibits the stagnation it causes.
    "stall": (frozenset({"VerlTrainingStalled"}), frozenset({"VerlRewardStagnation"})),
    "crash": (frozenset({"VerlRunCrashed"}), frozenset()),
    "nan": (frozenset({"VerlNaNMetrics"}), frozenset({"VerlNonFiniteStep", "VerlRunCrashed"})),
    "memory_pressure": (frozenset({"VerlGPUMemoryPressure"}), frozenset()),
    "token_runaway": (frozenset({"VerlBatchTokenRunaway"}), TRUNCATION),
    "rollout_aborts": (frozenset({"VerlRolloutAborts"}), frozenset()),
    # Entropy rising several-fold within a few steps, responses running to the length cap.
    "entropy_explosion": (frozenset({"VerlEntropyExplosion"}),
                          frozenset({"VerlRewardCliff", "VerlRewardCollapse", "VerlRewardStagnation",
                                     "VerlBatchTokenRunaway"}) | TRUNCATION),
    # Responses shrink to a few tokens while the reward stays up (hacked by minimal answers).
    "length_collapse": (frozenset({"VerlResponseLengthCollapse"}),
                        frozenset({"VerlEntropyCollapse", "VerlRewardStagnation", "VerlNoLearningSignal"})),
    # Every GRPO group's rewards are identical: no advantage, grad norm and policy loss exactly 0.
    "no_learning_signal": (frozenset({"VerlNoLearningSignal"}), frozenset({"VerlRewardStagnation"})),
    # Skipped updates (non-finite grad norm) every REPEATED_SKIP_EVERY steps, never two in a row.
    "repeated_skips": (frozenset({"VerlNonFiniteSteps"}), frozenset({"VerlNonFiniteStep"})),
    # Reserved memory near the card's capacity with little of it unallocated (no fragmentation).
    "memory_near_capacity": (frozenset({"VerlGPUMemoryPressure"}), frozenset()),
    # Not faults: events of a healthy run that an alert may or should report.
    "plateau": (frozenset({"VerlRewardStagnation"}), frozenset()),
    "nan_skip": (frozenset(), frozenset({"VerlNonFiniteStep"})),
    # Entropy falling 10x per `speed` steps. Issue 20 took it for a fault; real healthy runs fall so
    # (40x over 300 steps; verl's DeepSeek-7B GRPO baseline 7x in its first 55, bench/realruns/).
    "entropy_decay": (frozenset(), frozenset({"VerlRewardStagnation"})),
    # Issue 35. Entropy falling 10x per `speed` steps while the reward rises 0.5 over them: convergence.
    "convergence": (frozenset(), frozenset({"VerlRewardStagnation"})),
    # Reference KL ~11,000 and grad norm ~420,000 from `at`; from `at + speed` a reward of 0 and
    # every completion cut at the length cap (a public run logged every 10th step).
    "implausible_start": (frozenset({"VerlImplausibleValue"}),
                          frozenset({"VerlReferenceKLBlowUp", "VerlRewardCliff", "VerlRewardCollapse",
                                     "VerlRewardStagnation", "VerlNoLearningSignal", "VerlKLSpike",
                                     "VerlTrainingDivergence", "VerlBatchTokenRunaway", "VerlGradNormExplosion",
                                     "VerlEntropyCollapse", "VerlEntropyExplosion", "VerlResponseLengthCollapse"})
                          | TRUNCATION),
    # A small-batch run whose reward sits at its floor: every step whose completions score alike (the
    # run's zero-std share, 86-97% in public runs) scores the lowest value, the others one completion above.
    "no_reward": (frozenset({"VerlNoLearningSignal"}),
                  frozenset({"VerlRewardNeverPays", "VerlRewardStagnation", "VerlImplausibleValue", "VerlEntropyCollapse",
                             "VerlEntropyExplosion", "VerlResponseLengthCollapse"})),
    # Entropy doubling every `speed` steps up to 13x (0.76 to 9.8 in a public verl agent run at
    # 2,400-4,800 s a step) while the reward falls to 0; its NaN grad norms are the spec's skipped steps.
    "entropy_growth": (frozenset({"VerlEntropyExplosion"}),
                       frozenset({"VerlRewardCliff", "VerlRewardCollapse", "VerlRewardStagnation",
                                  "VerlBatchTokenRunaway", "VerlImplausibleValue", "VerlGradNormExplosion",
                                  "VerlNonFiniteStep", "VerlNonFiniteSteps", "VerlNaNMetrics",
                                  # at 9.8 nats the run is destroyed: a page (issue 52)
                                  "VerlRunDestroyed", "VerlNonFiniteStepsClose"}) | TRUNCATION),
    # Entropy falling by e every `speed` steps (3.3x in 60 steps, not 10x) while the reward slips.
    "entropy_slow_collapse": (frozenset({"VerlEntropyCollapse"}),
                              frozenset({"VerlRewardStagnation", "VerlRewardCliff", "VerlRewardCollapse",
                                         "VerlNoLearningSignal",
                                         "VerlResponseLengthCollapse"})),
    # Issue 40. Grad norm alone: about 12x, 36x, then 120x its level on consecutive steps; KL,
    # entropy and reward as before (a public unclipped off-policy run: at most 4.6, then 34, 80, 292).
    "grad_norm_explosion": (frozenset({"VerlGradNormExplosion"}), frozenset()),
    # After a long quiet stretch, entropy 28x within `speed` steps (0.33 to 0.68, 3.4, 7.4, 9.4 in
    # 50 steps in a public run), grad norm 13x, PPO clip fraction to 0.7, responses to ~4 tokens.
    "late_entropy_explosion": (frozenset({"VerlEntropyExplosion"}),
                               frozenset({"VerlResponseLengthCollapse", "VerlGradNormExplosion",
                                          "VerlImplausibleValue", "VerlRewardCliff", "VerlRewardCollapse",
                                          "VerlRewardStagnation",
                                          "VerlNoLearningSignal", "VerlBatchTokenRunaway",
                                          "VerlKLSpike", "VerlEntropyCollapse", "VerlRunDestroyed"}) | TRUNCATION),
    # The validation score falls to 0 over `speed` steps while the training reward keeps rising.
    "reward_hacking_validation": (frozenset({"VerlRewardHacking"}), frozenset({"VerlRewardStagnation"})),
    # Issue 39. The trainer's and the rollout engine's token probabilities part: the mean gap rises
    # from its level (0.002-0.003 in bf16) to MISMATCH_GAP over `speed` steps and stays (a rollout
    # engine upgraded, a precision setting changed, a weight sync that stopped).
    "train_rollout_mismatch": (frozenset({"VerlTrainRolloutMismatch"}), frozenset({"VerlTrainRolloutGapBeyondGate"})),
    # actor/entropy no longer logged while the steps go on (a renamed key, a logger that lost it).
    "entropy_unlogged": (frozenset({"VerlSignalStopped"}), frozenset()),
    # Issue 35, class 3. Not a fault: a small-batch run that has learned its data, so that from `at`,
    # over `speed` steps, nearly every step's completions all score the top reward and its update is 0.
    "saturation": (frozenset(), frozenset({"VerlRewardSaturated", "VerlRewardStagnation"})),
    # Its failing twin: the same zero gradient with every completion scoring the lowest reward.
    "reward_floor": (frozenset({"VerlNoLearningSignal"}),
                     frozenset({"VerlRewardNeverPays", "VerlRewardCliff", "VerlRewardCollapse",
                                "VerlRewardStagnation",
                                "VerlEntropyCollapse", "VerlEntropyExplosion", "VerlResponseLengthCollapse"})),
    # Issues 35/40. A run that learned, then every rollout of every step scores the lowest reward
    # (exactly 0, std 0, grad norm 0) from `at` + `speed` on: a policy collapsed onto answers that earn nothing.
    "reward_collapse": (frozenset({"VerlRewardNeverPays"}),
                        frozenset({"VerlNoLearningSignal", "VerlRewardCliff", "VerlRewardCollapse",
                                   "VerlRewardStagnation",
                                   "VerlEntropyCollapse", "VerlEntropyExplosion", "VerlResponseLengthCollapse"})),
    # Issue 52. A policy loss from its level (0.18) to 1e6-4.5e7 on most steps from `at`, the reward,
    # KL and entropy as before, in a log without a grad norm (a hand-written loop's, a TRL table's):
    # only the loss tells. Beyond every plausible loss by orders of magnitude, so a page is right too.
    "loss_explosion": (frozenset({"VerlLossExplosion"}), frozenset({"VerlRunDestroyed", "VerlImplausibleValue"})),
    # A share of responses cut at the cap of 0.6 from the first step (an agent run's setup) rising
    # to 1.0 over `speed` steps and staying: 0.6 cannot double, so it is judged as saturating.
    "truncation_saturation": (frozenset({"VerlResponseTruncationSaturating"}),
                              frozenset({"VerlBatchTokenRunaway", "VerlRewardStagnation"}) | TRUNCATION),
    # The policy samples uniformly: entropy to the log of the vocabulary, the reward to 0 and every
    # response cut at the cap within `speed` steps. Nothing comes back from it: a page.
    "destroyed": (frozenset({"VerlRunDestroyed"}),
                  frozenset({"VerlEntropyExplosion", "VerlImplausibleValue", "VerlRewardCliff", "VerlRewardCollapse",
                             "VerlRewardStagnation", "VerlRewardNeverPays", "VerlBatchTokenRunaway"}) | TRUNCATION),
}
# Alerts FAULT_ALERTS expects that the rules do not define yet, with the severity they are to have
# (issue 35's VerlImplausibleValue, issue 40's VerlGradNormExplosion and issue 52's VerlRunDestroyed
# and VerlLossExplosion were planned here before they existed).
PLANNED_ALERTS: dict[str, str] = {}
