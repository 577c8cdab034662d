"""Where a run's metrics come from, one module per source, each mapping its own keys and labels
onto the catalog's meanings (dashgen/catalog.py)."""
