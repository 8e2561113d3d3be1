"""Local sources: paths, binary file objects and bytes-like objects, as `RangeFile` backends.

Layer: sources. A path is read with ``os.preadv`` straight into the memory the bytes are
returned in (no shared file position, so any number of threads may read one file; a long
read is split over the machine's cores), after ``os.fstat`` has checked that the file is the
one first read (the same device, inode, size and modification time): a file rewritten or
replaced between two reads is a `HeaderError` of kind ``FileChanged``, never a mix of two
files. A pipe, a FIFO or a character device is read as a stream. A file object is read with
``readinto`` where it has one, its position restored after a ranged read; a bytes-like
object is sliced, its views handed out read-only without a copy.
"""

from __future__ import annotations

import io
import os
import stat

from ._options import LOCAL_GAP
from ._parser import parse_file_start, parse_header
from ._rangefile import (
    RangeFile,
    ShortRead,
    changed,
    cut,
    header_of,
    run_parallel,
)

__all__ = ["BufferFile", "PathFile", "StreamFile", "header_at", "mode_kind", "read_at_most"]
__all__ += ["read_path"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final, NoReturn

    from ._header import Header
    from ._options import Clock, Options
    from ._rangefile import Read

#: Bytes of a regular file read at once: most headers in one system call.
FILE_FIRST_READ: Final = 16 * 1024
_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
# A stream of unknown size may be far shorter than a (raised) header limit, and read(n) may
# allocate n bytes before it finds that out: read at most this much at a time.
_STREAM_CHUNK: Final = 16 * 2**20
# A local read at least this long is split over the cores, in parts of `_PART` bytes (the
# copy out of the page cache, and the page faults of fresh memory, scale with them).
_PARALLEL: Final = 32 << 20
_PART: Final = 8 << 20
_IOV_MAX: Final = 1024  # buffers per preadv call (POSIX's minimum IOV_MAX is 16; Linux's 1024)
_pread: Callable[[int, int, int], bytes] | None = getattr(os, "pread", None)


def read_path(path: str | os.PathLike[str] | os.PathLike[bytes], limit: int) -> Header:
    """A local file's header: a regular file's from its first read (one ``open``, one
    ``fstat``, one ``read`` and one ``close`` for most headers), anything else's as `PathFile`
    reads it."""
    # The descriptor itself (no file object: a tenth of a small header's time).
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        if stat.S_ISFIFO(status.st_mode) or stat.S_ISCHR(status.st_mode):
            # A pipe is read from this very descriptor: opened again, it would wait for a
            # writer that may have written and gone (its bytes with the first reader).
            from ._options import Clock, Options

            stream = open(descriptor, "rb", buffering=0, closefd=True)  # noqa: SIM115
            descriptor = -1  # (the stream closes it)
            with stream:
                file = StreamFile(stream, Options(), shown=os.fsdecode(path))
                return header_of(file, limit, Clock(None))
        if stat.S_ISREG(status.st_mode):
            # `header_at`'s first read, inline: the common case touches as little code as it
            # can (a small header's read is mostly what it fetches back into the caches).
            size = status.st_size
            parsed = parse_file_start(os.read(descriptor, min(size, FILE_FIRST_READ)), size, limit)
            if not isinstance(parsed, int):
                return parsed
            if _pread is not None:
                whole = _pread(descriptor, parsed, 0)
                if len(whole) == parsed:
                    return parse_header(whole, file_size=size, max_header_size=limit)
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    from ._options import Clock, Options

    # A longer header cut meanwhile, a block device: the general loop.
    return header_of(PathFile(path, Options()), limit, Clock(None))


def header_at(descriptor: int, size: int, limit: int) -> Header | None:
    """The header of the regular file open as `descriptor` (of `size` bytes), read from
    offset 0 in one read (two for a header over 16 KiB); None if the file was cut short
    meanwhile (read it as a stream). Raises what the bytes decide."""
    if _pread is not None:
        ahead = _pread(descriptor, min(size, FILE_FIRST_READ), 0)
    else:  # (Windows)
        os.lseek(descriptor, 0, os.SEEK_SET)
        ahead = os.read(descriptor, min(size, FILE_FIRST_READ))
    parsed = parse_file_start(ahead, size, limit)
    if not isinstance(parsed, int):
        return parsed
    if _pread is None:
        return None
    # The rest of a longer header: the whole of it read again in one call, rather than the
    # rest read and joined (a copy more).
    whole = _pread(descriptor, parsed, 0)
    if len(whole) == parsed:
        return parse_header(whole, file_size=size, max_header_size=limit)
    return None


class PathFile(RangeFile):
    """A local file by its path; reopened, and checked to be the same file, at every read.

    A regular file (or a block device) is read with ``os.preadv`` at any offset; anything
    else (a pipe, a FIFO, ``/dev/stdin``) as a stream, from where it is, once.
    """

    default_gap = LOCAL_GAP

    def __init__(
        self,
        path: str | os.PathLike[str] | os.PathLike[bytes],
        options: Options,
        *,
        shown: str | None = None,
        flags: int = _OPEN_FLAGS,
        refuse: Callable[[int], NoReturn] | None = None,
    ) -> None:
        super().__init__(options, os.fsdecode(path) if shown is None else shown)
        self.path = path
        self.flags = flags
        # Called with the mode of a file that is not a regular file, to raise instead.
        self.refuse = refuse
        self.identity: tuple[int, int, int, int] | None = None
        self.seekable = True
        self._stream: StreamFile | None = None  # a pipe's reader, kept: it is read once

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in _PATH_STATE}
        state["_stream"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)

    def open_checked(self) -> int:
        """A new descriptor of the file, checked to be the file first read (its identity,
        pinned by the first call); the caller closes it."""
        try:
            descriptor = os.open(self.path, self.flags)
        except OSError as error:
            if self.shown == os.fsdecode(self.path):
                raise
            # Named as the caller knows it (a shard as its index names it, not as resolved).
            raise OSError(error.errno, error.strerror, self.shown) from None
        try:
            status = os.fstat(descriptor)
            mode = status.st_mode
            if not stat.S_ISREG(mode) and self.refuse is not None:
                self.refuse(mode)
            if stat.S_ISBLK(mode):  # a block device: its size is where seeking ends
                size = os.lseek(descriptor, 0, os.SEEK_END)
            elif stat.S_ISREG(mode):
                size = status.st_size
            else:
                size = -1  # a stream
            identity = (status.st_dev, status.st_ino, size, status.st_mtime_ns)
            if self.identity is None:
                if self.expected_size is not None and size != self.expected_size:
                    raise changed(
                        self.shown,
                        f"its size is {size:,} bytes, but its header was read from a file of "
                        f"{self.expected_size:,}",
                    )
                self.identity = identity
                self.seekable = size >= 0
                self.size = size if size >= 0 else None
            elif identity != self.identity:
                raise changed(self.shown, _difference(self.identity, identity))
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor

    def prepare(self) -> None:
        if self.identity is None:
            descriptor = self.open_checked()  # learns the size and whether it can seek
            if self.seekable:
                os.close(descriptor)
            else:  # a pipe: kept, and read from this descriptor (see `_streamed`)
                self._keep_stream(descriptor)

    def can_seek(self) -> bool:
        self.prepare()
        return self.seekable

    def first_read_size(self) -> int:
        self.prepare()
        if not self.seekable:
            return 8  # a stream: exactly the bytes of the header, the data left in it
        return min(self.size or 0, FILE_FIRST_READ)

    def first(self, count: int, clock: Clock) -> bytes:
        return self.read(0, count, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        if not self.seekable:
            return self._streamed().read(start, stop, clock)
        return super().read(start, stop, clock)

    def _streamed(self) -> StreamFile:
        if self._stream is None:
            self._keep_stream(self.open_checked())
        assert self._stream is not None
        return self._stream

    def _keep_stream(self, descriptor: int) -> None:
        # Kept open between reads (a pipe is read once, in order, from one descriptor: opened
        # again it would wait for a writer that may be gone); closed by close().
        stream = open(descriptor, "rb", buffering=0, closefd=True)  # noqa: SIM115
        self._stream = StreamFile(stream, self.options, shown=self.shown)

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        if not self.seekable:
            if self._stream is None:
                raise ValueError(
                    f"reading ranges needs a file it can seek in; {self.shown!r} is a stream "
                    "(read it in order with read_header or open_file, or copy it to a file)"
                )
            self._stream.read_into(reads, clock)
            return
        reads = list(reads)
        descriptor = self.open_checked()
        try:
            total = sum(stop - start for start, stop, _ in reads)
            workers = min(self.options.max_workers, os.cpu_count() or 1)
            if total >= _PARALLEL and workers > 1 and _preadv is not None:
                run_parallel(lambda read: _read_at(descriptor, read), cut(reads, _PART), workers)
            else:
                for read in reads:
                    _read_at(descriptor, read)
            # Rewritten while it was read: the bytes may be a mix.
            status = os.fstat(descriptor)
            now = (status.st_dev, status.st_ino, self.identity[2], status.st_mtime_ns)  # type: ignore[index]
            if stat.S_ISREG(status.st_mode):
                now = (*now[:2], status.st_size, now[3])
            if now != self.identity:
                raise changed(self.shown, _difference(self.identity, now))  # type: ignore[arg-type]
        finally:
            os.close(descriptor)

    def document(self, limit: int, clock: Clock) -> bytes:
        descriptor = self.open_checked()
        with open(descriptor, "rb", buffering=0, closefd=True) as file:
            return read_at_most(file.read, limit + 1)

    def sibling(self, name: str) -> PathFile:
        folder = os.path.dirname(os.fsdecode(self.path))
        return PathFile(os.path.join(folder, name), self.options)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.stream.close()
            self._stream = None


_PATH_STATE: Final = ("options", "shown", "size", "path", "flags", "refuse", "identity", "seekable")


def _difference(was: tuple[int, int, int, int], now: tuple[int, int, int, int]) -> str:
    if was[:2] != now[:2]:
        return "another file is at its path now"
    if was[2] != now[2]:
        return f"its size was {was[2]:,} bytes and is {now[2]:,} now"
    return "it was modified"


def _read_at(descriptor: int, read: Read) -> None:
    """Bytes ``[start, stop)`` of a file into their segments; the bytes between them into
    scratch space. `ShortRead` where the file ends first."""
    start, stop, segments = read
    buffers: list[memoryview] = []
    at = start
    for offset, view in segments:
        if offset > at:
            buffers.append(memoryview(bytearray(offset - at)))
        buffers.append(view)
        at = offset + len(view)
    if stop > at:
        buffers.append(memoryview(bytearray(stop - at)))
    position = start
    index = 0
    while index < len(buffers):
        batch = buffers[index : index + _IOV_MAX]
        if _preadv is not None:
            count = _preadv(descriptor, batch, position)
        else:
            count = _read_one(descriptor, batch[0], position)
        if count == 0:
            raise ShortRead(position)
        position += count
        # Drop the buffers filled; cut the one filled in part.
        while count and index < len(buffers):
            size = len(buffers[index])
            if count >= size:
                count -= size
                index += 1
            else:
                buffers[index] = buffers[index][count:]
                count = 0


_preadv: Callable[[int, Sequence[memoryview], int], int] | None = getattr(os, "preadv", None)


def _read_one(descriptor: int, view: memoryview, position: int) -> int:
    """One read at `position` where there is no preadv: pread and a copy, or (Windows: one
    descriptor per call, so the position is not shared) a seek and a readinto."""
    if _pread is not None:
        data = _pread(descriptor, min(len(view), _STREAM_CHUNK), position)
        view[: len(data)] = data
        return len(data)
    os.lseek(descriptor, position, os.SEEK_SET)
    with open(descriptor, "rb", buffering=0, closefd=False) as file:
        return file.readinto(view[:_STREAM_CHUNK]) or 0


def mode_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, for a message: "a FIFO (named pipe)", ..."""
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a file"


class StreamFile(RangeFile):
    """A binary file object: anything with ``read`` (and ``seek``/``tell`` when it has them).

    A seekable one is read at any offset, its position restored after each ranged read; its
    size comes from seeking to the end. One that cannot seek is read once, in order, from
    where it is: its size is unknown (``None``). Either gives exactly the bytes asked for,
    keeping the bytes a ``read(n)`` returns past ``n`` for the next read.
    """

    default_gap = LOCAL_GAP

    def __init__(self, stream: Any, options: Options, *, shown: str | None = None) -> None:
        super().__init__(options, shown or f"a {type(stream).__name__} object")
        self.stream = stream
        self.size = _seek_size(stream)
        self.seekable = self.size is not None
        self.position = 0  # of a stream that cannot seek: how far it has been read
        self._ahead = b""  # bytes read past what was asked, from a read(n) longer than n
        self._readinto = getattr(stream, "readinto", None) if _readinto_is_read(stream) else None

    def first_read_size(self) -> int:
        return 8  # exactly the header's bytes: a stream's data stays in it for its reader

    def can_seek(self) -> bool:
        return self.seekable

    def first(self, count: int, clock: Clock) -> bytes:
        if self.seekable:
            self.stream.seek(0)
            self.position, self._ahead = 0, b""
        return self._next(count)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        if self.seekable:
            self.stream.seek(start)
            self.position, self._ahead = start, b""
        elif start != self.position:
            self._skip_to(start)
        return self._next(stop - start)

    def _next(self, count: int) -> bytes:
        """The next `count` bytes of the stream (fewer at its end)."""
        data, self._ahead = self._ahead[:count], self._ahead[count:]
        if len(data) < count:
            more = read_at_most(self.stream.read, count - len(data))
            if len(more) > count - len(data):  # a read(n) that gave more than n
                self._ahead = more[count - len(data) :]
                more = more[: count - len(data)]
            data += more
        self.position += len(data)
        return data

    def _skip_to(self, offset: int) -> None:
        if offset < self.position:
            raise ValueError(
                "read_ranges() needs a file object it can seek in (this one cannot: a pipe "
                "or a stream) for bytes before its position; read the stream in order, or "
                "copy it to a file first"
            )
        while self.position < offset:
            skipped = self._next(min(offset - self.position, _STREAM_CHUNK))
            if not skipped:
                raise ShortRead(self.position)

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        if not self.seekable:
            for start, stop, segments in reads:
                self._skip_to(start)
                self._fill(segments)
                self._skip_to(stop)
            return
        if not hasattr(self.stream, "tell"):
            raise ValueError(
                "read_ranges() needs a file object it can seek in (this one has no tell())"
            )
        position = self.stream.tell()
        try:
            for start, _, segments in reads:
                if self.size is not None and start >= self.size:
                    raise ShortRead(self.size)  # (and offsets past 2**63 cannot seek)
                for offset, view in segments:
                    self.stream.seek(offset)
                    self.position = offset
                    self._ahead = b""
                    self._fill([(offset, view)])
        finally:
            self._ahead = b""
            self.stream.seek(position)

    def _fill(self, segments: list[tuple[int, memoryview]]) -> None:
        for offset, view in segments:
            if not self.seekable:
                self._skip_to(offset)
            got = 0
            if self._ahead:
                got = min(len(self._ahead), len(view))
                view[:got] = self._ahead[:got]
                self._ahead = self._ahead[got:]
            while got < len(view):
                count = self._read_into(view[got : got + _STREAM_CHUNK])
                if not count:
                    raise ShortRead(offset + got)
                got += count
            self.position = offset + len(view)

    def _read_into(self, view: memoryview) -> int:
        """One read into `view`: ``readinto`` where the object has one that works, else
        ``read`` and a copy (the bytes past `view` kept for the next read)."""
        if self._readinto is not None:
            try:
                return self._readinto(view) or 0
            except (NotImplementedError, io.UnsupportedOperation, AttributeError):
                self._readinto = None  # an abstract base's readinto: read() it is
        chunk = self._next_raw(len(view))
        count = min(len(chunk), len(view))
        view[:count] = chunk[:count]
        self._ahead = chunk[count:]
        return count

    def _next_raw(self, count: int) -> bytes:
        chunk = self.stream.read(count)
        if not chunk:
            return b""
        return chunk if isinstance(chunk, bytes) else _as_bytes(chunk)


class BufferFile(RangeFile):
    """A bytes-like object holding the whole file: ranges are read-only views of it."""

    default_gap = LOCAL_GAP

    def __init__(self, source: Any, options: Options) -> None:
        super().__init__(options, f"a {type(source).__name__} object")
        self.source = source
        with memoryview(source) as view:
            self.size = view.nbytes

    def _view(self) -> memoryview:
        view = memoryview(self.source)
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B")
        return view.toreadonly()

    def first(self, count: int, clock: Clock) -> bytes:
        return bytes(self._view()[:count])

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        return bytes(self._view()[start:stop])

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        view = self._view()
        for _, _, segments in reads:
            for offset, target in segments:
                piece = view[offset : offset + len(target)]
                target[: len(piece)] = piece
                if len(piece) < len(target):
                    raise ShortRead(len(view))

    def _read_spans(
        self, ranges: Sequence[tuple[int, int]], gap: int, clock: Clock
    ) -> list[memoryview]:
        # The source is the file's memory already: each range a view of it, no copy.
        view = self._view()
        return [view[offset : offset + length] for offset, length in ranges]


def _seek_size(file: object) -> int | None:
    """The stream's size, its position left where it was; None if it cannot seek.

    Objects without ``seekable()`` (older file-likes) are tried with ``seek`` directly.
    """
    seekable = getattr(file, "seekable", None)
    try:
        if seekable is not None and not seekable():
            return None
        here = file.tell() if hasattr(file, "tell") else 0
        size: int = file.seek(0, io.SEEK_END)  # type: ignore[attr-defined]
        file.seek(here)  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None
    return size


def _readinto_is_read(stream: object) -> bool:
    """Whether the object's ``readinto`` reads what its ``read`` does: not one it inherits
    from a class whose ``read`` it overrides (a BytesIO that changes read(), say)."""
    order = type(stream).__mro__

    def owner(name: str) -> int:
        return next((i for i, cls in enumerate(order) if name in cls.__dict__), len(order))

    return owner("readinto") <= owner("read")


def read_at_most(read: Callable[[int], object], count: int) -> bytes:
    """`count` bytes from `read`, fewer only at the end of the stream.

    Raw reads may return fewer bytes than asked (then it asks again), and a file object may
    return more (they are kept: they are the bytes that follow). Reads at most
    `_STREAM_CHUNK` bytes at a time.
    """
    chunks: list[bytes] = []
    while count > 0:
        chunk: object = read(min(count, _STREAM_CHUNK))
        if not chunk:
            break
        if not isinstance(chunk, bytes):
            chunk = _as_bytes(chunk)
        if not chunks and len(chunk) >= count:
            return chunk  # the usual case: read whole at once, no join
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _as_bytes(chunk: object) -> bytes:
    try:  # bytearray, memoryview, obstore's Bytes, ...: any buffer of bytes
        return memoryview(chunk).tobytes()  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"expected a binary file object; read() returned {type(chunk).__name__}"
        ) from None
