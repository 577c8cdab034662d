"""The compiler: a project's definitions (panels/, alerts/) -> the files in rendered/.

`build` loads the project once and hands it to each renderer: dashboards (checked against the
catalog and Grafana's schema), rule files and their generated promtool tests, the runbook.
`targets/` renders what each engine loads beside Prometheus: Alertmanager, Kubernetes' Prometheus
Operator, VictoriaMetrics' vmalert.
"""
