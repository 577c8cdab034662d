"""What runs beside a trainer: the exporter that follows a run's step log and serves /metrics,
the supervisor of a trainer process, the link to Ray's session, and `dashgen act`, which takes
Alertmanager's notifications and stops or signals the run."""
