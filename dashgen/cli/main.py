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
    """A signal that ends a process arrived (SIGTERM, SIGHUP, ...): unwinds like KeyboardInterrupt
    (not an Exception, nor a SystemExit that a definition module's guard would take for sys.exit)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# Every signal whose default action ends the process and that can be handled: each unwinds the
# command, so its `with` blocks stop the processes it started and remove its temporary folders
# (a terminal closed, SIGHUP; a CPU limit, SIGXCPU; `kill -USR1` by mistake; ...). SIGPIPE is
# Python's to ignore; SIGKILL and SIGSTOP cannot be handled (a killed run's folders go to the next).
ENDING_SIGNALS = tuple(getattr(signal, name) for name in (
    "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF", "SIGXCPU",
    "SIGXFSZ", "SIGPOLL", "SIGPWR") if hasattr(signal, name))


def main() -> None:
    _clean_up_on_signals()
    try:
        cli()
    except Terminated as ended:
        click.echo(f"dashgen: terminated ({signal.Signals(ended.signum).name}); cleaned up", err=True)
        sys.exit(128 + ended.signum)
    finally:
        # The process ends next. Objects frozen out of the collector are not traversed again
        # at interpreter shutdown: about a tenth of a short command's wall time (issue 19).
        gc.freeze()


def _clean_up_on_signals() -> None:
    """Each of ENDING_SIGNALS (SIGTERM from `timeout`, say) unwinds like Ctrl-C does, so every `with`
    block stops the processes it started and removes its temporary folders; a second signal during
    that clean-up is ignored rather than cutting it short."""
    def unwind(signum: int, _frame) -> None:
        for each in ENDING_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    for each in ENDING_SIGNALS:
        # Beside SIGTERM and SIGINT, one that whoever started us ignores stays ignored (nohup's SIGHUP).
        if each in (signal.SIGTERM, signal.SIGINT) or signal.getsignal(each) is not signal.SIG_IGN:
            signal.signal(each, unwind)


for command in (project.init, project.build, project.check, project.list_, project.lint, project.test, project.config_,
                trainer.export, trainer.act, replay.backfill, replay.backtest, replay.preview, review.review):
    cli.add_command(command)
