"""Where header bytes come from: paths, URLs, object stores, bytes and binary file objects.

Each source asks `bytes_needed` how much to read, reads that (the 8 + N header bytes, never
the data buffer beyond a first read: up to 16 KiB of a local file, `first_read` bytes of a
URL) and calls `parse_header` once.
"""

from __future__ import annotations

import io
import os
import re
import stat
from functools import partial

from ._format import MAX_HEADER_SIZE, bytes_needed
from ._parser import parse_file_start, parse_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import IO, Any, Final, Protocol, TypeAlias

    from ._header import Header

    class _Readable(Protocol):
        # Any buffer of bytes: fsspec returns bytes, obstore its own Bytes type.
        def read(self, size: int = ..., /) -> object: ...

    #: What `read_header` accepts: a path or URL, a bytes-like object, a binary file object,
    #: or a ``(store, path)`` pair of an obstore store or an fsspec filesystem and a path.
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
    )
else:
    # At run time, for introspection and documentation: any object with read() also works.
    Source = str | os.PathLike | bytes | bytearray | memoryview | io.IOBase | tuple

__all__ = ["FIRST_READ", "RETRIES", "TIMEOUT", "Source", "is_url", "read_at_most", "read_header"]
__all__ += ["in_store", "path_kind", "url_scheme"]

# A stream of unknown size may be far shorter than a (raised) header limit, and read(n) may
# allocate n bytes before it finds that out: read at most this much at a time.
_STREAM_CHUNK: Final = 16 * 2**20
# The URL options' defaults, here so that reading a local file does not import the HTTP client.
#: Bytes asked for by the first request. 97 % of the top-1000 models on the Hugging Face Hub
#: have N < 100 KB (82 % < 25 KB); 128 KiB covers every header up to N = 131,064 bytes in one
#: round trip, and the bytes past the header cost less than the round trip a second request
#: would (128 KiB is ~10 ms at 100 Mbit/s; a round trip to a CDN is 20-200 ms).
FIRST_READ: Final = 128 * 1024
#: Seconds a `read_header` of a URL may take in all (connects, replies, retries); with no
#: bound on the whole call (`read_ranges`' default), the longest any one wait may take.
TIMEOUT: Final = 10.0
RETRIES: Final = 2  # retries after the first attempt, so at most 3 attempts per request
_FILE_FIRST_READ: Final = 16 * 1024  # bytes of a regular file read at once (a header's, mostly)
_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


# A URL's scheme (RFC 3986), of two letters or more: ``C://x`` is a Windows path.
_SCHEME: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def is_url(source: str) -> bool:
    """Whether `read_header` reads ``source`` over HTTP(S) rather than as a local path."""
    return source[:8].lower().startswith(("http://", "https://"))


def url_scheme(source: str) -> str | None:
    """The scheme of a URL that fsspec reads (``s3``, ``hf``, ``file``...), else None."""
    match = _SCHEME.match(source)
    if match is None or is_url(source):
        return None
    return match[1].lower()


def path_kind(descriptor: int) -> str:
    """What an open descriptor is: "file" (regular, or a block device), or another kind."""
    mode = os.fstat(descriptor).st_mode
    if stat.S_ISREG(mode) or stat.S_ISBLK(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "pipe"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "directory" if stat.S_ISDIR(mode) else "special file"


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
              the rest of the file is then skipped and ``Header.file_size`` is ``None``.
        max_header_size: The largest header length N accepted; see `parse_header`. Over
            HTTP it is checked on the first bytes, before more are asked for.
        headers: For URLs: extra request headers, e.g. ``{"Authorization": "Bearer ..."}``.
            ``Authorization`` and ``Cookie`` go only to the URL's own scheme, host and port,
            never on to a host it redirects to; ``Range`` and ``If-Range`` are set here.
        timeout: For URLs: seconds the whole call may take: connects, every read of a reply
            (a server that trickles bytes, or answers ``100 Continue`` without end, is cut
            off), the waits between retries. ``None``: no bound on the whole call, each wait
            still at most 10 s.
        first_read: For URLs and object stores: bytes asked for by the first request (at
            least 8). The default, 128 KiB, holds the whole header of 97 % of popular models
            in one round trip.
        retries: For URLs: how many times to retry a request after a connection error, a
            timeout, a body cut short or a 5xx status, waiting 0.25 s, 0.5 s, ... (with
            jitter). 4xx statuses are never retried.
        storage_options: For fsspec URLs: passed to ``fsspec.core.url_to_fs`` (credentials,
            an ``endpoint_url``, ...).

    The URL options are ignored for other sources, so that one call can serve both. The
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
            unusable ``Content-Length`` or ``Location``), or a redirect led to a scheme other
            than http and https; an object store's own error.
        ImportError: An fsspec URL, without fsspec (or the scheme's package) installed.
        OSError: The file could not be opened or read.
        TypeError: ``source`` is none of the above.
        ValueError: A URL option is out of range, or the URL is malformed.
    """
    if isinstance(source, str):
        # A str is a URL only with "://" in it (a local path is the common case: one check).
        if "://" in source:
            if is_url(source):
                from ._remote import read_url

                return read_url(
                    source,
                    max_header_size=max_header_size,
                    headers=headers,
                    timeout=timeout,
                    first_read=first_read,
                    retries=retries,
                )
            if in_store(source):
                return _read_store(source, max_header_size, first_read, storage_options)
        return _read_path(source, max_header_size)
    # os.PathLike without the ABC's isinstance: __fspath__ on the type, not None (an opt-out).
    if getattr(type(source), "__fspath__", None) is not None:
        return _read_path(source, max_header_size)  # type: ignore[arg-type]
    if in_store(source):
        return _read_store(source, max_header_size, first_read, storage_options)
    try:
        # Bytes-like first: an mmap also has read(), but its buffer is the whole file.
        view = memoryview(source)  # type: ignore[arg-type]
    except TypeError:
        read = getattr(source, "read", None)
        if read is not None:
            return _read_stream(read, _seek_size(source), max_header_size)
        raise TypeError(
            "read_header() expected a path, a URL, a bytes-like object, a binary file object "
            f"or a (store, path) pair, not {type(source).__name__}"
        ) from None
    with view:
        return parse_header(view, file_size=view.nbytes, max_header_size=max_header_size)


def _read_path(path: str | os.PathLike[str] | os.PathLike[bytes], limit: int) -> Header:
    """A local file's header: a regular file's from its first read (and, for a longer header,
    one more), anything else's as a stream."""
    # The descriptor itself (no file object: a tenth of a small header's time).
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        status = os.fstat(descriptor)
        if stat.S_ISREG(status.st_mode):
            size = status.st_size
            # Most headers in one read: a few KiB more cost less than a second system call.
            ahead = os.read(descriptor, min(size, _FILE_FIRST_READ))
            parsed = parse_file_start(ahead, size, limit)
            if not isinstance(parsed, int):
                return parsed
            # The rest of a longer header: the whole of it read again in one call, rather
            # than the rest read and joined (a copy more). A short read (no pread, or a file
            # cut meanwhile) goes on as a stream from where the first read ended.
            whole = _read_from_start(descriptor, parsed)
            if len(whole) == parsed:
                return parse_header(whole, file_size=size, max_header_size=limit)
            return _read_stream(partial(os.read, descriptor), size, limit, ahead)
        # A pipe, a FIFO or /dev/stdin has a size of 0 that means nothing: a stream.
        length: int | None = None
        if stat.S_ISBLK(status.st_mode):  # a block device: its size is where seeking ends
            length = os.lseek(descriptor, 0, os.SEEK_END)
            os.lseek(descriptor, 0, os.SEEK_SET)
        return _read_stream(partial(os.read, descriptor), length, limit)
    finally:
        os.close(descriptor)


def _read_store(
    source: object, limit: int, first_read: int, storage_options: Mapping[str, Any] | None
) -> Header:
    """The header from an fsspec URL or a ``(store or filesystem, path)`` pair."""
    from . import _stores  # fsspec and obstore: only for such sources

    if first_read < 8:
        raise ValueError(f"first_read must be at least 8 bytes, not {first_read}")
    return _stores.read_store_header(
        _stores.target(source, storage_options),  # type: ignore[arg-type]
        max_header_size=limit,
        first_read=first_read,
    )


def _read_from_start(descriptor: int, count: int) -> bytes:
    """Up to `count` bytes from the file's offset 0, leaving the descriptor's offset alone."""
    if _pread is None:  # (Windows)
        return b""
    return _pread(descriptor, count, 0)


_pread: Callable[[int, int, int], bytes] | None = getattr(os, "pread", None)


def in_store(source: object) -> bool:
    """Whether `source` is read through `_stores`: an fsspec URL, or a ``(store or
    filesystem, path)`` pair (`_stores` is imported only for a 2-tuple)."""
    if isinstance(source, str):
        return url_scheme(source) is not None
    if not (isinstance(source, tuple) and len(source) == 2):
        return False
    from ._stores import is_pair

    return is_pair(source)


def _seek_size(file: object) -> int | None:
    """The stream's size, leaving it at offset 0; None if it cannot seek.

    Objects without ``seekable()`` (older file-likes) are tried with ``seek`` directly.
    """
    seekable = getattr(file, "seekable", None)
    try:
        if seekable is not None and not seekable():
            return None
        size: int = file.seek(0, io.SEEK_END)  # type: ignore[attr-defined]
        file.seek(0)  # type: ignore[attr-defined]
    except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
        return None
    return size


def _read_stream(
    read: Callable[[int], object], size: int | None, limit: int, data: bytes = b""
) -> Header:
    """The header from a stream at the file's start: exactly the bytes it needs.

    `data`: the file's first bytes, already read from it (a regular file's first read).
    """
    need = bytes_needed(data, file_size=size, max_header_size=limit)
    while len(data) < need:
        data += read_at_most(read, need - len(data))
        if len(data) < need:
            size = None  # the stream ended early: judge what was read as the whole file
            break
        need = bytes_needed(data, file_size=size, max_header_size=limit)
    return parse_header(data, file_size=size, max_header_size=limit)


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
            try:  # bytearray, memoryview, obstore's Bytes, ...: any buffer of bytes
                chunk = memoryview(chunk).tobytes()  # type: ignore[arg-type]
            except TypeError:
                raise TypeError(
                    "read_header() needs a binary file object; "
                    f"read() returned {type(chunk).__name__}"
                ) from None
        if not chunks and len(chunk) >= count:
            return chunk  # the usual case: read whole at once, no join
        chunks.append(chunk)
        count -= len(chunk)
    return b"".join(chunks)
