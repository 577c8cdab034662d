"""The one exception type for problems in a user's definitions or input.

It is a click exception, so the CLI prints its message once (`Error: ...`) and exits 1.
"""

import click


class BuildError(click.ClickException):
    """The message names the place (file, dashboard, panel or alert) and what is wrong."""


class DefinitionError(ValueError):
    """A mistake in a definition, found where it is written (an Alert's condition): the loader
    reports it with the definition's file and line, as one error."""


def get_close_matches(word: str, possibilities, n: int = 1, cutoff: float = 0.6) -> list[str]:
    """difflib's, for a "did you mean" hint; difflib is imported only when a message needs one."""
    import difflib

    return difflib.get_close_matches(word, possibilities, n=n, cutoff=cutoff)
