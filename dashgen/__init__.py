"""dashgen: Grafana dashboards and Prometheus alerts for verl RL training runs, as code."""

__version__ = "0.1.0"
# The name pip knows dashgen by (pyproject.toml's [project] name). The command and the import
# are `dashgen`, but the bare name `dashgen` on PyPI is an unrelated project: every install hint
# names this one.
DISTRIBUTION = "dashgen-rl"
