"""The verl training dashboard: dashgen's default, plus this team's rows.

Add a row of your own panels to TEAM_ROWS; a metric that dashgen does not know goes in
metrics.yaml first. To change a default panel, copy it from dashgen_panels.verl_training.
"""

import dataclasses

from dashgen_panels import verl_training as defaults

from dashgen.config import Config
from dashgen.model import Dashboard, Query, Row, Threshold, TimeSeries  # noqa: F401  (for your panels)

TEAM_ROWS: tuple[Row, ...] = (
    # Row("Our metrics", (TimeSeries("Judge score", (Query("verl_judge_score_mean{$run}", "{{experiment}}"),)),)),
)


def dashboard(config: Config) -> Dashboard:
    verl = defaults.dashboard(config)
    return dataclasses.replace(verl, rows=verl.rows + TEAM_ROWS)
