"""Rule files as PyYAML writes them, written without PyYAML's emitter where the data allows.

PyYAML's pure-Python emitter was a tenth of `dashgen build` (an event per node, a character loop
per scalar). The rule files hold only mappings, lists and ASCII strings, for which its block style
is simple: this module writes exactly those bytes, and hands anything else (another type, a
character outside printable ASCII, an empty string, a line long enough to be folded, a multi-line
string needing a chomping or indentation hint) to PyYAML. tests/test_block_yaml.py compares the
two on the rendered rules and on generated strings of the characters YAML treats specially.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.resolver import Resolver

# PyYAML folds a line at a space once it passes its width (1000 here); lines are kept well short of it.
WIDTH = 1000
_SHORT_ENOUGH = WIDTH - 40
# Printable ASCII, and line breaks in multi-line strings.
_ASCII = re.compile(r"[\x20-\x7e\n]*")
# What makes PyYAML quote a one-line string in block context (its analyze_scalar): an indicator
# first, ": " or " #" inside, a colon last, a document marker, a space at either end.
_NOT_PLAIN = re.compile(r"""[-?:](?:\s|$)|[#,\[\]{}&*!|>'"%@`]|---|\.\.\.|\s|.*(?::(?:\s|$)| \#)|.*\s$""")


class _Literal(yaml.SafeDumper):
    """The rule dumper: multi-line strings as literal blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Literal.add_representer(str, _represent_str)


def pyyaml_rule_yaml(data: dict) -> str:
    """The reference: PyYAML's block style, multi-line strings as literal blocks."""
    return yaml.dump(data, Dumper=_Literal, sort_keys=False, default_flow_style=False, width=WIDTH,
                     allow_unicode=True)


def rule_yaml(data: dict) -> str:
    """`data` as pyyaml_rule_yaml writes it, byte for byte."""
    out: list[str] = []
    if not isinstance(data, dict) or not data or not _mapping(data, 0, out, first_inline=False):
        return pyyaml_rule_yaml(data)
    return "".join(out)


class _Unsupported(Exception):
    pass


def _mapping(data: dict, indent: int, out: list[str], first_inline: bool) -> bool:
    try:
        _write_mapping(data, indent, out, first_inline)
    except _Unsupported:
        return False
    return True


def _write_mapping(data: dict, indent: int, out: list[str], first_inline: bool) -> None:
    """A non-empty mapping whose keys start at column `indent`; its first key follows "- " when `first_inline`."""
    pad = " " * indent
    for number, (key, value) in enumerate(data.items()):
        if not isinstance(key, str) or "\n" in key or len(key) > 100:  # PyYAML writes a key of 128 as "? key"
            raise _Unsupported
        prefix = ("" if first_inline and number == 0 else pad) + _one_line(key, indent) + ":"
        if isinstance(value, str):
            out.append(prefix + _value(value, indent, len(pad) + len(prefix) + 1))
        elif isinstance(value, dict) and value:
            out.append(prefix + "\n")
            _write_mapping(value, indent + 2, out, False)
        elif isinstance(value, list) and value:
            out.append(prefix + "\n")
            _write_sequence(value, indent, out)  # PyYAML does not indent a list under its key
        else:
            raise _Unsupported


def _write_sequence(items: list, indent: int, out: list[str]) -> None:
    pad = " " * indent
    for item in items:
        if isinstance(item, dict) and item:
            out.append(pad + "- ")
            _write_mapping(item, indent + 2, out, True)
        elif isinstance(item, str):
            out.append(pad + "-" + _value(item, indent, indent + 2))
        else:
            raise _Unsupported


def _value(text: str, indent: int, column: int) -> str:
    """A string after its key's colon (or a list's dash), with the space and line break after it."""
    if "\n" in text:
        return " " + _literal(text, indent)
    return " " + _one_line(text, column) + "\n"


def _one_line(text: str, column: int) -> str:
    """A one-line string, plain where PyYAML writes it plain, else single-quoted."""
    if not text or column + len(text) > _SHORT_ENOUGH or not _ASCII.fullmatch(text):
        raise _Unsupported
    if _NOT_PLAIN.match(text) is None and _resolves_to_str(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _literal(text: str, indent: int) -> str:
    """A multi-line string as a literal block `|-`, its lines two columns in from `indent`."""
    if (not _ASCII.fullmatch(text) or text[0] in " \n" or text[-1] in " \n" or " \n" in text
            or max(map(len, text.split("\n"))) + indent > _SHORT_ENOUGH):
        raise _Unsupported
    pad = " " * (indent + 2)
    return "|-\n" + "".join((pad + line if line else "") + "\n" for line in text.split("\n"))


def _resolves_to_str(text: str) -> bool:
    """Whether PyYAML would read `text`, written plain, back as a string (not a number, bool, null, ...)."""
    resolvers = Resolver.yaml_implicit_resolvers
    for _tag, pattern in resolvers.get(text[0], []) + resolvers.get(None, []):
        if pattern.match(text):
            return False
    return True


def value_is_supported(text: Any) -> bool:
    """For tests: whether rule_yaml writes this string itself rather than handing the file to PyYAML."""
    try:
        _value(text, 4, 10)
    except _Unsupported:
        return False
    return True
