"""Vocabulary shared by the alert modules: the run's labels, series, and template text."""

# The labels that identify one training run; composite alerts match signals on all of them.
RUN = "job, instance, project, experiment"

KL = "verl_actor_ppo_kl{verl}"
GRAD_NORM = "verl_actor_grad_norm{verl}"
ENTROPY = "verl_actor_entropy{verl}"
SCORE = "verl_critic_score_mean{verl}"

# Prometheus alert templates.
RUN_NAME = "{{ $labels.project }}/{{ $labels.experiment }}"
VALUE = '{{ printf "%.4g" $value }}'


def complete_baseline_median(series: str, baseline: str, recent: str) -> str:
    """Median of `series` over `baseline`, ending `recent` ago; empty until that window is
    covered from its start, so nothing is compared against a run's first few steps."""
    return (f"quantile_over_time(0.5, {series}[{baseline}] offset {recent})\n"
            f"  and present_over_time({series}[{recent}] offset {baseline})")


def held_baseline(rolling: str, hold: str, fault_raises: bool) -> str:
    """The pre-fault level of a rolling baseline: its lowest value over `hold` for a signal a
    fault raises, its highest for one a fault lowers. The rolling median absorbs a lasting
    fault within its window; this keeps the level from before it for `hold`."""
    return f"{'min' if fault_raises else 'max'}_over_time({rolling}[{hold}])"


def smoothed(series: str, window: str) -> str:
    """Median over `window`: one odd step (a spike, a dip) changes nothing."""
    return f"quantile_over_time(0.5, {series}[{window}])"
