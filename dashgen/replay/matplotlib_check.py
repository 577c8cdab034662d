"""The pictures (`dashgen preview`, `backtest --plot`) need matplotlib, an optional dependency."""

from __future__ import annotations

import importlib.util

from dashgen import DISTRIBUTION
from dashgen.errors import BuildError


def require_matplotlib(what: str) -> None:
    """Fail with the install command when matplotlib is missing; `what` is the command that needs it."""
    if importlib.util.find_spec("matplotlib") is None:
        raise BuildError(f"{what} needs matplotlib; install it with: pip install '{DISTRIBUTION}[plot]' "
                         "(dashgen's plot extra) or pip install matplotlib")
