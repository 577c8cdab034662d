"""Commands on a project's definitions: init, build, check, list, lint, test, config."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dashgen.cli.options import collector_paused, config_option, rendered_dir, root_option
from dashgen.compiler.sections import load_config
from dashgen.config import config_path as find_config_path
from dashgen.errors import BuildError
from dashgen.sources.chosen import SOURCES
from dashgen.sources.exporter import EXPORTER

@click.command()
@root_option
@config_option
@click.option("--reload", "reload_url", default=None, metavar="URL",
              help="Then make the Prometheus at URL (e.g. http://localhost:9090) re-read its config and rules "
                   "(POST URL/-/reload; Prometheus needs --web.enable-lifecycle).")
@collector_paused
def build(root: Path, config_path: Path | None, reload_url: str | None) -> None:
    """Render panels/ and alerts/ into rendered/ (untouched if anything fails)."""
    from dashgen.compiler.output.build import check_for_vmalert, render_project, write_rendered
    from dashgen.compiler.output.tree_writer import project_lock

    if reload_url is not None:  # urllib.request, only then
        from dashgen.replay.prometheus_server import check_reload_url, reload_prometheus

        check_reload_url(reload_url)
    rendered = render_project(root, load_config(config_path, root))
    check_for_vmalert(rendered.files)
    with project_lock(root):
        out_dir = rendered_dir(root)
        changed = write_rendered(out_dir, rendered.files)
    for notice in rendered.project.notices:
        click.echo(f"notice: {notice}", err=True)
    click.echo(f"rendered {len(rendered.files)} files into {out_dir}"
               + (f"; changed: {', '.join(changed)}" if changed else "; nothing changed"))
    if reload_url is not None:
        reload_prometheus(reload_url)
        click.echo(f"reloaded Prometheus at {reload_url}")


@click.command()
@root_option
@config_option
@collector_paused
def check(root: Path, config_path: Path | None) -> None:
    """Fail if rendered/ is stale against the sources or any check fails."""
    from dashgen.compiler.output.build import PREVIEW, check_for_vmalert, differences, render_project, validate_rendered
    from dashgen.compiler.output.targets.grafana import dashboard_path
    from dashgen.compiler.output.tree_writer import project_lock
    from dashgen.replay.preview.stamp import stale_previews

    rendered = render_project(root, load_config(config_path, root))
    validate_rendered(rendered.files)
    check_for_vmalert(rendered.files)
    with project_lock(root):
        out_dir = rendered_dir(root)
        problems = differences(out_dir, rendered.files)
    problems += stale_previews(out_dir / PREVIEW, {d.uid: rendered.files[dashboard_path(d.uid)]
                                                   for d in rendered.project.dashboards})
    if problems:
        raise BuildError("rendered/ does not match the sources; run `dashgen build` and commit:\n  "
                         + "\n  ".join(problems))
    click.echo(f"ok: {len(rendered.files)} rendered files match their sources and pass the checks")


@click.command(name="list")
@root_option
@config_option
@click.option("--unused", is_flag=True,
              help="Instead: the verl keys of the catalog that no panel shows, each with the reason a dashboard "
                   "gives for leaving it out (Dashboard.left_out).")
def list_(root: Path, config_path: Path | None, unused: bool) -> None:
    """Show dashboards, their panels and the metrics each panel queries; then the alerts."""
    from dashgen.compiler.dashboards.dashboard_json import metrics_used
    from dashgen.compiler.project import compile_project

    config = load_config(config_path, root)
    project = compile_project(root, config)
    if unused:
        _list_unused(project)
        return
    for dashboard in project.dashboards:
        click.echo(f"{dashboard.uid}  {dashboard.definition.title!r}  ({dashboard.module})")
        used = metrics_used(dashboard.definition, config)
        for row in dashboard.definition.rows:
            click.echo(f"  {row.title}")
            for panel in row.panels:
                why = project.left_out.get((dashboard.uid, panel.title))
                left_out = f"  LEFT OUT with source {config.source}: {why}" if why else ""
                click.echo(f"    {panel.title}: {', '.join(used[panel.title])}{left_out}")
    for alert in project.alerts:
        click.echo(f"alert {alert.name} [{alert.severity.value}] ({alert.module})")
    for alert in project.unavailable:
        click.echo(f"alert {alert.name} [{alert.severity.value}] ({alert.module}) UNAVAILABLE with source "
                   f"{config.source}: {alert.why}")


def _list_unused(project) -> None:
    from dashgen.compiler.dashboards.coverage import unused_signals

    signals = unused_signals(project.dashboards, project.config, project.metrics)
    for unused in signals:
        click.echo(f"{unused.verl_key}  ({unused.metric})  "
                   + (f"left out: {unused.reason}" if unused.reason else "no panel, and no reason given"))
    click.echo(f"{len(signals)} catalogued verl key(s) without a panel", err=True)


@click.command()
@root_option
def lint(root: Path) -> None:
    """Run `promtool check rules` on rendered/rules/*.yaml and `amtool check-config` on Alertmanager's file;
    also `vmalert -dryRun` on rendered/victoriametrics/rules/*.yaml, as they are, when VictoriaMetrics is
    a target (config `victoriametrics: true`) and vmalert is installed."""
    from dashgen.compiler.output.targets.alertmanager import ALERTMANAGER_FILE
    from dashgen.compiler.output.tree_writer import project_lock
    from dashgen.promtool import run_tool

    with project_lock(root):
        rendered = rendered_dir(root)
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
    vmalert = _vmalert_dry_run(rendered)
    sys.exit(rules.returncode or routing.returncode or vmalert)


def _vmalert_dry_run(rendered: Path) -> int:
    """`vmalert -dryRun` on the rule files rendered for VictoriaMetrics, if there are any and vmalert
    is installed; says which it checked, or why it did not."""
    from dashgen.compiler.output.targets.victoriametrics import VMALERT_RULES_DIR, dry_run, vmalert_installed

    files = sorted((rendered / VMALERT_RULES_DIR).glob("*.yaml"))
    if not files:
        click.echo(f"no {rendered.name}/{VMALERT_RULES_DIR}/: VictoriaMetrics is not a target (config "
                   f"`victoriametrics: true` renders its rule files); skipped `vmalert -dryRun`")
        return 0
    if not vmalert_installed():
        click.echo("vmalert not found: skipped `vmalert -dryRun` (VictoriaMetrics' rule check; Debian package "
                   "victoria-metrics)")
        return 0
    result = dry_run(files)
    _show(result.stdout, result.stderr)
    click.echo(f"vmalert -dryRun: {len(files)} rule files in {rendered.name}/{VMALERT_RULES_DIR}/ "
               + ("load" if result.returncode == 0 else "FAILED"))
    return result.returncode


@click.command()
@root_option
@config_option
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

    from dashgen.compiler.rule_tests.fixture_names import (fixtures_for_source, readable_fixtures,
                                                           refuse_missing_rule_files)
    from dashgen.compiler.rule_tests.fixture_statistics import fixtures_with_statistics
    from dashgen.compiler.output.targets.prometheus import panel_links
    from dashgen.compiler.project import compile_project
    from dashgen.compiler.rule_tests.failure_report import explain_failures, unreachable_branches
    from dashgen.compiler.rule_tests.promtool_files import alerts_tested_by_fixtures, write_generated_tests
    from dashgen.compiler.rule_tests.generated_cases import known_gaps
    from dashgen.compiler.output.targets.alertmanager import run_route_fixtures
    from dashgen.promtool import find_binary, run_rule_tests

    config = load_config(config_path, root)
    if keep_generated is not None:
        _writable_folder("--keep-generated", keep_generated)
    project = compile_project(root, config)
    # Under another source, dashgen's own fixtures (in the exporter's names) are left out, a team's
    # in the exporter's names refused; the generated tests are in the source's names.
    fixtures, left_out = fixtures_for_source(readable_fixtures(root / "tests" / "rules"), project.source,
                                             project.metrics, config)
    if left_out:
        click.echo(f"source {config.source}: dashgen's own {len(left_out)} fixture(s) of tests/rules/ are in the "
                   f"exporter's names and not run; the alerts written with Alert.when are tested in the source's "
                   f"names", err=True)
    refuse_missing_rule_files(fixtures)
    # An alert is tested if any fixture tests it, whichever module's tests run.
    tested = alerts_tested_by_fixtures(fixtures)
    alerts = project.alerts
    if modules:
        alerts, fixtures = _tests_of_modules(modules, [rule_file.name for rule_file in project.rules.files],
                                             alerts, fixtures)
    untested = [(alert.module, alert.name) for alert in alerts if alert.definition.condition is None
                and alert.name not in tested and not alert.definition.untested.strip()]
    if not project.source.is_catalog:
        for module, name in untested:
            click.echo(f"{module}: alert {name!r} (PromQL written by hand) is tested by fixtures in the exporter's "
                       f"names only", err=True)
        untested = []
    if fixtures or any(alert.definition.condition is not None for alert in alerts):
        find_binary("promtool")  # a missing promtool named before the seconds that writing the tests takes
    failed = False
    folder = Path(tempfile.mkdtemp(prefix="dashgen-generated-tests-"))
    try:
        generated = write_generated_tests(folder, project.rules, alerts, config)
        fixtures = fixtures_with_statistics(fixtures, project.step_statistics, config.rule_interval,
                                            folder / "fixtures", config.runbook_base_url, panel_links(project))
        if keep_generated is not None:
            try:
                shutil.copytree(folder, keep_generated, dirs_exist_ok=True)
            except OSError as exc:  # shutil.Error (several files) is an OSError too
                raise BuildError(f"--keep-generated {keep_generated}: cannot write the generated tests there: "
                                 f"{exc.strerror or exc}") from None
        if fixtures or generated:
            stdout, stderr, failed = run_rule_tests([*fixtures, *generated])
            _show(stdout, stderr)
            explained = explain_failures(stdout + stderr, {alert.name: alert.definition for alert in alerts})
            for line in explained:
                click.echo(line, err=True)
            if explained:  # kept to read and to rerun with `promtool test rules`
                click.echo(f"the generated tests are kept in {keep_generated or folder}", err=True)
                if keep_generated is None:
                    folder = None
        elif modules and not untested:
            click.echo(f"no rule tests of {', '.join(modules)}: every alert there says why (untested=...)")
        elif not untested:
            raise BuildError(f"no rule tests: none in {root / 'tests' / 'rules'}, and no alert written with the "
                             f"vocabulary (Alert.when) to generate them for")
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    for line in known_gaps(alert.definition for alert in alerts):
        click.echo(line, err=True)
    unreachable = unreachable_branches(alerts, project.catalog, config)
    for line in unreachable:
        click.echo(line, err=True)
    for module, name in untested:
        click.echo(f"{module}: alert {name!r} has no rule test: add a case to tests/rules/, write it with "
                   f"Alert.when(...) so one is generated, or say why not with untested=\"...\"", err=True)
    routes_passed, report = run_route_fixtures(root)
    _show(report, "")
    sys.exit(1 if failed or untested or unreachable or not routes_passed else 0)


def _writable_folder(option: str, folder: Path) -> None:
    """Create `folder` (and its parents); BuildError naming `option` if it cannot be."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"{option} {folder}: cannot create that folder: {exc.strerror or exc}; give a folder "
                         f"you can write to") from None


def _tests_of_modules(modules: tuple[str, ...], rule_modules: list[str], alerts: list,
                      fixtures: list[Path]) -> tuple[list, list[Path]]:
    """The compiled alerts of the named alert modules, and their fixtures (tests/rules/MODULE-test*.yaml);
    `rule_modules` names every module of alerts/, with alerts or only recordings."""
    from dashgen.errors import get_close_matches

    known = sorted({*rule_modules, *(Path(alert.module).stem for alert in alerts)})
    wanted = {Path(name).stem for name in modules}  # `team` or `alerts/team.py`
    for name in sorted(wanted - set(known)):
        close = get_close_matches(name, known)
        hint = f"; did you mean {close[0]!r}?" if close else f" (the project's alert modules: {', '.join(known)})"
        raise BuildError(f"dashgen test {name}: no alert module alerts/{name}.py{hint}")
    return ([alert for alert in alerts if Path(alert.module).stem in wanted],
            [path for path in fixtures if any(path.stem.startswith(f"{name}-test") for name in wanted)])


def _show(stdout: str, stderr: str) -> None:
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)


@click.command(name="config")
@root_option
@config_option
@click.option("--describe", is_flag=True,
              help="Describe every field instead: type, unit or format, default and what it tunes.")
def config_(root: Path, config_path: Path | None, describe: bool) -> None:
    """Print the effective config (defaults plus the project's dashgen.yaml or --config) as YAML.

    Alert areas (stability, rewards, ...) are sections of their own; a project without alerts/
    shows dashgen's default areas."""
    from dashgen.compiler.sections import deploy_sections, shipped_areas
    from dashgen.config import areas_of, config_yaml, describe_config, read_overrides

    if (root / "alerts").is_dir():
        from dashgen.compiler.rules.rule_files import load_rule_modules

        areas = [*deploy_sections(), *areas_of(definition.module for definition in load_rule_modules(root))]
    else:
        areas = [*deploy_sections(), *shipped_areas()]
    if describe:
        click.echo(describe_config(areas), nl=False)
        return
    found = find_config_path(root, config_path)
    config = load_config(config_path, root)
    config.check_sections(areas)
    click.echo(config_yaml(config, areas, found, read_overrides(found) if found else {}), nl=False)



@click.command()
@click.argument("name", metavar="DIRECTORY")
@click.option("--source", type=click.Choice(list(SOURCES)), default=EXPORTER.name, show_default=True,
              help="Where the runs' metrics come from: dashgen's exporter on verl's step log, or verl's "
                   "RL-Insight hub (its dashgen.yaml then says `source: rl_insight`).")
def init(name: str, source: str) -> None:
    """Create a team project in DIRECTORY that builds on dashgen's verl dashboards and alerts."""
    from dashgen.compiler.scaffold import init_project

    if not name.strip():
        raise BuildError(f"dashgen init {name!r}: give the project's folder, e.g. dashgen init verl-monitoring")
    directory = Path(name)
    written = init_project(directory, source)
    click.echo(f"created {len(written)} files in {directory}:\n  " + "\n  ".join(written))
    click.echo(f"next: cd {directory} && dashgen build && dashgen check   (make test also runs the rule tests)")
