"""The source layer: every kind of source as a `RangeFile`, chosen from one table.

Layer: sources (above the sans-IO core, below the services). Every public reader, the
command line and every adapter reach a file through this package:

* `BACKENDS` is the one table of the kinds of source, in the order they are tried: each a
  ``(name, matches, open)`` entry, as ``_core.parse.READERS`` is for the parser. `open_source`
  opens a source as the `RangeFile` of the first entry that matches it; a backend's module
  (``local``, ``streams``, ``http_file``, ``hub_files``, ``filesystems``, ``stores``) is imported
  when a source of its kind is first opened;
* `read_header` reads a header from any source (a local path and bytes the fast way; every
  other source through `base.header_of`, the one loop from a source to its header).

What a caller needs of a source it asks the `RangeFile` (`remote`, `local_path`,
`location`, `sibling`), never what kind it is. The modules: `base` (the protocol, the
file's identity, the header loop), `planning` (spans, parts, buffers), `threads`, `urls`,
`options` and `transport` (the transport keywords), and one module a backend.
"""

from __future__ import annotations

import os

from .._core.fileformat import MAX_HEADER_SIZE
from .._core.parse import parse_header
from .base import RangeFile, header_of, read_from
from .options import Options
from .urls import is_url, url_scheme

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any, Final, Protocol, TypeAlias

    from typing_extensions import Unpack

    from .._core.header import Header
    from .transport import Transport

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
        | RangeFile
    )
    #: One kind of source: its name, whether a source is of it, and how it is opened.
    Backend: TypeAlias = tuple[str, Callable[[object], bool], Callable[[Any, Options], RangeFile]]
else:
    # At run time, for introspection and documentation: any object with read() also works.
    import io

    Source = str | os.PathLike | bytes | bytearray | memoryview | io.IOBase | tuple

__all__ = ["BACKENDS", "Source", "backend_of", "is_checkpoint", "open_source", "read_header"]


def _is_opened(source: object) -> bool:
    return isinstance(source, RangeFile) or hasattr(source, "_range_file")


def _opened(source: Any, options: Options) -> RangeFile:
    return source if isinstance(source, RangeFile) else source._range_file


def _is_http(source: object) -> bool:
    return isinstance(source, str) and is_url(source)


def _http(source: str, options: Options) -> RangeFile:
    from .http_file import HttpFile  # the HTTP client: only for URLs

    return HttpFile(source, options)


def _is_hub(source: object) -> bool:
    return isinstance(source, str) and source.startswith("hf://")


def _hub(source: str, options: Options) -> RangeFile:
    from .hub import online

    online(source)  # (offline: the error before the HTTP modules are imported)
    from .hub_files import hub_file

    return hub_file(source, options)


def _is_fsspec(source: object) -> bool:
    return isinstance(source, str) and "://" in source and url_scheme(source) is not None


def _fsspec(source: str, options: Options) -> RangeFile:
    from .filesystems import url_file  # fsspec: only for such sources

    return url_file(source, options)


def _is_filesystem_pair(source: object) -> bool:
    return _is_pair(source) and hasattr(source[0], "cat_ranges") and hasattr(source[0], "cat_file")  # type: ignore[index]


def _filesystem_pair(source: tuple[Any, str], options: Options) -> RangeFile:
    from .filesystems import FsspecFile

    filesystem, path = source
    return FsspecFile(filesystem, path, options, shown=f"{path} in {type(filesystem).__name__}")


def _is_store_pair(source: object) -> bool:
    if not _is_pair(source):
        return False
    store = source[0]  # type: ignore[index]
    return hasattr(store, "get_range") and (hasattr(store, "get") or hasattr(store, "head"))


def _store_pair(source: tuple[Any, str], options: Options) -> RangeFile:
    from .stores import StoreFile  # obstore's and obspec's stores (obstore is not imported)

    store, path = source
    return StoreFile(store, path, options, shown=f"{path} in {type(store).__name__}")


def _is_pair(source: object) -> bool:
    return isinstance(source, tuple) and len(source) == 2 and isinstance(source[1], str)


def _is_path(source: object) -> bool:
    # os.PathLike without the ABC's isinstance: __fspath__ on the type, not None (an opt-out).
    return isinstance(source, str) or getattr(type(source), "__fspath__", None) is not None


def _path(source: Any, options: Options) -> RangeFile:
    from .local import PathFile

    return PathFile(source, options)


def _is_buffer(source: object) -> bool:
    # Bytes-like before streams: an mmap also has read(), but its buffer is the whole file.
    try:
        memoryview(source).release()  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def _buffer(source: Any, options: Options) -> RangeFile:
    from .streams import BufferFile

    return BufferFile(source, options)


def _is_stream(source: object) -> bool:
    return getattr(source, "read", None) is not None


def _stream(source: Any, options: Options) -> RangeFile:
    from .streams import StreamFile

    return StreamFile(source, options)


#: The kinds of source, in the order they are tried (the first that matches opens it).
BACKENDS: Final[tuple[Backend, ...]] = (
    ("opened", _is_opened, _opened),  # a RangeFile, or a file opened already (open_file)
    ("http", _is_http, _http),  # http:// and https:// URLs
    ("hub", _is_hub, _hub),  # hf:// paths of the Hugging Face Hub, read at their HTTPS URL
    ("fsspec", _is_fsspec, _fsspec),  # other URLs (s3://, gs://, memory://...), with fsspec
    ("filesystem", _is_filesystem_pair, _filesystem_pair),  # (fsspec filesystem, path)
    ("store", _is_store_pair, _store_pair),  # (obstore or any obspec store, path)
    ("path", _is_path, _path),  # local paths: str and os.PathLike
    ("buffer", _is_buffer, _buffer),  # bytes-like objects holding the whole file
    ("stream", _is_stream, _stream),  # binary file objects (anything with read())
)


def backend_of(source: object) -> Backend:
    """The entry of `BACKENDS` that reads `source`; TypeError for a source of no kind."""
    for backend in BACKENDS:
        if backend[1](source):
            return backend
    raise TypeError(
        "expected a path, a URL, a bytes-like object, a binary file object or a "
        f"(store, path) pair, not {type(source).__name__}"
    )


def open_source(source: object, options: Options | None = None) -> RangeFile:
    """`source` as the `RangeFile` of its backend (a file opened already, as it is)."""
    return backend_of(source)[2](source, options or Options())


def is_checkpoint(source: object) -> bool:
    """Whether `source` names a checkpoint (`read_checkpoint`) rather than one file: an
    index JSON (a path, a URL, a store's path), a local directory, or a Hub repository
    named without a file. Nothing is read."""
    path = source[1] if isinstance(source, tuple) and len(source) == 2 else source
    if not isinstance(path, (str, os.PathLike)):
        return False
    text = os.fsdecode(path)
    if text.split("?", 1)[0].endswith(".json"):
        return True
    if text.startswith("hf://"):
        from .hub import hub_repository

        return hub_repository(text) is not None
    return "://" not in text and os.path.isdir(text)


def read_header(
    source: Source,
    /,
    *,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> Header:
    """Read and validate the header of a safetensors file.

    Args:
        source: One of:

            * an ``http://`` or ``https://`` URL (a ``str``): read with HTTP Range requests,
              one when ``8 + N <= first_read``, else one more for exactly the missing bytes
              (redirects followed; a server that ignores Range is read only as far as the
              header and the connection closed); user info in the URL
              (``https://user:password@host/...``) is sent as an ``Authorization: Basic``
              header to that host only;
            * an ``hf://<org>/<repo>[@<revision>]/<file>`` path of the Hugging Face Hub:
              read as its HTTPS URL is (`hub_url`; ``HF_ENDPOINT`` honoured), with
              ``HF_TOKEN`` (or huggingface_hub's saved login) sent to the Hub only, unless
              `headers` has an Authorization or ``storage_options={"token": False}``; no
              fsspec or huggingface_hub needed;
            * an fsspec URL (a ``str`` with another scheme: ``s3://``, ``gs://``, ``az://``,
              ``memory://``, ``file://``...), when fsspec and the scheme's
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
        **transport: How a URL or an object store is reached (`Transport`): ``headers``,
            ``timeout`` (10 s by default), ``retries``, ``first_read``, ``storage_options``.

    The transport options are ignored for local sources, so that one call can serve both. The
    header is read, not the data buffer: a local file's first read is of up to 16 KiB (then
    exactly the rest of a longer header), a stream's exactly ``8 + N`` bytes, a URL's
    `first_read` bytes (then exactly the rest). The file size (from the file system, by
    seeking, or from ``Content-Range``/``Content-Length``) is used to check that the tensors
    cover the data exactly. A server that gives no size leaves ``file_size`` ``None``. The
    header carries the file's identity (``Header.identity``: its size, ETag, modification
    time...), which later reads of its data with this header are checked against.

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
        TypeError: A keyword that is not an option.
        ValueError: A transport option is out of range, or the URL is malformed.
    """
    # Checked for every source (a local one ignores them), built once, used by the remote ones.
    options = Options.given("read_header", transport) if transport else None
    if type(source) is str and "://" not in source:  # a local path: the common case first
        return _read_path(source, max_header_size)
    name, _, open_as = backend_of(source)
    if name == "path":
        return _read_path(source, max_header_size)  # type: ignore[arg-type]
    if name == "buffer":
        return _read_buffer(source, max_header_size)
    if name == "opened" and hasattr(source, "header"):
        return source.header  # type: ignore[union-attr]
    options = options or Options()
    return header_of(open_as(source, options), max_header_size, options.clock())


def _read_buffer(source: Any, limit: int) -> Header:
    """The header of a bytes-like object holding the whole file, its identity its size and
    the CRC-32 of its header's bytes."""
    with memoryview(source) as view:
        header = parse_header(view, file_size=view.nbytes, max_header_size=limit)
        flat = view if view.ndim == 1 and view.format == "B" else view.cast("B")
        shown = f"a {type(source).__name__} object"
        return read_from(header, flat, shown, header.file_size, ())


def _read_path(path: str | os.PathLike[str] | os.PathLike[bytes], limit: int) -> Header:
    """`local.read_path`, imported on the first call, which puts it in this name's place
    (an import statement in `read_header` would cost a small header's read a tenth more)."""
    global _read_path  # noqa: PLW0603
    from .local import read_path

    _read_path = read_path
    return read_path(path, limit)
