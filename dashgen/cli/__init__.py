"""The `dashgen` command line (dashgen.cli.main); `dashgen.cli:main` is the console script."""

from __future__ import annotations

import sys


def main() -> None:
    # Importing the commands takes a moment on a loaded machine: a Ctrl-C in that moment is an
    # ordinary interruption (nothing was started yet), not a traceback.
    try:
        from dashgen.cli.main import main as run
    except KeyboardInterrupt:
        print("dashgen: interrupted before it started", file=sys.stderr)
        sys.exit(130)
    run()


def __getattr__(name: str):
    if name == "cli":
        from dashgen.cli.main import cli
        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["cli", "main"]
