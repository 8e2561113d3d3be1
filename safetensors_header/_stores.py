"""Object stores: fsspec URLs (``s3://``, ``gs://``, ``hf://``, ``memory://``, ...) and obstore.

Two kinds of source, each read with the same discipline as an HTTP URL:

* an fsspec URL (a ``str`` with a scheme other than http and https), resolved with
  ``fsspec.core.url_to_fs(url, **storage_options)``; or a pair ``(filesystem, path)`` of an
  fsspec filesystem and a path in it. The file's size comes from ``fs.size`` (one metadata
  request, a HEAD for s3fs), the header from one ranged read (two for a header longer than
  the first read), byte ranges from ``fs.cat_ranges`` (concurrent on async filesystems);
* a pair ``(store, path)`` of an obstore store (or any obspec store with ``get``,
  ``get_range`` and ``get_ranges``) and a path in it. The first ranged ``get`` brings the
  file's size with it, so a header costs one request (two for a long one), and the other
  ranges are one ``get_ranges`` call (which obstore sends concurrently).

fsspec and obstore are imported by their users, never by this module: nothing is imported
unless such a source is used. A store's own errors other than `OSError` (botocore's,
obstore's) are raised as `RemoteError`, with the store's message.
"""

from __future__ import annotations

import errno
import posixpath

from ._errors import RemoteError
from ._format import bytes_needed
from ._parser import parse_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, TypeVar

    from ._header import Header

    _Result = TypeVar("_Result")

__all__ = [
    "Target",
    "fetch_document",
    "is_pair",
    "read_ranges",
    "read_store_header",
    "sibling",
    "target",
]


class Target:
    """A file in an object store: an fsspec filesystem or an obspec store, and a path."""

    __slots__ = ("fsspec", "path", "shown", "store")

    def __init__(self, store: Any, path: str, *, fsspec: bool, shown: str) -> None:
        self.store, self.path, self.fsspec, self.shown = store, path, fsspec, shown

    def call(self, what: Callable[[], _Result]) -> _Result:
        """Run a store call; its errors that are not OSErrors become RemoteErrors."""
        try:
            return what()
        except OSError:
            raise  # FileNotFoundError, PermissionError, ...: already what callers expect
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # obstore's panics (pyo3's PanicException) too
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise RemoteError(
                f"could not read {self.shown}: {type(error).__name__}: {message[:300]!a}",
                url=self.shown,
            ) from error


def is_pair(source: object) -> bool:
    """Whether `source` is a ``(store or filesystem, path)`` pair."""
    return (
        isinstance(source, tuple)
        and len(source) == 2
        and isinstance(source[1], str)
        and (_is_filesystem(source[0]) or _is_store(source[0]))
    )


def _is_filesystem(store: object) -> bool:
    return hasattr(store, "cat_ranges") and hasattr(store, "cat_file")


def _is_store(store: object) -> bool:
    return all(hasattr(store, name) for name in ("get", "get_range", "get_ranges"))


def target(source: str | tuple[Any, str], storage_options: Mapping[str, Any] | None) -> Target:
    """The store and path of an fsspec URL or of a pair."""
    if isinstance(source, tuple):
        store, path = source
        name = type(store).__name__
        return Target(store, path, fsspec=_is_filesystem(store), shown=f"{path} in {name}")
    try:
        import fsspec.core  # type: ignore[import-untyped]  # optional: only for such URLs
    except ImportError:
        scheme = source.partition("://")[0]
        raise ImportError(
            f"reading a {scheme}:// URL needs fsspec and the package for {scheme}:// (s3fs, "
            "gcsfs, adlfs, huggingface_hub, ...): pip install fsspec s3fs, for example"
        ) from None
    filesystem, path = fsspec.core.url_to_fs(source, **(storage_options or {}))
    return Target(filesystem, path, fsspec=True, shown=_redacted(source))


def sibling(source: str | tuple[Any, str], name: str) -> str | tuple[Any, str]:
    """The source of the file `name` next to `source` (a shard beside its index)."""
    if isinstance(source, tuple):
        return source[0], posixpath.join(posixpath.dirname(source[1]), name)
    return source.rsplit("/", 1)[0] + "/" + name


def read_store_header(where: Target, *, max_header_size: int, first_read: int) -> Header:
    """The header: the first `first_read` bytes (and the file's size), then any remainder."""
    if where.fsspec:
        size = _fs_size(where)
        first = min(first_read, size) if size is not None else first_read
        data = _fs_ranges(where, [(0, first)])[0] if first else b""
    else:
        data, size = _store_first(where, first_read)
    need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    while need > len(data) and len(data) >= first_read:  # fewer than asked: the file's end
        first_read = need
        data += _get(where, len(data), need)
        need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    return parse_header(data, file_size=size, max_header_size=max_header_size)


def read_ranges(where: Target, spans: Sequence[tuple[int, int]]) -> tuple[list[bytes], int | None]:
    """The bytes of each non-empty ``[start, stop)`` span (short only at the file's end)."""
    if where.fsspec:
        try:
            return _fs_ranges(where, spans), None
        except _PastTheEnd:
            # s3fs refuses a range that starts at or past the end (EINVAL) where others
            # give b"": ask the size, and only for what the file holds.
            size = _fs_size(where)
            if size is None:
                raise
            inside = [(start, min(stop, size)) for start, stop in spans if start < size]
            found = iter(_fs_ranges(where, inside) if inside else [])
            return [next(found) if start < size else b"" for start, _ in spans], size
    # obstore panics (a BaseException) for a range that starts past the end: the first
    # request learns the size, and the other ranges are cut to it before they are asked for.
    first, size = _store_first(where, spans[0][1], start=spans[0][0])
    rest = [(start, min(stop, size)) for start, stop in spans[1:] if start < size]
    pieces = where.call(
        lambda: (
            where.store.get_ranges(
                where.path, starts=[start for start, _ in rest], ends=[stop for _, stop in rest]
            )
            if rest
            else []
        )
    )
    found = iter(pieces)
    return [first] + [_bytes(next(found)) if start < size else b"" for start, _ in spans[1:]], size


class _PastTheEnd(Exception):
    """A filesystem refused a range past the end of the file (s3fs: EINVAL)."""


def _fs_ranges(where: Target, spans: Sequence[tuple[int, int]]) -> list[bytes]:
    """``cat_ranges`` of the spans; pieces longer than asked (a range ignored) refused."""
    count = len(spans)
    try:
        pieces = where.call(
            lambda: where.store.cat_ranges(
                [where.path] * count,
                [start for start, _ in spans],
                [stop for _, stop in spans],
                on_error="raise",
            )
        )
        # Older fsspec (2024.12) returns a range's error in the list even with "raise".
        failed = next((piece for piece in pieces if isinstance(piece, BaseException)), None)
        if failed is not None:
            where.call(lambda: _raise(failed))
    except OSError as error:
        if error.errno == errno.EINVAL:
            raise _PastTheEnd from error
        raise
    out = [_bytes(piece) for piece in pieces]
    for piece, (start, stop) in zip(out, spans, strict=True):
        if len(piece) > stop - start:  # fsspec's HTTPFileSystem, on a 200 to a Range
            raise RemoteError(
                f"could not read {where.shown}: {len(piece):,} bytes came for the "
                f"{stop - start:,} of bytes {start:,}-{stop - 1:,} (the range was ignored)",
                url=where.shown,
            )
    return out


def _raise(error: BaseException) -> None:
    raise error


def fetch_document(where: Target, limit: int) -> bytes:
    """A whole small file (an index JSON), read to at most ``limit + 1`` bytes (more than
    `limit`: the file is larger, and the caller says so)."""
    return _get(where, 0, limit + 1)


def _store_first(where: Target, stop: int, *, start: int = 0) -> tuple[bytes, int]:
    """Bytes ``[start, stop)`` from an obspec store, and the file's size, in one request."""

    def get() -> tuple[bytes, int]:
        result = where.store.get(where.path, options={"range": (start, stop)})
        return _bytes(result.bytes()), int(result.meta["size"])

    try:
        return get()
    except OSError:
        raise
    except Exception:
        size = int(where.call(lambda: where.store.head(where.path))["size"])
        if start >= size:
            return b"", size
        return where.call(get)  # the range was not the problem: the store's error, wrapped


def _get(where: Target, start: int, stop: int) -> bytes:
    if where.fsspec:
        return _fs_ranges(where, [(start, stop)])[0] if start else _fs_read(where, stop)
    return _store_first(where, stop, start=start)[0]


def _fs_read(where: Target, stop: int) -> bytes:
    """Bytes ``[0, stop)``, fewer if the file is shorter (an empty file too, which s3fs
    refuses any range of)."""
    try:
        return _fs_ranges(where, [(0, stop)])[0]
    except _PastTheEnd:
        size = _fs_size(where)
        if size is None or size > 0:
            raise
        return b""


def _fs_size(where: Target) -> int | None:
    size = where.call(lambda: where.store.size(where.path))
    return None if size is None else int(size)


def _bytes(piece: object) -> bytes:
    """bytes of any buffer (obstore's Bytes, a memoryview, ...)."""
    if isinstance(piece, bytes):
        return piece
    return memoryview(piece).tobytes()  # type: ignore[arg-type]


def _redacted(url: str) -> str:
    """The URL without user info or query: credentials may hide there."""
    scheme, _, rest = url.partition("://")
    rest = rest.split("?", 1)[0]
    host, slash, path = rest.partition("/")
    if "@" in host:
        host = "<redacted>@" + host.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path}"
