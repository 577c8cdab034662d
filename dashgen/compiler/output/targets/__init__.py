"""The renderers: each turns the compiled project (dashgen/compiler/compiled.py) into the files of one
artefact under rendered/; `dashgen build` runs them in turn (dashgen/compiler/output/build.py, RENDERERS).

prometheus.py       rules/*.yaml, prometheus/prometheus.yml
exporter.py         exporter/step-statistics.yaml: the step windows `dashgen export` computes
runbook.py          docs/alerts.md
grafana.py          dashboards/*.json, provisioning/
alertmanager.py     alertmanager/alertmanager.yml (and its routing fixtures, which `dashgen test` runs)
victoriametrics.py  victoriametrics/rules/*.yaml for vmalert (with `victoriametrics: true`)
kubernetes.py       kubernetes/: the Prometheus Operator's objects (with `kubernetes: true`)
"""
