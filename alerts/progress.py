"""Progress: the run stops making steps, or its metrics stop arriving at all."""

from alerts._common import RUN, RUN_NAME

from dashgen.config import Config, duration_seconds
from dashgen.model import Alert, RuleGroup, Severity

LAST_STEP = "verl_exporter_last_step_timestamp_seconds{verl}"


def rules(config: Config) -> RuleGroup:
    min_silence = duration_seconds(config.stall_min_silence)
    factor, window = config.stall_step_time_factor, config.stall_step_time_window
    stalled = Alert(
        name="VerlTrainingStalled",
        severity=Severity.CRITICAL,
        # Silent longer than the floor, unless still within `factor` typical step times.
        expr=(f"(time() - {LAST_STEP} > {min_silence:g})\n"
              f"unless on({RUN})\n"
              f"(time() - {LAST_STEP}\n"
              f"   <= {factor:g} * quantile_over_time(0.5, verl_timing_step_seconds{{verl}}[{window}]))"),
        for_=config.stall_for,
        summary="No new training step for much longer than a step usually takes: a worker is probably hung.",
        description=(f"Run {RUN_NAME}: the last step was read {{{{ $value | humanizeDuration }}}} ago "
                     f"(more than {config.stall_min_silence} and {factor:g}x the median step time of the "
                     f"last {window})."),
        meaning="The exporter is up but verl wrote no step. The usual cause in Ray-based RL is one hung "
                "worker (an NCCL collective waiting forever, a stuck rollout request, a dead node) that "
                "blocks every other rank, or a checkpoint save or validation that takes far longer than usual.",
        next_steps=(
            "Look at the Per-rank heatmap: a GPU at 0% while others wait at 100% (or all at 0%) points at "
            "the stuck rank.",
            "`ray status` and the Ray dashboard: dead actors or nodes; py-spy dump the trainer and workers.",
            "Check timing_s/save_checkpoint and timing_s/testing of the previous steps; check disk space.",
        ),
    )
    absent = Alert(
        name="VerlMetricsAbsent",
        severity=Severity.CRITICAL,
        expr="up{verl} == 0",
        for_=config.metrics_absent_for,
        summary="Prometheus cannot scrape the verl exporter: training metrics are not arriving.",
        description=(f"Prometheus has failed to scrape {{{{ $labels.instance }}}} (job {config.verl_job}) "
                     f"for {config.metrics_absent_for}."),
        meaning="Either the exporter (`dashgen export`) stopped, its host is down, or the network between "
                "Prometheus and it is. Every other verl alert is blind while this fires.",
        next_steps=(
            "Check that `dashgen export` is running next to the trainer and listening on the scraped address.",
            "Check the target on Prometheus' /targets page for the scrape error.",
        ),
    )
    return RuleGroup("verl-progress", (stalled, absent))
