"""`dashgen backtest --plot`: the run's key signals with the alerts' firing intervals shaded."""

from __future__ import annotations

from pathlib import Path

from dashgen.replay.matplotlib_check import require_matplotlib
from dashgen.replay.backtest.evaluation import SEVERITY_ORDER, RunOutcome


PLOTTED = (("verl_critic_score_mean", "reward (critic/score/mean)"), ("verl_actor_ppo_kl", "KL (actor/ppo_kl)"),
           ("verl_actor_entropy", "entropy (actor/entropy)"), ("verl_actor_grad_norm", "grad norm (actor/grad_norm)"))
SEVERITY_COLOURS = {"critical": "tab:red", "warning": "tab:orange", "info": "tab:blue"}


def plot(outcomes: list[RunOutcome], path: Path) -> None:
    """Reward, KL, entropy and grad norm over the steps, one column per run, firing intervals shaded."""
    require_matplotlib("--plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(PLOTTED), len(outcomes), sharex="col", squeeze=False,
                                figsize=(8 * len(outcomes), 2.4 * len(PLOTTED)))
    for column, outcome in enumerate(outcomes):
        run = outcome.run
        for row, (metric, title) in enumerate(PLOTTED):
            ax = axes[row][column]
            points = [(step, values[metric]) for step, values in zip(run.steps, run.values) if metric in values]
            ax.plot([p[0] for p in points], [p[1] for p in points], linewidth=0.8, color="black")
            ax.set_ylabel(title, fontsize=8)
            # Critical alerts last, so they are drawn on top.
            for alert in sorted(outcome.alerts, key=lambda a: -SEVERITY_ORDER.get(a.severity, 9)):
                for firing in alert.firing:
                    end = run.steps[-1] if firing.end_step is None else firing.end_step
                    ax.axvspan(firing.start_step, end, alpha=0.2, linewidth=0,
                               color=SEVERITY_COLOURS.get(alert.severity, "tab:gray"), label=alert.alertname)
        axes[0][column].set_title(run.name)
        axes[-1][column].set_xlabel("step")
        handles = {label: handle for handle, label in zip(*axes[0][column].get_legend_handles_labels())}
        if handles:
            axes[0][column].legend(handles.values(), handles.keys(), fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
