"""dashgen's "verl runs compared by step" dashboard, as shipped (the training dashboard links to it).

To change it, copy panels from dashgen_panels.compare_runs and return your own Dashboard.
"""

from dashgen_panels import compare_runs as defaults

from dashgen.config import Config
from dashgen.model import Dashboard


def dashboard(config: Config) -> Dashboard:
    return defaults.dashboard(config)
