"""Import the definition modules of a project: panels/*.py and alerts/*.py.

Each is imported from its file (modules starting with `_` are helpers and are skipped),
so an error can name the file, and a project needs no packaging of its definitions.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from dashgen.errors import BuildError, DefinitionError
from dashgen.records import record


@record
class DefinitionModule:
    """A definition module of the project, imported, with its path for messages."""

    path: Path  # relative to the project root, for messages
    module: ModuleType


def load_modules(root: Path, folder: str, entry_point: str) -> list[DefinitionModule]:
    """Every definition module in root/folder, in name order; each must define `entry_point`.

    A project without any is an error: most likely --root does not point at the project."""
    directory = root / folder
    where = f"{directory}" if root != Path(".") else folder
    if not directory.is_dir():
        raise BuildError(f"{where}/: no such folder; a project keeps its definitions in {folder}/*.py "
                         f"(each defining {entry_point}(config)). Is --root the project folder? "
                         f"`dashgen init DIR` creates a project on dashgen's verl defaults.")
    if str(root) not in sys.path:
        # Definitions may share helpers (`from panels._common import ...`).
        sys.path.insert(0, str(root))
    modules = []
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        shown = path.relative_to(root)
        name = f"dashgen_definitions.{folder}.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        # Registered, so that what inspects a definition's classes (typing, `config --describe`) finds it.
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except DefinitionError as exc:
            raise BuildError(f"{shown}: {exc}\n{_user_frames(exc, path)}") from None
        except Exception as exc:  # a definition module's own bug: report it with its place
            raise BuildError(f"{shown}: importing the module failed: {type(exc).__name__}: {exc}\n"
                             f"{_user_frames(exc, path)}") from None
        except SystemExit as exc:
            raise BuildError(f"{shown}: importing the module called sys.exit({exc.code!r}); a definition "
                             f"module must not exit\n{_user_frames(exc, path)}") from None
        if not callable(getattr(module, entry_point, None)):
            raise BuildError(f"{shown}: defines no function {entry_point}(config)")
        modules.append(DefinitionModule(shown, module))
    if not modules:
        raise BuildError(f"{where}/: no definition modules (expected {folder}/*.py, each defining "
                         f"{entry_point}(config); files starting with _ are helpers)")
    return modules


def call_definition(definition: DefinitionModule, entry_point: str, *args):
    try:
        return getattr(definition.module, entry_point)(*args)
    except BuildError:
        raise
    except DefinitionError as exc:
        files = [arg.config_file for arg in args if isinstance(getattr(arg, "config_file", None), Path)]  # a Config's file
        read = f" (with the values {files[0]} sets)" if files else ""
        raise BuildError(f"{definition.path}: {exc}{read}\n{_user_frames(exc, Path(definition.module.__file__))}") \
            from None
    except SystemExit as exc:
        raise BuildError(f"{definition.path}: {entry_point}() called sys.exit({exc.code!r}); a definition "
                         f"must not exit") from None
    except Exception as exc:
        raise BuildError(f"{definition.path}: {entry_point}() raised {type(exc).__name__}: {exc}\n"
                         f"{_user_frames(exc, Path(definition.module.__file__))}") from None


def _user_frames(exc: BaseException, path: Path) -> str:
    """The traceback lines inside the definition file, where the mistake is."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return "".join(f"  line {f.lineno}: {f.line}\n" for f in frames).rstrip()
