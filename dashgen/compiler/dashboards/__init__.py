"""Dashboard definitions (panels/*.py) -> Grafana dashboard JSON, validated against Grafana's schemas;
which logged signals the dashboards show."""
