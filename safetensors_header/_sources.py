"""The source layer's entry: what kind a source is, which backend reads it, and its header.

Layer: sources (above the sans-IO core, below the services). Every public reader, the
command line and every adapter reach a file through this module:

* `kind_of` is the one place that decides what kind a source is, and `open_source` opens it
  as the `RangeFile` of its backend: ``_local`` (paths, file objects, bytes-like objects),
  ``_http`` (http and https URLs) or ``_stores`` (fsspec URLs and filesystems, obstore and
  obspec stores), each built on ``_rangefile``;
* `read_header` reads a header from any source (a local path the fast way; every other
  source through ``_rangefile.header_of``, the one loop from a source to its header);
* `sibling` is the one rule for the file next to another (a shard beside its index).
"""

from __future__ import annotations

import os

from ._format import MAX_HEADER_SIZE
from ._options import FIRST_READ, RETRIES, Options
from ._parser import parse_header
from ._rangefile import RangeFile, header_of, is_url, url_scheme, url_sibling

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from typing import IO, Any, Protocol, TypeAlias

    from typing_extensions import Unpack

    from ._header import Header
    from ._transport import Transport

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
else:
    # At run time, for introspection and documentation: any object with read() also works.
    import io

    Source = str | os.PathLike | bytes | bytearray | memoryview | io.IOBase | tuple

__all__ = ["Source", "kind_of", "open_source", "read_header", "sibling"]


def read_header(
    source: Source,
    /,
    *,
    max_header_size: int = MAX_HEADER_SIZE,
    **transport: Unpack[Transport],
) -> Header:
    """Read and validate the header of a safetensors file.

    Args:
        source: One of
            * an ``http://`` or ``https://`` URL (a ``str``): read with HTTP Range requests,
              one when ``8 + N <= first_read``, else one more for exactly the missing bytes
              (redirects followed; a server that ignores Range is read only as far as the
              header and the connection closed);
            * an ``hf://<org>/<repo>[@<revision>]/<file>`` path of the Hugging Face Hub:
              read as its HTTPS URL is (`hub_url`; ``HF_ENDPOINT`` honoured), with
              ``HF_TOKEN`` (or huggingface_hub's saved login) sent to the Hub only, unless
              `headers` has an Authorization; no fsspec or huggingface_hub needed;
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
        TypeError: A keyword that is not an option.
        ValueError: A transport option is out of range, or the URL is malformed.
    """
    # Checked for every source (a local one ignores them), built once, used by the remote ones.
    options = Options.given("read_header", transport) if transport else None
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
    if options is None:
        options = Options()
    if kind == "stream":  # read as it comes: exactly the header, no clock
        options = options.replace(timeout=None, first_read=FIRST_READ, retries=RETRIES)
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

    ``"http"`` (an http or https URL, or an ``hf://`` path of the Hugging Face Hub, read at
    its HTTPS URL), ``"fsspec"`` (another URL, read with fsspec),
    ``"store"`` (a ``(store or filesystem, path)`` pair), ``"path"`` (a local path: a
    ``str`` or an ``os.PathLike``), ``"buffer"`` (a bytes-like object holding the whole
    file), ``"stream"`` (a binary file object), or ``"file"`` (a file opened already).
    TypeError for anything else.
    """
    if isinstance(source, str):
        if "://" in source:  # (a local path is the common case: one check)
            if is_url(source) or source.startswith("hf://"):
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

        if source.startswith("hf://"):  # type: ignore[attr-defined]
            return _hub_file(source, options)  # type: ignore[arg-type]
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


def _hub_file(path: str, options: Options) -> RangeFile:
    """An ``hf://`` path read at the Hub's HTTPS URL, with the caller's token or the saved
    one (`hub_headers`): the standard library alone, fsspec and huggingface_hub unused."""
    from ._http import HttpFile
    from ._hub import hub_headers, hub_url

    extra = dict(options.storage_options or {})
    token, endpoint = extra.pop("token", None), extra.pop("endpoint", None)
    if extra:
        raise ValueError(
            "an hf:// path is read over HTTPS without fsspec: storage_options takes only "
            f"'token' and 'endpoint' for it, not {sorted(extra)}; for fsspec's "
            "HfFileSystem, pass (HfFileSystem(...), path)"
        )
    headers = hub_headers(options.headers, token if isinstance(token, str) else None)
    url = hub_url(path, endpoint=endpoint)
    return HttpFile(url, options.replace(headers=headers, storage_options=None))


def sibling(source: Any, name: str) -> Any:
    """The source of the file `name` next to `source` (a shard beside its index).

    An http(s) URL: `name` percent-quoted and joined to the URL (its query dropped, as a
    shard has no signature of its index's); another URL: its path's folder and `name`
    (fsspec paths are not quoted); a ``(store, path)`` pair: the same store, the path's
    folder and `name`; a local path: its folder and `name`.
    """
    kind = kind_of(source)
    if kind == "http" and not source.startswith("hf://"):
        return url_sibling(source, name)
    if kind in ("fsspec", "http"):  # an hf:// path is quoted when it is made a URL
        return source.split("?", 1)[0].rsplit("/", 1)[0] + "/" + name
    if kind == "store":
        import posixpath

        return source[0], posixpath.join(posixpath.dirname(source[1]), name)
    if kind == "path":
        return os.path.join(os.path.dirname(os.fspath(source)), name)
    raise TypeError(f"a {kind} has no files beside it")
