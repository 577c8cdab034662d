"""Where notifications go: Alertmanager's routes, inhibitions and receivers."""
