"""The config as `dashgen config` prints it, and every field as `dashgen config --describe` does."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
from pathlib import Path
from typing import Any

import yaml

from dashgen.config.checking import _defined_in, _kinds, _schema, _type_name
from dashgen.config.schema import Config, Section


def _yaml_line(name: str, value: Any) -> str:
    return yaml.safe_dump({name: list(value) if isinstance(value, (tuple, frozenset)) else value},
                          default_flow_style=True, width=10**9, allow_unicode=True).strip()[1:-1]


def config_yaml(config: Config, sections: list[type[Section]] = (), overridden_in: Path | None = None,
                overridden: dict[str, Any] | None = None) -> str:
    """The effective config as YAML, one field a line (deploy targets and alert areas as sections),
    marking what a file set."""
    overridden = overridden or {}
    mark = f"  # from {overridden_in.name}" if overridden_in else ""
    lines = ["# Effective dashgen config: defaults of dashgen/config/, the deploy targets and the alert areas"
             + (f", overridden by {overridden_in}" if overridden_in else "") + "."]
    for f in dataclasses.fields(Config):
        lines.append(_yaml_line(f.name, getattr(config, f.name)) + (mark if f.name in overridden else ""))
    for section in sections:
        given = overridden.get(section.section) or {}
        lines.append(f"{section.section}:")
        values = config.section(section)
        for f in dataclasses.fields(section):
            lines.append("  " + _yaml_line(f.name, getattr(values, f.name)) + (mark if f.name in given else ""))
    return "\n".join(lines) + "\n"


# --- Describing the fields ------------------------------------------------------------------------

def describe_config(sections: list[type[Section]]) -> str:
    """Every field, the core config's and each section's: type, unit or format, default and
    description (the comment above the field in its source)."""
    out = []
    for cls, heading in ((Config, "Config (top level of dashgen.yaml)"),
                         *((s, f"{s.section}: ({s.__qualname__} in {_defined_in(s)})") for s in sections)):
        out.append(f"{heading}\n")
        docs = field_comments(cls)
        defaults = cls()
        for f, hint in _schema(cls).items():
            kind = "; ".join(k.describe() for k in _kinds(hint))
            out.append(f"  {f.name}: {_type_name(hint)}{f' ({kind})' if kind else ''}, default "
                       f"{_yaml_line('x', getattr(defaults, f.name))[3:]}\n")
            if docs.get(f.name):
                out.extend(f"      {line}\n" for line in textwrap.wrap(docs[f.name], 96, break_on_hyphens=False,
                                                                   break_long_words=False))
        out.append("\n")
    return "".join(out)


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> the comment lines right above its definition (and one at its end), joined; a
    field without a comment of its own has none (it does not borrow its neighbour's)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    comments: dict[int, str] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                comments[token.start[0]] = token.string.lstrip("#").strip()
    except (tokenize.TokenError, SyntaxError):
        return {}
    lines = source.splitlines()
    docs: dict[str, str] = {}
    for node in ast.parse(source).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above, line = [], node.lineno - 1
            while line >= 1 and line in comments and lines[line - 1].lstrip().startswith("#") \
                    and not comments[line].startswith("---"):
                above.insert(0, comments[line])
                line -= 1
            above += [comments[at] for at in sorted({node.lineno, node.end_lineno}) if at in comments]
            docs[node.target.id] = " ".join(above)
    return docs
