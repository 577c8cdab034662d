"""Progress: the run stops making steps, its trainer crashes, or its metrics stop arriving.

A run that ended (finished, exited_without_steps, crashed or stopped: `verl_run_state`, see
dashgen/lifecycle.py) is silent by design: it is neither stalled nor absent.
"""

from dataclasses import dataclass

from dashgen.catalog import LAST_STEP_METRIC, RUN_STATE_METRIC, STEP_WINDOWS_INFO_METRIC
from dashgen.conditions import RUN_NAME
from dashgen.config import AreaConfig, Config, ConfigError, Duration, Factor, Interval
from dashgen.lifecycle import RunPhase
from dashgen.model import ON_RUN, EXPORTER_LABELS, Alert, Inhibition, Recording, RuleGroup, Severity

LAST_STEP = f"{LAST_STEP_METRIC}{{$verl}}"
STEP_SECONDS, SAVE_SECONDS = "verl_timing_step_seconds{$verl}", "verl_timing_save_checkpoint_seconds{$verl}"
# How far the last step moved within one evaluation: the gap between two step-log lines, recorded
# at the evaluations a new one arrived (none at the others); it never measures the silence going
# on now. Its samples are the gaps themselves: a day of them is read as a range, not re-evaluated
# minute by minute as a subquery of the nonzero ones (1,440 evaluations a run at every cycle).
LINE_GAP = "verl:step_log:line_gap_seconds"
ENDED = f'{RUN_STATE_METRIC}{{$verl, state!="{RunPhase.RUNNING.value}"}} == 1'
# The run state once per evaluation: the end alerts look back `run_end_memory` (24h) for the
# last state an exporter served, and read 4x fewer samples here than in the 15s scrapes.
RUN_STATE_SAMPLED = "verl:run_state:sampled"
# The silence past which VerlTrainingStalled may page a run, for the on-call panel's threshold.
STALL_LIMIT = "verl:stall:silence_limit_seconds"


@dataclass(frozen=True)
class ProgressConfig(AreaConfig, area="progress"):
    """The tunables of alerts/progress.py: the config file's `progress:` section."""

    # VerlTrainingStalled: no new step for at least this long...
    stall_min_silence: Interval = "5m"
    # ... and for longer than this many median step times of the last stall_step_time_window...
    stall_step_time_factor: Factor = 3.0
    # The window those median step times are taken over.
    stall_step_time_window: Interval = "2h"
    # ... and than this many times the longest gap between two step-log lines (a validation or a
    # checkpoint save, or a log written every N steps) of the last stall_longest_gap_window...
    stall_longest_gap_factor: Factor = 1.5
    # The window that longest gap is taken over (longer than stall_step_time_window).
    stall_longest_gap_window: Interval = "24h"
    # ... and than this many median gaps between two step-log lines of that window: two gaps and
    # half of one, so that one line lost from the log (a logger's hiccup, a skipped write) is not
    # taken for a hung worker when the log is written every N steps.
    stall_lost_line_factor: Factor = 2.5
    # ... and, until the run has logged a checkpoint save (timing_s/save_checkpoint) within that
    # window and has stall_step_time_window of history, for at least this long: a first save may
    # take far longer than any step before it, and a log written every N steps shows its gaps late.
    stall_silence_before_first_save: Interval = "15m"
    # How long all of that must hold before VerlTrainingStalled pages.
    stall_for: Duration = "1m"
    # VerlMetricsAbsent: the exporter of a running run has not been scraped for this long.
    metrics_absent_for: Duration = "5m"
    # How long Prometheus remembers the last state of an exporter that is gone: VerlRunCrashed
    # stays firing this long after a crashed run's exporter exits (unless the run restarts),
    # and VerlMetricsAbsent fires for a vanished exporter whose run was still running.
    run_end_memory: Interval = "24h"
    # VerlStepWindowsNotServed: how long a run's exporter must serve other step windows than the
    # rules read (a rolling deploy updates the rules and the exporters one after the other).
    step_windows_not_served_for: Duration = "15m"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.stall_longest_gap_window <= self.stall_step_time_window:
            raise ConfigError(f"stall_longest_gap_window = {self.stall_longest_gap_window!r} must be longer than "
                              f"stall_step_time_window ({self.stall_step_time_window}): the run's history is "
                              f"counted within it")


def _stall_silence_limit(config: Config) -> str:
    """The silence (seconds) past which VerlTrainingStalled may page a run: the longest of the bounds its
    expression waits out, read from the run's own steps (the on-call panel's red threshold)."""
    tunables = config.area(ProgressConfig)
    window, gap_window = tunables.stall_step_time_window, tunables.stall_longest_gap_window
    first_save = (f"{tunables.stall_silence_before_first_save.seconds:g} + 0 * {LAST_STEP}\n"
                  f"   unless on({ON_RUN}) (present_over_time({SAVE_SECONDS}[{gap_window}])\n"
                  f"      and on({ON_RUN}) present_over_time({LAST_STEP}[{gap_window - window}] offset {window}))")
    bounds = (
        f"{tunables.stall_step_time_factor:g} * quantile_over_time(0.5, {STEP_SECONDS}[{window}])",
        f"{tunables.stall_longest_gap_factor:g} * max_over_time({LINE_GAP}[{gap_window}])",
        f"{tunables.stall_lost_line_factor:g} * "
        f"quantile_over_time(0.5, {LINE_GAP}[{gap_window}])",
        first_save,
    )
    # Each bound under a label of its own, so that `or` keeps all four for the max.
    labelled = "\nor ".join(f'label_replace({bound}, "bound", "{index}", "", "")' for index, bound in enumerate(bounds))
    return f"clamp_min(\nmax by ({ON_RUN}) (\n{labelled}\n),\n{tunables.stall_min_silence.seconds:g})"


def rules(config: Config) -> RuleGroup:
    tunables = config.area(ProgressConfig)
    factor, window = tunables.stall_step_time_factor, tunables.stall_step_time_window
    gap_factor, gap_window = tunables.stall_longest_gap_factor, tunables.stall_longest_gap_window
    lost_line_factor = tunables.stall_lost_line_factor
    silence = f"time() - {LAST_STEP}"
    stalled = Alert(
        name="VerlTrainingStalled",
        severity=Severity.CRITICAL,
        # Silent longer than the run's own steps allow: the longest of the floor and what its step times
        # and log gaps allow (STALL_LIMIT, recorded earlier in this group; the on-call panel's threshold reads it).
        expr=(f"(\n"
              f"({silence} > on({ON_RUN}) {STALL_LIMIT})\n"
              f"unless on({ON_RUN})\n"
              f"({ENDED})\n"
              f")\n"
              # The run's rhythm is learnt from its own log first: no page before a gap between two
              # of its lines has been seen (a log written every 20 steps shows its first gap late).
              f"and on({ON_RUN})\n"
              f"(max_over_time({LINE_GAP}[{gap_window}]) > 0)"),
        for_=tunables.stall_for,
        summary="No new training step for much longer than a step usually takes: a worker is probably hung.",
        description=(f"Run {RUN_NAME}: the last step was read {{{{ $value | humanizeDuration }}}} ago: more than "
                     f"{tunables.stall_min_silence} ({tunables.stall_silence_before_first_save} before the run's "
                     f"first checkpoint save and {window} of history), {factor:g}x the median step time of the last {window}, "
                     f"{gap_factor:g}x the longest gap between two of its log lines in the last {gap_window} and "
                     f"{lost_line_factor:g}x their median gap."),
        meaning="The exporter is up, the run has not ended (finished, crashed or stopped), but verl wrote no "
                "step, although the run has shown its rhythm (two step-log lines at least). The usual cause in Ray-based RL is one hung "
                "worker (an NCCL collective waiting forever, a stuck rollout request, a dead node) that "
                "blocks every other rank, or a checkpoint save or validation that takes far longer than usual.",
        healthy_runs=("The silence it waits for is the longest of 5m, three median step times, 1.5x the longest "
                      "gap between two of the run's lines in the last day and 2.5x their median gap (one line lost "
                      "from a log written every N steps), so the gaps a healthy run shows (a "
                      "validation, a checkpoint save, a log written every N steps) widen it; before the first save "
                      "it waits at least 15m, and a run that has not shown its rhythm yet (two lines) is not judged."),
        next_steps=(
            "Look at the Per-rank heatmap: a GPU at 0% while others wait at 100% (or all at 0%) points at "
            "the stuck rank.",
            "`ray status` and the Ray dashboard: dead actors or nodes; py-spy dump the trainer and workers.",
            "Check timing_s/save_checkpoint and timing_s/testing of the previous steps; check disk space.",
        ),
    )
    memory = tunables.run_end_memory
    line_gap = Recording(LINE_GAP, f"{LAST_STEP} - {LAST_STEP} offset {config.rule_interval} > 0",
                         "Seconds between the newest step-log line and the one before, at the evaluation it arrived "
                         "(no sample at the others)")
    stall_limit = Recording(STALL_LIMIT, _stall_silence_limit(config),
                            "Seconds of silence past which VerlTrainingStalled may page the run: the longest of its "
                            "floor and the bounds the run's step times and log gaps set")
    sampled_state = Recording(RUN_STATE_SAMPLED, f"{RUN_STATE_METRIC}{{$verl}}",
                              "verl_run_state sampled once per rule evaluation, for look-backs of hours")
    absent = Alert(
        name="VerlMetricsAbsent",
        severity=Severity.CRITICAL,
        # Only while the newest run the exporter served was still running: a finished run's
        # exporter may go away, and one that never came up shows on Prometheus' /targets page.
        expr=(f"up{{$verl}} == 0\n"
              f"and on(job, instance)\n"
              f'(max by (job, instance) (last_over_time({RUN_STATE_SAMPLED}{{state="{RunPhase.RUNNING.value}"}}'
              f"[{memory}])) == 1)"),
        for_=tunables.metrics_absent_for,
        summary="Prometheus cannot scrape the verl exporter of a running run: training metrics are not arriving.",
        description=(f"Prometheus has failed to scrape {{{{ $labels.instance }}}} (job {config.verl_job}) "
                     f"for {tunables.metrics_absent_for}, and the run it served last was still running."),
        meaning="Either the exporter (`dashgen export`) stopped while its run was still running, its host is "
                "down, or the network between Prometheus and it is. Every other verl alert is blind while this "
                "fires. An exporter that goes away after its run finished, crashed or was stopped does not fire "
                f"this; nor does one whose last run Prometheus saw more than {memory} ago.",
        healthy_runs=("It reads whether Prometheus can scrape the exporter, not a training signal: no noise, rhythm "
                      "or phase of a run moves it. An exporter that goes away after its run finished, crashed or "
                      "was stopped is a run's end, not an absence, and one whose last run is more than 24h old is "
                      "forgotten."),
        next_steps=(
            "Check that `dashgen export` is running next to the trainer and listening on the scraped address.",
            "Check the target on Prometheus' /targets page for the scrape error.",
        ),
    )
    crashed = Alert(
        name="VerlRunCrashed",
        severity=Severity.CRITICAL,
        expr=f'last_over_time({RUN_STATE_SAMPLED}{{state="{RunPhase.CRASHED.value}"}}[{memory}]) == 1',
        summary="The trainer exited with an error.",
        description=(f"Run {RUN_NAME}: the trainer supervised by `dashgen export` exited non-zero or was killed "
                     f"(not by a stop sent through the exporter)."),
        meaning="The training process is gone: an exception (CUDA out-of-memory, NCCL error, a failed Ray "
                "actor), a kill by the scheduler or the OOM killer. It keeps firing until the run is restarted "
                f"under the same project and experiment, or for {memory} after its exporter went away.",
        healthy_runs=("It reads the exit code the exporter saw the trainer leave with: a finished run exits 0, and "
                      "a run told its total steps, or stopped by `dashgen act`, ends finished or stopped, never "
                      "crashed."),
        next_steps=(
            "Read the end of the trainer's output (the exporter passes it through) for the exception.",
            "Check `dmesg` for the OOM killer, `ray status` for dead nodes, and the scheduler's log for a kill.",
            "Resume from the last checkpoint once the cause is fixed (trainer.resume_mode=auto).",
        ),
    )
    not_served = Alert(
        name="VerlStepWindowsNotServed",
        severity=Severity.WARNING,
        # `{$step_windows}`: the digest of the step windows these rules read, filled in by the build.
        expr=f"{LAST_STEP}\nunless on({ON_RUN})\n{STEP_WINDOWS_INFO_METRIC}{{$verl, $step_windows}}",
        for_=tunables.step_windows_not_served_for,
        summary="The run's exporter does not compute the step windows these rules read: the alerts that count "
                "in steps are blind for it.",
        description=(f"Run {RUN_NAME}: its exporter serves the step windows of another build of the rules, or "
                     f"none (verl_exporter_step_windows_info has another digest, or is absent)."),
        meaning="The exporter computes the statistics over the run's last steps that the rules read "
                "(rendered/exporter/step-statistics.yaml, as it read it when it started). It was started outside "
                "the project folder, before `dashgen build` changed the list, or it is a library logger given no "
                "list. VerlEntropyCollapse, VerlRewardCliff and the other alerts that count in steps read "
                "nothing for this run until it serves the list these rules were built with.",
        healthy_runs=("It compares the fingerprint of the statistics the exporter serves with the one the rules "
                      "were built with, not a training signal: an exporter started in the project folder after the "
                      "last build serves the same list whatever its run does."),
        next_steps=(
            "Run `dashgen build` and deploy its rendered/ to Prometheus and to the exporter's host together.",
            "Restart `dashgen export` from the project folder (or with --root): a restart loses nothing, it "
            "reads back the steps the windows need from the log.",
            "With VerlPrometheusLogger, pass step_statistics=load_statistics(path) of the same build.",
        ),
        untested="its fixture needs the digest of the build: tests/compiler/test_step_windows_served.py writes it",
    )
    return RuleGroup("verl-progress", (line_gap, stall_limit, sampled_state, stalled, absent, crashed, not_served))


def inhibitions(config: Config) -> tuple[Inhibition, ...]:
    return (
        Inhibition("VerlTrainingStalled", ("VerlRewardStagnation",),
                   why="A run that makes no steps has a flat reward curve."),
        # VerlMetricsAbsent carries only the exporter's labels, so "the same run" is the same exporter.
        Inhibition("VerlMetricsAbsent", ("VerlTrainingStalled", "VerlRewardStagnation"), equal=EXPORTER_LABELS,
                   why="With no samples arriving, progress cannot be judged; the missing metrics are the problem."),
        Inhibition("VerlRunCrashed", ("VerlTrainingStalled", "VerlMetricsAbsent"), equal=EXPORTER_LABELS,
                   why="A trainer that exited with an error writes no more steps, and its exporter may stop "
                       "with it; the crash is the cause."),
    )
