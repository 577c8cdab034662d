"""Recorded runs replayed through the real engines: backfill into a TSDB, backtest the alerts,
preview the dashboards."""
