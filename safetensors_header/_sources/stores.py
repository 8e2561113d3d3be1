"""Object stores as `RangeFile` backends: obstore and obspec stores here, and what they share
with fsspec's filesystems (`filesystems`).

Layer: sources. Two kinds of store, each read with the discipline of an HTTP URL:

* an fsspec URL (a ``str`` with a scheme other than http and https), resolved with
  ``fsspec.core.url_to_fs(url, **storage_options)``, or a pair ``(filesystem, path)``. The
  file's size and identity come from ``fs.info`` (one metadata request, a HEAD for s3fs),
  the header from one ranged read (two for a long header). Tensors: where the filesystem can
  sign a URL (s3fs, gcsfs, adlfs), through the HTTP client with that URL, each byte read
  once into the memory it is returned in; elsewhere ``fs.cat_ranges``, a few parts at a
  time (concurrent on async filesystems), and the file's identity checked after;
* a pair ``(store, path)`` of an obstore store or any obspec store (``get`` with options,
  ``get_range``, ``get_ranges``, ``head``; or ``head`` and ``get_range`` alone). The first
  ``get`` brings the size and ETag with it, so a header costs one request (two for a long
  one); later reads are conditional on that ETag (``if_match``), and ``get_ranges`` (which
  obstore joins and sends concurrently) is followed by a ``head`` that checks it. obstore's
  buffers are handed out as they are, never copied.

fsspec and obstore are imported by their users, never by this module: nothing is imported
unless such a source is used (`_sources.BACKENDS` tells a store from a filesystem by its
methods). A store's own errors other than `OSError` (botocore's,
obstore's) are raised as `RemoteError`, with the store's message.
"""

from __future__ import annotations

import posixpath

from .._errors import RemoteError
from .base import RangeFile, changed
from .options import REMOTE_GAP
from .planning import check_known_end

__all__ = ["StoreBase", "StoreFile"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    from .base import Validators
    from .options import Clock, Options
    from .planning import Read

    _Result = TypeVar("_Result")


class StoreBase(RangeFile):
    """What both kinds of store share: their errors as RemoteErrors, short reads refused."""

    default_gap = REMOTE_GAP
    remote = True

    def __init__(self, store: Any, path: str, options: Options, shown: str) -> None:
        super().__init__(options, shown)
        self.store = store
        self.path = path

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)

    def call(self, what: Callable[[], _Result]) -> _Result:
        """Run a store call; its errors that are not OSErrors become RemoteErrors."""
        try:
            return what()
        except OSError:
            raise  # FileNotFoundError, PermissionError, ...: already what callers expect
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # obstore's panics (pyo3's PanicException) too
            if type(error).__name__ in ("PreconditionError", "NotModifiedError"):
                raise changed(self.shown, "its e_tag is no longer the one read first") from error
            message = str(error).strip().splitlines()[0] if str(error).strip() else ""
            said = f"{type(error).__name__}: {message[:300]!a}"
            if "builder error" in message and "http://" in message:
                # obstore's HTTP client refuses plain http unless told; its message says
                # "builder error" and nothing more.
                said = (
                    "obstore refuses plain http:// unless the store allows it: make it with "
                    "client_options={'allow_http': True} (HTTPStore.from_url(url, "
                    f"client_options=...), S3Store(..., client_options=...)); it said {said}"
                )
            raise RemoteError(f"could not read {self.shown}: {said}", url=self.shown) from error

    def short(self, start: int, asked: int, got: int) -> RemoteError:
        return RemoteError(
            f"could not read {self.shown}: the store returned {got:,} of the {asked:,} bytes at "
            f"offset {start:,}, which its size of {self.size:,} bytes says are there",
            url=self.shown,
        )

    def _first_read_size(self) -> int:
        asked = super()._first_read_size()
        if self.identified and self.size is not None:
            return min(asked, self.size)
        return asked

    def document(self, limit: int, clock: Clock) -> bytes:
        return self._first(limit + 1, clock)  # one request where the store can (no HEAD)


class StoreFile(StoreBase):
    """A file in an obstore store, or any obspec store."""

    def __init__(self, store: Any, path: str, options: Options, *, shown: str) -> None:
        super().__init__(store, path, options, shown)
        # obstore's stores: get() with options brings the size and ETag with the bytes, and
        # can be made conditional. A bare obspec store: head() and get_range().
        self.rich = hasattr(store, "get") and hasattr(store, "get_ranges")

    def _head(self) -> None:
        meta = self.call(lambda: self.store.head(self.path))
        self._identify(int(meta["size"]), _meta_validators(meta))

    def _get(self, start: int, stop: int) -> memoryview:
        """Bytes ``[start, stop)`` of a pinned file (`stop` within it), checked."""
        if self.rich:
            options: dict[str, Any] = {"range": (start, stop)}
            etag = dict(self.validators or ()).get("e_tag")
            if etag is not None:
                options["if_match"] = etag
            result = self.call(lambda: self.store.get(self.path, options=options))
            self._identify(int(result.meta["size"]), _meta_validators(result.meta))
            data = memoryview(self.call(result.bytes))
        else:
            data = memoryview(
                self.call(lambda: self.store.get_range(self.path, start=start, end=stop))
            )
        if len(data) != stop - start:
            raise self.short(start, stop - start, len(data))
        return data

    def _first(self, count: int, clock: Clock) -> bytes:
        if self.rich and not self.identified:
            # One request: the bytes, and the size and ETag with them.
            def get() -> Any:
                return self.store.get(self.path, options={"range": (0, count)})

            try:
                result = get()
            except OSError:
                raise
            except Exception:
                # obstore refuses a range of an empty object, and panics for one that
                # starts past the end: ask the size, then the store's error if it remains.
                self._head()
                if self.size == 0:
                    return b""
                result = self.call(get)
            self._identify(int(result.meta["size"]), _meta_validators(result.meta))
            data = bytes(self.call(result.bytes))
            if len(data) != min(count, self.size or 0):
                raise self.short(0, min(count, self.size or 0), len(data))
            return data
        return self.read(0, count, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        if not self.identified:
            self._head()
        stop = min(stop, self.size or 0)
        if start >= stop:
            return b""
        return bytes(self._get(start, stop))

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        segments = [segment for _, _, pieces in reads for segment in pieces]
        found = self._ranges([(offset, len(view)) for offset, view in segments])
        for (_, view), data in zip(segments, found, strict=True):
            view[:] = data

    def _read_spans(
        self, ranges: Sequence[tuple[int, int]], gap: int, clock: Clock
    ) -> list[memoryview]:
        # obstore joins ranges closer than 1 MiB itself, and slices its buffers without a
        # copy: the ranges go to it as they are, and its buffers come back as they are.
        return self._ranges(ranges)

    def _ranges(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        if not self.identified:
            self._head()
        check_known_end(ranges, self.size)
        wanted = [(offset, length) for offset, length in ranges if length]
        out: dict[tuple[int, int], memoryview] = {}
        if len(set(wanted)) == 1:
            offset, length = wanted[0]
            out[wanted[0]] = self._get(offset, offset + length)
        elif wanted:
            if self.rich:
                pieces = self.call(
                    lambda: self.store.get_ranges(
                        self.path,
                        starts=[offset for offset, _ in wanted],
                        ends=[offset + length for offset, length in wanted],
                    )
                )
                for key, piece in zip(wanted, pieces, strict=True):
                    view = memoryview(piece)
                    if len(view) != key[1]:
                        raise self.short(key[0], key[1], len(view))
                    out[key] = view
                self._head()  # the object is still the one pinned: nothing was mixed
            else:
                for offset, length in wanted:
                    out[offset, length] = self._get(offset, offset + length)
                self._head()
        empty = memoryview(b"")
        return [out[offset, length] if length else empty for offset, length in ranges]

    def sibling(self, name: str) -> StoreFile:
        path = posixpath.join(posixpath.dirname(self.path), name)
        return StoreFile(
            self.store, path, self.options, shown=f"{path} in {type(self.store).__name__}"
        )


def _meta_validators(meta: Any) -> Validators:
    """What an obspec ObjectMeta says that changes when the object does."""
    get = meta.get if hasattr(meta, "get") else lambda name: getattr(meta, name, None)
    found = [(name, get(name)) for name in ("e_tag", "version", "last_modified")]
    return tuple((name, str(value)) for name, value in found if value is not None)
