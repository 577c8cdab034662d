"""`dashgen preview`: each dashboard drawn to a PNG from real query results, without Grafana.

query.py   backfill a recorded run into a temporary Prometheus (as backtest does), evaluate the
           project's rules over it with the backtest's machinery (the alerts that fire become
           `ALERTS` series), and evaluate every panel's and annotation's queries of the rendered
           dashboard over the run, with the template variables set to that run
units.py   values formatted as Grafana formats its units (s, bytes, percentunit, suffix:...)
draw.py    the panels laid out on Grafana's 24-column grid with matplotlib: time series (stacked
           where the panel stacks), stats as numbers, heatmaps as heatmaps, XY charts against the
           step, collapsed rows as bars, "No data" where a query returned nothing
stamp.py   the digest of the dashboard JSON a PNG was drawn from, which `dashgen check` compares
"""

from dashgen.replay.preview.draw import draw_dashboard
from dashgen.replay.preview.query import PanelResult, PreviewRun, Series, preview_data

__all__ = ["PanelResult", "PreviewRun", "Series", "draw_dashboard", "preview_data"]
