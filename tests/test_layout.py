"""dashgen's layers as the graph they are: each package imports only what stands below it, and the
graph has no circle. The shipped definitions are in it too (dashgen_alerts, dashgen_panels), which
import the authoring API and which the compiler reads as a project's defaults.

    cli
    review    evaluation
    replay
    runtime   compiler
       |      dashgen_panels -> dashgen_alerts
    sources -> formats
    the authoring API (dashgen/*.py: model, conditions, config, catalog, ...)

runtime and compiler stand side by side: what runs beside a trainer and what turns definitions into
files share only what stands below them. MAY_IMPORT says which layer reads which.
"""

import ast
from pathlib import Path

from conftest import REPO

API = "the authoring API"  # dashgen's top-level modules (and the config package): model, conditions, config, ...
ALERTS, PANELS = "dashgen_alerts", "dashgen_panels"  # alerts/ and panels/ as the wheel installs them
# Each layer and the layers it may import (besides itself).
MAY_IMPORT = {
    "cli": {"review", "evaluation", "replay", "runtime", "compiler", "sources", "formats", API},
    "review": {"replay", "compiler", "sources", API},
    "evaluation": {"replay", "compiler", "sources", "formats", API},
    "replay": {"runtime", "compiler", "sources", "formats", API},
    "runtime": {"sources", "formats", API},
    "compiler": {"sources", ALERTS, PANELS, API},
    "sources": {"formats", API},
    "formats": {API},
    PANELS: {ALERTS, API},
    ALERTS: {API},
    API: set(),
}
# Imports the graph does not have, that the code still has, each with why and what removes it.
KNOWN: dict[tuple[str, str], str] = {}  # none now: dashgen.config lists no shipped area (dashgen.compiler.sections does)
# A project's definition modules that `dashgen init` copies: not dashgen's code.
NOT_CODE = ("templates",)


def layer_of(path: Path) -> str | None:
    relative = path.relative_to(REPO)
    if relative.parts[0] == "alerts":
        return ALERTS
    if relative.parts[0] == "panels":
        return PANELS
    inside = relative.relative_to("dashgen")
    if len(inside.parts) == 1 or inside.parts[0] == "config":
        return API
    return None if inside.parts[0] in NOT_CODE else inside.parts[0]


def layer_named(module: str) -> str | None:
    """The layer a module name belongs to; None for one outside dashgen."""
    parts = module.split(".")
    if parts[0] in (ALERTS, PANELS):
        return parts[0]
    if parts[0] != "dashgen":
        return None
    if len(parts) > 1 and parts[1] in MAY_IMPORT:
        return parts[1]
    return API


def imports(path: Path):
    """(line, module) of each import, at the top or in a function; a module that importlib loads by
    a literal name (`import_module(f"dashgen_alerts.{name}")`) counts as imported."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for name in [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]:
                yield node.lineno, name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant):
                first = first.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value


def edges() -> dict[tuple[str, str], list[str]]:
    """Each import from one layer into another, with the places it is made."""
    found: dict[tuple[str, str], list[str]] = {}
    files = [*(REPO / "dashgen").rglob("*.py"), *(REPO / "alerts").glob("*.py"), *(REPO / "panels").glob("*.py")]
    for path in sorted(files):
        source = layer_of(path)
        if source is None or path == REPO / "dashgen" / "__main__.py":  # `python -m dashgen` runs the command line
            continue
        for line, module in imports(path):
            target = layer_named(module)
            place = f"{path.relative_to(REPO)}:{line}"
            if target is not None and target != source and place not in found.get((source, target), ()):
                found.setdefault((source, target), []).append(place)
    return found


def circle(graph: dict[str, set[str]]) -> list[str]:
    """A circle of the graph, as the layers along it; empty if there is none."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(layer: str) -> list[str]:
        state[layer] = "on path"
        path.append(layer)
        for below in sorted(graph.get(layer, ())):
            if state.get(below) == "on path":
                return path[path.index(below):] + [below]
            if below not in state and (found := visit(below)):
                return found
        state[layer] = "done"
        path.pop()
        return []

    for layer in sorted(graph):
        if layer not in state and (found := visit(layer)):
            return found
    return []


def test_the_layers_form_a_graph_without_a_circle():
    assert circle(MAY_IMPORT) == []
    assert not set(MAY_IMPORT["runtime"]) & {"compiler"} and not set(MAY_IMPORT["compiler"]) & {"runtime"}


def test_no_layer_imports_one_it_may_not():
    wrong = [f"{where} imports {target} ({source} may import {', '.join(sorted(MAY_IMPORT[source])) or 'nothing'})"
             for (source, target), places in edges().items() if (source, target) not in KNOWN
             if target not in MAY_IMPORT[source] for where in places]
    assert not wrong, "\n".join(wrong)


def test_the_imports_have_no_circle_but_the_known_edges():
    graph: dict[str, set[str]] = {}
    for source, target in edges():
        if (source, target) not in KNOWN:
            graph.setdefault(source, set()).add(target)
    assert circle(graph) == []


def test_each_known_edge_is_still_there():
    """A known edge the code no longer has is taken out of KNOWN, so it cannot come back unseen."""
    assert set(KNOWN) <= set(edges()), sorted(set(KNOWN) - set(edges()))


def test_the_top_level_holds_the_authoring_api_and_at_most_15_modules():
    modules = sorted(path.name for path in (REPO / "dashgen").glob("*.py"))
    assert len(modules) <= 15, modules
    assert {"model.py", "conditions.py", "catalog.py"} <= set(modules)
    assert (REPO / "dashgen" / "config" / "__init__.py").is_file()


# Sizes a reader takes in at once (issue 37): a module, and a compiler function, which each turn one
# kind of definition into one kind of output.
MAX_MODULE_LINES, MAX_COMPILER_FUNCTION_LINES = 500, 60


def test_no_module_is_over_500_lines_and_no_compiler_function_over_60():
    long_modules = {path.relative_to(REPO).as_posix(): lines for path in (REPO / "dashgen").rglob("*.py")
                    if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long_modules == {}
    long_functions = {f"{path.relative_to(REPO).as_posix()}:{node.name}": node.end_lineno - node.lineno + 1
                      for path in (REPO / "dashgen" / "compiler").rglob("*.py")
                      for node in ast.walk(ast.parse(path.read_text()))
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.end_lineno - node.lineno + 1 > MAX_COMPILER_FUNCTION_LINES}
    assert long_functions == {}


# A folder a reader takes in at once (issue 54): the compiler was 34 modules in one folder.
MAX_FOLDER_MODULES = 15


def test_no_folder_in_dashgen_holds_more_than_15_modules():
    crowded = {}
    for folder in [REPO / "dashgen", *(path for path in (REPO / "dashgen").rglob("*") if path.is_dir())]:
        modules = [path.name for path in folder.glob("*.py") if path.name != "__init__.py"]
        if len(modules) > MAX_FOLDER_MODULES:
            crowded[folder.relative_to(REPO).as_posix()] = len(modules)
    assert crowded == {}
