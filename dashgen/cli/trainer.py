"""Commands that run beside a trainer: export (follow its step log, serve /metrics, supervise it) and act."""

from __future__ import annotations

import math
import signal
import sys
from pathlib import Path

import click

from dashgen.cli.options import (DEFAULT_GRACE, DEFAULT_KILL_TIMEOUT, DEFAULT_POLL_SECONDS, MAX_SUPERVISOR_WAIT,
                                 built_step_statistics, config_option, root_option)
from dashgen.compiler.sections import load_config
from dashgen.errors import BuildError
from dashgen.runtime.log_watch import SHORT_POLL_SECONDS

def _finite(param: click.Parameter, value: float) -> float:
    """click's FloatRange lets nan through (every comparison with it is false)."""
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a finite number of seconds", param=param)
    return value


def _bounded_duration(option: str, text: str, max_seconds: float, positive: bool) -> float:
    from dashgen.config import duration_seconds

    try:
        seconds = duration_seconds(text)
    except ValueError:
        raise BuildError(f"{option} {text!r} is not a Prometheus duration (e.g. 30s, 5m)") from None
    if positive and seconds <= 0:
        raise BuildError(f"{option} {text}: must be longer than 0s")
    if seconds > max_seconds:
        raise BuildError(f"{option} {text}: at most {max_seconds / 3600:g}h")
    return seconds


def _listen_address(listen: str) -> tuple[str, int]:
    host, colon, port_text = listen.rpartition(":")
    if not colon or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BuildError(f"--listen {listen!r}: expected host:port with a port from 0 to 65535 "
                         f"(0: any free port; no host: every interface), e.g. 127.0.0.1:9464")
    return host.strip("[]") or "0.0.0.0", int(port_text)


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("--jsonl", "--log", "jsonl", required=True,
              help="The run's log, known by its content once it shows: verl's step log (trainer.logger includes "
                   "'file'), its console output tee'd to a file, or a TensorBoard event file or log directory; "
                   "may not exist yet.")
@click.option("--listen", default=None,
              help="host:port to serve /metrics on. Default: 127.0.0.1 and the port of the config's "
                   "exporter_address (9464).")
@click.option("--project", default=None, help="Label value; default: the log's parent folder name.")
@click.option("--experiment", default=None, help="Label value; default: the log's file name without .jsonl.")
@click.option("--unknown-keys/--no-unknown-keys", default=True, show_default=True,
              help="Also export keys the catalog does not know, named by the same rule.")
@click.option("--poll-interval", default=DEFAULT_POLL_SECONDS, type=click.FloatRange(0.01, 60),
              callback=lambda _ctx, param, value: _finite(param, value),
              help=f"Seconds between looks at the log that no change prompted (default {DEFAULT_POLL_SECONDS:g}): "
                   f"a network filesystem reports no change made on another machine. A change prompts a "
                   f"look within milliseconds on Linux (inotify); elsewhere the log is also looked at every "
                   f"{SHORT_POLL_SECONDS:g} s, whatever this interval.")
@click.option("--total-steps", default=None, type=click.IntRange(1), metavar="N",
              help="The run is finished once step N is logged (sidecar mode: how the end is known).")
@click.option("--grace", default=DEFAULT_GRACE, show_default=True,
              help="With a supervised trainer: keep serving its final state this long after it exits.")
@click.option("--pid-file", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="With a supervised trainer: write its PID here while it runs.")
@click.option("--kill-timeout", default=DEFAULT_KILL_TIMEOUT, show_default=True,
              help="With a supervised trainer: after a stop (SIGTERM, SIGINT, `dashgen act`), SIGKILL its process "
                   "group if it has not exited within this long.")
@click.option("--ray-session", default=None, metavar="NAME",
              help="Ray session the run's GPUs belong to (Ray's SessionName label). Default: where "
                   "session_latest points in --ray-temp-dir, read at every scrape.")
@click.option("--ray-temp-dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Ray's temp dir (ray start --temp-dir). Default: the config's ray_temp_dir (/tmp/ray).")
@root_option
@config_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- TRAINER COMMAND...]")
def export(jsonl: str, listen: str | None, project: str | None, experiment: str | None, unknown_keys: bool,
           poll_interval: float, total_steps: int | None, grace: str, pid_file: Path | None, kill_timeout: str,
           ray_session: str | None, ray_temp_dir: Path | None, root: Path,
           config_path: Path | None, command: tuple[str, ...]) -> None:
    """Follow a run's log and serve its newest step on /metrics for Prometheus.

    The log is verl's JSONL step log, its console log or TensorBoard event files (a file, or the
    run's log directory), known by content.

    Given a trainer command after `--`, run it as a child in its own process group (supervise
    mode): SIGINT and SIGTERM are passed to the group, which gets SIGKILL after --kill-timeout (a
    repeated signal changes nothing); what the trainer leaves in its group is stopped when it
    exits; its end (finished, crashed, stopped) and exit code are published, and the exporter
    exits with its status after the grace period.
    """
    import threading

    from prometheus_client import CollectorRegistry

    from dashgen.runtime.exporter import RunState

    from dashgen.runtime.log_follower import follow_forever, run_from_path
    from dashgen.runtime.record_follower import RecordFollower

    from dashgen.project_metrics import project_catalog
    from dashgen.runtime.log_watch import LogChanges
    from dashgen.runtime.metrics_server import serve_metrics
    from dashgen.runtime.supervisor import Supervisor
    from dashgen.formats.trl import is_trainer_state

    config = load_config(config_path, root)
    grace_seconds = _bounded_duration("--grace", grace, MAX_SUPERVISOR_WAIT, positive=False)
    kill_seconds = _bounded_duration("--kill-timeout", kill_timeout, MAX_SUPERVISOR_WAIT, positive=True)
    if (pid_file is not None or grace != DEFAULT_GRACE or kill_timeout != DEFAULT_KILL_TIMEOUT) and not command:
        raise BuildError("--grace, --kill-timeout and --pid-file apply to a supervised trainer: give its command "
                         "after `--`")
    if not jsonl.strip():
        raise BuildError(f"--jsonl {jsonl!r}: give the path of verl's step log")
    path = Path(jsonl)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise BuildError(f"--jsonl {path}: not a regular file or a folder; verl's file logger writes a file")
    if is_trainer_state(path):  # one JSON document rewritten at each save, not a log of lines appended
        raise BuildError(f"--jsonl {path}: a TRL trainer state, not a step log: follow the log that "
                         f"dashgen.formats.trl_callback.StepLogCallback writes from inside the trainer (docs/"
                         f"connect-a-run.md); backtest, backfill and preview read a trainer state as it is")
    host, port = _listen_address(listen or f"127.0.0.1:{config.exporter_address.rpartition(':')[2]}")
    default_project, default_experiment = run_from_path(path)
    state = RunState(project or default_project, experiment or default_experiment, export_unknown=unknown_keys,
                     total_steps=total_steps, catalog=project_catalog(root),
                     step_statistics=built_step_statistics(root, "export", "serving"))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    ray_link = _ray_link(state.labels, ray_session, ray_temp_dir or Path(config.ray_temp_dir))
    registry.register(ray_link)
    follower = RecordFollower(path, state)
    try:
        follower.poll()  # serve what the log already holds from the first scrape on
    except OSError:
        follower.close()  # follow_forever retries and says why
    # Looked at before the first scrape can be answered, so what it says is what that scrape shows.
    no_session_yet = ray_temp_dir is not None and ray_link.current_session() is None
    try:
        port = serve_metrics(registry, host, port,  # the real port when 0 was asked
                             version=lambda: (state.version, ray_link.current_session())).server_port
    except (OSError, OverflowError, ValueError) as exc:
        raise BuildError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    shown_host = f"[{host}]" if ":" in host else host
    click.echo(f"dashgen export: serving {path} as project={state.labels[0]!r} experiment={state.labels[1]!r} "
               f"on http://{shown_host}:{port}/metrics", err=True)
    if no_session_yet:
        click.echo(f"dashgen export: no Ray session in {ray_temp_dir} yet ({ray_temp_dir}/session_latest); the run "
                   f"is linked to its GPUs once Ray starts there (or give --ray-session)", err=True)
    with LogChanges(path) as changes:
        try:
            if command:
                supervisor = Supervisor(list(command), follower, poll_interval, grace_seconds, kill_seconds, pid_file,
                                        say=lambda message: click.echo(message, err=True), changes=changes)
                sys.exit(supervisor.run())
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: (stop.set(), changes.wake()))
            try:
                follow_forever(follower, changes, poll_interval, stop)
            except KeyboardInterrupt:
                pass
        finally:
            follower.stop()


def _ray_link(labels: tuple[str, str], session: str | None, temp_dir: Path):
    """The run's link to its Ray session, which GPU panels and alerts join on."""
    from dashgen.runtime.ray_link import RaySessionLink, check_session_name

    return RaySessionLink(*labels, check_session_name(session) if session is not None else None, temp_dir)


# --- From alert to action ------------------------------------------------------------------------

@click.command()
@root_option
@config_option
@click.option("--listen", default=None, help="host:port to receive Alertmanager's webhook on. "
                                             "Default: the config's act.address (127.0.0.1:9095).")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File holding the bearer token Alertmanager sends. Default: $DASHGEN_ACT_TOKEN if set, "
                   "else the config's act.token_file.")
@click.option("--project", default=None, help="The guarded run's project label. Default: the config's act.project.")
@click.option("--experiment", default=None,
              help="The guarded run's experiment label. Default: the config's act.experiment.")
@click.option("--pid-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The trainer's PID file (`dashgen export --pid-file`), for `stop`. Default: the config's act.pid_file.")
@click.option("--audit-log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL file every decision is appended to. Default: the config's act.audit_log.")
@click.option("--dry-run", is_flag=True, help="Record what each action would do; do nothing.")
def act(root: Path, config_path: Path | None, listen: str | None, token_file: Path | None, project: str | None,
        experiment: str | None, pid_file: Path | None, audit_log: Path | None, dry_run: bool) -> None:
    """Receive Alertmanager's notifications and act on the guarded run's alerts (log, stop, command)."""
    from dashgen.model import ActSection
    from dashgen.runtime.act import ActSettings, load_token, serve

    config = load_config(config_path, root)
    settings = ActSettings.from_config(config, project, experiment, pid_file, audit_log, dry_run)
    act_section = config.section(ActSection)
    token, _ = load_token(token_file, act_section.token_file)
    host, port = _listen_address(listen or act_section.address)
    serve(settings, host, port, token, say=lambda message: click.echo(message, err=True))
