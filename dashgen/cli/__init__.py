"""The `dashgen` command line (dashgen.cli.main); `dashgen.cli:main` is the console script."""

from dashgen.cli.main import cli, main

__all__ = ["cli", "main"]
