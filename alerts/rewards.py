"""Rewards: a cliff (reward falls far below its recent level) and stagnation (it stops rising)."""

from alerts._common import RUN_NAME, SCORE, VALUE, complete_baseline_median

from dashgen.config import Config
from dashgen.model import Alert, Recording, RuleGroup, Severity

SCORE_BASELINE = "verl:critic_score_mean:baseline_median"


def rules(config: Config) -> RuleGroup:
    base, recent = config.reward_cliff_baseline_window, config.reward_cliff_recent_window
    drop = config.reward_cliff_drop_fraction
    window = config.reward_stagnation_window
    baseline = Recording(
        SCORE_BASELINE, complete_baseline_median(SCORE, base, recent),
        f"Median reward (critic/score/mean) over {base}, ending {recent} ago, once that window is full")
    cliff = Alert(
        name="VerlRewardCliff",
        severity=Severity.CRITICAL,
        expr=f"{SCORE} < {SCORE_BASELINE} - {drop:g} * abs({SCORE_BASELINE})",
        for_=config.reward_cliff_for,
        summary="Reward fell far below its level of the last hour and stays there.",
        description=(f"Run {RUN_NAME}: critic/score/mean is {VALUE}, more than {drop:.0%} of its magnitude "
                     f"below its median of the {base} before the last {recent}."),
        meaning="A sudden, sustained reward drop: the policy has unlearned something (often after a "
                "divergent update), the reward function or its data changed, or the critic went wrong.",
        next_steps=(
            "Look at the critic value loss and explained variance first: a critic that blew up produces "
            "bad advantages and drags the policy down (PPO only; GRPO has no critic).",
            "Check VerlTrainingDivergence and the KL, grad norm and entropy panels around the same step.",
            "Check that the reward function and the data loader did not change or fail (e.g. a reward "
            "server returning zeros); compare response length and truncation.",
        ),
    )
    stagnation = Alert(
        name="VerlRewardStagnation",
        severity=Severity.INFO,
        expr=(f"quantile_over_time(0.5, {SCORE}[{window}])\n"
              f"  - quantile_over_time(0.5, {SCORE}[{window}] offset {window})\n"
              f"  < {config.reward_stagnation_min_gain:g}"),
        for_=config.reward_stagnation_for,
        summary="Reward has stopped rising.",
        description=(f"Run {RUN_NAME}: the median reward of the last {window} is {VALUE} above that of the "
                     f"{window} before (less than {config.reward_stagnation_min_gain:g}), "
                     f"for {config.reward_stagnation_for}."),
        meaning="Training has plateaued. Late in a run that may simply be convergence; early, it usually "
                "means too little exploration, too weak a learning signal, or a task too hard for the model.",
        next_steps=(
            "Check entropy (collapsed?) and the PPO clip fraction (are updates doing anything?).",
            "Look at the score's min/max spread: if every sample gets the same reward, GRPO advantages are "
            "zero and nothing is learned; adjust the data difficulty or the reward.",
            "Decide whether to stop the run and save the GPUs.",
        ),
    )
    return RuleGroup("verl-rewards", (baseline, cliff, stagnation))
