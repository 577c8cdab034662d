"""verl dashboards shipped with dashgen (installed as `dashgen_panels`); `dashgen init` projects import them."""
