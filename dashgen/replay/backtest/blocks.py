"""OpenMetrics text turned into TSDB blocks part by part, while the rest is still being written.

`BlockParts` is a text file to write OpenMetrics into. Once a part holds `part_bytes`, the next
family (`# TYPE` line) starts a new part, and the finished one goes to a promtool of its own in
the background: on two cores Python writes (or queries) on while promtool converts. A family is
never split, so the parts hold disjoint series, and Prometheus reads blocks that overlap in time
as one. Each part's blocks are made in a folder of their own and moved into the TSDB once every
promtool has finished, so no promtool sees another's half-written block.

Blocks are made as long as promtool allows (BLOCK_HOURS): promtool 2.42 reads its whole input once
per block window, so a run that crossed a window boundary cost two reads. A backtest's TSDB is
temporary, so the retention price `dashgen backfill` avoids (dashgen/replay/backfill.py, block_hours)
does not apply.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterable

from dashgen.errors import BuildError
from dashgen.parent_death import die_with_parent_hook
from dashgen.promtool import find_binary

# The longest block promtool makes (2 h x 3^9, 4.5 years); a longer request is cut to it.
BLOCK_HOURS = 2 * 3 ** 9
# A part's size before the next family starts a new one. Each promtool costs some CPU of its own
# (a part of 16 MB, a third more in all), so parts are few: three for a 10,000-step run.
PART_BYTES = 40 * 1024 * 1024
TYPE_LINE = "# TYPE "
EOF_LINE = "# EOF\n"


def parallel_jobs() -> int:
    """How many promtools or queries to run at once: the processors this process may use, 2 to 8."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 2
    return max(2, min(8, available))


class BlockParts:
    """Write OpenMetrics into it (families whole, `# EOF` last); `close()` leaves the blocks in tsdb_dir.

    As a `with` block: closed at the end, or on an error every promtool it started is stopped by
    its PID and waited for.
    """

    def __init__(self, folder: Path, tsdb_dir: Path, name: str, part_bytes: int | None = None,
                 parallel: int | None = None):
        self.folder = folder
        self.tsdb_dir = tsdb_dir
        self.name = name
        self.part_bytes = part_bytes or PART_BYTES
        self.parallel = parallel or parallel_jobs()
        self.parts = 0  # parts handed to promtool
        self._running: list[tuple[subprocess.Popen, Path, Path]] = []  # (promtool, its input, its blocks)
        self._done: list[Path] = []  # folders of finished parts' blocks
        self._handle = None
        self._path: Path | None = None
        self._ended = False

    def __enter__(self) -> "BlockParts":
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # --- the file side ----------------------------------------------------------------------

    def write(self, text: str) -> None:
        if not text:
            return
        if text.startswith(TYPE_LINE):
            if self._handle is not None and self._handle.tell() >= self.part_bytes:
                self._end_part()
            if self._handle is None:
                self._open_part()
        elif text == EOF_LINE:
            self._end_part()
            self._ended = True
            return
        elif self._handle is None:
            raise BuildError(f"{self.name}: OpenMetrics samples before a '# TYPE' line; write the family's "
                             f"TYPE line first")
        self._handle.write(text)

    def writelines(self, lines: Iterable[str]) -> None:
        if self._handle is None:
            raise BuildError(f"{self.name}: OpenMetrics samples before a '# TYPE' line; write the family's "
                             f"TYPE line first")
        self._handle.writelines(lines)

    def _open_part(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._path = self.folder / f"{self.name}-{self.parts}.om"
        self._handle = open(self._path, "w")

    def _end_part(self) -> None:
        """Close the open part and start its promtool (after one of the running ones, at the limit)."""
        if self._handle is None:
            return
        self._handle.write(EOF_LINE)
        self._handle.close()
        self._handle = None
        while len(self._running) >= self.parallel:
            self._wait_oldest()
        blocks = self._path.with_suffix(".tsdb")
        blocks.mkdir()
        command = [find_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                   f"--max-block-duration={BLOCK_HOURS}h", str(self._path), str(blocks)]
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True, preexec_fn=die_with_parent_hook())
        except OSError as exc:
            raise BuildError(f"cannot run promtool ({command[0]}): {exc.strerror or exc}") from None
        self._running.append((process, self._path, blocks))
        self.parts += 1

    def _wait_oldest(self) -> None:
        process, path, blocks = self._running.pop(0)
        output, _ = process.communicate()
        if process.returncode != 0:
            self.abort()
            raise BuildError(f"promtool could not turn {path} into blocks (exit {process.returncode}):\n"
                             f"{output.strip()}")
        path.unlink()
        self._done.append(blocks)

    # --- the end ----------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for every promtool, then move their blocks into tsdb_dir."""
        if not self._ended:
            self._end_part()
        while self._running:
            self._wait_oldest()
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        for blocks in self._done:
            for block in sorted(blocks.iterdir()):
                if (block / "meta.json").is_file():
                    block.rename(self.tsdb_dir / block.name)
            shutil.rmtree(blocks)
        self._done = []

    def abort(self) -> None:
        """Stop the running promtools (each by the PID it was started with) and wait for them."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        running, self._running = self._running, []
        for process, _, _ in running:
            if process.poll() is None:
                process.kill()
            process.communicate()
