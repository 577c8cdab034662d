"""Expansion of named selectors (`verl_actor_ppo_kl{$run}`) into label matchers.

Definitions never spell out job names or template variables themselves; the compiler
fills them in from the config, so one setting changes every query that uses it. A name is
written with a `$` (`{$verl}`, `{$verl, state!="running"}`), so in a Python f-string it is no
replacement field: `f"{metric}{{$verl}}"`, where a forgotten doubling of the braces is a syntax
error instead of a variable quietly filled in. The bare name (`{verl}`) of projects made before
is read the same way.
"""

from __future__ import annotations

import re
from typing import Mapping

import textwrap

from dashgen.catalog import Catalog
from dashgen.compiler.queries.promql import QueryError, SeriesInfo, check_expression, label_value
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.gpu import gpu_source

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _scrape_job_selectors(config: Config) -> dict[str, str]:
    return {"gpu": f"job={label_value(gpu_source(config).job(config))}", "node": f"job={label_value(config.ray_job)}",
            "rollout": f"job={label_value(config.rollout_job)}"}


def dashboard_selectors(config: Config) -> dict[str, str]:
    """`run` is the run picked with the dashboard's variables; `run_labels` its project and experiment
    without the exporter's job, for series another job scrapes (the rollout engines)."""
    return {"run": 'job=~"$job", project=~"$project", experiment=~"$experiment"',
            "run_labels": 'project=~"$project", experiment=~"$experiment"', **_scrape_job_selectors(config)}


def rule_selectors(config: Config) -> dict[str, str]:
    """`verl` is the exporter's scrape job; rules see every run at once."""
    return {"verl": f"job={label_value(config.verl_job)}", **_scrape_job_selectors(config)}


def checked_expression(text: str, selectors: Mapping[str, str], catalog: Catalog,
                       where: str) -> tuple[str, SeriesInfo]:
    """Expand a definition's expression and check it; BuildError naming `where` if it fails."""
    try:
        return expression_info(text, selectors, catalog)
    except QueryError as exc:
        raise BuildError(f"{where}: {exc}\n  expr: {text.strip()}") from None


def expression_info(text: str, selectors: Mapping[str, str], catalog: Catalog) -> tuple[str, SeriesInfo]:
    """Expand a definition's expression and check it; QueryError, whose message is made only when read, if it fails."""
    expr = expand_selectors(textwrap.dedent(text).strip(), selectors)
    return expr, check_expression(expr, catalog)


# Where expand_selectors has something to do: a string starts, or braces open.
_QUOTE_OR_BRACE = re.compile(r"[\"'`{]")


def expand_selectors(expr: str, selectors: Mapping[str, str]) -> str:
    """Replace each bare name inside `{...}` by its matchers; quoted text is left alone."""
    out: list[str] = []
    i = 0
    while i < len(expr):
        special = _QUOTE_OR_BRACE.search(expr, i)
        if special is None:
            out.append(expr[i:])
            break
        out.append(expr[i:special.start()])
        i = special.start()
        char = expr[i]
        if char == '"' or char == "'" or char == "`":
            end = _string_end(expr, i)
            out.append(expr[i:end])
            i = end
        elif char == "{" and not (i > 0 and expr[i - 1] == "$"):
            end = _brace_end(expr, i)
            if end == len(expr):  # unclosed: leave it for the parser to report
                out.append(expr[i:])
                break
            out.append("{" + _expand_items(expr[i + 1:end], selectors) + "}")
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _expand_items(body: str, selectors: Mapping[str, str]) -> str:
    items = _split_top_level(body)
    expanded = []
    for item in items:
        name = item.strip()
        if name.startswith("$") and _IDENTIFIER.fullmatch(name[1:]):
            if name[1:] not in selectors:
                raise QueryError(f"unknown selector {name!r} in braces; known: "
                                 f"{', '.join('$' + known for known in sorted(selectors))}")
            expanded.append(selectors[name[1:]])
        elif _IDENTIFIER.fullmatch(name):  # the spelling before `$name`, which projects made before still use
            if name not in selectors:
                raise QueryError(f"unknown selector {name!r} in braces; known: {', '.join(sorted(selectors))}")
            expanded.append(selectors[name])
        elif name:
            expanded.append(name)
    return ", ".join(expanded)


def _split_top_level(body: str) -> list[str]:
    items, start, i = [], 0, 0
    while i < len(body):
        if body[i] in "\"'`":
            i = _string_end(body, i)
            continue
        if body[i] == ",":
            items.append(body[start:i])
            start = i + 1
        i += 1
    items.append(body[start:])
    return items


def _string_end(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text):
        if text[i] == "\\" and quote != "`":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return len(text)


def _brace_end(text: str, start: int) -> int:
    i = start + 1
    while i < len(text):
        if text[i] in "\"'`":
            i = _string_end(text, i)
            continue
        if text[i] == "}":
            return i
        i += 1
    return len(text)
