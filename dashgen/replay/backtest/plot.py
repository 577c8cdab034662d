"""`dashgen backtest --plot`: each alert that fired in a lane of its own, with the signals it reads.

The picture is computed first as data (`run_plot`: lanes, bands, the steps shown), then drawn:
- one lane per alert that fired, most severe first, then by onset; a lane draws the run's series
  the alert reads (through its recordings: a baseline's source, not the baseline), one row each,
  so the signal that failed is on the picture whatever it is;
- a band per firing interval, in the severity's colour; its end is marked as what it was: a
  recovery (the condition stopped holding while the run still logged steps) or the run's end
  (still firing when the data ended, or resolved only after the last step, when the exporter
  stopped serving);
- the steps shown zoomed to the alerts: from before the first onset to after the last end, with
  as much context as the alerts took (at least MIN_CONTEXT_STEPS), so a 12-step collapse at the
  end of a long run fills half the axis instead of a sliver;
- a run where no alert fired shows its key signals (QUIET_SIGNALS) in one lane, over the whole run.
"""

from __future__ import annotations

from pathlib import Path

from dashgen.records import record
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.backtest.evaluation import SEVERITY_ORDER, AlertOutcome, Firing, RunOutcome
from dashgen.replay.matplotlib_check import require_matplotlib

QUIET_SIGNALS = ("verl_critic_score_mean", "verl_actor_ppo_kl", "verl_actor_entropy", "verl_actor_grad_norm")
SEVERITY_COLOURS = {"critical": "tab:red", "warning": "tab:orange", "info": "tab:blue"}
# The step counters an alert reads to skip a warm-up: drawn only when it reads nothing else (a stall).
STEP_COUNTERS = frozenset({"verl_training_global_step", "verl_training_epoch"})
# The least context shown before the first onset (and after a recovery), in steps.
MIN_CONTEXT_STEPS = 10
RECOVERED, RUN_ENDED = "recovered", "run ended"


@record
class Band:
    start_step: int
    end_step: int  # the last step it covers: the step shown when it ended, or the run's last
    ended: str  # RECOVERED or RUN_ENDED


@record
class Lane:
    title: str  # the alert's name
    severity: str
    signals: tuple[str, ...]  # the run's series drawn in it, one row each
    bands: tuple[Band, ...]


@record
class RunPlot:
    run: RecordedRun
    lanes: tuple[Lane, ...]
    steps: tuple[int, int]  # the first and last step shown


def run_plot(outcome: RunOutcome) -> RunPlot:
    """What the plot of one run shows: its lanes, in order, and the steps they are zoomed to."""
    run = outcome.run
    held = {name for values in run.values for name in values}
    by_alert: dict[str, list[AlertOutcome]] = {}
    for alert in outcome.alerts:
        if alert.firing:
            by_alert.setdefault(alert.alertname, []).append(alert)
    lanes = [Lane(name, group[0].severity, _drawn(group[0].signals, held),
                  tuple(sorted((_band(firing, run) for alert in group for firing in alert.firing),
                               key=lambda band: band.start_step)))
             for name, group in by_alert.items()]
    lanes.sort(key=lambda lane: (SEVERITY_ORDER.get(lane.severity, len(SEVERITY_ORDER)), lane.bands[0].start_step,
                                 lane.title))
    if not lanes:
        quiet = tuple(signal for signal in QUIET_SIGNALS if signal in held)
        return RunPlot(run, (Lane("no alert fired", "", quiet, ()),), (run.steps[0], run.steps[-1]))
    return RunPlot(run, tuple(lanes), _zoom(run, [band for lane in lanes for band in lane.bands]))


def _drawn(signals: tuple[str, ...], held: set[str]) -> tuple[str, ...]:
    logged = tuple(signal for signal in signals if signal in held)
    return tuple(signal for signal in logged if signal not in STEP_COUNTERS) or logged


def _band(firing: Firing, run: RecordedRun) -> Band:
    # Resolved after the last step: the values stood still, the exporter went away; no recovery.
    ended_by_run = firing.end is None or firing.end > run.times[-1]
    end_step = run.steps[-1] if firing.end_step is None else firing.end_step
    return Band(firing.start_step, end_step, RUN_ENDED if ended_by_run else RECOVERED)


def _zoom(run: RecordedRun, bands: list[Band]) -> tuple[int, int]:
    onset = min(band.start_step for band in bands)
    last_end = max(band.end_step for band in bands)
    context = max(MIN_CONTEXT_STEPS, last_end - onset)
    return max(run.steps[0], onset - context), min(run.steps[-1], last_end + context)


def plot(outcomes: list[RunOutcome], path: Path) -> None:
    """One column per run, its lanes stacked, each signal a row of its own."""
    require_matplotlib("--plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = [run_plot(outcome) for outcome in outcomes]
    rows_of = [[(lane, signal) for lane in run.lanes for signal in lane.signals or ("",)] for run in plots]
    height = max(len(rows) for rows in rows_of)
    figure, axes = plt.subplots(height, len(plots), squeeze=False, figsize=(9 * len(plots), 1.7 * height + 0.8))
    for column, (shown, rows) in enumerate(zip(plots, rows_of)):
        first, last = shown.steps
        for row, (lane, signal) in enumerate(rows):
            ax = axes[row][column]
            _draw_row(ax, shown.run, lane, signal, first, last)
            if row == 0 or rows[row - 1][0] is not lane:
                ax.set_title(f"{lane.title} ({lane.severity})" if lane.severity else lane.title, loc="left",
                             fontsize=9, color=SEVERITY_COLOURS.get(lane.severity, "black"), fontweight="bold")
        for row in range(len(rows), height):
            axes[row][column].set_visible(False)
        axes[len(rows) - 1][column].set_xlabel("step")
        whole = (shown.run.steps[0], shown.run.steps[-1])
        zoom = "" if (first, last) == whole else f", steps {first}-{last} of {whole[0]}-{whole[1]}"
        figure.text((column + 0.5) / len(plots), 0.995, f"{shown.run.name}{zoom}", ha="center", va="top",
                    fontsize=10)
    figure.tight_layout(rect=(0, 0, 1, 0.98))
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _draw_row(ax, run: RecordedRun, lane: Lane, signal: str, first: int, last: int) -> None:
    colour = SEVERITY_COLOURS.get(lane.severity, "tab:gray")
    if signal:
        points = [(step, values[signal]) for step, values in zip(run.steps, run.values)
                  if signal in values and first <= step <= last]
        ax.plot([p[0] for p in points], [p[1] for p in points], linewidth=0.9, color="black")
        ax.set_ylabel(signal.removeprefix("verl_"), fontsize=7)
    else:
        ax.text(0.5, 0.5, "reads no series of the step log", transform=ax.transAxes, ha="center", va="center",
                fontsize=8, color="gray")
    for band in lane.bands:
        ax.axvspan(band.start_step, band.end_step, alpha=0.18, linewidth=0, color=colour)
        ax.axvline(band.start_step, color=colour, linewidth=1.2)
        if band.ended == RECOVERED:
            ax.axvline(band.end_step, color="tab:green", linewidth=1.2)
            ax.annotate("recovered", (band.end_step, 1), xycoords=("data", "axes fraction"), fontsize=6,
                        color="tab:green", ha="left", va="top")
        else:
            ax.annotate("run ended \u2192", (band.end_step, 1), xycoords=("data", "axes fraction"), fontsize=6,
                        color=colour, ha="right", va="top")
    ax.set_xlim(first, last)
    ax.tick_params(labelsize=7)
