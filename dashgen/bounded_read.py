"""Reading a file a user names, with a ceiling: `/dev/zero` or a huge file is refused, not held in memory."""

from __future__ import annotations

from pathlib import Path


class TooLarge(Exception):
    """The file holds more than the limit; the message says how much is allowed."""


def read_bounded(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of `path`; TooLarge if it holds more, OSError if it cannot be read."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"larger than {limit:,} bytes")
    return data
