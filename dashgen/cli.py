"""The `dashgen` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dashgen.config import Config, load_config
from dashgen.errors import BuildError

if TYPE_CHECKING:
    from dashgen.backfill import Timing

# How long `dashgen export -- CMD` serves a finished trainer's final state; backfill models the same.
DEFAULT_GRACE = "5m"
# How long backfill watches a hung run (--end hung) unless --hold says.
DEFAULT_HUNG_HOLD = "1h"

_root_option = click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=".",
                            show_default=True, help="Project folder holding panels/, alerts/ and rendered/.")
_config_option = click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                              default=None, help="YAML file overriding fields of dashgen/config.py.")


@click.group()
@click.version_option(package_name="dashgen")
def cli() -> None:
    """Grafana dashboards and Prometheus alerts for verl RL training, as code."""


main = cli


@cli.command()
@_root_option
@_config_option
def build(root: Path, config_path: Path | None) -> None:
    """Render panels/ and alerts/ into rendered/ (untouched if anything fails)."""
    from dashgen.build import RENDERED, render_project, write_rendered

    rendered = render_project(root, load_config(config_path))
    changed = write_rendered(root / RENDERED, rendered.files)
    click.echo(f"rendered {len(rendered.files)} files into {root / RENDERED}"
               + (f"; changed: {', '.join(changed)}" if changed else "; nothing changed"))


@cli.command()
@_root_option
@_config_option
def check(root: Path, config_path: Path | None) -> None:
    """Fail if rendered/ is stale against the sources or any check fails."""
    from dashgen.build import RENDERED, differences, render_project

    rendered = render_project(root, load_config(config_path))
    problems = differences(root / RENDERED, rendered.files)
    if problems:
        raise BuildError("rendered/ does not match the sources; run `dashgen build` and commit:\n  "
                         + "\n  ".join(problems))
    click.echo(f"ok: {len(rendered.files)} rendered files match their sources and pass the checks")


@cli.command(name="list")
@_root_option
@_config_option
def list_(root: Path, config_path: Path | None) -> None:
    """Show dashboards, their panels and the metrics each panel queries; then the alerts."""
    from dashgen.build import render_project
    from dashgen.dashboards import metrics_used

    config = load_config(config_path)
    rendered = render_project(root, config)
    for module, dashboard in rendered.dashboards:
        click.echo(f"{dashboard.uid}  {dashboard.title!r}  ({module})")
        used = metrics_used(dashboard, config)
        for row in dashboard.rows:
            click.echo(f"  {row.title}")
            for panel in row.panels:
                click.echo(f"    {panel.title}: {', '.join(used[panel.title])}")
    for module, alert, _ in rendered.alerts:
        click.echo(f"alert {alert.name} [{alert.severity.value}] ({module})")


@cli.command()
@_root_option
def lint(root: Path) -> None:
    """Run `promtool check rules` on rendered/rules/*.yaml."""
    files = sorted(str(p) for p in (root / "rendered" / "rules").glob("*.yaml"))
    if not files:
        raise BuildError(f"no rule files in {root / 'rendered' / 'rules'}; run `dashgen build` first")
    _promtool_and_exit(["check", "rules", *files])


@cli.command()
@_root_option
def test(root: Path) -> None:
    """Run `promtool test rules` on tests/rules/*.yaml."""
    files = sorted(str(p) for p in (root / "tests" / "rules").glob("*.yaml"))
    if not files:
        raise BuildError(f"no rule test files in {root / 'tests' / 'rules'}")
    _promtool_and_exit(["test", "rules", *files])


def _promtool_and_exit(args: list[str]) -> None:
    from dashgen.promtool import run_promtool

    result = run_promtool(args)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--jsonl", "path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="verl's step log (trainer.logger includes 'file'); may not exist yet.")
@click.option("--listen", default="127.0.0.1:9464", show_default=True, help="host:port to serve /metrics on.")
@click.option("--project", default=None, help="Label value; default: the log's parent folder name.")
@click.option("--experiment", default=None, help="Label value; default: the log's file name without .jsonl.")
@click.option("--unknown-keys/--no-unknown-keys", default=True, show_default=True,
              help="Also export keys the catalog does not know, named by the same rule.")
@click.option("--poll-interval", default=0.5, show_default=True, type=click.FloatRange(0.01, 60),
              help="Seconds between looks at the log.")
@click.option("--total-steps", default=None, type=click.IntRange(1), metavar="N",
              help="The run is finished once step N is logged (sidecar mode: how the end is known).")
@click.option("--grace", default=DEFAULT_GRACE, show_default=True,
              help="With a supervised trainer: keep serving its final state this long after it exits.")
@click.option("--pid-file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="With a supervised trainer: write its PID here while it runs.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- TRAINER COMMAND...]")
def export(path: Path, listen: str, project: str | None, experiment: str | None, unknown_keys: bool,
           poll_interval: float, total_steps: int | None, grace: str, pid_file: Path | None,
           command: tuple[str, ...]) -> None:
    """Follow verl's JSONL step log and serve its newest step on /metrics for Prometheus.

    Given a trainer command after `--`, run it as a child (supervise mode): SIGINT and SIGTERM
    are forwarded to it, its end (finished, crashed, stopped) and exit code are published, and
    the exporter exits with its status after the grace period.
    """
    import signal
    import threading

    from prometheus_client import CollectorRegistry, start_http_server

    from dashgen.config import duration_seconds
    from dashgen.exporter import LogFollower, RunState, follow_forever, run_from_path
    from dashgen.supervisor import Supervisor

    host, _, port_text = listen.rpartition(":")
    if not host or not port_text.isdigit():
        raise BuildError(f"--listen {listen!r}: expected host:port, e.g. 127.0.0.1:9464")
    try:
        grace_seconds = duration_seconds(grace)
    except ValueError:
        raise BuildError(f"--grace {grace!r} is not a Prometheus duration (e.g. 5m)") from None
    if (pid_file is not None or grace != DEFAULT_GRACE) and not command:
        raise BuildError("--grace and --pid-file apply to a supervised trainer: give its command after `--`")
    default_project, default_experiment = run_from_path(path)
    state = RunState(project or default_project, experiment or default_experiment, export_unknown=unknown_keys,
                     total_steps=total_steps)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    try:
        start_http_server(int(port_text), addr=host.strip("[]"), registry=registry)
    except OSError as exc:
        raise BuildError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    click.echo(f"dashgen export: serving {path} as project={state.labels[0]!r} experiment={state.labels[1]!r} "
               f"on http://{listen}/metrics", err=True)
    follower = LogFollower(path, state)
    if command:
        supervisor = Supervisor(list(command), follower, poll_interval, grace_seconds, pid_file,
                                say=lambda message: click.echo(message, err=True))
        sys.exit(supervisor.run())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        follow_forever(follower, poll_interval, stop)
    except KeyboardInterrupt:
        pass


# --- Recorded runs: backfill and backtest ------------------------------------------------------

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


def _parse_time(text: str) -> float:
    from datetime import datetime, timezone

    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BuildError(f"--start {text!r}: expected Unix seconds or RFC 3339, e.g. 2025-05-01T12:00:00Z") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()


def _timing(start: str | None, scrape_interval: str | None, default_step_time: str, run_end: str | None,
            hold: str | None, config: Config) -> Timing:
    from dashgen.backfill import Timing
    from dashgen.config import duration_seconds

    run_end = run_end or ("hung" if hold is not None else "finished")
    hold = hold or (DEFAULT_HUNG_HOLD if run_end == "hung" else DEFAULT_GRACE)
    seconds = {}
    for option, text in (("--scrape-interval", scrape_interval or config.scrape_interval),
                         ("--default-step-time", default_step_time), ("--hold", hold)):
        try:
            seconds[option] = duration_seconds(text)
        except ValueError:
            raise BuildError(f"{option} {text!r} is not a Prometheus duration (e.g. 15s, 1m, 2h)") from None
    if seconds["--scrape-interval"] <= 0 or seconds["--default-step-time"] <= 0:
        raise BuildError("--scrape-interval and --default-step-time must be longer than 0s")
    return Timing(None if start is None else _parse_time(start), seconds["--scrape-interval"],
                  seconds["--default-step-time"], run_end, seconds["--hold"])


@cli.command()
@click.argument("run_path", metavar="RUN.jsonl", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tsdb", "tsdb_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the blocks: a Prometheus data directory (read at its next block reload) or a new one.")
@_timing_options
@click.option("--project", default=None, help="Label value; default: the log's parent folder name.")
@click.option("--experiment", default=None, help="Label value; default: the log's file name without .jsonl.")
@click.option("--instance", default=None, help="Label value; default: backfill/<project>/<experiment>.")
@click.option("--unknown-keys/--no-unknown-keys", default=True, show_default=True,
              help="Also backfill keys the catalog does not know, named by the same rule.")
@_config_option
def backfill(run_path: Path, tsdb_dir: Path, start: str | None, scrape_interval: str | None,
             default_step_time: str, run_end: str | None, hold: str | None, project: str | None,
             experiment: str | None,
             instance: str | None, unknown_keys: bool, config_path: Path | None) -> None:
    """Turn a recorded verl run into Prometheus blocks, as if `dashgen export` had been scraped."""
    import tempfile

    from dashgen.backfill import create_blocks, read_run, run_labels, write_openmetrics
    from dashgen.backtest import iso_time
    from dashgen.promtool import find_binary

    config = load_config(config_path)
    timing = _timing(start, scrape_interval, default_step_time, run_end, hold, config)
    find_binary("promtool")
    run = read_run(run_path, run_labels(run_path, config.verl_job, project, experiment, instance), timing,
                   export_unknown=unknown_keys)
    for note in run.notes:
        click.echo(f"dashgen backfill: {run_path}: {note}", err=True)
    with tempfile.TemporaryDirectory(prefix="dashgen-backfill-") as tmp:
        scraped = Path(tmp) / "run.om"
        with open(scraped, "w") as handle:
            samples = write_openmetrics([run], handle, timing.scrape_interval)
        create_blocks(scraped, tsdb_dir, run.end - run.times[0])
    labels = ", ".join(f'{name}="{value}"' for name, value in run.labels.items())
    click.echo(f"backfilled {len(run.steps)} steps ({samples} samples) of {run_path} into {tsdb_dir}: "
               f"{iso_time(run.times[0])} to {iso_time(run.end)}, labels {{{labels}}}")


@cli.command()
@click.argument("run_paths", metavar="RUN.jsonl...", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_root_option
@_config_option
@_timing_options
@click.option("--format", "output_format", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also draw reward, KL, entropy and grad norm with the firing intervals shaded (PNG).")
def backtest(run_paths: tuple[Path, ...], root: Path, config_path: Path | None, start: str | None,
             scrape_interval: str | None, default_step_time: str, run_end: str | None, hold: str | None,
             output_format: str,
             plot_path: Path | None) -> None:
    """Replay recorded runs through a real Prometheus and show when each alert would have fired.

    GPU alerts need Ray's or DCGM's metrics, which verl's step log does not hold: they never fire here.
    """
    import json

    from dashgen.backtest import backtest as run_backtest
    from dashgen.backtest import format_table, plot, require_matplotlib, to_json

    config = load_config(config_path)
    timing = _timing(start, scrape_interval, default_step_time, run_end, hold, config)
    if plot_path is not None:
        require_matplotlib()
    outcomes = run_backtest(list(run_paths), root, config, timing,
                            say=lambda message: click.echo(f"dashgen backtest: {message}", err=True))
    if output_format == "json":
        click.echo(json.dumps(to_json(outcomes), indent=2))
    else:
        click.echo(format_table(outcomes), nl=False)
    if plot_path is not None:
        plot(outcomes, plot_path)
        click.echo(f"dashgen backtest: plot written to {plot_path}", err=True)
