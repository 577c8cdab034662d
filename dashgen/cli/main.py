"""The `dashgen` command line: the group, its signal handling, and the commands of each concern."""

from __future__ import annotations

import gc
import signal
import sys

import click

from dashgen import DISTRIBUTION
from dashgen.cli import project, replay, review, trainer


@click.group()
@click.version_option(package_name=DISTRIBUTION)
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



for command in (project.init, project.build, project.check, project.list_, project.lint, project.test, project.config_,
                trainer.export, trainer.act, replay.backfill, replay.backtest, replay.preview, review.review):
    cli.add_command(command)
