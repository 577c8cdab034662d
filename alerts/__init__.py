"""verl alert rules shipped with dashgen (installed as `dashgen_alerts`); `dashgen init` projects import them."""
