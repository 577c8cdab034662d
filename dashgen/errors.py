"""The one exception type for problems in a user's definitions or input.

It is a click exception, so the CLI prints its message once (`Error: ...`) and exits 1.
"""

import click


class BuildError(click.ClickException):
    """The message names the place (file, dashboard, panel or alert) and what is wrong."""
