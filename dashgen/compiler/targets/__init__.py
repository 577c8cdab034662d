"""Deploy targets beyond Prometheus' own rule files: Alertmanager's config and receivers, the
Prometheus Operator's Kubernetes objects, and VictoriaMetrics' vmalert dialect."""
