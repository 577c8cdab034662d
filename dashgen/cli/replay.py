"""Commands on recorded runs: backfill, backtest, preview."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dashgen.cli.options import DEFAULT_GRACE, DEFAULT_HUNG_HOLD, built_step_statistics, config_option, root_option
from dashgen.compiler.sections import load_config
from dashgen.config import Config
from dashgen.errors import BuildError

if TYPE_CHECKING:
    from dashgen.replay.backfill import Timing

def _timing_options(command):
    options = [
        click.option("--start", default=None,
                     help="When the run began: Unix seconds or RFC 3339 (2025-05-01T12:00:00Z; no zone: UTC). "
                          "Default: the file's modification time minus the run's length."),
        click.option("--scrape-interval", default=None,
                     help="Spacing of the samples, like the exporter's scrapes. Default: the config's "
                          "scrape_interval (15s)."),
        click.option("--default-step-time", default="60s", show_default=True,
                     help="Spacing of steps that log no timing_s/step."),
        click.option("--end", "run_end", type=click.Choice(["finished", "crashed", "hung"]), default=None,
                     help="How the run ended. finished (default) and crashed: the exporter serves that final state "
                          "for the grace period, then goes away. hung (default when --hold is given): it keeps "
                          "serving the last step, so VerlTrainingStalled can fire."),
        click.option("--hold", default=None,
                     help=f"How long the exporter serves after the last step: the grace period of a finished or "
                          f"crashed run (default {DEFAULT_GRACE}), or how long a hung run is watched (default "
                          f"{DEFAULT_HUNG_HOLD})."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


# The steps a replay takes by default, and from how many it says it will take minutes. Each step's
# statistics over steps are computed as the exporter computes them, then every scrape of the run is
# written: on a shared 2-core machine a 20,000-step log took 2 minutes to read and 4.5 to backfill,
# and a 200,000-step one 9 minutes of silence before this bound.
MAX_REPLAY_STEPS = 50_000
LONG_REPLAY_STEPS = 5_000


def _max_steps_option(command):
    return click.option("--max-steps", type=click.IntRange(min=0), default=MAX_REPLAY_STEPS, show_default=True,
                        help="Refuse a run of more step-log lines than this, before replaying any (a longer replay "
                             "takes tens of minutes); 0: no limit.")(command)


def _bounded_replay(command: str, run_paths: list[Path], max_steps: int) -> None:
    """BuildError for a run over --max-steps, said before any is replayed (a whole read would take
    minutes); a note for one long enough to take minutes, so the wait is not silent."""
    from dashgen.replay.backfill import count_lines

    limit = max_steps or math.inf
    for path in run_paths:
        if not path.is_file():
            continue  # the reader says what is wrong with it (or reads an MLflow run's folder)
        lines = count_lines(path, int(min(limit, 10 ** 18)))
        if lines > limit:
            raise BuildError(f"{path}: more than {max_steps:,} step-log lines; a replay of that many takes tens of "
                             f"minutes (every step's statistics are computed, then every scrape written). Give "
                             f"--max-steps with a larger number, or 0, to replay it anyway, or cut the log to the "
                             f"steps you want (e.g. `tail -n 20000`)")
        if lines > LONG_REPLAY_STEPS:
            click.echo(f"dashgen {command}: {path}: {lines:,} step-log lines; replaying them takes minutes",
                       err=True)


# Times a run may start at: from the Unix epoch to the end of year 9999 (what RFC 3339 can spell).
LATEST_START = 253402300799.0


def _parse_time(text: str) -> float:
    from datetime import datetime, timezone

    try:
        when = float(text)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
            when = (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
        except (ValueError, OverflowError, OSError):
            raise BuildError(f"--start {text!r}: expected Unix seconds or RFC 3339, "
                             f"e.g. 2025-05-01T12:00:00Z") from None
    if not (math.isfinite(when) and 0 <= when <= LATEST_START):
        raise BuildError(f"--start {text!r}: not a time between 1970-01-01 and 9999-12-31 "
                         f"(Unix seconds or RFC 3339, e.g. 2025-05-01T12:00:00Z)")
    return when


def replayed_config(config: Config) -> Config:
    """A recorded run is replayed as dashgen's exporter serves it: its rules and panels are judged
    in the exporter's names, whatever metric source the project reads live."""
    from dashgen.sources.chosen import REPLAYED_SOURCE, metric_source

    if metric_source(config) is not REPLAYED_SOURCE:
        click.echo(f"source {config.source}: the run is replayed as dashgen's exporter serves it, and judged by "
                   f"the rules and panels built for source {REPLAYED_SOURCE.name}", err=True)
    return config.with_source(REPLAYED_SOURCE.name)


def _timing(start: str | None, scrape_interval: str | None, default_step_time: str, run_end: str | None,
            hold: str | None, config: Config) -> Timing:
    from dashgen.config import duration_seconds
    from dashgen.replay.backfill import MAX_SCRAPES_PER_RUN, Timing

    run_end = run_end or ("hung" if hold is not None else "finished")
    hold = hold or (DEFAULT_HUNG_HOLD if run_end == "hung" else DEFAULT_GRACE)
    seconds = {}
    for option, text in (("--scrape-interval", scrape_interval or config.scrape_interval),
                         ("--default-step-time", default_step_time), ("--hold", hold)):
        try:
            seconds[option] = duration_seconds(text)
        except ValueError:
            raise BuildError(f"{option} {text!r} is not a Prometheus duration (e.g. 15s, 1m, 2h)") from None
    if seconds["--scrape-interval"] < 1:
        raise BuildError(f"--scrape-interval {scrape_interval or config.scrape_interval}: must be at least 1s")
    if seconds["--default-step-time"] <= 0:
        raise BuildError(f"--default-step-time {default_step_time}: must be longer than 0s")
    if seconds["--hold"] / seconds["--scrape-interval"] > MAX_SCRAPES_PER_RUN:
        raise BuildError(f"--hold {hold}: {seconds['--hold'] / seconds['--scrape-interval']:.3g} scrapes at "
                         f"--scrape-interval {scrape_interval or config.scrape_interval}; at most "
                         f"{MAX_SCRAPES_PER_RUN:,} per run: shorten --hold or lengthen --scrape-interval")
    return Timing(None if start is None else _parse_time(start), seconds["--scrape-interval"],
                  seconds["--default-step-time"], run_end, seconds["--hold"])


def _writable_folder(path: Path, option: str) -> None:
    """`path` is a folder, or can be made one: checked before any long work starts."""
    existing = path
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
    except OSError as exc:  # a name too long, a symlink loop
        raise BuildError(f"{option} {path}: {exc.strerror or exc}") from None
    if not existing.is_dir():
        raise BuildError(f"{option} {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BuildError(f"{option} {path}: cannot write into {existing} (permission denied)")


PLOT_FORMATS = (".png", ".pdf", ".svg")


def _check_plot_path(path: Path) -> None:
    """The plot can be written where it is asked for: checked before the backtest runs."""
    if path.suffix.lower() not in PLOT_FORMATS:
        raise BuildError(f"--plot {path}: name a {', '.join(PLOT_FORMATS)} file")
    try:
        if path.is_dir():
            raise BuildError(f"--plot {path}: is a folder; name a file in it")
        if not path.parent.is_dir():
            raise BuildError(f"--plot {path}: the folder {path.parent} does not exist")
        existed = path.exists()
        # Opened as the plot will be (not truncated; made and removed if new): a name too long, a
        # read-only file system or a file without write permission is refused now, not after the replay.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o666))
    except OSError as exc:
        raise BuildError(f"--plot {path}: cannot be written: {exc.strerror or exc}") from None
    if not existed:
        path.unlink(missing_ok=True)


@click.command()
@click.argument("run_path", metavar="RUN.jsonl", type=click.Path(exists=True, path_type=Path))
@click.option("--tsdb", "tsdb_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the blocks: a Prometheus data directory (read at its next block reload) or a new one.")
@_timing_options
@click.option("--project", default=None, help="Label value; default: the log's parent folder name.")
@click.option("--experiment", default=None, help="Label value; default: the log's file name without .jsonl.")
@click.option("--instance", default=None, help="Label value; default: backfill/<project>/<experiment>.")
@click.option("--unknown-keys/--no-unknown-keys", default=True, show_default=True,
              help="Also backfill keys the catalog does not know, named by the same rule.")
@_max_steps_option
@root_option
@config_option
def backfill(run_path: Path, tsdb_dir: Path, start: str | None, scrape_interval: str | None,
             default_step_time: str, run_end: str | None, hold: str | None, project: str | None,
             experiment: str | None, instance: str | None, unknown_keys: bool, max_steps: int, root: Path,
             config_path: Path | None) -> None:
    """Turn a recorded verl run into Prometheus blocks, as if `dashgen export` had been scraped."""
    from dashgen.project_metrics import project_catalog
    from dashgen.promtool import find_binary
    from dashgen.replay.backfill import create_blocks, read_run, run_labels
    from dashgen.replay.openmetrics import write_openmetrics
    from dashgen.replay.backtest import iso_time
    from dashgen.replay.work_dir import work_dir

    config = replayed_config(load_config(config_path, root))
    timing = _timing(start, scrape_interval, default_step_time, run_end, hold, config)
    for option, value in (("--project", project), ("--experiment", experiment), ("--instance", instance)):
        if value is not None and not value.strip():
            raise BuildError(f"{option} {value!r}: give a label value, or leave the option out for its default")
    _writable_folder(tsdb_dir, "--tsdb")
    find_binary("promtool")
    _bounded_replay("backfill", [run_path], max_steps)
    run = read_run(run_path, run_labels(run_path, config.verl_job, project, experiment, instance), timing,
                   export_unknown=unknown_keys, catalog=project_catalog(root),
                   step_statistics=built_step_statistics(root, "backfill", "writing"))
    try:  # before promtool's long work; a folder os.access calls writable may still refuse (/proc)
        tsdb_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"--tsdb {tsdb_dir}: cannot create the folder: {exc.strerror or exc}") from None
    for note in run.notes:
        click.echo(f"dashgen backfill: {run_path}: {note}", err=True)
    with work_dir("backfill") as tmp:
        scraped = tmp / "run.om"
        with open(scraped, "w") as handle:
            samples = write_openmetrics([run], handle, timing.scrape_interval)
        create_blocks(scraped, tsdb_dir, run.end - run.times[0])
    labels = ", ".join(f'{name}="{value}"' for name, value in run.labels.items())
    click.echo(f"backfilled {len(run.steps)} steps ({samples} samples) of {run_path} into {tsdb_dir}: "
               f"{iso_time(run.times[0])} to {iso_time(run.end)}, labels {{{labels}}}")


@click.command()
@click.argument("run_paths", metavar="RUN.jsonl...", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@root_option
@config_option
@_timing_options
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw reward, KL, entropy and grad norm with the firing intervals shaded (PNG).")
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Backtest this Prometheus rule file instead of the project's alerts (repeatable).")
@_max_steps_option
def backtest(run_paths: tuple[Path, ...], root: Path, config_path: Path | None, start: str | None,
             scrape_interval: str | None, default_step_time: str, run_end: str | None, hold: str | None,
             output_format: str, plot_path: Path | None, rule_files: tuple[Path, ...], max_steps: int) -> None:
    """Replay recorded runs through a real Prometheus and show when each alert would have fired.

    GPU alerts need Ray's or DCGM's metrics, which verl's step log does not hold: they never fire here.
    """
    import json

    from dashgen.replay.backtest import backtest as run_backtest
    from dashgen.replay.backtest import format_table, plot, to_json
    from dashgen.replay.matplotlib_check import require_matplotlib

    config = replayed_config(load_config(config_path, root))
    timing = _timing(start, scrape_interval, default_step_time, run_end, hold, config)
    if plot_path is not None:
        _check_plot_path(plot_path)
        require_matplotlib("--plot")
    _bounded_replay("backtest", list(run_paths), max_steps)
    outcomes = run_backtest(list(run_paths), root, config, timing,
                            say=lambda message: click.echo(f"dashgen backtest: {message}", err=True),
                            rule_files=list(rule_files) or None)
    if output_format == "json":
        click.echo(json.dumps(to_json(outcomes), indent=2))
    else:
        click.echo(format_table(outcomes), nl=False)
    if plot_path is not None:
        plot(outcomes, plot_path)
        click.echo(f"dashgen backtest: plot written to {plot_path}", err=True)


# The sample run of the repository, and a fixed clock for it, so the committed preview is byte-stable.
DEFAULT_PREVIEW_RUN = Path("examples/runs/gsm8k/ppo-qwen-7b.jsonl")
PREVIEW_START = "2025-01-01T00:00:00Z"


@click.command()
@click.argument("run_path", metavar="[RUN.jsonl]", required=False, type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for one <dashboard uid>.png per dashboard. Default: rendered/preview/ of the project.")
@click.option("--strict", is_flag=True,
              help="Fail, and replace no preview, when a panel that reads verl's series has no data (for CI on a "
                   "run that logs every key the dashboards read).")
@click.option("--allow-empty", is_flag=True, hidden=True)  # the default since --strict; kept for old scripts
@click.option("--start", default=PREVIEW_START, show_default=True,
              help="When the run began (Unix seconds or RFC 3339): fixed, so the same run draws the same PNG.")
@_max_steps_option
@root_option
@config_option
def preview(run_path: Path | None, out_dir: Path | None, strict: bool, allow_empty: bool, start: str, max_steps: int,
            root: Path, config_path: Path | None) -> None:
    """Draw each dashboard to a PNG from real query results over a recorded run.

    The run (default: the sample run examples/runs/gsm8k/ppo-qwen-7b.jsonl of the project, or
    where it has none, a verl PPO run of the public corpus shipped in the package) is backfilled
    into a temporary Prometheus as backtest does; every panel's queries are evaluated over it with
    the dashboard's variables set to the run. Panels without data are drawn as "No data" and
    counted; --strict fails instead when one of them reads verl's series.
    """
    from dashgen.compiler.output.build import PREVIEW, RENDERED
    from dashgen.compiler.project import compile_project
    from dashgen.compiler.output.targets.grafana import dashboard_to_text
    from dashgen.config import duration_seconds
    from dashgen.replay.backfill import Timing
    from dashgen.replay.backtest import RuleSet
    from dashgen.replay.matplotlib_check import require_matplotlib
    from dashgen.replay.preview import draw_dashboard, preview_data
    from dashgen.replay.preview.partials import drawing_partials, partial_path
    from dashgen.replay.preview.query import backfilled
    from dashgen.replay.preview.stamp import dashboard_digest

    require_matplotlib("dashgen preview")
    config = replayed_config(load_config(config_path, root))
    project = compile_project(root, config)
    run_path = run_path or _default_preview_run(root)
    if not run_path.exists():
        raise BuildError(f"{run_path}: no such step log; give a verl run's JSONL (dashgen preview RUN.jsonl)")
    out_dir = out_dir or root / RENDERED / PREVIEW
    _writable_folder(out_dir, "--out")
    _bounded_replay("preview", [run_path], max_steps)
    scrape_interval = duration_seconds(config.scrape_interval)
    timing = Timing(start=_parse_time(start), scrape_interval=scrape_interval)
    catalog = project.metrics
    empty: list[str] = []
    rules = RuleSet(project.rules.recording_rules, project.rules.alert_rules, project.step_statistics)
    drawn: list[tuple[Path, Path, str]] = []  # (partial, final path, what to say)
    out_dir.mkdir(parents=True, exist_ok=True)
    with drawing_partials(out_dir):
        try:
            with backfilled(run_path, config, catalog, timing, rules) as (server, run):
                queried = [(dashboard, *preview_data(server, dashboard.model, run, catalog, scrape_interval,
                                                     dashboard.module)) for dashboard in project.dashboards]
            for dashboard, results, _ in queried:
                titles = {panel["id"]: panel["title"] for panel in _all_panels(dashboard.model)}
                empty += [f"{dashboard.uid}: {titles[panel_id]!r}" for panel_id, result in results.items()
                          if result.reads_verl and not result.has_data]
            if empty and strict:  # said before drawing anything: drawing is most of a preview's time
                raise BuildError(f"{run_path}: panels reading verl's series have no data (a key the run does not log, "
                                 f"or a query that selects nothing; without --strict they are drawn as \"No data\"); "
                                 f"no preview in {out_dir} was replaced:\n  " + "\n  ".join(empty))
            if empty:
                panels = "1 panel reading verl's series has" if len(empty) == 1 else \
                    f"{len(empty)} panels reading verl's series have"
                click.echo(f"{run_path}: {panels} no data (keys this run does not log), drawn as \"No data\":\n  "
                           + "\n  ".join(empty))
                renamed = _logged_as(run.run, catalog)
                if renamed:
                    click.echo("It logs keys no series reads under names like keys it never logged (`aliases:` in "
                               "metrics.yaml would read them):\n  " + "\n  ".join(renamed))
            for dashboard, results, events in queried:
                path = out_dir / f"{dashboard.uid}.png"
                drawn.append((partial_path(path), path, f"{sum(r.has_data for r in results.values())} of "
                                                          f"{len(results)} panels with data"))
                draw_dashboard(dashboard.model, results, events, run, drawn[-1][0],
                               dashboard_digest(dashboard_to_text(dashboard.model)))
            for partial, path, said in drawn:  # only once every dashboard is drawn and good
                os.replace(partial, path)
                click.echo(f"{path}: {said}")
        finally:
            for partial, _, _ in drawn:
                partial.unlink(missing_ok=True)


# The run a project without the sample drew from (a wheel-installed one): a verl PPO run of the public
# corpus, shipped in the package (dashgen_runs), healthy and logging 65 of verl's keys.
CORPUS_PREVIEW_RUN = "verl-qwen25-7b-gsm8k-ppo-dstack"


def _default_preview_run(root: Path) -> Path:
    sample = root / DEFAULT_PREVIEW_RUN
    if sample.is_file():
        return sample
    from dashgen.review.corpus import public_corpus

    run = public_corpus() / CORPUS_PREVIEW_RUN / "steps.jsonl"
    click.echo(f"dashgen preview: no run given and no {DEFAULT_PREVIEW_RUN} in {root}: drawing {CORPUS_PREVIEW_RUN} "
               f"of the public corpus", err=True)
    return run


def _logged_as(run, catalog) -> list[str]:
    """`present for missing` of each key the run's framework logs by default that the run never logged,
    where it logs a key no series reads that looks like it (dashgen/sources/expected_keys.py)."""
    final = run.never_logged[-1] if run.never_logged else {}
    return [f"{present} for {catalog[series].verl_keys[0]}" for (series, present), _ in sorted(final.items())
            if present]


def _all_panels(model: dict):
    from dashgen.compiler.dashboards.dashboard_json import iter_panels

    return iter_panels(model)
