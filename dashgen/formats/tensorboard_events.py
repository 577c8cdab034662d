"""TensorBoard event files (verl's `tensorboard` logger, TRL's `report_to="tensorboard"`) read as the
run's step log, with the `tensorboard` package's own event reader: one file, or a run's log
directory (the event files in it, in name order: a restarted writer starts a new one).

Scalars are read by step, the tags of one step merged. verl's logger writes its keys as tags;
transformers' callback writes `train/<key>` and `eval/<key>`, read as TRL's keys and validation
(formats/trl.py). An event file is known by its first record, TensorBoard's version event
(`brain.Event:2`), not by its name.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Callable, Iterable, Iterator

from dashgen.formats.trl import LOGGER_TRAIN, logger_key
from dashgen.formats.records import step_lines

VERSION_MARK = b"brain.Event:"
_HEAD_BYTES = 256
# Tags verl's own logger writes: a run with these is verl's, whatever else it logs.
VERL_SECTIONS = ("actor/", "critic/", "timing_s/", "response_length/")
# How deep below a log directory event files are looked for (TRL: <output_dir>/runs/<date_host>/),
# and how many entries are looked at on the way.
MAX_DEPTH = 3
MAX_ENTRIES = 10_000
READ_BLOCK = 1 << 20
_HEADER, _DATA_CRC = struct.Struct("<QI"), struct.Struct("<I")
_FRAME = 16  # a record's bytes besides its event: length 8, two checksums 4 each
_DECIMALS_KEPT = 1 << 16


def is_event_file(path: Path) -> bool:
    """Whether `path` is a regular file starting with TensorBoard's version record."""
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            return VERSION_MARK in handle.read(_HEAD_BYTES)
    except OSError:
        return False


def is_tensorboard_events(path: Path) -> bool:
    """Whether `path` is an event file, or a log directory holding event files (at most MAX_DEPTH down)."""
    if path.is_dir():
        try:
            return bool(_event_folders(path))
        except OSError:
            return False
    return is_event_file(path)


def _event_folders(top: Path) -> dict[Path, list[Path]]:
    """The folders under `top` (itself included) that hold event files, each with its event files by name."""
    found: dict[Path, list[Path]] = {}
    seen = 0
    for folder, folders, files in os.walk(top):
        depth = len(Path(folder).relative_to(top).parts)
        folders[:] = sorted(name for name in folders if not name.startswith(".")) if depth < MAX_DEPTH else []
        seen += len(files) + len(folders)
        if seen > MAX_ENTRIES:
            break
        events = [Path(folder) / name for name in sorted(files) if is_event_file(Path(folder) / name)]
        if events:
            found[Path(folder)] = events
    return found


def event_files(path: Path) -> list[Path]:
    """The event files of a run: the file itself, or a log directory's, in name order (the names start
    with the time the writer opened them). The directory's own event files if it has any, else those
    of the one folder below it that has any; ValueError when several do (several runs: name one)."""
    if not path.is_dir():
        return [path]
    found = _event_folders(path)
    if path in found:
        return found[path]
    if len(found) > 1:
        names = ", ".join(str(folder.relative_to(path)) for folder in sorted(found)[:5])
        raise ValueError(f"event files in {len(found)} folders ({names}{', ...' if len(found) > 5 else ''}): "
                         f"several runs; give one run's folder")
    if not found:
        raise ValueError("no TensorBoard event file in it")
    return next(iter(found.values()))


def _masked_crc(data: bytes, crc32c) -> int:
    """TFRecord's checksum: CRC-32C, rotated right by 15 bits plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_record(data: bytes) -> bytes:
    """An event's bytes framed as a record of an event file (for writing one)."""
    crc32c = _crc32c()
    header = _HEADER.pack(len(data), 0)[:8]
    return header + _DATA_CRC.pack(_masked_crc(header, crc32c)) + data + _DATA_CRC.pack(_masked_crc(data, crc32c))


def _crc32c():
    try:
        import google_crc32c
        from tensorboard.compat.proto.event_pb2 import Event  # noqa: F401 (the package is there)
    except ImportError:
        raise ValueError("reading a TensorBoard event file needs the tensorboard and google-crc32c packages: "
                         "install dashgen-rl with its extra, pip install 'dashgen-rl[tensorboard]'") from None
    return google_crc32c.value


def event_steps(records: Iterable[bytes]) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {tag: value}) of the scalars of the events (serialized), in the order written, the
    events of one step in a row merged (torch's SummaryWriter writes one event per scalar).

    A value is kept as a 32-bit float: read back as the shortest decimal that is that float (what
    TensorBoard shows), so a logged 0.2 is 0.2 again, not 0.20000000298 (a threshold of 0.2 would
    call it above); a value that was a 32-bit float already moves by less than half its last bit."""
    import numpy
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.util.tensor_util import make_ndarray

    parse, float32 = Event.FromString, numpy.float32
    # A run logs many values again and again (a learning rate, a clip ratio of 0): each is converted once.
    decimals: dict[float, float] = {}
    step, tags = None, {}
    for record in records:
        event = parse(record)
        values = event.summary.value
        if not values:
            continue
        if event.step != step:
            if tags:
                yield step, tags
            step, tags = event.step, {}
        for value in values:
            if value.HasField("simple_value"):  # torch's SummaryWriter, as verl and transformers use it
                number = value.simple_value
            elif value.HasField("tensor") and not value.tensor.tensor_shape.dim:  # TF2's scalar summaries
                array = make_ndarray(value.tensor)
                if array.dtype.kind not in "fiu":
                    continue
                if array.dtype != float32:
                    tags[value.tag] = float(array)
                    continue
                number = float(array)
            else:
                continue
            found = decimals.get(number)
            if found is None:
                if len(decimals) >= _DECIMALS_KEPT:
                    decimals.clear()
                found = decimals[number] = float(str(float32(number)))
            tags[value.tag] = found
    if tags:
        yield step, tags


class EventFileReader:
    """The scalars of one event file, read as far as it is written at each `read()`: the next read
    starts after the last whole record (a record written in part is read once it is whole), so a
    file that grows is read on. Records are TFRecord frames (length, its masked CRC-32C, the event,
    its masked CRC-32C), read in blocks and checked with google-crc32c; each event is parsed by the
    tensorboard package's Event message. (The package's own record reader, pure Python without
    TensorFlow, took 6.5 times the step log's reading time.)"""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self._crc32c = _crc32c()

    def read(self) -> Iterator[tuple[int, dict[str, float]]]:
        """(step, {tag: value}) of what was written since the last read (a step may come in several)."""
        try:
            with open(self.path, "rb") as handle:
                yield from event_steps(self._records(handle))
        except ValueError as exc:
            raise ValueError(f"{self.path}: not a TensorBoard event file it can read: {exc}") from None
        except Exception as exc:  # protobuf's DecodeError and the like: no common base
            raise ValueError(f"{self.path}: not a TensorBoard event file it can read: "
                             f"{type(exc).__name__}: {exc}") from None

    def _records(self, handle) -> Iterator[bytes]:
        """The event bytes of each whole record from the offset on, read in blocks (the offset moves past
        each); stops at a record written in part. ValueError at a record whose checksum is wrong."""
        crc32c, header_of, crc_of = self._crc32c, _HEADER.unpack_from, _DATA_CRC.unpack_from
        buffer, at = b"", 0  # bytes read past the offset, and where in them the next record starts
        handle.seek(self.offset)
        while block := handle.read(READ_BLOCK):
            buffer = buffer[at:] + block
            at = 0
            while len(buffer) - at >= _FRAME:
                length, masked = header_of(buffer, at)
                crc = crc32c(buffer[at:at + 8])
                if (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF != masked:
                    raise ValueError(f"the record at byte {self.offset} has a bad length checksum")
                end = at + _FRAME + length
                if end > len(buffer):
                    break
                data = buffer[at + 12:end - 4]
                crc = crc32c(data)
                if (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF != crc_of(buffer, end - 4)[0]:
                    raise ValueError(f"the record at byte {self.offset} has a bad checksum")
                self.offset += end - at
                at = end
                yield data


def key_namer(tags: Iterable[str]) -> Callable[[str], str]:
    """How a run's tags are read as keys: transformers' train/ and eval/ tags as TRL's keys when the
    run logs those and none of verl's own sections, else each tag as it is."""
    tags = set(tags)
    trl = any(tag.startswith(LOGGER_TRAIN) for tag in tags) and not any(tag.startswith(VERL_SECTIONS) for tag in tags)
    return logger_key if trl else str


def step_records(path: Path) -> list[tuple[int, dict[str, float]]]:
    """(step, values) per step, in step order, over the run's event files (a tag a later file logs
    again at a step wins: a resumed run's)."""
    by_step: dict[int, dict[str, float]] = {}
    for file in event_files(path):
        for step, tags in EventFileReader(file).read():
            held = by_step.get(step)
            if held is None:
                by_step[step] = tags
            else:
                held.update(tags)
    name = key_namer({tag for tags in by_step.values() for tag in tags})
    if name is not str:
        by_step = {step: {name(tag): value for tag, value in tags.items()} for step, tags in by_step.items()}
    return sorted(by_step.items())


def step_log_lines(path: Path) -> Iterator[bytes]:
    """An event file (or log directory) as verl's step-log lines ({"step": N, "data": {...}})."""
    return step_lines(step_records(path), "a TensorBoard event file without any scalar")
