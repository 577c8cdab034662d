"""Bytes per panel of the committed dashboards (the issue's goal: <= 1,200 B per panel).

    .venv/bin/python bench/dashboard_bytes.py

Per dashboard: file size, panels (rows included, collapsed rows' panels counted once), the
average, and the largest panel as it is written in the file.
"""

import json
from pathlib import Path

from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.targets.grafana import dashboard_to_text

REPO = Path(__file__).resolve().parent.parent


def panel_bytes(model: dict) -> dict[str, int]:
    """Each panel's bytes as written (a collapsed row without the panels it holds)."""
    sizes = {}
    for panel in iter_panels(model):
        alone = {key: value for key, value in panel.items() if key != "panels"}
        # Indented as in the file: a panel sits two levels deep, a collapsed row's child three.
        sizes[f"{panel['type']} {panel.get('title', '')!r}"] = len(dashboard_to_text(alone).replace("\n", "\n    "))
    return sizes


def main() -> None:
    for path in sorted((REPO / "rendered" / "dashboards").glob("*.json")):
        model = json.loads(path.read_text())
        sizes = panel_bytes(model)
        total = path.stat().st_size
        largest = max(sizes, key=sizes.get)
        print(f"{path.relative_to(REPO)}: {total} B, {len(sizes)} panels, {total / len(sizes):.0f} B per panel "
              f"(file / panels); largest: {largest} {sizes[largest]} B")


if __name__ == "__main__":
    main()
