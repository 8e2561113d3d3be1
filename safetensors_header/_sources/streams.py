"""Binary file objects and bytes-like objects as `RangeFile` backends.

Layer: sources. A file object is read with ``readinto`` where it has one, its position
restored after a ranged read; one that cannot seek is read once, in order. A bytes-like
object is sliced, its views handed out read-only without a copy. Their identity: the size,
and for a file object over a descriptor, what ``os.fstat`` says of it (a file object of
memory, or bytes, has only its size and its header's bytes to go by).
"""

from __future__ import annotations

import io
import os

from .base import RangeFile, ShortRead
from .identity import absolute, same_path
from .options import LOCAL_GAP

__all__ = ["STREAM_CHUNK", "BufferFile", "StreamFile", "read_at_most", "stat_validators"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final

    from .base import Validators
    from .options import Clock, Options
    from .planning import Read

# A stream of unknown size may be far shorter than a (raised) header limit, and read(n) may
# allocate n bytes before it finds that out: read at most this much at a time.
STREAM_CHUNK: Final = 16 * 2**20


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

    @property
    def _place(self) -> str:
        """A file object of a named local file: its absolute path (so that the path and
        the file object are one place); else `shown`."""
        name = getattr(self.stream, "name", None)
        if isinstance(name, (str, bytes)) and _descriptor_validators(self.stream)[0]:
            return absolute(os.fsdecode(name))
        return self.shown

    def _same_place(self, location: str) -> bool:
        place = self._place
        return location == place if place == self.shown else same_path(location, place)

    def _first_read_size(self) -> int:
        return 8  # exactly the header's bytes: a stream's data stays in it for its reader

    def candidates(self, *, follow_links: bool = False) -> list[RangeFile]:
        raise _no_checkpoint(self)

    def _can_seek(self) -> bool:
        return self.seekable

    def _identify_stream(self) -> None:
        """What the stream is now: its size (if it can seek), and its descriptor's identity."""
        if self.seekable:
            validators, nameless = _descriptor_validators(self.stream)
            self._identify(_seek_size(self.stream), validators, nameless=nameless)
        elif not self.identified:
            self._identify(None, _descriptor_validators(self.stream)[0])

    def _first(self, count: int, clock: Clock) -> bytes:
        self._identify_stream()
        if self.seekable:
            self.stream.seek(0)
            self.position, self._ahead = 0, b""
        return self._next(count)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        self._identify_stream()
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
            skipped = self._next(min(offset - self.position, STREAM_CHUNK))
            if not skipped:
                raise ShortRead(self.position)

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        self._identify_stream()
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
                count = self._read_some(view[got : got + STREAM_CHUNK])
                if not count:
                    raise ShortRead(offset + got)
                got += count
            self.position = offset + len(view)

    def _read_some(self, view: memoryview) -> int:
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

    def candidates(self, *, follow_links: bool = False) -> list[RangeFile]:
        raise _no_checkpoint(self)

    def _view(self) -> memoryview:
        view = memoryview(self.source)
        if view.ndim != 1 or view.format != "B":
            view = view.cast("B")
        self._identify(view.nbytes, ())  # (a bytearray or a map may have been resized)
        return view.toreadonly()

    def _first(self, count: int, clock: Clock) -> bytes:
        return bytes(self._view()[:count])

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        return bytes(self._view()[start:stop])

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
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


def _no_checkpoint(file: RangeFile) -> TypeError:
    return TypeError(
        f"read_checkpoint() expected a path, a URL or a (store, path) pair, not {file.shown}: "
        "a checkpoint's files are found by their names"
    )


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


def _descriptor_validators(stream: object) -> tuple[Validators, bool]:
    """What ``os.fstat`` says of the regular file under a file object, else nothing; and
    whether the file has no name left (deleted, or replaced, while it is open)."""
    import stat

    try:
        status = os.fstat(stream.fileno())  # type: ignore[attr-defined]
    except Exception:  # no descriptor (BytesIO: io.UnsupportedOperation), or closed
        return (), False
    if not stat.S_ISREG(status.st_mode):
        return (), False
    return stat_validators(status), status.st_nlink == 0


def stat_validators(status: os.stat_result) -> Validators:
    """What an ``os.stat`` says changes when a local file does (its size is apart): which
    file it is (device and inode), and when it was modified and when its inode last changed
    (``st_ctime_ns``: a rewrite in place whose modification time is set back, as ``cp -p``
    and ``rsync -t`` do, still moves it)."""
    return (
        ("device", status.st_dev),
        ("inode", status.st_ino),
        ("mtime_ns", status.st_mtime_ns),
        ("ctime_ns", status.st_ctime_ns),
    )


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
    `STREAM_CHUNK` bytes at a time.
    """
    chunks: list[bytes] = []
    while count > 0:
        chunk: object = read(min(count, STREAM_CHUNK))
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
