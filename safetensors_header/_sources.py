"""The source layer: what a source is, and how one is read, written once for every kind.

Layer: sources (above the sans-IO core, below the services). Every public reader, the
command line and every adapter reach a file through this module:

* `open_source` is the one place that decides what kind a source is (`kind_of`) and opens
  it as a `RangeFile`, the protocol every backend implements: ``_local`` (paths, file
  objects, bytes-like objects), ``_http`` (http and https URLs) and ``_stores`` (fsspec URLs
  and filesystems, obstore and obspec stores);
* `header_of` is the one loop that turns a source into its `Header`: a first read, then
  `bytes_needed` says what more to read, then `parse_header` judges the bytes once;
* `RangeFile.read_ranges` is the one planner of ranged reads, written once on top of a
  backend's `read_into` (ranges sorted, joined across gaps, each span read into one buffer
  of its own, each range handed out as a view of it: every byte copied once, into the
  memory it is returned in), and overridden by a backend only for speed (obstore);
* `redact` is the one rule for showing a URL, `sibling` the one rule for the file next to
  another (a shard beside its index).

A `RangeFile` pins the file's identity at its first read (the size, and the ETag or
Last-Modified of a URL or an object, the inode and modification time of a local file) and
checks it at every later read, so bytes of two different files are never mixed: a file that
changed raises `RemoteError` (a URL or a store) or `HeaderError` of kind ``FileChanged``.
"""

from __future__ import annotations

import os
import re

from ._errors import HeaderError
from ._format import MAX_HEADER_SIZE, bytes_needed
from ._options import FIRST_READ, LOCAL_GAP, RETRIES, TIMEOUT, Options
from ._parser import parse_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from typing import IO, Any, Final, Protocol, TypeAlias, TypeVar

    from ._header import Header
    from ._options import Clock

    _T = TypeVar("_T")
    _R = TypeVar("_R")
    #: Bytes of a file read into memory: ``(offset in the file, a writable view)`` pairs.
    Segment: TypeAlias = tuple[int, memoryview]
    #: One request: ``[start, stop)`` of the file, its bytes landing in the segments (sorted,
    #: disjoint, inside the span); bytes between the segments are read and dropped.
    Read: TypeAlias = tuple[int, int, list[Segment]]

    class _Readable(Protocol):
        # Any buffer of bytes: fsspec returns bytes, obstore its own Bytes type.
        def read(self, size: int = ..., /) -> object: ...

    class _Opened(Protocol):
        # A file opened already (`open_file`'s SafetensorsFile): its header and its file.
        header: Header
        _range_file: RangeFile

    #: What `read_header` accepts: a path or URL, a bytes-like object, a binary file object,
    #: a ``(store, path)`` pair of an obstore store or an fsspec filesystem and a path, or a
    #: file opened already (`open_file`).
    Source: TypeAlias = (
        str
        | "os.PathLike[str]"
        | "os.PathLike[bytes]"
        | bytes
        | bytearray
        | memoryview
        | IO[bytes]
        | _Readable
        | tuple[Any, str]
        | _Opened
        | "RangeFile"
    )
else:
    # At run time, for introspection and documentation: any object with read() also works.
    import io

    Source = str | os.PathLike | bytes | bytearray | memoryview | io.IOBase | tuple

__all__ = [
    "RangeFile",
    "ShortRead",
    "Source",
    "allocate",
    "changed",
    "header_of",
    "is_url",
    "kind_of",
    "read_header",
]
__all__ += ["open_source", "parts", "redact", "run_parallel", "sibling", "url_scheme"]

# A URL's scheme (RFC 3986), of two letters or more: ``C://x`` is a Windows path.
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")
# Buffers from this size up are fresh anonymous memory (see `allocate`).
_MAPPED: Final = 1 << 21


def is_url(source: str) -> bool:
    """Whether `source` is read over HTTP(S) rather than as a local path."""
    return source[:8].lower().startswith(("http://", "https://"))


def url_scheme(source: str) -> str | None:
    """The scheme of a URL that fsspec reads (``s3``, ``hf``, ``file``...), else None."""
    match = _SCHEME.match(source)
    if match is None or is_url(source):
        return None
    return match[1].lower()


def read_header(
    source: Source,
    /,
    *,
    max_header_size: int = MAX_HEADER_SIZE,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = TIMEOUT,
    first_read: int = FIRST_READ,
    retries: int = RETRIES,
    storage_options: Mapping[str, Any] | None = None,
) -> Header:
    """Read and validate the header of a safetensors file.

    Args:
        source: One of
            * an ``http://`` or ``https://`` URL (a ``str``): read with HTTP Range requests,
              one when ``8 + N <= first_read``, else one more for exactly the missing bytes
              (redirects followed; a server that ignores Range is read only as far as the
              header and the connection closed);
            * an fsspec URL (a ``str`` with another scheme: ``s3://``, ``gs://``, ``az://``,
              ``hf://``, ``memory://``, ``file://``...), when fsspec and the scheme's
              package (s3fs, gcsfs, ...) are installed: the size from the filesystem, then
              one ranged read (two for a header longer than `first_read`);
            * a ``(store, path)`` pair: an obstore store (or any obspec store) and a path in
              it, one ranged ``get`` (two for a long header), the size coming with it; or
              an fsspec filesystem and a path, read as an fsspec URL is;
            * a local path (``str`` or ``os.PathLike``). A pipe, FIFO or character device
              (``/dev/stdin``, ``<(cat f)``) is read as a stream;
            * a bytes-like object holding the whole file (``bytes``, ``bytearray``,
              ``memoryview``, ``mmap``): bytes are always contents, never a path;
            * a binary file object (anything with ``read``; ``seek``/``tell`` when it has
              them). The header is read from offset 0 when the object is seekable, else
              from its current position; the file size comes from seeking to the end. A
              stream that cannot seek has no known size: the rule that the tensors cover
              the rest of the file is then skipped and ``Header.file_size`` is ``None``;
            * a file opened already with `open_file`: its header.
        max_header_size: The largest header length N accepted; see `parse_header`. Over
            HTTP it is checked on the first bytes, before more are asked for.
        headers: For URLs: extra request headers, e.g. ``{"Authorization": "Bearer ..."}``.
            ``Authorization`` and ``Cookie`` go only to the URL's own scheme, host and port,
            never on to a host it redirects to; ``Range`` and ``If-Range`` are set here.
        timeout: For URLs and object stores: seconds the whole call may take: connects,
            every read of a reply (a server that trickles bytes, or answers
            ``100 Continue`` without end, is cut off), the waits between retries. ``None``
            or ``float("inf")``: no bound on the whole call, each wait still at most 10 s.
        first_read: For URLs and object stores: bytes asked for by the first request (at
            least 8). The default, 128 KiB, holds the whole header of 97 % of popular models
            in one round trip.
        retries: For URLs: how many times to retry a request after a connection error, a
            timeout, a body cut short or a 5xx status, waiting 0.25 s, 0.5 s, ... (with
            jitter). 4xx statuses are never retried.
        storage_options: For fsspec URLs: passed to ``fsspec.core.url_to_fs`` (credentials,
            an ``endpoint_url``, ...).

    The URL options are ignored for local sources, so that one call can serve both. The
    header is read, not the data buffer: a local file's first read is of up to 16 KiB (then
    exactly the rest of a longer header), a stream's exactly ``8 + N`` bytes, a URL's
    `first_read` bytes (then exactly the rest). The file size (from the file system, by
    seeking, or from ``Content-Range``/``Content-Length``) is used to check that the tensors
    cover the data exactly. A server that gives no size leaves ``file_size`` ``None``.

    Raises:
        HeaderError: The file is not a valid safetensors file; ``kind`` is the reference's
            error for the same bytes. Any other exception from bad file contents is a bug.
        RemoteError: An ``OSError``: the server answered an error status (``status``, with
            hints for 401, 403 and 404), the network failed after the retries, the timeout
            was used up, a reply contradicted the request (a wrong ``Content-Range``, an
            unusable ``Content-Length`` or ``Location``, a body in a transfer coding), or a
            redirect led to a scheme other than http and https; an object store's own error.
        ImportError: An fsspec URL, without fsspec (or the scheme's package) installed.
        OSError: The file could not be opened or read.
        TypeError: ``source`` is none of the above.
        ValueError: A URL option is out of range, or the URL is malformed.
    """
    if type(source) is str and "://" not in source:  # a local path: the common case first
        return _read_path(source, max_header_size)
    kind = kind_of(source)
    if kind == "path":
        return _read_path(source, max_header_size)  # type: ignore[arg-type]
    if kind == "buffer":
        with memoryview(source) as view:  # type: ignore[arg-type]
            return parse_header(view, file_size=view.nbytes, max_header_size=max_header_size)
    if kind == "file" and hasattr(source, "header"):
        return source.header  # type: ignore[union-attr]
    local = kind == "stream"
    options = Options(
        headers=headers,
        timeout=None if local else timeout,
        first_read=first_read if not local else FIRST_READ,
        retries=retries if not local else RETRIES,
        storage_options=storage_options,
    )
    file = open_source(source, options)
    return header_of(file, max_header_size, options.clock())


def _read_path(path: str | os.PathLike[str] | os.PathLike[bytes], limit: int) -> Header:
    """`_local.read_path`, imported on the first call, which puts it in this name's place
    (an import statement in `read_header` would cost a small header's read a tenth more)."""
    global _read_path  # noqa: PLW0603
    from ._local import read_path

    _read_path = read_path
    return read_path(path, limit)


def kind_of(source: object) -> str:
    """What kind of source `source` is, the one decision every reader goes by.

    ``"http"`` (an http or https URL), ``"fsspec"`` (another URL, read with fsspec),
    ``"store"`` (a ``(store or filesystem, path)`` pair), ``"path"`` (a local path: a
    ``str`` or an ``os.PathLike``), ``"buffer"`` (a bytes-like object holding the whole
    file), ``"stream"`` (a binary file object), or ``"file"`` (a file opened already).
    TypeError for anything else.
    """
    if isinstance(source, str):
        if "://" in source:  # (a local path is the common case: one check)
            if is_url(source):
                return "http"
            if url_scheme(source) is not None:
                return "fsspec"
        return "path"
    # os.PathLike without the ABC's isinstance: __fspath__ on the type, not None (an opt-out).
    if getattr(type(source), "__fspath__", None) is not None:
        return "path"
    if isinstance(source, RangeFile) or hasattr(source, "_range_file"):
        return "file"
    if isinstance(source, tuple) and len(source) == 2:
        from ._stores import is_pair  # (imports neither fsspec nor obstore)

        if is_pair(source):
            return "store"
    try:
        # Bytes-like first: an mmap also has read(), but its buffer is the whole file.
        memoryview(source).release()  # type: ignore[arg-type]
    except TypeError:
        if getattr(source, "read", None) is not None:
            return "stream"
        raise TypeError(
            "expected a path, a URL, a bytes-like object, a binary file object or a "
            f"(store, path) pair, not {type(source).__name__}"
        ) from None
    return "buffer"


def open_source(source: object, options: Options | None = None) -> RangeFile:
    """`source` as a `RangeFile` of its kind (a `RangeFile`, or a file opened already, as is)."""
    kind = kind_of(source)
    if kind == "file":
        return source if isinstance(source, RangeFile) else source._range_file  # type: ignore[attr-defined]
    options = options or Options()
    if kind == "http":
        from ._http import HttpFile  # the HTTP client: only for URLs

        return HttpFile(source, options)  # type: ignore[arg-type]
    if kind in ("fsspec", "store"):
        from ._stores import store_file  # fsspec and obstore: only for such sources

        return store_file(source, options)  # type: ignore[arg-type]
    from ._local import BufferFile, PathFile, StreamFile

    if kind == "path":
        return PathFile(source, options)  # type: ignore[arg-type]
    if kind == "buffer":
        return BufferFile(source, options)
    return StreamFile(source, options)


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

    A backend sets `shown` (a name for messages, URLs redacted) and, once known, `size` (the
    file's size; ``None`` for a stream or a server that does not say). It implements
    `first` and `read_into`, and may override `read`, `read_ranges`, `document` and
    `sibling`. Instances are shared by threads (a pinned identity is only ever set once) and
    hold no open file or connection between calls, so they can be pickled.
    """

    #: Ranges closer than this are one request, unless the caller says otherwise.
    default_gap: int = LOCAL_GAP

    def __init__(self, options: Options, shown: str) -> None:
        self.options = options
        self.shown = shown
        self.size: int | None = None
        # The size the file must have (its header, read before, says so): checked when the
        # file's identity is pinned.
        self.expected_size: int | None = None

    def prepare(self) -> None:
        """Learn what a ranged read is planned by (a local file's size), if it costs little."""

    def can_seek(self) -> bool:
        """Whether ranges can be read at any offset (not a pipe's or a stream's)."""
        return True

    def first_read_size(self) -> int:
        """How many bytes the first read of a header asks for."""
        return self.options.first_read

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

        `reads` are sorted by offset and do not overlap.
        """
        raise NotImplementedError

    def document(self, limit: int, clock: Clock) -> bytes:
        """The whole (small) file, such as an index, read to at most ``limit + 1`` bytes."""
        return self.read(0, limit + 1, clock)

    def sibling(self, name: str) -> RangeFile:
        """The file called `name` in the same folder, with the same options."""
        raise NotImplementedError

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
        _check_known_end(ranges, self.size)
        try:
            if into is None:
                return self._read_spans(ranges, gap, clock)
            return self._read_into_buffers(ranges, into, gap, clock)
        except ShortRead as short:
            raise _past_the_end(ranges, short.end, self.size) from None

    def _read_spans(
        self, ranges: Sequence[tuple[int, int]], gap: int, clock: Clock
    ) -> list[memoryview]:
        spans = joined(
            sorted((offset, offset + length) for offset, length in ranges if length), gap
        )
        buffers = [allocate(stop - start) for start, stop in spans]
        reads = [
            (start, stop, [(start, buffer)])
            for (start, stop), buffer in zip(spans, buffers, strict=True)
        ]
        self.read_into(reads, clock)
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
        self.read_into(reads, clock)
        for i in again:
            offset, length = ranges[i]
            self.read_into([(offset, offset + length, [(offset, into[i])])], clock)
        return list(into)


def header_of(file: RangeFile, max_header_size: int, clock: Clock) -> Header:
    """The one loop from a source to its header: read, ask `bytes_needed`, read, parse.

    A first read of ``first_read`` bytes (up to 16 KiB of a local file), then exactly the
    missing bytes that `bytes_needed` asks for until the header is there (or the length
    prefix decides), then `parse_header` once. A read that comes back short ends the file:
    its size is then what was read when the file had none (a stream), and `parse_header`
    judges the bytes as they are.
    """
    try:
        try:
            data, size = _header_bytes(file, max_header_size, clock)
        except Restart:  # replaced meanwhile: the new file's header, from its start
            data, size = _header_bytes(file, max_header_size, clock)
    finally:
        file.release()
    return parse_header(data, file_size=size, max_header_size=max_header_size)


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


def joined(reads: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted ``[start, stop)`` reads, those less than `gap` bytes apart joined into one."""
    spans: list[tuple[int, int]] = []
    for start, stop in reads:
        if spans and start - spans[-1][1] <= gap:  # touching and overlapping reads too
            if stop > spans[-1][1]:
                spans[-1] = (spans[-1][0], stop)
        else:
            spans.append((start, stop))
    return spans


def cut_out(
    ranges: Sequence[tuple[int, int]], spans: list[tuple[int, int]], buffers: list[memoryview]
) -> list[memoryview]:
    """Every range, as a view of the buffer of the span that holds it."""
    from bisect import bisect_right

    starts = [start for start, _ in spans]
    out = []
    empty = memoryview(b"")
    for offset, length in ranges:
        if not length:
            out.append(empty)
            continue
        index = bisect_right(starts, offset) - 1
        at = offset - starts[index]
        out.append(buffers[index][at : at + length])
    return out


def parts(reads: Iterable[Read], part_size: int) -> Iterator[Read]:
    """The reads cut into parts of at most `part_size` bytes, made one at a time."""
    for start, stop, segments in reads:
        if stop - start <= part_size:
            yield start, stop, segments
            continue
        for cut in range(start, stop, part_size):
            end = min(cut + part_size, stop)
            pieces = []
            for offset, view in segments:
                low, high = max(offset, cut), min(offset + len(view), end)
                if low < high:
                    pieces.append((low, view[low - offset : high - offset]))
            yield cut, end, pieces


def allocate(count: int) -> memoryview:
    """A writable buffer of `count` bytes, for bytes about to be read into it.

    From 2 MiB up, fresh private anonymous memory, its pages made by the kernel as the read
    fills them (a bytearray would be zeroed first: a pass over the memory for nothing), and
    on Linux in huge pages where the system allows (``madvise``): a large read then costs
    what copying the bytes costs, not what faulting in 4 KiB pages does.
    """
    if count < _MAPPED:
        return memoryview(bytearray(count))
    import mmap

    try:
        if hasattr(mmap, "MAP_PRIVATE"):  # POSIX
            memory = mmap.mmap(-1, count, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        else:  # Windows: bytearray's zeroing is what is left
            return memoryview(bytearray(count))
    except (OSError, OverflowError, ValueError):
        raise MemoryError(f"cannot allocate a buffer of {count:,} bytes for the data") from None
    if hasattr(memory, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        import contextlib

        with contextlib.suppress(OSError):  # not allowed here: 4 KiB pages then
            memory.madvise(mmap.MADV_HUGEPAGE)
    return memoryview(memory)


def run_parallel(
    work: Callable[[_T], None], jobs: Iterable[_T], workers: int, *, first_alone: bool = False
) -> None:
    """`work(job)` for every job, on at most `workers` threads; the first failure is raised.

    The jobs are taken one at a time from `jobs` (which may be a generator: at most
    `workers` of them exist at once). With `first_alone`, the first job runs alone before
    the others start (it learns what they need: a URL's final address and identity). With
    one worker, at interpreter shutdown (no thread can be started) or for a single job,
    the jobs run in the calling thread.
    """
    jobs = iter(jobs)
    if first_alone:
        for job in jobs:
            work(job)
            break
    if workers <= 1:
        for job in jobs:
            work(job)
        return
    import threading

    lock = threading.Lock()
    failures: list[BaseException] = []

    def loop() -> None:
        while True:
            with lock:
                if failures:
                    return
                job = next(jobs, _DONE)
            if job is _DONE:
                return
            try:
                work(job)  # type: ignore[arg-type]
            except BaseException as error:  # re-raised in the calling thread
                with lock:
                    failures.append(error)
                return

    threads = []
    for _ in range(workers - 1):
        thread = threading.Thread(target=loop, daemon=True)
        try:
            thread.start()
        except RuntimeError:  # "can't create new thread at interpreter shutdown"
            break
        threads.append(thread)
    try:
        loop()  # the calling thread works too
    finally:
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]


def map_parallel(work: Callable[[_T], _R], jobs: Sequence[_T], workers: int) -> list[_R]:
    """`[work(job) for job in jobs]` on at most `workers` threads, in order."""
    results: list[Any] = [None] * len(jobs)

    def one(index: int) -> None:
        results[index] = work(jobs[index])

    run_parallel(one, range(len(jobs)), min(workers, len(jobs)))
    return results


_DONE: Final = object()


def _check_known_end(ranges: Sequence[tuple[int, int]], size: int | None) -> None:
    """HeaderError before any read for a range past the end of a file of known size."""
    if size is None:
        return
    for offset, length in ranges:
        if length and offset + length > size:
            raise _past_the_end(ranges, size, size)


def _past_the_end(ranges: Sequence[tuple[int, int]], end: int, size: int | None) -> HeaderError:
    """MetadataIncompleteBuffer for the first range that ends past `end` (where the file
    ends)."""
    offset, length = next(
        ((offset, length) for offset, length in ranges if length and offset + length > end),
        (end, 0),
    )
    where = f"is {size:,} bytes" if size is not None else f"ended at byte {end:,}"
    return HeaderError(
        "MetadataIncompleteBuffer",
        f"the file {where}: it ends before the range of {length:,} bytes at offset "
        f"{offset:,} does (at byte {offset + length:,})",
        offset=end,
    )


def changed(shown: str, what: str) -> HeaderError:
    """The error for a local file that changed between two reads."""
    return HeaderError(
        "FileChanged",
        f"{shown} changed between two reads ({what}): its header and its data would be of "
        "two different files; read it again",
    )


def redact(url: str) -> str:
    """The URL without user info or query (signed links carry credentials there)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unreadable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "<redacted>@" + netloc.rpartition("@")[2]
    query = "<redacted>" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def sibling(source: Any, name: str) -> Any:
    """The source of the file `name` next to `source` (a shard beside its index).

    An http(s) URL: `name` percent-quoted and joined to the URL (its query dropped, as a
    shard has no signature of its index's); another URL: its path's folder and `name`
    (fsspec paths are not quoted); a ``(store, path)`` pair: the same store, the path's
    folder and `name`; a local path: its folder and `name`.
    """
    kind = kind_of(source)
    if kind == "http":
        from urllib.parse import quote, urljoin, urlsplit, urlunsplit

        parts = urlsplit(source)
        return urljoin(urlunsplit((*parts[:3], "", "")), quote(name))
    if kind == "fsspec":
        return source.split("?", 1)[0].rsplit("/", 1)[0] + "/" + name
    if kind == "store":
        import posixpath

        return source[0], posixpath.join(posixpath.dirname(source[1]), name)
    if kind == "path":
        return os.path.join(os.path.dirname(os.fspath(source)), name)
    raise TypeError(f"a {kind} has no files beside it")
