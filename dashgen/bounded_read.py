"""Reading a file a user names, with a ceiling: `/dev/zero` or a huge file is refused, not held in
memory, and a document nested deeper than Python's parsers go is a clear error, not a traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

Text = TypeVar("Text", str, bytes)


class TooLarge(Exception):
    """The file holds more than the limit; the message says how much is allowed."""


class Unparseable(ValueError, yaml.YAMLError):
    """A JSON or YAML document nested deeper than its parser goes, or holding an integer of more
    digits than Python reads. Both a ValueError (as json's errors are) and a YAMLError, so the
    handler that reports a file's other syntax errors reports this one too."""


def read_bounded(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of `path`; TooLarge if it holds more, OSError if it cannot be read."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit:,} bytes")
    return data


class NotText(ValueError):
    """The file is binary (NUL bytes) or not UTF-8; the message says which and where."""


def read_text(path: Path, limit: int) -> str:
    """`path` as UTF-8 text, read as at most `limit` bytes first: TooLarge, NotText for a binary
    file, OSError if it cannot be read (unreadable, a folder). One clear error naming the file is
    the caller's, never a UnicodeDecodeError traceback."""
    data = read_bounded(path, limit)
    nul = data.find(b"\0")
    if nul >= 0:
        raise NotText(f"a binary file (a NUL byte at offset {nul:,}), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotText(f"not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start:,}): a binary "
                      f"file?") from None


def parse_nested(load: Callable[[Text], Any], text: Text) -> Any:
    """`load(text)` (json.loads, a yaml loader), with nesting deeper than Python's recursion goes
    and integers of thousands of digits as Unparseable, never a RecursionError or a bare ValueError:
    the one reader every JSON and YAML a user gives goes through."""
    try:
        return load(text)
    except RecursionError:
        raise Unparseable("nested deeper than the parser goes (thousands of brackets or indents); "
                          "is it the right file?") from None
    except ValueError as exc:
        if isinstance(exc, yaml.YAMLError) or "integer string conversion" not in str(exc):
            raise
        raise Unparseable(f"holds an integer of more than {sys.get_int_max_str_digits():,} digits") from None
