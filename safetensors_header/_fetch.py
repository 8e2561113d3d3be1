"""The bytes themselves: byte ranges of a file from any source, in the fewest requests.

`read_ranges` plans the reads (sorts the ranges, joins those closer than a gap into one
request, drops empty ones), sends them the way the source reads best, then cuts every range
back out of what came: ``os.pread`` for paths, seek and read for file objects, slices of a
buffer, the HTTP client of `read_header` for URLs (in parallel), ``cat_ranges`` for fsspec
and ``get_ranges`` for obstore.
"""

from __future__ import annotations

import operator
import os

from ._errors import HeaderError
from ._sources import (
    RETRIES,
    TIMEOUT,
    Source,
    in_store,
    is_url,
    path_kind,
    read_at_most,
    read_header,
)

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any, Final

    from ._header import Header

__all__ = ["LOCAL_GAP", "PART_SIZE", "REMOTE_GAP", "WORKERS", "header_for_data", "read_ranges"]

#: The default gap for URLs and object stores: ranges closer than this are one request. A
#: round trip (20-200 ms to a CDN or a bucket) costs more than a mebibyte on most links.
REMOTE_GAP: Final = 1 << 20
#: The default gap for local files and file objects: a page; a read costs little more.
LOCAL_GAP: Final = 4096
#: The default bound on requests in flight at once, for URLs.
WORKERS: Final = 8
#: The default size of the parts a long remote read is split into, fetched in parallel: one
#: connection rarely carries more than 50-100 MB/s from a CDN or a bucket; several do.
PART_SIZE: Final = 16 << 20
_CHUNK: Final = 16 * 2**20  # the most one os.pread asks for (Linux stops at 2 GiB anyway)


def read_ranges(
    source: Source,
    ranges: Iterable[tuple[int, int]],
    /,
    *,
    gap: int | None = None,
    max_workers: int = WORKERS,
    part_size: int = PART_SIZE,
    headers: Mapping[str, str] | None = None,
    timeout: float | None = None,
    retries: int = RETRIES,
    storage_options: Mapping[str, Any] | None = None,
) -> list[bytes]:
    """The bytes of each ``(offset, length)`` range of a file, in the order given.

    What `TensorInfo.byte_ranges` returns (or ``(info.start, info.nbytes)`` for whole
    tensors) can be passed as it is. Ranges may overlap and come in any order; an empty
    range (length 0) gives ``b""`` and costs nothing.

    Args:
        source: What `read_header` reads: a local path (read with ``os.pread``: no shared
            file position, safe from many threads), a bytes-like object, a seekable binary
            file object (its position is restored afterwards), an ``http(s)://`` URL, an
            fsspec URL (``s3://``, ``gs://``, ``hf://``, ``memory://``, ...) or a
            ``(store, path)`` pair of an obstore store or an fsspec filesystem.
        ranges: ``(offset, length)`` pairs of non-negative ints.
        gap: Ranges less than this many bytes apart are read as one request (the bytes
            between them are read and dropped). Default: 1 MiB (`REMOTE_GAP`) for URLs and
            object stores, 4 KiB (`LOCAL_GAP`) for local files and file objects; ``0``
            joins only ranges that touch or overlap.
        max_workers: For http(s) URLs: how many requests may be in flight at once (the
            first is sent alone: it follows redirects and learns the file's size and ETag).
            fsspec and obstore run their own concurrency.
        part_size: For http(s) and fsspec URLs: a read longer than this is split into parts
            of this size, fetched in parallel (default 16 MiB, `PART_SIZE`); a tensor up to
            that size is one request.
        headers, retries: For http(s) URLs, as for `read_header`.
        timeout: For http(s) URLs: seconds the whole call may take (connects, replies,
            retries and bodies); ``None`` (the default) bounds only each wait, at 10 s, so
            that a large download is not cut short.
        storage_options: For fsspec URLs: passed to ``fsspec.core.url_to_fs``.

    Returns:
        One ``bytes`` per range, of exactly its length.

    Raises:
        HeaderError: ``MetadataIncompleteBuffer``: the file ends before a range does.
        RemoteError: As for `read_header`; also when an http(s) file is replaced between two
            requests (its ETag or size changed).
        OSError: The file could not be opened or read.
        TypeError: `source` is none of the above, or a range is not a pair of ints.
        ValueError: A negative offset or length; a file object or a path that cannot seek
            (a pipe); an option out of range.
    """
    wanted = [_checked(item) for item in ranges]
    reads = sorted((offset, offset + length) for offset, length in wanted if length)
    if not reads:
        return [b"" for _ in wanted]
    if part_size < 1:
        raise ValueError(f"part_size must be at least 1 byte, not {part_size}")
    if isinstance(source, str) and is_url(source):
        spans = _joined(reads, REMOTE_GAP if gap is None else gap)
        from ._remote import read_url_ranges  # the HTTP client: only for URLs

        parts, counts = _split(spans, part_size)
        fetched, size = read_url_ranges(
            source,
            parts,
            headers=headers,
            timeout=timeout,
            retries=retries,
            max_workers=max_workers,
        )
        pieces = _rejoined(fetched, counts)
    elif in_store(source):
        from . import _stores  # fsspec and obstore: only for such sources

        spans = _joined(reads, REMOTE_GAP if gap is None else gap)
        where = _stores.target(source, storage_options)  # type: ignore[arg-type]
        if where.fsspec:
            parts, counts = _split(spans, part_size)
            fetched, size = _stores.read_ranges(where, parts)
            pieces = _rejoined(fetched, counts)
        else:  # obstore joins ranges closer than 1 MiB itself: it would undo a split
            pieces, size = _stores.read_ranges(where, spans)
    elif isinstance(source, (str, os.PathLike)):
        spans = _joined(reads, LOCAL_GAP if gap is None else gap)
        pieces, size = _pread(source, spans)
    else:
        try:
            view = memoryview(source)  # type: ignore[arg-type]
        except TypeError:
            if not hasattr(source, "read"):
                raise TypeError(
                    "read_ranges() expected a path, a URL, a bytes-like object, a binary file "
                    f"object or a (store, path) pair, not {type(source).__name__}"
                ) from None
            spans = _joined(reads, LOCAL_GAP if gap is None else gap)
            pieces, size = _seek_and_read(source, spans)
        else:
            with view:
                flat = view.cast("B") if view.ndim != 1 or view.format != "B" else view
                size = flat.nbytes
                return [
                    _cut(flat[offset : offset + length].tobytes(), offset, length, size)
                    for offset, length in wanted
                ]
    return _cut_out(wanted, spans, pieces, size)


def header_for_data(
    source: Source,
    /,
    *,
    max_header_size: int,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    retries: int,
    storage_options: Mapping[str, Any] | None,
) -> Header:
    """The header a read of the tensors starts from: `read_header` with the read's options.

    A data read's `timeout` defaults to ``None`` (no bound on a large download); its header
    read keeps `read_header`'s own bound then, ``TIMEOUT``.
    """
    return read_header(
        source,
        max_header_size=max_header_size,
        headers=headers,
        timeout=TIMEOUT if timeout is None else timeout,
        retries=retries,
        storage_options=storage_options,
    )


def _checked(item: tuple[int, int]) -> tuple[int, int]:
    try:
        offset, length = item
        offset, length = operator.index(offset), operator.index(length)
    except (TypeError, ValueError):
        raise TypeError(f"a range is an (offset, length) pair of ints, not {item!r:.80}") from None
    if offset < 0 or length < 0:
        raise ValueError(f"a range's offset and length must be 0 or more, not {item!r}")
    return offset, length


def _joined(reads: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted ``[start, stop)`` reads, those less than `gap` bytes apart joined into one."""
    if gap < 0:
        raise ValueError(f"gap must be 0 or more bytes, not {gap}")
    spans = [reads[0]]
    for start, stop in reads[1:]:
        last_start, last_stop = spans[-1]
        if start - last_stop <= gap:  # touching and overlapping reads too
            if stop > last_stop:
                spans[-1] = (last_start, stop)
        else:
            spans.append((start, stop))
    return spans


def _split(spans: list[tuple[int, int]], part_size: int) -> tuple[list[tuple[int, int]], list[int]]:
    """The spans cut into parts of at most `part_size` bytes, and how many parts each has."""
    parts: list[tuple[int, int]] = []
    counts = []
    for start, stop in spans:
        cuts = range(start, stop, part_size)
        parts.extend((cut, min(cut + part_size, stop)) for cut in cuts)
        counts.append(len(cuts))
    return parts, counts


def _rejoined(parts: list[bytes], counts: list[int]) -> list[bytes]:
    """Every span's bytes, from its parts (a span of one part is not copied)."""
    pieces, at = [], 0
    for count in counts:
        pieces.append(parts[at] if count == 1 else b"".join(parts[at : at + count]))
        at += count
    return pieces


def _cut_out(
    wanted: list[tuple[int, int]],
    spans: list[tuple[int, int]],
    pieces: Sequence[bytes],
    size: int | None,
) -> list[bytes]:
    """Every wanted range, cut out of the span that holds it."""
    from bisect import bisect_right

    starts = [start for start, _ in spans]
    out = []
    for offset, length in wanted:
        if not length:
            out.append(b"")
            continue
        index = bisect_right(starts, offset) - 1
        piece, at = pieces[index], offset - starts[index]
        if at == 0 and len(piece) == length:
            out.append(piece)  # the usual case, one range a request: no copy
        else:
            out.append(_cut(piece[at : at + length], offset, length, size))
    return out


def _cut(data: bytes, offset: int, length: int, size: int | None) -> bytes:
    if len(data) < length:
        end = offset + len(data)
        where = f"is {size:,} bytes" if size is not None else f"ended at byte {end:,}"
        raise HeaderError(
            "MetadataIncompleteBuffer",
            f"the file {where}: it ends before the range of {length:,} bytes at offset "
            f"{offset:,} does (at byte {offset + length:,})",
        )
    return data


def _pread(
    path: str | os.PathLike[str] | os.PathLike[bytes], spans: list[tuple[int, int]]
) -> tuple[list[bytes], int]:
    """Each span of a local file, with ``os.pread`` where there is one."""
    with open(path, "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        if path_kind(file.fileno()) != "file":
            raise ValueError(
                f"read_ranges() needs a file it can seek in; {os.fsdecode(path)!r} is a "
                f"{path_kind(file.fileno())} (read it with read_header, or copy it to a file)"
            )
        pread = getattr(os, "pread", None)
        if pread is None:  # Windows: one file object of our own, so no position is shared
            return _seek_and_read(file, spans)[0], size
        pieces = []
        for start, end in spans:
            stop = min(end, size)  # nothing past the end is asked for (nor 2**63 offsets)
            chunks, at = [], start
            while at < stop:
                chunk = pread(file.fileno(), min(stop - at, _CHUNK), at)
                if not chunk:
                    break
                chunks.append(chunk)
                at += len(chunk)
            pieces.append(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        return pieces, size


def _seek_and_read(file: Any, spans: list[tuple[int, int]]) -> tuple[list[bytes], int | None]:
    """Each span of a binary file object, its position put back afterwards."""
    seekable = getattr(file, "seekable", None)
    if (seekable is not None and not seekable()) or not (
        hasattr(file, "seek") and hasattr(file, "tell")
    ):
        raise ValueError(
            "read_ranges() needs a file object it can seek in (this one cannot: a pipe or a "
            "stream); read the stream in order, or copy it to a file first"
        )
    position = file.tell()
    try:
        size = file.seek(0, os.SEEK_END)
        pieces = []
        for start, stop in spans:
            if size is not None and start >= size:
                pieces.append(b"")  # past the end (and offsets past 2**63 cannot seek)
                continue
            file.seek(start)
            pieces.append(read_at_most(file.read, stop - start))
    finally:
        file.seek(position)
    return pieces, size
