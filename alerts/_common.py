"""Vocabulary shared by the alert modules: the run's labels, series, and template text."""

from dataclasses import dataclass

from dashgen.config import Config
from dashgen.model import Recording, RuleGroup

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


@dataclass(frozen=True)
class HeldBaseline:
    step_extreme: Recording  # evaluated every baseline_hold_step, in a group of its own
    held: Recording


def held_baseline(rolling: str, held: str, config: Config, fault_raises: bool) -> HeldBaseline:
    """The pre-fault level of a rolling baseline: its lowest value over `baseline_hold_window`
    for a signal a fault raises, its highest for one a fault lowers. The rolling median absorbs
    a lasting fault within its window; this keeps the level from before it for that long.

    Read from the rolling baseline's extreme of each `baseline_hold_step`, recorded by a group
    of that interval, so a cycle reads a tenth of the samples a look-back over every evaluation
    would."""
    extreme, word = ("min", "low") if fault_raises else ("max", "high")
    step, window = config.baseline_hold_step, config.baseline_hold_window
    name = rolling.rsplit(":", 1)[0] + f":baseline_{word}"
    return HeldBaseline(
        Recording(name, f"{extreme}_over_time({rolling}[{step}])",
                  f"{'Lowest' if fault_raises else 'Highest'} {rolling} of the last {step}"),
        Recording(held, f"{extreme}_over_time({name}[{window}])",
                  f"{'Lowest' if fault_raises else 'Highest'} {rolling} of the last {window}: the level "
                  f"before a fault"))


def hold_group(name: str, baselines: list[HeldBaseline], config: Config) -> RuleGroup:
    """The group that records the held baselines' per-step extremes."""
    return RuleGroup(f"{name}-hold", tuple(b.step_extreme for b in baselines), interval=config.baseline_hold_step)


def smoothed(series: str, window: str) -> str:
    """Median over `window`: one odd step (a spike, a dip) changes nothing."""
    return f"quantile_over_time(0.5, {series}[{window}])"
