"""What every source backend is: a `RangeFile`, and the reading written once on top of it.

Layer: sources. The protocol of "a file I can read ranges of" (`RangeFile`: a first read,
ranged reads into buffers the caller provides, the file beside it, a whole small document),
and what is written once for every backend: `header_of`, the one loop from a source to its
header; `RangeFile.read_ranges`, the one planner of ranged reads (ranges sorted, joined across
gaps, each span read into one buffer, each range a view of it); the parts a long read is cut
into (`parts`), the buffers (`allocate`), the threads (`run_parallel`), the rule for showing
a URL (`redact`) and for the file beside one (`url_sibling`). The backends (``_local``,
``_http``, ``_stores``) build on it; ``_sources`` decides which backend a source gets.

A `RangeFile` pins the file's identity at its first read (the size, and the ETag or
Last-Modified of a URL or an object, the inode and modification time of a local file) and
checks it at every later read, so bytes of two different files are never mixed: a file that
changed raises `RemoteError` (a URL or a store) or `HeaderError` of kind ``FileChanged``.
"""

from __future__ import annotations

import os
import re

from ._errors import HeaderError
from ._format import bytes_needed
from ._options import LOCAL_GAP
from ._parser import parse_header

__all__ = ["RangeFile", "Restart", "ShortRead", "allocate", "changed", "check_known_end"]
__all__ += ["cut", "cut_out", "header_of", "is_url", "joined", "map_parallel", "part_length"]
__all__ += ["parts", "past_the_end", "redact", "run_parallel", "url_scheme", "url_sibling"]
__all__ += ["streams", "with_segments"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final, TypeAlias, TypeVar

    from ._header import Header
    from ._options import Clock, Options

    _T = TypeVar("_T")
    _R = TypeVar("_R")
    #: Bytes of a file read into memory: ``(offset in the file, a writable view)`` pairs.
    Segment: TypeAlias = tuple[int, memoryview]
    #: One request: ``[start, stop)`` of the file, its bytes landing in the segments (sorted,
    #: disjoint, inside the span); bytes between the segments are read and dropped.
    Read: TypeAlias = tuple[int, int, list[Segment]]

# A URL's scheme (RFC 3986), of two letters or more: ``C://x`` is a Windows path.
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")
# Buffers from this size up are fresh anonymous memory (see `allocate`).
_MAPPED: Final = 1 << 21
# The parts of a long read grow up to this many times `part_size` (see `part_length`).
_PART_GROWTH: Final = 4
# The parts of one long read in flight: at most this many per core, and this many at least
# (see `streams`).
_STREAMS_PER_CORE: Final = 2
_STREAMS_AT_LEAST: Final = 4


def is_url(source: str) -> bool:
    """Whether `source` is read over HTTP(S) rather than as a local path."""
    return source[:8].lower().startswith(("http://", "https://"))


def url_scheme(source: str) -> str | None:
    """The scheme of a URL that fsspec reads (``s3``, ``hf``, ``file``...), else None."""
    match = _SCHEME.match(source)
    if match is None or is_url(source):
        return None
    return match[1].lower()


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
        # At least the bytes its header takes (8 + N), where something said so beforehand (a
        # checkpoint's index names the tensors of each shard): the first read asks no more.
        self.header_hint: int | None = None

    def prepare(self) -> None:
        """Learn what a ranged read is planned by (a local file's size), if it costs little."""

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


def part_length(total: int, part_size: int, workers: int) -> int:
    """How long the parts are of reads of `total` bytes made on `workers` threads.

    `part_size`, or longer where that would make more requests than there are workers: one
    request per worker then, up to ``4 * part_size`` each. Every request costs a round trip
    and the server's work of starting a reply; fewer, longer ones still keep every worker
    busy, and the cap bounds what one retry reads again.
    """
    return max(part_size, min(part_size * _PART_GROWTH, -(-total // workers)))


def streams(max_workers: int) -> int:
    """How many parts of one long read are in flight: `max_workers`, at most 2 per core
    (4 on one or two cores).

    Every byte of a part costs this process's CPU (the kernel's copy into the buffer, the
    zeroing of its fresh pages); past a few streams a core, more add no speed and cost system
    time: on 2 cores, 16 streams took 3-5 times the system time per GB of 8 or 4, and 4 were
    the fastest from both loopback servers measured (nginx, s3rver).
    """
    cores = os.cpu_count() or 1
    return max(1, min(max_workers, max(_STREAMS_AT_LEAST, _STREAMS_PER_CORE * cores)))


def parts(reads: Sequence[Read], part_size: int, max_workers: int) -> list[Read]:
    """The requests that read `reads` on ``streams(max_workers)`` threads: every read
    longer than `part_length` cut into equal parts no longer than it (`cut`)."""
    total = sum(stop - start for start, stop, _ in reads)
    return cut(reads, part_length(total, part_size, streams(max_workers)))


def cut(reads: Iterable[Read], length: int) -> list[Read]:
    """Every read longer than `length` cut into the fewest equal parts no longer than it."""
    out: list[Read] = []
    for read in reads:
        start, stop, segments = read
        span = stop - start
        if span <= length:
            out.append(read)
            continue
        count = -(-span // length)
        bounds = [start + span * i // count for i in range(count + 1)]
        out += with_segments([(bounds[i], bounds[i + 1]) for i in range(count)], segments)
    return out


def with_segments(spans: Sequence[tuple[int, int]], segments: Sequence[Segment]) -> list[Read]:
    """Each of the sorted `spans` with the parts of the sorted `segments` inside it (a
    segment that crosses a span's end is cut there; bytes between spans go nowhere)."""
    reads: list[Read] = []
    index = 0
    for start, stop in spans:
        inside: list[Segment] = []
        while index < len(segments):
            offset, view = segments[index]
            end = offset + len(view)
            if offset >= stop:
                break
            low, high = max(offset, start), min(end, stop)
            if low < high:
                inside.append((low, view[low - offset : high - offset]))
            if end > stop:
                break  # the rest of it is in the next span
            index += 1
        reads.append((start, stop, inside))
    return reads


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


def check_known_end(ranges: Sequence[tuple[int, int]], size: int | None) -> None:
    """HeaderError before any read for a range past the end of a file of known size."""
    if size is None:
        return
    for offset, length in ranges:
        if length and offset + length > size:
            raise past_the_end(ranges, size, size)


def past_the_end(ranges: Sequence[tuple[int, int]], end: int, size: int | None) -> HeaderError:
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


def url_sibling(url: str, name: str) -> str:
    """The URL of the file `name` beside an http(s) URL: `name` percent-quoted and joined to
    the URL, its query dropped (a shard has no signature of its index's)."""
    from urllib.parse import quote, urljoin, urlsplit, urlunsplit

    parts = urlsplit(url)
    return urljoin(urlunsplit((*parts[:3], "", "")), quote(name))
