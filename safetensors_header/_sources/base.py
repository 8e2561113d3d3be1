"""What every source backend is: a `RangeFile`, the file's identity, and the header loop.

Layer: sources. The protocol of "a file I can read ranges of" (`RangeFile`: a first read,
ranged reads into buffers the caller provides, the file beside it, a whole small document),
and what is written once for every backend:

* **the file's identity.** A backend only says what one reply or one ``stat`` told of the
  file (`RangeFile.identify`: its size, and its validators: an ETag and a Last-Modified date,
  an object's version, a local file's device, inode and modification time). The first is
  pinned; every later one is checked against it here, and so is the identity a header was
  read with (`FileIdentity`, carried by the `Header`) when data is read with that header.
  Any difference, a validator that appears or goes away included, is the one error of a
  changed file (`changed`: `HeaderError` of kind ``FileChanged``): bytes of two different
  files are never mixed;
* **the header loop** (`header_of`): read, ask `bytes_needed`, read, parse;
* **ranged reads** (`RangeFile.read_ranges`): ranges sorted, joined across gaps, each span
  read into one buffer, each range a view of it (the arithmetic is in `planning`).
"""

from __future__ import annotations

import _thread

from .._errors import HeaderError
from .._format import bytes_needed
from .._header import FileIdentity, defer_identity
from .._parser import parse_header
from .options import LOCAL_GAP
from .planning import allocate, check_known_end, cut_out, joined, past_the_end

__all__ = ["RangeFile", "Restart", "ShortRead", "changed", "header_of"]
__all__ += ["read_from"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Final, TypeAlias

    from .._header import Header
    from .options import Clock, Options
    from .planning import Read

    #: What a source says changes when the file does: ``(name, value)`` pairs.
    Validators: TypeAlias = tuple[tuple[str, str | int], ...]

# Reads of unknown size from this many bytes up learn the size first (`RangeFile.settle`): a
# range past the end is then the error it is, not a buffer of its length made for nothing.
_SETTLE_FROM: Final = 1 << 21
_PIN: Final = _thread.allocate_lock()  # an identity is pinned once (threading costs an import)


class Restart(Exception):
    """The file was replaced while its header was read, and its source now holds the new
    file's bytes from offset 0: read the header again, from the start. (A signal between
    layers, never raised to a caller.)"""


class ShortRead(Exception):
    """A read reached the end of the file at `end` (an offset) before it was done."""

    def __init__(self, end: int) -> None:
        super().__init__(end)
        self.end = end


class RangeFile:
    """A file whose byte ranges can be read: the protocol of every backend.

    A backend sets `shown` (a name for messages, URLs redacted) and calls `identify` with
    what each reply or ``stat`` says of the file. It implements `first` and `read_into`,
    and may override `read`, `document`, `sibling`, `requests` and ``_read_spans``.
    Instances are shared by threads (an identity is only ever pinned once) and hold no
    open file or connection between calls, so they can be pickled.

    What callers ask a file instead of what kind it is: `remote` (bytes over a network:
    read, never mapped), `local_path` (a regular file's path, for a memory map),
    `location` (where it is, credentials and all: for a reference another tool reads) and
    `sibling` (the file beside it).
    """

    #: Ranges closer than this are one request, unless the caller says otherwise.
    default_gap: int = LOCAL_GAP
    #: Whether the bytes come over a network (a URL, an object store).
    remote: bool = False

    def __init__(self, options: Options, shown: str) -> None:
        self.options = options
        self.shown = shown
        self.size: int | None = None
        # The identity pinned by the first reply or stat (`identify`): None until then, and
        # the validators None while no reply has said them (a 416 says only the size).
        self.identified = False
        self.validators: Validators | None = None
        # A header given for this file (`expect`): the file must be the one it was read from.
        self.expected: Header | None = None
        # At least the bytes its header takes (8 + N), where something said so beforehand (a
        # checkpoint's index names the tensors of each shard): the first read asks no more.
        self.header_hint: int | None = None

    @property
    def location(self) -> str:
        """Where the file is, as another tool would open it (a URL with its query, a path)."""
        return self.shown

    @property
    def local_path(self) -> str | None:
        """The path of a local regular file (which can be memory-mapped), else None."""
        return None

    @property
    def name(self) -> str:
        """The file's name: the last part of its path."""
        return self.shown.rsplit("/", 1)[-1]

    def candidates(self, *, follow_links: bool = False) -> list[RangeFile]:
        """The files that a checkpoint named by this source is read from, the first that
        exists: the file itself, unless the source names a folder (a local directory: its
        index or single file; a Hub repository: its files of those names, in turn).
        `follow_links`: a local checkpoint's files may lead out of its directory."""
        return [self]

    def none_found(self) -> Exception:
        """The error for a source whose `candidates` all turned out missing."""
        return FileNotFoundError(f"{self.shown}: no such file")

    def identify(self, size: int | None, validators: Validators | None) -> None:
        """What one reply or ``stat`` said of the file: pinned the first time, checked every
        later time. `size` None: not said (a stream, ``Content-Range: a-b/*``), learned
        later without a change; `validators` None: this reply says nothing of them (a 416).
        A size or validator that differs, appears or goes away raises `changed`."""
        with _PIN:
            if not self.identified:
                if self.expected is not None:
                    self._against_expected(size, validators)
                self.size, self.validators, self.identified = size, validators, True
                return
            if size is not None:
                if self.size is None:
                    self.size = size  # not said at first: learned, not changed
                elif size != self.size:
                    raise changed(self.shown, _sizes(self.size, size))
            if validators is not None:
                if self.validators is None:
                    self.validators = validators
                elif validators != self.validators:
                    raise changed(self.shown, _difference(self.validators, validators))

    def forget(self) -> None:
        """Forget the file's identity (its header is read again, from a new file)."""
        with _PIN:
            self.identified, self.size, self.validators = False, None, None

    def expect(self, header: Header) -> None:
        """Read this file's data with `header`: it must be of the file the header was read
        from (its identity; at least its size, where the header has none: `parse_header`'s)."""
        self.expected = header

    def confirm(self, header: Header, clock: Clock) -> None:
        """`expect` `header`, and where the file's validators cannot decide that it is the
        file the header was read from (its source gave none: bytes, a file object of
        memory, a server without ETag or Last-Modified), compare the header's bytes with
        the file's now: one read of ``8 + N`` bytes. A header read from another location
        (a copy of the file) is held to its size."""
        self.expect(header)
        identity = header.identity
        if identity is None or identity.location != self.shown or identity.header_digest is None:
            return  # a header of another location (a copy), or of none: its size decides
        if identity.validators:
            return  # the first reply's validators decide
        import zlib

        data = self.read(0, header.data_start, clock)
        if len(data) < header.data_start or zlib.crc32(data) != identity.header_digest:
            raise changed(
                self.shown,
                f"its header's bytes are not those of the header given, read from "
                f"{identity.location}",
            )

    def _against_expected(self, size: int | None, validators: Validators | None) -> None:
        header = self.expected
        assert header is not None
        expected = header.identity
        expected_size = header.file_size if expected is None else expected.size
        if expected_size is not None and size is not None and size != expected_size:
            raise changed(
                self.shown,
                f"its size is {size:,} bytes, but its header was read from a file of "
                f"{expected_size:,}",
            )
        if (
            expected is not None
            and validators is not None
            and expected.location == self.shown
            and validators != expected.validators
        ):
            raise changed(self.shown, _difference(expected.validators, validators))

    def quick_header(self, max_header_size: int) -> Header | None:
        """The header read the quickest way this backend has (a local file's: one open and
        one or two reads), or None: `header_of`'s loop then reads it."""
        return None

    def prepare(self) -> None:
        """Learn what a ranged read is planned by (a local file's size), if it costs little."""

    def settle(self, clock: Clock) -> None:
        """Learn the file's size before buffers are made for a long read (a backend whose
        first request would tell it reads a byte)."""
        self.prepare()

    def can_seek(self) -> bool:
        """Whether ranges can be read at any offset (not a pipe's or a stream's)."""
        return True

    def first_read_size(self) -> int:
        """How many bytes the first read of a header asks for."""
        if self.header_hint is None:
            return self.options.first_read
        return min(self.options.first_read, self.header_hint)

    def release(self) -> None:
        """Let go of what a header read kept open between its reads (a 200's body)."""

    def first(self, count: int, clock: Clock) -> bytes:
        """Bytes ``[0, count)`` (fewer only where the file ends), learning `size`."""
        raise NotImplementedError

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        """Bytes ``[start, stop)``, fewer only where the file ends."""
        buffer = bytearray(stop - start)
        try:
            self.read_into([(start, stop, [(start, memoryview(buffer))])], clock)
        except ShortRead as short:
            return bytes(memoryview(buffer)[: max(short.end - start, 0)])
        return bytes(buffer)

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        """Every read's bytes into its segments; `ShortRead` where the file ends first.

        `reads` are sorted by offset and do not overlap; a backend that makes requests makes
        one per read, as given (`requests` cut them).
        """
        raise NotImplementedError

    def requests(self, reads: list[Read]) -> list[Read]:
        """The requests that make `reads` (`read_into` makes each as it is given): as they
        are, unless a backend cuts long ones into parts to make in parallel (`parts`)."""
        return reads

    def document(self, limit: int, clock: Clock) -> bytes:
        """The whole (small) file, such as an index, read to at most ``limit + 1`` bytes."""
        return self.read(0, limit + 1, clock)

    def sibling(self, name: str) -> RangeFile:
        """The file called `name` in the same folder, with the same options."""
        raise TypeError(f"{self.shown} has no files beside it")

    def read_ranges(
        self,
        ranges: Sequence[tuple[int, int]],
        clock: Clock,
        *,
        gap: int | None = None,
        into: Sequence[memoryview] | None = None,
    ) -> list[memoryview]:
        """One view per ``(offset, length)`` range, in the order given (`read_ranges`).

        Without `into`, the ranges closer than `gap` are read as one span into one buffer,
        and each range is a view of its span's buffer; with `into`, each range lands in its
        own buffer (the caller's), whose view is returned.
        """
        if gap is None:
            gap = self.default_gap if self.options.gap is None else self.options.gap
        self.prepare()
        if self.size is None and into is None and _total(ranges) >= _SETTLE_FROM:
            self.settle(clock)
        check_known_end(ranges, self.size)
        try:
            if into is None:
                return self._read_spans(ranges, gap, clock)
            return self._read_into_buffers(ranges, into, gap, clock)
        except ShortRead as short:
            raise past_the_end(ranges, short.end, self.size) from None

    def _read_spans(
        self, ranges: Sequence[tuple[int, int]], gap: int, clock: Clock
    ) -> list[memoryview]:
        """`read_ranges` without `into`: ranges closer than `gap` read as one span into a
        fresh buffer, each range a view of it. A backend whose bytes are in memory already
        (a bytes-like source, a store's buffers) returns views of them instead."""
        spans = joined(
            sorted((offset, offset + length) for offset, length in ranges if length), gap
        )
        buffers = [allocate(stop - start) for start, stop in spans]
        reads = [
            (start, stop, [(start, buffer)])
            for (start, stop), buffer in zip(spans, buffers, strict=True)
        ]
        self.read_into(self.requests(reads), clock)
        return cut_out(ranges, spans, buffers)

    def _read_into_buffers(
        self,
        ranges: Sequence[tuple[int, int]],
        into: Sequence[memoryview],
        gap: int,
        clock: Clock,
    ) -> list[memoryview]:
        # Each range into its own buffer; a range that overlaps one placed already is read
        # again on its own (rare: the same bytes wanted twice, in two buffers).
        order = sorted(range(len(ranges)), key=lambda i: ranges[i])
        placed: list[tuple[int, int, memoryview]] = []
        again: list[int] = []
        for i in order:
            offset, length = ranges[i]
            if not length:
                continue
            if placed and offset < placed[-1][1]:
                again.append(i)
            else:
                placed.append((offset, offset + length, into[i]))
        reads: list[Read] = []
        for start, stop, view in placed:
            if reads and start - reads[-1][1] <= gap:
                reads[-1][2].append((start, view))
                reads[-1] = (reads[-1][0], stop, reads[-1][2])
            else:
                reads.append((start, stop, [(start, view)]))
        self.read_into(self.requests(reads), clock)
        for i in again:
            offset, length = ranges[i]
            self.read_into(self.requests([(offset, offset + length, [(offset, into[i])])]), clock)
        return list(into)


def _total(ranges: Sequence[tuple[int, int]]) -> int:
    return sum(length for _, length in ranges)


def header_of(file: RangeFile, max_header_size: int, clock: Clock) -> Header:
    """The one loop from a source to its header: read, ask `bytes_needed`, read, parse.

    A first read of ``first_read`` bytes (up to 16 KiB of a local file), then exactly the
    missing bytes that `bytes_needed` asks for until the header is there (or the length
    prefix decides), then `parse_header` once. A read that comes back short ends the file:
    its size is then what was read when the file had none (a stream), and `parse_header`
    judges the bytes as they are. The header carries the file's identity (`FileIdentity`).
    """
    quick = file.quick_header(max_header_size)
    if quick is not None:
        return quick
    try:
        try:
            data, size = _header_bytes(file, max_header_size, clock)
        except Restart:  # replaced meanwhile: the new file's header, from its start
            data, size = _header_bytes(file, max_header_size, clock)
    finally:
        file.release()
    header = parse_header(data, file_size=size, max_header_size=max_header_size)
    return read_from(header, data, file.shown, file.size, file.validators or ())


def read_from(
    header: Header,
    data: bytes | memoryview,
    location: str,
    size: int | None,
    validators: Validators,
) -> Header:
    """`header`, just parsed from `data` (its file's first bytes), with the identity of the
    file it was read from, its header's bytes' CRC-32 included (`RangeFile.confirm`)."""
    import zlib

    digest = zlib.crc32(memoryview(data)[: header.data_start])
    # (made when first asked for: most headers are read for their tensors alone)
    defer_identity(header, (FileIdentity, location, size, validators, digest))
    return header


def _header_bytes(file: RangeFile, max_header_size: int, clock: Clock) -> tuple[bytes, int | None]:
    """The bytes `header_of` parses, and the file's size to judge them by."""
    asked = file.first_read_size()
    data = file.first(asked, clock)
    size = file.size
    need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    while need > len(data) and len(data) >= asked:
        asked = need
        data += file.read(len(data), need, clock)
        size = file.size
        need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    if need > len(data) and size is not None and size > len(data):
        size = None  # cut short with a size that says otherwise: judge what was read
    return data, size


def changed(shown: str, what: str) -> HeaderError:
    """The one error for a file that changed between two reads (`what` says how)."""
    return HeaderError(
        "FileChanged",
        f"{shown} changed between two reads ({what}): its header and its data would be of "
        "two different files; read it again",
    )


def _sizes(was: int, now: int) -> str:
    return f"its size was {was:,} bytes and is {now:,} now"


def _difference(was: Validators, now: Validators) -> str:
    """How two identities differ, in words (the values escaped: a server sent them)."""
    before, after = dict(was), dict(now)
    if ("inode" in before or "inode" in after) and (
        before.get("device"),
        before.get("inode"),
    ) != (after.get("device"), after.get("inode")):
        return "another file is at its path now"
    names = dict.fromkeys([*before, *after])
    # A validator that appears or goes away first: what makes the two kinds of reply differ.
    for name in sorted(names, key=lambda name: (name in before) == (name in after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if name == "mtime_ns":
            return "it was modified"
        if old is None:
            return f"it had no {name} and has {_quoted(new)} now"
        if new is None:
            return f"its {name} was {_quoted(old)} and it has none now"
        return f"its {name} was {_quoted(old)} and is {_quoted(new)} now"
    return "its identity differs"  # (the same pairs in another order)


def _quoted(value: object) -> str:
    text = str(value)
    return ascii(text[:100]) + ("..." if len(text) > 100 else "")
