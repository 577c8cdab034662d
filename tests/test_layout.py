"""dashgen's packages import one way: cli -> review -> replay -> runtime -> compiler -> sources -> the authoring API."""

import ast
from pathlib import Path

from conftest import REPO

# Each package, and what it may import of dashgen's packages; the top-level modules (the
# authoring API) import none of them, but for `python -m dashgen`, which runs the command line.
MAY_IMPORT = {
    "cli": {"cli", "review", "replay", "runtime", "compiler", "sources"},
    "review": {"review", "replay", "runtime", "compiler", "sources"},
    "replay": {"replay", "runtime", "compiler", "sources"},
    "runtime": {"runtime", "compiler", "sources"},
    "compiler": {"compiler", "sources"},
    "sources": {"sources"},
    None: set(),
}
PACKAGES = {name for name in MAY_IMPORT if name}


def dashgen_imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "dashgen" and len(parts) > 1 and parts[1] in PACKAGES:
                yield node.lineno, parts[1]
                break


def test_no_package_imports_one_above_it():
    wrong = []
    for path in sorted((REPO / "dashgen").rglob("*.py")):
        relative = path.relative_to(REPO / "dashgen")
        package = relative.parts[0] if len(relative.parts) > 1 else None
        if package not in MAY_IMPORT:  # templates/project/: files `dashgen init` copies, not dashgen's code
            continue
        allowed = {"cli"} if relative.name == "__main__.py" and package is None else MAY_IMPORT[package]
        for line, imported in dashgen_imports(path):
            if imported not in allowed:
                wrong.append(f"dashgen/{relative}:{line} imports dashgen.{imported}")
    assert not wrong, "\n".join(wrong)


def test_the_top_level_holds_the_authoring_api_and_at_most_15_modules():
    modules = sorted(path.name for path in (REPO / "dashgen").glob("*.py"))
    assert len(modules) <= 15, modules
    assert {"model.py", "conditions.py", "config.py", "catalog.py"} <= set(modules)
