"""The public corpus of real runs: bench/realruns/ in a clone, the package `dashgen_runs` in the wheel."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from dashgen.errors import BuildError

CORPUS_PACKAGE = "dashgen_runs"


def public_corpus() -> Path:
    """The folder of the public corpus' run folders."""
    try:
        folder = Path(str(resources.files(CORPUS_PACKAGE)))
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parents[2] / "bench" / "realruns"
    if not folder.is_dir():
        raise BuildError(f"the public corpus ({CORPUS_PACKAGE}) is not installed: install dashgen-rl from a wheel "
                         f"built in a clone (pip wheel --no-deps -w dist .), or give the runs' folders")
    return folder
