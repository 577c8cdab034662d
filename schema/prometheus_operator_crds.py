"""Extract the OpenAPI v3 schemas of the Prometheus Operator's CRDs into dashgen/schemas/kubernetes/.

Usage: python schema/prometheus_operator_crds.py CHECKOUT
  CHECKOUT: a clone of github.com/prometheus-operator/prometheus-operator at the release to vendor.

Reads example/prometheus-operator-crd/monitoring.coreos.com_<plural>.yaml, keeps the served
version's `openAPIV3Schema` of each kind dashgen renders, drops the `description` texts (the
schema's size, not its meaning) and writes it as JSON with sorted keys. Nothing here runs at
build or test time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

KINDS = {  # file name under example/prometheus-operator-crd/ -> version dashgen renders
    "monitoring.coreos.com_prometheusrules.yaml": "v1",
    "monitoring.coreos.com_podmonitors.yaml": "v1",
    "monitoring.coreos.com_servicemonitors.yaml": "v1",
    "monitoring.coreos.com_alertmanagerconfigs.yaml": "v1alpha1",
}
OUT = Path(__file__).resolve().parent.parent / "dashgen" / "schemas" / "kubernetes"


class _CRDLoader(yaml.SafeLoader):
    """Safe YAML that reads a plain `=` (an enum value of label matchers) as the string it is."""


_CRDLoader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def without_descriptions(node):
    if isinstance(node, dict):
        return {k: without_descriptions(v) for k, v in node.items()
                if not (k == "description" and isinstance(v, str))}
    if isinstance(node, list):
        return [without_descriptions(v) for v in node]
    return node


def main(checkout: Path) -> None:
    for file_name, version in KINDS.items():
        crd = yaml.load((checkout / "example" / "prometheus-operator-crd" / file_name).read_text(), Loader=_CRDLoader)
        kind = crd["spec"]["names"]["kind"]
        (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
        schema = without_descriptions(served["schema"]["openAPIV3Schema"])
        schema["x-dashgen-origin"] = {
            "apiVersion": f"{crd['spec']['group']}/{version}", "kind": kind,
            "operatorVersion": crd["metadata"]["annotations"]["operator.prometheus.io/version"],
            "file": f"example/prometheus-operator-crd/{file_name}"}
        (OUT / f"{kind}.schema.json").write_text(json.dumps(schema, sort_keys=True, indent=1) + "\n")
        print(f"{kind} {version}: {OUT / f'{kind}.schema.json'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
