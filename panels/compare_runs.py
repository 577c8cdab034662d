"""Compare runs by training step: the signals one reads in wandb, one line per picked run.

Every panel is a StepChart (Grafana's XY chart): the value against `training/global_step`,
so runs started days apart, or resumed, overlay step for step.
"""

from dashgen.config import Config
from dashgen.model import Dashboard, DashboardLink, Query, Row, StepChart
from dashgen_panels.verl_training import NATS, REWARD, RUN_VARIABLES, TOKENS

# Each value keeps exactly the run's labels, so a sample pairs with the step logged at its time.
RUN = "job, instance, project, experiment"

reward = StepChart("Reward (score)", Query("verl_critic_score_mean{$run}"), unit=REWARD,
                   description="critic/score/mean: the batch's mean sequence score, before any KL penalty.")
validation = StepChart(
    "Validation score",
    Query(f"avg by ({RUN}) (verl_val_core{{$run}})"),
    unit=REWARD,
    description="verl's core validation results (val-core/...), averaged over data sources and metrics; "
                "flat between test steps. The main dashboard shows each data source.",
)
kl = StepChart("KL divergence (PPO)", Query("verl_actor_ppo_kl{$run}"), unit=NATS,
               description="actor/ppo_kl: drift within one PPO update.")
entropy = StepChart("Policy entropy", Query("verl_actor_entropy{$run}"), unit=NATS,
                    description="actor/entropy: mean token entropy.")
grad_norm = StepChart("Actor grad norm", Query("verl_actor_grad_norm{$run}"),
                      width=8, description="actor/grad_norm, before clipping.")
response_length = StepChart("Response length", Query("verl_response_length_mean{$run}"),
                            unit=TOKENS, width=8, description="response_length/mean: tokens per response.")
step_time = StepChart("Step time", Query("verl_timing_step_seconds{$run}"), unit="s",
                      width=8, description="timing_s/step: wall time of the whole step.")


def dashboard(config: Config) -> Dashboard:
    return Dashboard(
        uid="verl-compare-runs",
        title="verl runs compared by step",
        description="The picked verl runs overlaid by training step, as wandb shows them. Rendered by dashgen.",
        tags=("verl", "rl", "dashgen"),
        variables=RUN_VARIABLES,
        links=(DashboardLink("verl RL training", "verl-training"),),
        rows=(
            Row("Learning", (reward, validation, kl, entropy)),
            Row("Optimisation and cost", (grad_norm, response_length, step_time)),
        ),
    )
