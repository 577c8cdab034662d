"""Options and helpers the command modules share."""

from __future__ import annotations

import functools
import gc
from pathlib import Path

import click

# How long `dashgen export -- CMD` serves a finished trainer's final state; backfill models the same.
DEFAULT_GRACE = "5m"
# How long backfill watches a hung run (--end hung) unless --hold says.
DEFAULT_HUNG_HOLD = "1h"
# How long a supervised trainer may take to exit after a stop before its process group is killed.
DEFAULT_KILL_TIMEOUT = "30s"
# How often `dashgen export` looks at the log when no change prompted it (--poll-interval), in seconds.
DEFAULT_POLL_SECONDS = 0.5
# Longest --grace and --kill-timeout: a day is more than any scrape needs, and far below what a timer takes.
MAX_SUPERVISOR_WAIT = 86400.0

root_option = click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path), default=".",
                           show_default=True, help="Project folder holding panels/, alerts/ and rendered/.")
config_option = click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
                             default=None, help="YAML file overriding fields of the config (dashgen config --describe). "
                                                "Default: dashgen.yaml in the project folder, if there is one.")


def built_step_statistics(root: Path, command: str, doing: str):
    """The statistics over steps the project's rules read, as its last build listed them; none, said
    on stderr, for a project never built (`doing`: what the command does with them)."""
    from dashgen.sources.statistics_file import rendered_statistics, statistics_path
    from dashgen.sources.step_statistics import ServedStatistics

    statistics = rendered_statistics(root)
    if statistics is None:
        click.echo(f"dashgen {command}: no {statistics_path(root)}: {doing} no statistics over steps, so the "
                   f"alerts that count in steps read nothing; run `dashgen build` in the project (--root) first",
                   err=True)
        return ServedStatistics()
    return statistics


def collector_paused(command):
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


def rendered_dir(root: Path) -> Path:
    """root/rendered, after finishing or discarding an interrupted build (call under the project lock)."""
    from dashgen.compiler.output.build import RENDERED
    from dashgen.compiler.output.tree_writer import recover

    note = recover(root / RENDERED)
    if note:
        click.echo(f"dashgen: {note}", err=True)
    return root / RENDERED

