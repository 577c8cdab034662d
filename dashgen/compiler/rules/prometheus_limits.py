"""What Prometheus' rule loader refuses in a rule file, checked in process so that the message
names the module and the alert: label names, and the Go templates of labels and annotations.
(Durations: dashgen.config.duration_problem; group names: dashgen.compiler.rules.rule_files.)
`promtool check rules` stays the final guard (dashgen/compiler/output/staged_checks.py)."""

from __future__ import annotations

import re

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Go's text/template: an action is {{ ... }}, trimmed as {{- ... -}}; these open a block closed by {{ end }}.
_BLOCK_KEYWORDS = {"if", "range", "with", "define", "block"}
_WORD = re.compile(r"[A-Za-z_]\w*")
_ACTION_PART = re.compile(r"}}|[\"'`]|/\*")  # where an action ends, or a string or comment inside it starts


def label_name_problem(name: object) -> str | None:
    """Why Prometheus refuses `name` as a rule's label name, or None."""
    if not isinstance(name, str) or not LABEL_NAME.fullmatch(name):
        return f"label name {name!r} is not valid: letters, digits and _, not starting with a digit"
    if name.startswith("__"):
        return f"label name {name!r} is reserved: names starting with __ are Prometheus' own"
    return None


def template_problem(text: str) -> str | None:
    """Why Go's text/template would refuse `text` (as Prometheus parses labels and annotations), or None:
    an action not closed by }}, a string not closed inside one, or blocks and {{ end }} that do not pair."""
    open_blocks: list[str] = []
    position = 0
    while True:
        start = text.find("{{", position)
        if start < 0:
            break
        end, problem = _action_end(text, start + 2)
        if problem:
            return problem
        action = text[start + 2:end].strip().removeprefix("-").removesuffix("-").strip()
        position = end + 2
        if action.startswith("/*"):
            continue  # a comment
        word = _WORD.match(action)
        keyword = word.group() if word else ""
        if keyword in _BLOCK_KEYWORDS:
            open_blocks.append(keyword)
        elif keyword == "end":
            if not open_blocks:
                return "{{ end }} without an {{ if }}, {{ range }} or {{ with }} to close"
            open_blocks.pop()
        elif keyword in ("else", "break", "continue") and not open_blocks:
            return f"{{{{ {keyword} }}}} outside an {{{{ if }}}}, {{{{ range }}}} or {{{{ with }}}}"
    if open_blocks:
        return f"{{{{ {open_blocks[-1]} }}}} is not closed by {{{{ end }}}}"
    return None


def _action_end(text: str, position: int) -> tuple[int, str | None]:
    """Where the action starting at `position` ends (the index of its }}), skipping quoted strings."""
    while (found := _ACTION_PART.search(text, position)) is not None:
        position = found.start()
        if found.group() == "}}":
            return position, None
        if found.group() == "/*":
            close = text.find("*/", position + 2)
            if close < 0:
                return position, "a {{/* comment */}} is not closed"
            position = close + 2
            continue
        close = _string_end(text, position)
        if close < 0:
            return position, f"a string opened at {text[position:position + 20]!r} is not closed inside its {{{{ }}}}"
        position = close + 1
    return len(text), "an action {{ ... is not closed by }}"


def _string_end(text: str, start: int) -> int:
    """The index of the quote closing the string opened at `start`, or -1; "..." and '.' take escapes."""
    quote, position = text[start], start + 1
    while position < len(text):
        char = text[position]
        if char == "\\" and quote != "`":
            position += 2
            continue
        if char == quote:
            return position
        if char == "\n" and quote != "`":
            return -1
        position += 1
    return -1
