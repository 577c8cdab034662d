"""Rule and Alertmanager files as PyYAML writes them, without PyYAML's emitter where the data allows.

PyYAML's pure-Python emitter was a tenth of `dashgen build` (an event per node, a character loop
per scalar). The rendered files hold only mappings, lists, ASCII strings, integers and booleans,
for which its block style is simple: this module writes exactly those bytes, and hands anything
else (another type, a character outside printable ASCII, an empty string, a line long enough to be
folded, a multi-line string needing a chomping or indentation hint) to PyYAML. tests/compiler/test_block_yaml.py compares the
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


class _Indented(yaml.SafeDumper):
    """Lists indented under their key, as people write Alertmanager files."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


def pyyaml_rule_yaml(data: dict) -> str:
    """The reference for rule files: PyYAML's block style, multi-line strings as literal blocks."""
    return yaml.dump(data, Dumper=_Literal, sort_keys=False, default_flow_style=False, width=WIDTH,
                     allow_unicode=True)


def pyyaml_indented_yaml(data: dict) -> str:
    """The reference for Alertmanager's files: PyYAML's block style, lists indented under their key."""
    return yaml.dump(data, Dumper=_Indented, sort_keys=False, default_flow_style=False, width=WIDTH,
                     allow_unicode=True)


def rule_yaml(data: dict) -> str:
    """`data` as pyyaml_rule_yaml writes it, byte for byte."""
    return _Writer(indent_sequences=False, literal_blocks=True).text(data) or pyyaml_rule_yaml(data)


def indented_yaml(data: dict) -> str:
    """`data` as pyyaml_indented_yaml writes it, byte for byte."""
    return _Writer(indent_sequences=True, literal_blocks=False).text(data) or pyyaml_indented_yaml(data)


class _Unsupported(Exception):
    pass


class _Writer:
    def __init__(self, indent_sequences: bool, literal_blocks: bool):
        self.indent_sequences = indent_sequences
        self.literal_blocks = literal_blocks
        self.out: list[str] = []

    def text(self, data: Any) -> str | None:
        """The text, or None for data PyYAML must write."""
        if not isinstance(data, dict) or not data:
            return None
        try:
            self.mapping(data, 0, first_inline=False)
        except _Unsupported:
            return None
        return "".join(self.out)

    def mapping(self, data: dict, indent: int, first_inline: bool) -> None:
        """A non-empty mapping whose keys start at column `indent`; its first key follows "- " when `first_inline`."""
        pad = " " * indent
        for number, (key, value) in enumerate(data.items()):
            if not isinstance(key, str) or "\n" in key or len(key) > 100:  # PyYAML writes a key of 128 as "? key"
                raise _Unsupported
            key_text = _one_line(key, indent)
            prefix = ("" if first_inline and number == 0 else pad) + key_text + ":"
            if isinstance(value, dict) and value:
                self.out.append(prefix + "\n")
                self.mapping(value, indent + 2, False)
            elif isinstance(value, list) and value:
                self.out.append(prefix + "\n")
                self.sequence(value, indent + 2 if self.indent_sequences else indent)
            else:
                self.out.append(prefix + self.scalar(value, indent, indent + len(key_text) + 2))  # after ": "

    def sequence(self, items: list, indent: int) -> None:
        pad = " " * indent
        for item in items:
            if isinstance(item, dict) and item:
                self.out.append(pad + "- ")
                self.mapping(item, indent + 2, True)
            else:
                self.out.append(pad + "-" + self.scalar(item, indent, indent + 2))

    def scalar(self, value: Any, indent: int, column: int) -> str:
        """A scalar after its key's colon (or a list's dash), with the space and line break after it."""
        if isinstance(value, bool):
            return " true\n" if value else " false\n"
        if isinstance(value, int):
            return f" {value}\n"
        if not isinstance(value, str):
            raise _Unsupported
        if "\n" in value:
            if not self.literal_blocks:
                raise _Unsupported
            return " " + _literal(value, indent)
        return " " + _one_line(value, column) + "\n"


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
    """For tests: whether rule_yaml writes this value itself rather than handing the file to PyYAML."""
    try:
        _Writer(indent_sequences=False, literal_blocks=True).scalar(text, 4, 10)
    except _Unsupported:
        return False
    return True
