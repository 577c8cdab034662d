"""dashgen: Grafana dashboards and Prometheus alerts for verl RL training runs, as code."""

__version__ = "0.1.0"
