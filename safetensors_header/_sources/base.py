"""What every source backend is: a `RangeFile`, the file's identity, and the header loop.

Layer: sources. The protocol of "a file I can read ranges of" (`RangeFile`: a first read,
ranged reads into buffers the caller provides, the file beside it, a whole small document),
and what is written once for every backend:

* **the file's identity.** A backend only says what one reply or one ``stat`` told of the
  file (`RangeFile._identify`: its size, and its validators: an ETag and a Last-Modified date,
  an object's version, a local file's device, inode, modification and change times). The
  first is pinned; every later one is checked against it here, and so is the identity a
  header was read with (`FileIdentity`, carried by the `Header`) when data is read with that
  header, at the moment the validators are first learned. Whether that header is of *this*
  file is decided by what the file is, never by how it was spelled (`RangeFile._same_place`:
  a local file's device and inode, or its resolved path; a URL in its normalised form); a
  header of another location (a copy) is held to its size, the validators that name the
  content wherever it is (the Hub's sha256), and its header's bytes, read again
  (`RangeFile.confirm`). Any difference, a validator that appears or goes away included, is
  the one error of a changed file (`changed`: `HeaderError` of kind ``FileChanged``): bytes
  of two different files are never mixed. A source that has no validators at all has its
  header's bytes read again and compared before its first data read (`RangeFile.recheck`);
* **the header loop** (`header_of`): read, ask `bytes_needed`, read, parse;
* **ranged reads** (`RangeFile.read_ranges`): ranges sorted, joined across gaps, each span
  read into one buffer, each range a view of it (the arithmetic is in `planning`).
"""

from __future__ import annotations

import _thread

from .._core.fileformat import MAX_HEADER_SIZE, bytes_needed
from .._core.header import set_identity
from .._core.parse import parse_header
from .._errors import HeaderError
from .identity import identity_of, make_identity
from .options import LOCAL_GAP
from .planning import allocate, check_known_end, cut_out, joined, past_the_end

__all__ = ["RangeFile", "Restart", "ShortRead", "changed", "decisive", "header_of"]
__all__ += ["read_from"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import mmap
    from collections.abc import Iterable, Sequence
    from typing import Final, TypeAlias

    from .._core.header import Header
    from .identity import FileIdentity
    from .options import Clock, Options
    from .planning import Read

    #: What a source says changes when the file does: ``(name, value)`` pairs.
    Validators: TypeAlias = tuple[tuple[str, str | int], ...]

# Reads of unknown size from this many bytes up learn the size first (`RangeFile._settle`): a
# range past the end is then the error it is, not a buffer of its length made for nothing.
_SETTLE_FROM: Final = 1 << 21
_PIN: Final = _thread.allocate_lock()  # an identity is pinned once (threading costs an import)
# One header's bytes compared again at a time (`RangeFile._check_again`): a thread that reads
# data while another compares waits for the verdict. Only sources without validators take it.
_RECHECK: Final = _thread.allocate_lock()
#: Validators that name a file's content wherever it is kept (the Hub's sha256 and Xet
#: hash): two locations that both give one are the same content only if they agree.
CONTENT_VALIDATORS: Final = frozenset({"x-linked-etag", "x-xet-hash"})


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

    A backend sets `shown` (a name for messages, URLs redacted) and calls `_identify` with
    what each reply or ``stat`` says of the file. It implements `_first` and `_read_into`,
    and may override `read`, `document`, `sibling`, `_requests` and ``_read_spans``.
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
        self.options, self.shown = options, shown
        self.size: int | None = None
        # The identity pinned by the first reply or stat (`_identify`): None until then, and
        # the validators None while no reply has said them (a 416 says only the size).
        self.identified = False
        self.validators: Validators | None = None
        # A header given for this file (`_expect`): the file must be the one it was read from.
        self.expected: Header | None = None
        # At least the bytes its header takes (8 + N), where something said so beforehand (a
        # checkpoint's index names the tensors of each shard): the first read asks no more.
        self.header_hint: int | None = None
        # A header read from this file, which has no validators: its bytes are read again and
        # compared before the first read of data (`_check_again`).
        self.recheck: Header | None = None

    @property
    def location(self) -> str:
        """Where the file is, as another tool would open it (a URL with its query, a path)."""
        return self.shown

    @property
    def local_path(self) -> str | None:
        """The path of a local regular file (which can be memory-mapped), else None."""
        return None

    @property
    def _place(self) -> str:
        """Where the file is, for its identity (`FileIdentity.location`): what `_same_place`
        compares. A local file's absolute path; a URL with its query as a digest; else
        `shown`."""
        return self.shown

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

    def _identify(
        self, size: int | None, validators: Validators | None, *, nameless: bool = False
    ) -> None:
        """What one reply or ``stat`` said of the file: pinned the first time, checked every
        later time. `size` None: not said (a stream, ``Content-Range: a-b/*``), learned
        later without a change; `validators` None: this reply says nothing of them (a 416).
        A size or validator that differs, appears or goes away raises `changed`.

        `nameless`: the ``stat`` of a file open by its descriptor that has no name left (it
        was deleted or replaced while open): its change time moved for the unlinking, and
        no path can reach it to rewrite it, so that difference alone is no change."""
        if nameless and validators is not None:
            validators = self._unlinking_aside(validators)
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
                    # Learned now (the first reply was a 416): held to a header's identity
                    # now, as they would have been at the first reply.
                    if self.expected is not None:
                        self._against_expected(self.size, validators)
                    self.validators = validators
                elif validators != self.validators:
                    raise changed(self.shown, _difference(self.validators, validators))

    def _unlinking_aside(self, validators: Validators) -> Validators:
        """`validators` with the change time pinned before (or expected), where they differ
        from it in that alone (`_identify`'s `nameless`)."""
        before = self.validators
        expected = None if self.expected is None else identity_of(self.expected)
        if before is None and expected is not None:
            before = expected.validators
        if not before:
            return validators
        pinned = dict(before).get("ctime_ns")
        if pinned is None:
            return validators
        kept = tuple((name, pinned if name == "ctime_ns" else value) for name, value in validators)
        return kept if kept == before else validators

    def _forget(self) -> None:
        """Forget the file's identity (its header is read again, from a new file)."""
        with _PIN:
            self.identified, self.size, self.validators = False, None, None

    def _expect(self, header: Header) -> None:
        """Read this file's data with `header`: it must be of the file the header was read
        from (its identity; at least its size, where the header has none: `parse_header`'s)."""
        self.expected = header

    def _same_place(self, location: str) -> bool:
        """Whether `location` (a `FileIdentity`'s) is where this file is, however either
        was spelled. Backends whose locations have several spellings (a local path, a URL)
        compare them in a normal form."""
        return location == self._place

    def confirm(self, header: Header, clock: Clock) -> None:
        """`_expect` `header`, and where the file's validators cannot decide that it is the
        file the header was read from, hold it to the header's bytes: they are read again
        (``8 + N`` bytes) and compared before the first read of data (`_check_again`). They
        cannot decide where the header has no identity (`parse_header`'s), where it was read
        from another place (a copy: its validators are another file's), or where its source
        gave none that are decisive (bytes, a file object of memory, a server with no strong
        ETag: `decisive`)."""
        self._expect(header)
        if self._needs_header_bytes(header):
            self.recheck = header

    def _needs_header_bytes(self, header: Header) -> bool:
        """Whether `header` given for this file is held to its bytes (`confirm`): unless its
        identity's validators are decisive and this very place's."""
        identity = identity_of(header)
        if identity is None:
            return True
        return not (decisive(identity.validators) and self._same_place(identity.location))

    def _check_header_bytes(self, header: Header, data: bytes | memoryview) -> None:
        """``FileChanged`` unless `data`, this file's first bytes, are those `header` was
        parsed from: the same CRC-32 where its identity has one, else the same header when
        parsed (a local header's identity keeps no digest: its validators decide there)."""
        identity = identity_of(header)
        where = "" if identity is None else f", read from {identity.location}"
        differs = len(data) < header.data_start
        if not differs and identity is not None and identity.header_digest is not None:
            import zlib

            differs = zlib.crc32(memoryview(data)[: header.data_start]) != identity.header_digest
        elif not differs:
            # Judged by this file's size, or (a stream's, not known) the header's own.
            size = header.file_size if self.size is None else self.size
            try:
                again = parse_header(
                    bytes(memoryview(data)[: header.data_start]),
                    file_size=None if header.file_size is None else size,
                )
            except HeaderError:
                differs = True
            else:
                differs = again != header
        if differs:
            raise changed(
                self.shown, f"its header's bytes are not those of the header given{where}"
            )

    def _check_again(self, clock: Clock) -> None:
        """Before the first read of data: where `recheck` holds a header (one read from a
        source with no decisive validator, or one given that its validators cannot decide:
        `confirm`), the file's header bytes are read again and compared with it (a file
        replaced by one with another header is then found; one with the same header and
        other data cannot be told apart)."""
        if self.recheck is None:
            return
        with _RECHECK:
            header = self.recheck
            if header is not None:
                self._prepare()  # (a path learns first whether it is a stream: a FIFO's)
                self._check_header_bytes(header, self._read_again(header.data_start, clock))
                self.recheck = None

    def _read_again(self, count: int, clock: Clock) -> bytes:
        """The file's first `count` bytes (fewer where it ends), read as data is: a file
        replaced meanwhile is the error it is (never a header read started afresh)."""
        buffer = bytearray(count)
        try:
            self._read_into([(0, count, [(0, memoryview(buffer))])], clock)
        except ShortRead as short:
            return bytes(memoryview(buffer)[: max(short.end, 0)])
        return bytes(buffer)

    def _against_expected(self, size: int | None, validators: Validators | None) -> None:
        header = self.expected
        assert header is not None
        expected = identity_of(header)
        expected_size = header.file_size if expected is None else expected.size
        if expected_size is not None and size is not None and size != expected_size:
            raise changed(
                self.shown,
                f"its size is {size:,} bytes, but its header was read from a file of "
                f"{expected_size:,}",
            )
        if expected is None or validators is None:
            return
        if _same_file(expected.validators, validators) or self._same_place(expected.location):
            if validators != expected.validators:
                raise changed(self.shown, _difference(expected.validators, validators))
            return
        # A copy elsewhere: held to what names the content wherever it is (its header's
        # bytes are compared by `confirm`).
        said = dict(validators)
        for name, value in expected.validators:
            if name in CONTENT_VALIDATORS and name in said and said[name] != value:
                raise changed(self.shown, _difference(expected.validators, validators))

    def _map(
        self, header: Header | None, max_header_size: int, copy: bool
    ) -> tuple[Header, mmap.mmap] | None:
        """The header and a map of the whole file (`map_whole`); None: it cannot be mapped
        (read it instead)."""
        return None

    def _quick_header(self, max_header_size: int) -> Header | None:
        """The header read the quickest way this backend has (a local file's: one open and
        one or two reads), or None: `header_of`'s loop then reads it."""
        return None

    def _prepare(self) -> None:
        """Learn what a ranged read is planned by (a local file's size), if it costs little."""

    def _settle(self, clock: Clock) -> None:
        """Learn the file's size before buffers are made for a long read (a backend whose
        first request would tell it reads a byte)."""
        self._prepare()

    def _can_seek(self) -> bool:
        """Whether ranges can be read at any offset (not a pipe's or a stream's)."""
        return True

    def _first_read_size(self) -> int:
        """How many bytes the first read of a header asks for."""
        if self.header_hint is None:
            return self.options.first_read
        return min(self.options.first_read, self.header_hint)

    def _release(self) -> None:
        """Let go of what a header read kept open between its reads (a 200's body)."""

    def _first(self, count: int, clock: Clock) -> bytes:
        """Bytes ``[0, count)`` (fewer only where the file ends), learning `size`."""
        raise NotImplementedError

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        """Bytes ``[start, stop)``, fewer only where the file ends."""
        buffer = bytearray(stop - start)
        try:
            self._read_into([(start, stop, [(start, memoryview(buffer))])], clock)
        except ShortRead as short:
            return bytes(memoryview(buffer)[: max(short.end - start, 0)])
        return bytes(buffer)

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        """Every read's bytes into its segments; `ShortRead` where the file ends first.

        `reads` are sorted by offset and do not overlap; a backend that makes requests makes
        one per read, as given (`_requests` cut them).
        """
        raise NotImplementedError

    def _requests(self, reads: list[Read]) -> list[Read]:
        """The requests that make `reads` (`_read_into` makes each as it is given): as they
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
        self._check_again(clock)
        self._prepare()
        if self.size is None and into is None and _total(ranges) >= _SETTLE_FROM:
            self._settle(clock)
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
        self._read_into(self._requests(reads), clock)
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
        self._read_into(self._requests(reads), clock)
        for i in again:
            offset, length = ranges[i]
            self._read_into(self._requests([(offset, offset + length, [(offset, into[i])])]), clock)
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
    quick = file._quick_header(max_header_size)
    if quick is not None:
        return quick
    try:
        try:
            data, size, end = _header_bytes(file, max_header_size, clock)
        except Restart:  # replaced meanwhile: the new file's header, from its start
            data, size, end = _header_bytes(file, max_header_size, clock)
    finally:
        file._release()
    # Everything the source says is said before the parse, which ends the read: the identity
    # (the header's bytes end at `end`, 8 + N, wherever the parse accepts them), and whether
    # nothing but those bytes would tell another file from this one.
    validators = file.validators or ()
    identity = identity_of_bytes(data, end, file._place, file.size, validators)
    check_again = not decisive(validators) and file._can_seek()
    header = parse_header(data, file_size=size, max_header_size=max_header_size)
    set_identity(header, identity)
    if check_again:
        file.recheck = header
    return header


def identity_of_bytes(
    data: bytes | memoryview, end: int, location: str, size: int | None, validators: Validators
) -> FileIdentity:
    """The identity of the file whose first bytes are `data`, its header ending at `end`
    (``8 + N``): its header's bytes' CRC-32 included (`RangeFile.confirm`)."""
    import zlib

    return make_identity(location, size, validators, zlib.crc32(memoryview(data)[:end]))


def read_from(
    header: Header,
    data: bytes | memoryview,
    location: str,
    size: int | None,
    validators: Validators,
) -> Header:
    """`header`, just parsed from `data` (its file's first bytes), with the identity of the
    file it was read from (`identity_of_bytes`)."""
    set_identity(header, identity_of_bytes(data, header.data_start, location, size, validators))
    return header


def map_whole(
    file: RangeFile,
    *,
    header: Header | None = None,
    max_header_size: int = MAX_HEADER_SIZE,
    copy: bool = False,
) -> tuple[Header, mmap.mmap] | None:
    """The header of `file` and a read-only map of all of it (`copy`: a private, copy-on-write
    map, whose writes change the memory, never the file), both of the one file a descriptor
    opened; None for a file that cannot be mapped (not local, a pipe, empty): read it then. A
    `header` given is held to that descriptor's file (``FileChanged``: its identity, or for a
    copy its header's bytes) and returned."""
    return file._map(header, max_header_size, copy)


def read_planned(file: RangeFile, reads: list[Read], clock: Clock) -> None:
    """The requests of a read plan, as they are, into their segments."""
    if reads:
        file._check_again(clock)
        file._read_into(reads, clock)


def refuse_a_stream(file: RangeFile) -> None:
    """ValueError for a stream that cannot seek, given as it is: its offset 0 is unknown."""
    if not file._can_seek():
        raise ValueError(
            f"read_ranges() needs a file it can seek in; {file.shown} is a stream (a pipe, a "
            "socket): read it in order with read_header or open_file, or copy it to a file"
        )


def held_after_pickling(file: RangeFile, header: Header) -> None:
    """`file`, unpickled with `header`: where it has no decisive validators (`decisive`),
    its header's bytes are compared again before its first read of data in this process (it
    may have been replaced since it was pickled)."""
    if file.identified and not decisive(file.validators or ()):
        file.recheck = header


def _header_bytes(
    file: RangeFile, max_header_size: int, clock: Clock
) -> tuple[bytes, int | None, int]:
    """The bytes `header_of` parses, the file's size to judge them by, and where its header
    ends (`bytes_needed`'s last answer: 8 + N for the bytes of a header the parse accepts)."""
    asked = file._first_read_size()
    data = file._first(asked, clock)
    size = file.size
    need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    while need > len(data) and len(data) >= asked:
        asked = need
        data += file.read(len(data), need, clock)
        size = file.size
        need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    if need > len(data) and size is not None and size > len(data):
        size = None  # cut short with a size that says otherwise: judge what was read
    return data, size, need


def changed(shown: str, what: str) -> HeaderError:
    """The one error for a file that changed between two reads (`what` says how)."""
    return HeaderError(
        "FileChanged",
        f"{shown} changed between two reads ({what}): its header and its data would be of "
        "two different files; read it again",
    )


#: Validators that say when a file changed, not which bytes it holds: a second's date (two
#: files written in one second share it), a creation time. A weak ETag (``W/"..."``) is one
#: too (RFC 9110: unfit for ranges).
_WEAK_VALIDATORS: Final = frozenset(
    {"last-modified", "last_modified", "LastModified", "mtime", "created"}
)


def decisive(validators: Validators) -> bool:
    """Whether `validators` tell one file's bytes from another's: a strong ETag, an object's
    version or ETag, the Hub's sha256, a local file's inode and times; not a date alone, nor
    a weak ETag. A source without decisive validators has its header's bytes compared."""
    return any(
        name not in _WEAK_VALIDATORS and not (isinstance(value, str) and value.startswith("W/"))
        for name, value in validators
    )


def _same_file(was: Validators, now: Validators) -> bool:
    """Whether two local identities are of one file: the same device and inode (whatever
    path reached it: a link, another spelling)."""
    before, after = dict(was), dict(now)
    return "inode" in before and all(
        before.get(name) == after.get(name) for name in ("device", "inode")
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
        if name == "ctime_ns":
            return "it was rewritten or its status changed (its change time differs)"
        if old is None:
            return f"it had no {name} and has {_quoted(new)} now"
        if new is None:
            return f"its {name} was {_quoted(old)} and it has none now"
        return f"its {name} was {_quoted(old)} and is {_quoted(new)} now"
    return "its identity differs"  # (the same pairs in another order)


def _quoted(value: object) -> str:
    text = str(value)
    return ascii(text[:100]) + ("..." if len(text) > 100 else "")
