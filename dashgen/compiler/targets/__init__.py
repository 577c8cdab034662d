"""Deploy targets beyond Prometheus' own rule files: Alertmanager's config and receivers, the
Prometheus Operator's Kubernetes objects, and the rule files VictoriaMetrics' vmalert (1.79 on) loads."""
