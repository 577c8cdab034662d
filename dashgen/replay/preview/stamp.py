"""Which dashboard JSON a preview PNG was drawn from: a digest in a PNG text chunk.

`dashgen check` reads it back (with no image library: PNG chunks are simple) to name a preview
drawn from an older dashboard, so a reviewer is not shown a stale picture.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from pathlib import Path

STAMP_KEY = "dashgen-dashboard-sha256"
_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def dashboard_digest(dashboard_json: str) -> str:
    return hashlib.sha256(dashboard_json.encode()).hexdigest()


def read_stamp(png: Path) -> str | None:
    """The digest a preview PNG carries; None if it is no PNG or carries none."""
    data = png.read_bytes()
    if not data.startswith(_SIGNATURE):
        return None
    offset = len(_SIGNATURE)
    while offset + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            if key.decode("latin-1") == STAMP_KEY:
                return value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            if key.decode("latin-1") == STAMP_KEY:
                return zlib.decompress(rest[1:]).decode("latin-1")
        elif kind == b"IEND":
            break
        offset += 12 + length
    return None


def stale_previews(preview_dir: Path, dashboards: dict[str, str]) -> list[str]:
    """One line per preview PNG that was not drawn from the current JSON of its dashboard
    (uid -> JSON text), or whose dashboard is gone."""
    problems = []
    for png in sorted(preview_dir.glob("*.png")) if preview_dir.is_dir() else []:
        shown = f"{preview_dir.parent.name}/{preview_dir.name}/{png.name}"
        current = dashboards.get(png.stem)
        if current is None:
            problems.append(f"{shown}: no dashboard {png.stem!r} any more (left over?)")
        elif read_stamp(png) != dashboard_digest(current):
            problems.append(f"{shown}: drawn from an older dashboards/{png.stem}.json; run `dashgen preview`")
    return problems
