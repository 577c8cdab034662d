"""The metric sources a project's dashboards and alerts read a run's series from (`source:` in
dashgen.yaml), one module per source, each mapping its own series and labels onto the catalog's
meanings (dashgen/catalog.py); and the statistics over steps the exporter computes from the step log."""
