"""The `dashgen` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dashgen.config import load_config
from dashgen.errors import BuildError

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


@cli.command()
@click.option("--jsonl", "path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="verl's step log (trainer.logger includes 'file'); may not exist yet.")
@click.option("--listen", default="127.0.0.1:9464", show_default=True, help="host:port to serve /metrics on.")
@click.option("--project", default=None, help="Label value; default: the log's parent folder name.")
@click.option("--experiment", default=None, help="Label value; default: the log's file name without .jsonl.")
@click.option("--unknown-keys/--no-unknown-keys", default=True, show_default=True,
              help="Also export keys the catalog does not know, named by the same rule.")
@click.option("--poll-interval", default=0.5, show_default=True, type=click.FloatRange(0.01, 60),
              help="Seconds between looks at the log.")
def export(path: Path, listen: str, project: str | None, experiment: str | None, unknown_keys: bool,
           poll_interval: float) -> None:
    """Follow verl's JSONL step log and serve its newest step on /metrics for Prometheus."""
    import signal
    import threading

    from prometheus_client import CollectorRegistry, start_http_server

    from dashgen.exporter import LogFollower, RunState, follow_forever, run_from_path

    host, _, port_text = listen.rpartition(":")
    if not host or not port_text.isdigit():
        raise BuildError(f"--listen {listen!r}: expected host:port, e.g. 127.0.0.1:9464")
    default_project, default_experiment = run_from_path(path)
    state = RunState(project or default_project, experiment or default_experiment, export_unknown=unknown_keys)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(state)
    try:
        start_http_server(int(port_text), addr=host.strip("[]"), registry=registry)
    except OSError as exc:
        raise BuildError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    click.echo(f"dashgen export: serving {path} as project={state.labels[0]!r} experiment={state.labels[1]!r} "
               f"on http://{listen}/metrics", err=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        follow_forever(LogFollower(path, state), poll_interval, stop)
    except KeyboardInterrupt:
        pass
