"""Text helpers every renderer shares: the Jinja environment and its escaping filters, and
runbook anchors. A module of its own, so the renderers (rules, dashboards, Alertmanager,
scaffold) import it rather than each other."""

from __future__ import annotations

import re

import jinja2
import yaml


def templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("dashgen", "templates"), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
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
