"""Text helpers every renderer shares: the Jinja environment and its escaping filters, and
runbook anchors. A module of its own, so the renderers (rules, dashboards, Alertmanager,
scaffold) import it rather than each other."""

from __future__ import annotations

import os
import pickle
import re
import sys
import tempfile
import zlib
from pathlib import Path

import jinja2
import yaml

# dashgen/ itself holds the templates and schemas, which several packages read.
_PACKAGE_DIR = Path(__file__).resolve().parents[2]

# How dashgen's templates are compiled: part of the name of their compiled files.
_TEMPLATE_OPTIONS = {"keep_trailing_newline": True, "trim_blocks": True, "lstrip_blocks": True, "autoescape": False}


class _CompiledTemplates(jinja2.BytecodeCache):
    """Compiled templates kept beside them in templates/__pycache__, as Python keeps a module's
    .pyc: read when there (Jinja checks the template's checksum and its own version), written
    unless Python writes no bytecode (PYTHONDONTWRITEBYTECODE); `make compile` writes them."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.suffix = f"{sys.implementation.cache_tag}-{zlib.crc32(repr(sorted(_TEMPLATE_OPTIONS.items())).encode()):08x}"

    def _path(self, bucket: jinja2.bccache.Bucket) -> Path:
        return self.directory / f"{bucket.key}.{self.suffix}.jinja"

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            with open(self._path(bucket), "rb") as handle:
                bucket.load_bytecode(handle)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError):  # none, or cut short: compiled anew
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if sys.dont_write_bytecode:
            return
        try:
            self.directory.mkdir(exist_ok=True)
            handle = tempfile.NamedTemporaryFile("wb", dir=self.directory, prefix=".writing-", delete=False)
        except OSError:  # a read-only install: compiled again next time
            return
        try:
            with handle:
                bucket.write_bytecode(handle)
            os.chmod(handle.name, 0o644)
            os.replace(handle.name, self._path(bucket))
        except OSError:
            pass
        finally:
            Path(handle.name).unlink(missing_ok=True)  # left only if it was not moved into place


def compile_templates() -> None:
    """Write every template's compiled file (`make compile`), whatever PYTHONDONTWRITEBYTECODE says."""
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        env = templates()
        for name in env.list_templates(filter_func=lambda name: name.endswith(".j2")):
            env.get_template(name)
    finally:
        sys.dont_write_bytecode = writes


def _template_cache() -> _CompiledTemplates:
    return _CompiledTemplates(_PACKAGE_DIR / "templates" / "__pycache__")


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("dashgen", "templates"), undefined=jinja2.StrictUndefined,
                             bytecode_cache=_template_cache(), **_TEMPLATE_OPTIONS)
    # Values reach YAML and Markdown only through these filters, so no config or definition
    # value can change the structure of a rendered file.
    env.filters["yaml"] = yaml_scalar
    env.filters["markdown_text"] = markdown_text
    return env


def yaml_scalar(value: object) -> str:
    """`value` as one YAML scalar on one line, quoted as YAML needs (by PyYAML) in block or flow context."""
    # Dumped as the item of a flow list, PyYAML quotes whatever a flow context would misread (, [ ] { } :).
    text = yaml.safe_dump([value], default_flow_style=True, width=10**9, allow_unicode=True).strip()[1:-1]
    if "\n" in text:  # a multi-line string: double quotes turn its line breaks into \n escapes
        text = yaml.safe_dump(value, default_style='"', width=10**9, allow_unicode=True).strip()
    return text


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")
_MARKDOWN_LINE_START = re.compile(r"^([#>+=-]|\d+(?=[.)]))")


def markdown_text(value: str) -> str:
    """Plain text as one line of Markdown: line breaks become spaces, markup characters are escaped."""
    text = " ".join(str(value).split())
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", text)
    # A line starting like a heading, quote or list item would become one.
    return _MARKDOWN_LINE_START.sub(lambda m: m.group(1) + "\\" if m.group(1)[0].isdigit() else "\\" + m.group(1),
                                    text, count=1)


def runbook_anchor(alert_name: str) -> str:
    # Markdown renderers (GitHub's among them) anchor "## VerlKLSpike" as #verlklspike.
    return alert_name.lower()
