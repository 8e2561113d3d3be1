"""Where header bytes come from: paths, URLs, bytes-like objects and binary file objects.

Each source asks `bytes_needed` how much to read, reads exactly that (the 8 + N header bytes,
never the data buffer) and calls `parse_header` once.
"""

from __future__ import annotations

import io
import os
from functools import partial

from ._format import MAX_HEADER_SIZE, bytes_needed
from ._parser import parse_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import IO, Final, Protocol, TypeAlias

    from ._header import Header

    class _Readable(Protocol):
        # Any buffer of bytes: fsspec returns bytes, obstore its own Bytes type.
        def read(self, size: int = ..., /) -> object: ...

    #: What `read_header` accepts: a path, a bytes-like object, or a binary file object.
    Source: TypeAlias = (
        str
        | "os.PathLike[str]"
        | "os.PathLike[bytes]"
        | bytes
        | bytearray
        | memoryview
        | IO[bytes]
        | _Readable
    )
else:
    # At run time, for introspection and documentation: any object with read() also works.
    Source = str | os.PathLike | bytes | bytearray | memoryview | io.IOBase

__all__ = ["FIRST_READ", "RETRIES", "TIMEOUT", "Source", "is_url", "read_at_most", "read_header"]

# A stream of unknown size may be far shorter than a (raised) header limit, and read(n) may
# allocate n bytes before it finds that out: read at most this much at a time.
_STREAM_CHUNK: Final = 16 * 2**20
# The URL options' defaults, here so that reading a local file does not import the HTTP client.
#: Bytes asked for by the first request. 97 % of the top-1000 models on the Hugging Face Hub
#: have N < 100 KB (82 % < 25 KB); 128 KiB covers every header up to N = 131,064 bytes in one
#: round trip, and the bytes past the header cost less than the round trip a second request
#: would (128 KiB is ~10 ms at 100 Mbit/s; a round trip to a CDN is 20-200 ms).
FIRST_READ: Final = 128 * 1024
TIMEOUT: Final = 10.0  # seconds for the connection and for each read of the socket (urllib's)
RETRIES: Final = 2  # retries after the first attempt, so at most 3 attempts per request
_OPEN_FLAGS: Final = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)


def is_url(source: str) -> bool:
    """Whether `read_header` reads ``source`` over HTTP(S) rather than as a local path."""
    return source[:8].lower().startswith(("http://", "https://"))


def read_header(
    source: Source,
    /,
    *,
    max_header_size: int = MAX_HEADER_SIZE,
    headers: Mapping[str, str] | None = None,
    timeout: float = TIMEOUT,
    first_read: int = FIRST_READ,
    retries: int = RETRIES,
) -> Header:
    """Read and validate the header of a safetensors file.

    Args:
        source: One of
            * an ``http://`` or ``https://`` URL (a ``str``): read with HTTP Range requests,
              one when ``8 + N <= first_read``, else one more for exactly the missing bytes
              (redirects followed; a server that ignores Range is read only as far as the
              header and the connection closed);
            * a local path (``str`` or ``os.PathLike``);
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
        timeout: For URLs: seconds to wait to connect and for each read (urllib's timeout).
        first_read: For URLs: bytes asked for by the first request (at least 8). The default,
            128 KiB, holds the whole header of 97 % of popular models in one round trip.
        retries: For URLs: how many times to retry a request after a connection error, a
            timeout, a body cut short or a 5xx status, waiting 0.25 s, 0.5 s, ... (with
            jitter). 4xx statuses are never retried.

    The URL options are ignored for other sources, so that one call can serve both. Only the
    first ``8 + N`` bytes are read, never the data buffer; the file size (from the file system,
    by seeking, or from ``Content-Range``/``Content-Length``) is used to check that the
    tensors cover the data exactly. A server that gives no size leaves ``file_size`` ``None``.

    Raises:
        HeaderError: The file is not a valid safetensors file; ``kind`` is the reference's
            error for the same bytes. Any other exception from bad file contents is a bug.
        RemoteError: An ``OSError``: the server answered an error status (``status``, with
            hints for 401, 403 and 404), the network failed after the retries, or a reply
            contradicted the request (a wrong ``Content-Range``).
        OSError: The file could not be opened or read.
        TypeError: ``source`` is none of the above.
        ValueError: A URL option is out of range, or the URL is malformed.
    """
    if isinstance(source, str) and is_url(source):
        from ._remote import read_url

        return read_url(
            source,
            max_header_size=max_header_size,
            headers=headers,
            timeout=timeout,
            first_read=first_read,
            retries=retries,
        )
    if isinstance(source, (str, os.PathLike)):
        # The descriptor itself (no file object: a tenth of a small header's time), so that
        # exactly 8 + N bytes are read from the file.
        descriptor = os.open(source, _OPEN_FLAGS)
        try:
            size = os.fstat(descriptor).st_size
            return _read_stream(partial(os.read, descriptor), size, max_header_size)
        finally:
            os.close(descriptor)
    try:
        # Bytes-like first: an mmap also has read(), but its buffer is the whole file.
        view = memoryview(source)  # type: ignore[arg-type]
    except TypeError:
        if hasattr(source, "read"):
            return _read_stream(source.read, _seek_size(source), max_header_size)
        raise TypeError(
            "read_header() expected a path, a bytes-like object or a binary file object, "
            f"not {type(source).__name__}"
        ) from None
    with view:
        return parse_header(view, file_size=view.nbytes, max_header_size=max_header_size)


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


def _read_stream(read: Callable[[int], object], size: int | None, limit: int) -> Header:
    """The header from a stream positioned at the file's start: exactly the bytes it needs."""
    data = b""
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
