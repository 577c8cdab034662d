"""Training stability: divergence of the policy update, KL spikes, entropy collapse, NaNs."""

from alerts._common import ENTROPY, GRAD_NORM, KL, RUN, RUN_NAME, VALUE, complete_baseline_median

from dashgen.config import Config
from dashgen.model import Alert, Recording, RuleGroup, Severity

KL_BASELINE = "verl:actor_ppo_kl:baseline_median"
GRAD_NORM_BASELINE = "verl:actor_grad_norm:baseline_median"
ENTROPY_BASELINE = "verl:actor_entropy:baseline_median"

NAN_WATCHED = ("verl_actor_pg_loss", "verl_actor_grad_norm", "verl_actor_ppo_kl", "verl_actor_entropy",
               "verl_critic_vf_loss")


def rules(config: Config) -> RuleGroup:
    base, recent = config.divergence_baseline_window, config.divergence_recent_window
    baselines = [
        Recording(name, complete_baseline_median(series, base, recent),
                  f"Median of {series.split('{')[0]} over {base}, ending {recent} ago, once that window is full")
        for name, series in ((KL_BASELINE, KL), (GRAD_NORM_BASELINE, GRAD_NORM), (ENTROPY_BASELINE, ENTROPY))
    ]
    divergence = Alert(
        name="VerlTrainingDivergence",
        severity=Severity.CRITICAL,
        expr=f"""
            (max_over_time({KL}[{recent}]) > {config.divergence_kl_factor:g} * {KL_BASELINE})
            and on({RUN})
            (max_over_time({GRAD_NORM}[{recent}]) > {config.divergence_grad_norm_factor:g} * {GRAD_NORM_BASELINE})
            and on({RUN})
            (min_over_time({ENTROPY}[{recent}]) < {config.divergence_entropy_factor:g} * {ENTROPY_BASELINE})
        """,
        for_=config.divergence_for,
        summary="KL, grad norm and entropy broke away from their baselines together: the policy is diverging.",
        description=(f"Run {RUN_NAME}: within the last {recent}, PPO KL rose above "
                     f"{config.divergence_kl_factor:g}x and grad norm above {config.divergence_grad_norm_factor:g}x "
                     f"their median of the {base} before, while entropy fell below "
                     f"{config.divergence_entropy_factor:g}x its median."),
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
        expr=f"{KL} > {config.kl_spike_threshold}",
        for_=config.kl_spike_for,
        summary="PPO KL has stayed above its threshold: updates move the policy too far per step.",
        description=f"Run {RUN_NAME}: actor/ppo_kl is {VALUE} (threshold {config.kl_spike_threshold}).",
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
        expr=f"{ENTROPY} < {config.entropy_collapse_threshold}",
        for_=config.entropy_collapse_for,
        summary="Policy entropy is near zero: the model has collapsed onto a few answers.",
        description=f"Run {RUN_NAME}: actor/entropy is {VALUE} (threshold {config.entropy_collapse_threshold}).",
        meaning="Mode collapse: the policy samples nearly deterministically, so exploration stops and reward "
                "usually plateaus. Entropy declining slowly is normal; near zero is not.",
        next_steps=(
            "Look at sample responses of recent steps: are they identical or repetitive?",
            "Raise the entropy bonus (entropy_coeff) or lower the KL penalty; consider a higher rollout "
            "temperature.",
        ),
    )
    nan = Alert(
        name="VerlNaNMetrics",
        severity=Severity.CRITICAL,
        expr="\nor\n".join(
            f'label_replace({name}{{verl}} != {name}{{verl}}, "metric", "{name}", "", "")' for name in NAN_WATCHED),
        for_=config.nan_for,
        summary="A training loss or statistic is NaN: the weights are likely corrupted.",
        description=f"Run {RUN_NAME}: {{{{ $labels.metric }}}} is NaN.",
        meaning="NaN in the loss, grad norm, KL or entropy means an overflow or a division by zero in the "
                "update; once NaN reaches the weights every later step is wasted compute.",
        next_steps=(
            "Find the first NaN step in the step log; check grad norm and KL just before it.",
            "Resume from the last good checkpoint; with bf16/fp16 check loss scaling, lower the learning rate, "
            "and look for empty or zero-length responses in that batch.",
        ),
    )
    return RuleGroup("verl-stability", (*baselines, divergence, kl_spike, entropy_collapse, nan))
