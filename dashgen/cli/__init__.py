"""The `dashgen` command line."""

from __future__ import annotations

import functools
import gc
import math
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from dashgen.config import Config, config_path as find_config_path, load_config
from dashgen.errors import BuildError

if TYPE_CHECKING:
    from dashgen.replay.backfill import Timing

# How long `dashgen export -- CMD` serves a finished trainer's final state; backfill models the same.
DEFAULT_GRACE = "5m"
# How long backfill watches a hung run (--end hung) unless --hold says.
DEFAULT_HUNG_HOLD = "1h"
# How long a supervised trainer may take to exit after a stop before its process group is killed.
DEFAULT_KILL_TIMEOUT = "30s"
# Longest --grace and --kill-timeout: a day is more than any scrape needs, and far below what a timer takes.
MAX_SUPERVISOR_WAIT = 86400.0

_root_option = click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".",
                            show_default=True, help="Project folder holding panels/, alerts/ and rendered/.")
_config_option = click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                              default=None, help="YAML file overriding fields of dashgen/config.py. "
                                                 "Default: dashgen.yaml in the project folder, if there is one.")


@click.group()
@click.version_option(package_name="dashgen")
def cli() -> None:
    """Grafana dashboards and Prometheus alerts for verl RL training, as code."""


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like KeyboardInterrupt (not an Exception, nor a SystemExit that a
    definition module's guard would take for sys.exit)."""


def main() -> None:
    _clean_up_on_signals()
    try:
        cli()
    except Terminated:
        click.echo("dashgen: terminated (SIGTERM); cleaned up", err=True)
        sys.exit(128 + signal.SIGTERM)
    finally:
        # The process ends next. Objects frozen out of the collector are not traversed again
        # at interpreter shutdown: about a tenth of a short command's wall time (issue 19).
        gc.freeze()


def _clean_up_on_signals() -> None:
    """SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C does, so every `with` block stops the
    processes it started and removes its temporary folders; a second signal during that
    clean-up is ignored rather than cutting it short."""
    def unwind(signum: int, _frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated

    signal.signal(signal.SIGTERM, unwind)
    signal.signal(signal.SIGINT, unwind)


def _collector_paused(command):
    """For a command that lasts a fraction of a second and keeps what it allocates to the end
    (build, check): the cycle collector waits until it returns. Collecting as it went cost about
    3% of a build's wall time and freed almost nothing (issue 19)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return command(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return run


def _rendered_dir(root: Path) -> Path:
    """root/rendered, after finishing or discarding an interrupted build (call under the project lock)."""
    from dashgen.compiler.build import RENDERED
    from dashgen.compiler.tree_writer import recover

    note = recover(root / RENDERED)
    if note:
        click.echo(f"dashgen: {note}", err=True)
    return root / RENDERED


@cli.command()
@_root_option
@_config_option
@click.option("--reload", "reload_url", default=None, metavar="URL",
              help="Then make the Prometheus at URL (e.g. http://localhost:9090) re-read its config and rules "
                   "(POST URL/-/reload; Prometheus needs --web.enable-lifecycle).")
@_collector_paused
def build(root: Path, config_path: Path | None, reload_url: str | None) -> None:
    """Render panels/ and alerts/ into rendered/ (untouched if anything fails)."""
    from dashgen.compiler.build import render_project, write_rendered
    from dashgen.compiler.tree_writer import project_lock

    if reload_url is not None:  # urllib.request, only then
        from dashgen.replay.prometheus_server import check_reload_url, reload_prometheus

        check_reload_url(reload_url)
    rendered = render_project(root, load_config(config_path, root))
    with project_lock(root):
        out_dir = _rendered_dir(root)
        changed = write_rendered(out_dir, rendered.files)
    click.echo(f"rendered {len(rendered.files)} files into {out_dir}"
               + (f"; changed: {', '.join(changed)}" if changed else "; nothing changed"))
    if reload_url is not None:
        reload_prometheus(reload_url)
        click.echo(f"reloaded Prometheus at {reload_url}")


@cli.command()
@_root_option
@_config_option
@_collector_paused
def check(root: Path, config_path: Path | None) -> None:
    """Fail if rendered/ is stale against the sources or any check fails."""
    from dashgen.compiler.build import PREVIEW, differences, render_project, validate_rendered
    from dashgen.replay.preview.stamp import stale_previews
    from dashgen.compiler.tree_writer import project_lock

    rendered = render_project(root, load_config(config_path, root))
    validate_rendered(rendered.files)
    with project_lock(root):
        out_dir = _rendered_dir(root)
        problems = differences(out_dir, rendered.files)
    problems += stale_previews(out_dir / PREVIEW, {d.uid: rendered.files[f"dashboards/{d.uid}.json"]
                                                   for _, d in rendered.dashboards})
    if problems:
        raise BuildError("rendered/ does not match the sources; run `dashgen build` and commit:\n  "
                         + "\n  ".join(problems))
    click.echo(f"ok: {len(rendered.files)} rendered files match their sources and pass the checks")


@cli.command(name="list")
@_root_option
@_config_option
@click.option("--unused", is_flag=True,
              help="Instead: the verl keys of the catalog that no panel shows, each with the reason a dashboard "
                   "gives for leaving it out (Dashboard.left_out).")
def list_(root: Path, config_path: Path | None, unused: bool) -> None:
    """Show dashboards, their panels and the metrics each panel queries; then the alerts."""
    from dashgen.compiler.build import render_project
    from dashgen.compiler.dashboards import metrics_used

    config = load_config(config_path, root)
    rendered = render_project(root, config)
    if unused:
        _list_unused(rendered, config, root)
        return
    for module, dashboard in rendered.dashboards:
        click.echo(f"{dashboard.uid}  {dashboard.title!r}  ({module})")
        used = metrics_used(dashboard, config)
        for row in dashboard.rows:
            click.echo(f"  {row.title}")
            for panel in row.panels:
                click.echo(f"    {panel.title}: {', '.join(used[panel.title])}")
    for module, alert, _ in rendered.alerts:
        click.echo(f"alert {alert.name} [{alert.severity.value}] ({module})")


def _list_unused(rendered, config: Config, root: Path) -> None:
    from dashgen.compiler.coverage import unused_signals
    from dashgen.project_metrics import project_catalog

    signals = unused_signals(rendered.dashboards, config, project_catalog(root))
    for unused in signals:
        click.echo(f"{unused.verl_key}  ({unused.metric})  "
                   + (f"left out: {unused.reason}" if unused.reason else "no panel, and no reason given"))
    click.echo(f"{len(signals)} catalogued verl key(s) without a panel", err=True)


@cli.command()
@_root_option
def lint(root: Path) -> None:
    """Run `promtool check rules` on rendered/rules/*.yaml and `amtool check-config` on Alertmanager's file;
    also `vmalert -dryRun` on the rule files when vmalert (VictoriaMetrics) is installed."""
    from dashgen.compiler.targets.alertmanager import ALERTMANAGER_FILE
    from dashgen.promtool import run_tool
    from dashgen.compiler.tree_writer import project_lock

    with project_lock(root):
        rendered = _rendered_dir(root)
    files = sorted(str(p) for p in (rendered / "rules").glob("*.yaml"))
    if not files:
        raise BuildError(f"no rule files in {rendered / 'rules'}; run `dashgen build` first")
    alertmanager = rendered / ALERTMANAGER_FILE
    if not alertmanager.is_file():
        raise BuildError(f"{alertmanager} does not exist; run `dashgen build` first")
    rules = run_tool("promtool", ["check", "rules", *files])
    _show(rules.stdout, rules.stderr)
    routing = run_tool("amtool", ["check-config", str(alertmanager)])
    _show(routing.stdout, routing.stderr)
    vmalert = _vmalert_dry_run([Path(f) for f in files])
    sys.exit(rules.returncode or routing.returncode or vmalert)


def _vmalert_dry_run(files: list[Path]) -> int:
    """`vmalert -dryRun` on the rule files if vmalert is installed; says so if it is not."""
    from dashgen.compiler.targets.victoriametrics import dry_run, vmalert_installed

    if not vmalert_installed():
        click.echo("vmalert not found: skipped `vmalert -dryRun` (VictoriaMetrics' rule check; Debian package "
                   "victoria-metrics)")
        return 0
    result, note = dry_run(files)
    _show(result.stdout, result.stderr)
    click.echo(note if result.returncode == 0 else f"{note}: FAILED")
    return result.returncode


@cli.command()
@_root_option
@_config_option
@click.option("--keep-generated", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Also write the generated rule tests (and the rule files they test) into DIR, to read them.")
@click.argument("modules", nargs=-1, metavar="[MODULE]...")
def test(root: Path, config_path: Path | None, keep_generated: Path | None, modules: tuple[str, ...]) -> None:
    """Run the rule tests: tests/rules/*.yaml and the tests generated for every alert written with
    the vocabulary (promtool test rules); then the routing fixtures in tests/alertmanager/.

    With MODULE (an alert module's name, `team` for alerts/team.py), only that module's tests:
    tests/rules/MODULE-test*.yaml and its alerts' generated ones.

    Fails on an alert that no test covers, unless the alert says why (untested="...")."""
    import shutil
    import tempfile

    from dashgen.compiler.targets.alertmanager import run_route_fixtures
    from dashgen.compiler.build import render_project
    from dashgen.promtool import run_tool
    from dashgen.compiler.rule_tests import alerts_tested_by_fixtures, write_generated_tests

    config = load_config(config_path, root)
    rendered = render_project(root, config)
    fixtures = sorted((root / "tests" / "rules").glob("*.yaml"))
    # An alert is tested if any fixture tests it, whichever module's tests run.
    tested = alerts_tested_by_fixtures(fixtures)
    alerts = rendered.alerts
    if modules:
        alerts, fixtures = _tests_of_modules(modules, alerts, fixtures)
    untested = [(module, alert.name) for module, alert, _ in alerts
                if alert.condition is None and alert.name not in tested and not alert.untested.strip()]
    failed = False
    with tempfile.TemporaryDirectory(prefix="dashgen-generated-tests-") as tmp:
        rule_files = {rel: content for rel, content in rendered.files.items() if rel.startswith("rules/")}
        generated = write_generated_tests(Path(tmp), rule_files, alerts, rendered.catalog, config)
        if keep_generated is not None:
            shutil.copytree(tmp, keep_generated, dirs_exist_ok=True)
        if fixtures or generated:
            rules = run_tool("promtool", ["test", "rules", *map(str, fixtures), *map(str, generated)])
            _show(rules.stdout, rules.stderr)
            failed = rules.returncode != 0
        elif modules and not untested:
            click.echo(f"no rule tests of {', '.join(modules)}: every alert there says why (untested=...)")
        elif not untested:
            raise BuildError(f"no rule tests: none in {root / 'tests' / 'rules'}, and no alert written with the "
                             f"vocabulary (Alert.when) to generate them for")
    for module, name in untested:
        click.echo(f"{module}: alert {name!r} has no rule test: add a case to tests/rules/, write it with "
                   f"Alert.when(...) so one is generated, or say why not with untested=\"...\"", err=True)
    routes_passed, report = run_route_fixtures(root)
    _show(report, "")
    sys.exit(1 if failed or untested or not routes_passed else 0)


def _tests_of_modules(modules: tuple[str, ...], alerts: list, fixtures: list[Path]) -> tuple[list, list[Path]]:
    """The alerts of the named alert modules, and their fixtures (tests/rules/MODULE-test*.yaml)."""
    from dashgen.errors import get_close_matches

    known = sorted({Path(module).stem for module, _, _ in alerts})
    wanted = {Path(name).stem for name in modules}  # `team` or `alerts/team.py`
    for name in sorted(wanted - set(known)):
        close = get_close_matches(name, known)
        hint = f"; did you mean {close[0]!r}?" if close else f" (the project's alert modules: {', '.join(known)})"
        raise BuildError(f"dashgen test {name}: no alert module alerts/{name}.py{hint}")
    return ([item for item in alerts if Path(item[0]).stem in wanted],
            [path for path in fixtures if any(path.stem.startswith(f"{name}-test") for name in wanted)])


def _show(stdout: str, stderr: str) -> None:
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)


@cli.command(name="config")
@_root_option
@_config_option
@click.option("--describe", is_flag=True,
              help="Describe every field instead: type, unit or format, default and what it tunes.")
def config_(root: Path, config_path: Path | None, describe: bool) -> None:
    """Print the effective config (defaults plus the project's dashgen.yaml or --config) as YAML.

    Alert areas (stability, rewards, ...) are sections of their own; a project without alerts/
    shows dashgen's default areas."""
    from dashgen.config import areas_of, config_yaml, default_areas, describe_config, read_overrides

    if (root / "alerts").is_dir():
        from dashgen.compiler.rules import load_rule_modules

        areas = areas_of(definition.module for definition in load_rule_modules(root))
    else:
        areas = default_areas()
    if describe:
        click.echo(describe_config(areas), nl=False)
        return
    found = find_config_path(root, config_path)
    config = load_config(config_path, root)
    config.check_sections(areas)
    click.echo(config_yaml(config, areas, found, read_overrides(found) if found else {}), nl=False)


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


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--jsonl", "jsonl", required=True, help="verl's step log (trainer.logger includes 'file'); "
                                                       "may not exist yet.")
@click.option("--listen", default=None,
              help="host:port to serve /metrics on. Default: 127.0.0.1 and the port of the config's "
                   "exporter_address (9464).")
@click.option("--project", default=None, help="Label value; default: the log's parent folder name.")
@click.option("--experiment", default=None, help="Label value; default: the log's file name without .jsonl.")
@click.option("--unknown-keys/--no-unknown-keys", default=True, show_default=True,
              help="Also export keys the catalog does not know, named by the same rule.")
@click.option("--poll-interval", default=0.5, show_default=True, type=click.FloatRange(0.01, 60),
              callback=lambda _ctx, param, value: _finite(param, value),
              help="Seconds between looks at the log besides those its changes prompt (inotify, Linux; elsewhere "
                   "it is looked at every 0.05 s). A network filesystem reports no change made on another machine.")
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
@_root_option
@_config_option
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- TRAINER COMMAND...]")
def export(jsonl: str, listen: str | None, project: str | None, experiment: str | None, unknown_keys: bool,
           poll_interval: float, total_steps: int | None, grace: str, pid_file: Path | None, kill_timeout: str,
           ray_session: str | None, ray_temp_dir: Path | None, root: Path,
           config_path: Path | None, command: tuple[str, ...]) -> None:
    """Follow verl's JSONL step log and serve its newest step on /metrics for Prometheus.

    Given a trainer command after `--`, run it as a child in its own process group (supervise
    mode): SIGINT and SIGTERM are passed to the group, which gets SIGKILL after --kill-timeout or
    a second signal; its end (finished, crashed, stopped) and exit code are published, and the
    exporter exits with its status after the grace period.
    """
    import threading

    from prometheus_client import CollectorRegistry

    from dashgen.runtime.exporter import LogFollower, RunState, follow_forever, run_from_path, serve_metrics
    from dashgen.runtime.log_watch import LogChanges
    from dashgen.project_metrics import project_catalog
    from dashgen.runtime.supervisor import Supervisor

    config = load_config(config_path, root)
    grace_seconds = _bounded_duration("--grace", grace, MAX_SUPERVISOR_WAIT, positive=False)
    kill_seconds = _bounded_duration("--kill-timeout", kill_timeout, MAX_SUPERVISOR_WAIT, positive=True)
    if (pid_file is not None or grace != DEFAULT_GRACE or kill_timeout != DEFAULT_KILL_TIMEOUT) and not command:
        raise BuildError("--grace, --kill-timeout and --pid-file apply to a supervised trainer: give its command "
                         "after `--`")
    if not jsonl.strip():
        raise BuildError(f"--jsonl {jsonl!r}: give the path of verl's step log")
    path = Path(jsonl)
    if path.exists() and not path.is_file():
        raise BuildError(f"--jsonl {path}: not a regular file; verl's file logger writes one")
    host, port = _listen_address(listen or f"127.0.0.1:{config.exporter_address.rpartition(':')[2]}")
    default_project, default_experiment = run_from_path(path)
    state = RunState(project or default_project, experiment or default_experiment, export_unknown=unknown_keys,
                     total_steps=total_steps, catalog=project_catalog(root))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    ray_link = _ray_link(state.labels, ray_session, ray_temp_dir or Path(config.ray_temp_dir))
    registry.register(ray_link)
    follower = LogFollower(path, state)
    try:
        follower.poll()  # serve what the log already holds from the first scrape on
    except OSError:
        follower.close()  # follow_forever retries and says why
    try:
        port = serve_metrics(registry, host, port,  # the real port when 0 was asked
                             version=lambda: (state.version, ray_link.current_session())).server_port
    except (OSError, OverflowError, ValueError) as exc:
        raise BuildError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    shown_host = f"[{host}]" if ":" in host else host
    click.echo(f"dashgen export: serving {path} as project={state.labels[0]!r} experiment={state.labels[1]!r} "
               f"on http://{shown_host}:{port}/metrics", err=True)
    if ray_temp_dir is not None and ray_link.current_session() is None:
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

@cli.command()
@_root_option
@_config_option
@click.option("--listen", default=None, help="host:port to receive Alertmanager's webhook on. "
                                             "Default: the config's act_address (127.0.0.1:9095).")
@click.option("--token-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File holding the bearer token Alertmanager sends. Default: $DASHGEN_ACT_TOKEN if set, "
                   "else the config's act_token_file.")
@click.option("--project", default=None, help="The guarded run's project label. Default: the config's act_project.")
@click.option("--experiment", default=None,
              help="The guarded run's experiment label. Default: the config's act_experiment.")
@click.option("--pid-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The trainer's PID file (`dashgen export --pid-file`), for `stop`. Default: the config's act_pid_file.")
@click.option("--audit-log", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSONL file every decision is appended to. Default: the config's act_audit_log.")
@click.option("--dry-run", is_flag=True, help="Record what each action would do; do nothing.")
def act(root: Path, config_path: Path | None, listen: str | None, token_file: Path | None, project: str | None,
        experiment: str | None, pid_file: Path | None, audit_log: Path | None, dry_run: bool) -> None:
    """Receive Alertmanager's notifications and act on the guarded run's alerts (log, stop, command)."""
    from dashgen.runtime.act import ActSettings, load_token, serve

    config = load_config(config_path, root)
    settings = ActSettings.from_config(config, project, experiment, pid_file, audit_log, dry_run)
    token, _ = load_token(token_file, config.act_token_file)
    host, port = _listen_address(listen or config.act_address)
    serve(settings, host, port, token, say=lambda message: click.echo(message, err=True))


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


def _timing(start: str | None, scrape_interval: str | None, default_step_time: str, run_end: str | None,
            hold: str | None, config: Config) -> Timing:
    from dashgen.replay.backfill import MAX_SCRAPES_PER_RUN, Timing
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
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise BuildError(f"{option} {path}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise BuildError(f"{option} {path}: cannot write into {existing} (permission denied)")


PLOT_FORMATS = (".png", ".pdf", ".svg")


def _check_plot_path(path: Path) -> None:
    if path.suffix.lower() not in PLOT_FORMATS:
        raise BuildError(f"--plot {path}: name a {', '.join(PLOT_FORMATS)} file")
    if path.is_dir():
        raise BuildError(f"--plot {path}: is a folder; name a file in it")
    if not path.parent.is_dir():
        raise BuildError(f"--plot {path}: the folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise BuildError(f"--plot {path}: cannot write into {path.parent} (permission denied)")


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
@_root_option
@_config_option
def backfill(run_path: Path, tsdb_dir: Path, start: str | None, scrape_interval: str | None,
             default_step_time: str, run_end: str | None, hold: str | None, project: str | None,
             experiment: str | None, instance: str | None, unknown_keys: bool, root: Path,
             config_path: Path | None) -> None:
    """Turn a recorded verl run into Prometheus blocks, as if `dashgen export` had been scraped."""
    import tempfile

    from dashgen.replay.backfill import create_blocks, read_run, run_labels, write_openmetrics
    from dashgen.project_metrics import project_catalog
    from dashgen.replay.backtest import iso_time
    from dashgen.promtool import find_binary

    config = load_config(config_path, root)
    timing = _timing(start, scrape_interval, default_step_time, run_end, hold, config)
    for option, value in (("--project", project), ("--experiment", experiment), ("--instance", instance)):
        if value is not None and not value.strip():
            raise BuildError(f"{option} {value!r}: give a label value, or leave the option out for its default")
    _writable_folder(tsdb_dir, "--tsdb")
    find_binary("promtool")
    run = read_run(run_path, run_labels(run_path, config.verl_job, project, experiment, instance), timing,
                   export_unknown=unknown_keys, catalog=project_catalog(root))
    try:  # before promtool's long work; a folder os.access calls writable may still refuse (/proc)
        tsdb_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"--tsdb {tsdb_dir}: cannot create the folder: {exc.strerror or exc}") from None
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
@click.option("--rules", "rule_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Backtest this Prometheus rule file instead of the project's alerts (repeatable).")
def backtest(run_paths: tuple[Path, ...], root: Path, config_path: Path | None, start: str | None,
             scrape_interval: str | None, default_step_time: str, run_end: str | None, hold: str | None,
             output_format: str, plot_path: Path | None, rule_files: tuple[Path, ...]) -> None:
    """Replay recorded runs through a real Prometheus and show when each alert would have fired.

    GPU alerts need Ray's or DCGM's metrics, which verl's step log does not hold: they never fire here.
    """
    import json

    from dashgen.replay.backtest import backtest as run_backtest
    from dashgen.replay.backtest import format_table, plot, require_matplotlib, to_json

    config = load_config(config_path, root)
    timing = _timing(start, scrape_interval, default_step_time, run_end, hold, config)
    if plot_path is not None:
        _check_plot_path(plot_path)
        require_matplotlib()
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


@cli.command()
@click.argument("run_path", metavar="[RUN.jsonl]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for one <dashboard uid>.png per dashboard. Default: rendered/preview/ of the project.")
@click.option("--allow-empty", is_flag=True,
              help="Succeed even when a panel that reads the verl exporter's series has no data.")
@click.option("--start", default=PREVIEW_START, show_default=True,
              help="When the run began (Unix seconds or RFC 3339): fixed, so the same run draws the same PNG.")
@_root_option
@_config_option
def preview(run_path: Path | None, out_dir: Path | None, allow_empty: bool, start: str, root: Path,
            config_path: Path | None) -> None:
    """Draw each dashboard to a PNG from real query results over a recorded run.

    The run (default: the sample run examples/runs/gsm8k/ppo-qwen-7b.jsonl) is backfilled into a
    temporary Prometheus as backtest does; every panel's queries are evaluated over it with the
    dashboard's variables set to the run. Fails when a panel reading verl's series has no data.
    """
    import json

    from dashgen.replay.backfill import Timing
    from dashgen.compiler.build import PREVIEW, RENDERED, render_project
    from dashgen.config import duration_seconds
    from dashgen.replay.preview import draw_dashboard, preview_data, require_matplotlib
    from dashgen.replay.preview.query import backfilled
    from dashgen.replay.preview.stamp import dashboard_digest
    from dashgen.project_metrics import project_catalog

    require_matplotlib()
    config = load_config(config_path, root)
    rendered = render_project(root, config)
    run_path = run_path or root / DEFAULT_PREVIEW_RUN
    if not run_path.is_file():
        raise BuildError(f"{run_path}: no such step log; give a verl run's JSONL (dashgen preview RUN.jsonl)")
    out_dir = out_dir or root / RENDERED / PREVIEW
    _writable_folder(out_dir, "--out")
    scrape_interval = duration_seconds(config.scrape_interval)
    timing = Timing(start=_parse_time(start), scrape_interval=scrape_interval)
    catalog = project_catalog(root)
    empty: list[str] = []
    with backfilled(run_path, config, catalog, timing) as (server, run):
        for module, dashboard in rendered.dashboards:
            model = json.loads(rendered.files[f"dashboards/{dashboard.uid}.json"])
            results, events = preview_data(server, model, run, catalog, scrape_interval, module)
            out_dir.mkdir(parents=True, exist_ok=True)
            path = out_dir / f"{dashboard.uid}.png"
            partial = out_dir / f".{dashboard.uid}.png.partial"
            draw_dashboard(model, results, events, run, partial,
                           dashboard_digest(rendered.files[f"dashboards/{dashboard.uid}.json"]))
            os.replace(partial, path)
            titles = {panel["id"]: panel["title"] for panel in _all_panels(model)}
            empty += [f"{dashboard.uid}: {titles[panel_id]!r}" for panel_id, result in results.items()
                      if result.reads_verl and not result.has_data]
            drawn = sum(result.has_data for result in results.values())
            click.echo(f"{path}: {drawn} of {len(results)} panels with data")
    if empty and not allow_empty:
        raise BuildError(f"{run_path}: panels reading verl's series have no data (a key the run does not log, or a "
                         f"query that selects nothing; --allow-empty draws them anyway):\n  " + "\n  ".join(empty))


def _all_panels(model: dict):
    from dashgen.compiler.dashboards import iter_panels

    return iter_panels(model)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def init(directory: Path) -> None:
    """Create a team project in DIRECTORY that builds on dashgen's verl dashboards and alerts."""
    from dashgen.compiler.scaffold import init_project

    written = init_project(directory)
    click.echo(f"created {len(written)} files in {directory}:\n  " + "\n  ".join(written))
    click.echo(f"next: cd {directory} && dashgen build && dashgen check   (make test also runs the rule tests)")
