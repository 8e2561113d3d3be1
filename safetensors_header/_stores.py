"""Object stores as `RangeFile` backends: fsspec URLs and filesystems, obstore and obspec stores.

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
unless such a source is used. A store's own errors other than `OSError` (botocore's,
obstore's) are raised as `RemoteError`, with the store's message.
"""

from __future__ import annotations

import posixpath

from ._errors import RemoteError
from ._options import REMOTE_GAP
from ._rangefile import RangeFile, ShortRead, check_known_end, cut, parts, redact

__all__ = ["FsspecFile", "StoreFile", "is_pair", "store_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final, TypeVar

    from ._http import HttpFile
    from ._options import Clock, Options
    from ._rangefile import Read

    _Result = TypeVar("_Result")

# A batch of fsspec parts in memory at once, before they are copied to where they belong.
_BATCH: Final = 64 << 20
_SIGNED_FOR: Final = 3600  # seconds a signed URL is valid for
# What an fsspec info() may say that changes when the file does.
_VALIDATORS: Final = (
    "ETag",
    "etag",
    "e_tag",
    "VersionId",
    "version_id",
    "generation",
    "LastModified",
    "last_modified",
    "mtime",
    "created",
    "ino",
)


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
    return hasattr(store, "get_range") and (hasattr(store, "get") or hasattr(store, "head"))


def store_file(source: str | tuple[Any, str], options: Options) -> RangeFile:
    """The `RangeFile` of an fsspec URL or of a ``(store or filesystem, path)`` pair."""
    if isinstance(source, tuple):
        store, path = source
        shown = f"{path} in {type(store).__name__}"
        if _is_filesystem(store):
            return FsspecFile(store, path, options, shown=shown)
        return StoreFile(store, path, options, shown=shown)
    try:
        import fsspec.core  # type: ignore[import-untyped]  # optional: only for such URLs
    except ImportError:
        scheme = source.partition("://")[0]
        raise ImportError(
            f"reading a {scheme}:// URL needs fsspec and the package for {scheme}:// (s3fs, "
            "gcsfs, adlfs, huggingface_hub, ...): pip install fsspec s3fs, for example"
        ) from None
    filesystem, path = fsspec.core.url_to_fs(source, **(options.storage_options or {}))
    return FsspecFile(filesystem, path, options, shown=redact(source), url=source)


class _Store(RangeFile):
    """What both kinds share: errors as RemoteErrors, the identity pinned once."""

    default_gap = REMOTE_GAP

    def __init__(self, store: Any, path: str, options: Options, shown: str) -> None:
        super().__init__(options, shown)
        self.store = store
        self.path = path
        self.validator: object = None
        self.pinned = False

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
                raise self.changed("its ETag", "another") from error
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

    def pin(self, size: int, validator: object) -> None:
        """Set the file's identity on first sight; RemoteError if a later sight differs."""
        if not self.pinned:
            if self.expected_size is not None and size != self.expected_size:
                raise self.changed(f"its size was {self.expected_size:,} bytes", f"{size:,}")
            self.size, self.validator, self.pinned = size, validator, True
            return
        if size != self.size:
            raise self.changed(f"its size was {self.size:,} bytes", f"{size:,}")
        if validator != self.validator:
            raise self.changed(f"it was {self.validator!a}", f"{validator!a}")

    def changed(self, was: str, now: str) -> RemoteError:
        return RemoteError(
            f"the file at {self.shown} changed between two requests: {was}, and is now {now} "
            "(its header and its data would be of two different files; read it again)",
            url=self.shown,
        )

    def short(self, start: int, asked: int, got: int) -> RemoteError:
        return RemoteError(
            f"could not read {self.shown}: the store returned {got:,} of the {asked:,} bytes at "
            f"offset {start:,}, which its size of {self.size:,} bytes says are there",
            url=self.shown,
        )

    def first_read_size(self) -> int:
        asked = super().first_read_size()
        if self.pinned and self.size is not None:
            return min(asked, self.size)
        return asked

    def document(self, limit: int, clock: Clock) -> bytes:
        return self.first(limit + 1, clock)  # one request where the store can (no HEAD)


class StoreFile(_Store):
    """A file in an obstore store, or any obspec store."""

    def __init__(self, store: Any, path: str, options: Options, *, shown: str) -> None:
        super().__init__(store, path, options, shown)
        # obstore's stores: get() with options brings the size and ETag with the bytes, and
        # can be made conditional. A bare obspec store: head() and get_range().
        self.rich = hasattr(store, "get") and hasattr(store, "get_ranges")

    def _head(self) -> None:
        meta = self.call(lambda: self.store.head(self.path))
        self.pin(int(meta["size"]), _meta_validator(meta))

    def _get(self, start: int, stop: int) -> memoryview:
        """Bytes ``[start, stop)`` of a pinned file (`stop` within it), checked."""
        if self.rich:
            options: dict[str, Any] = {"range": (start, stop)}
            etag = self.validator[0] if isinstance(self.validator, tuple) else None
            if etag is not None:
                options["if_match"] = etag
            result = self.call(lambda: self.store.get(self.path, options=options))
            self.pin(int(result.meta["size"]), _meta_validator(result.meta))
            data = memoryview(self.call(result.bytes))
        else:
            data = memoryview(
                self.call(lambda: self.store.get_range(self.path, start=start, end=stop))
            )
        if len(data) != stop - start:
            raise self.short(start, stop - start, len(data))
        return data

    def first(self, count: int, clock: Clock) -> bytes:
        if self.rich and not self.pinned:
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
            self.pin(int(result.meta["size"]), _meta_validator(result.meta))
            data = bytes(self.call(result.bytes))
            if len(data) != min(count, self.size or 0):
                raise self.short(0, min(count, self.size or 0), len(data))
            return data
        return self.read(0, count, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        if not self.pinned:
            self._head()
        stop = min(stop, self.size or 0)
        if start >= stop:
            return b""
        return bytes(self._get(start, stop))

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
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
        if not self.pinned:
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


def _meta_validator(meta: Any) -> tuple[object, object, object]:
    """What an obspec ObjectMeta says that changes when the object does."""
    get = meta.get if hasattr(meta, "get") else lambda name: getattr(meta, name, None)
    return (get("e_tag"), get("version"), str(get("last_modified")))


class FsspecFile(_Store):
    """A file of an fsspec filesystem (given as a URL, or as a ``(filesystem, path)`` pair)."""

    def __init__(
        self, filesystem: Any, path: str, options: Options, *, shown: str, url: str | None = None
    ) -> None:
        super().__init__(filesystem, path, options, shown)
        self.url = url
        self.signing: bool | None = None  # unknown until tried
        self._signed: HttpFile | None = None

    def _info(self) -> None:
        if hasattr(self.store, "invalidate_cache") and self.pinned:
            self.call(lambda: self.store.invalidate_cache(self.path))
        info = self.call(lambda: self.store.info(self.path))
        size = info.get("size")
        if size is None:
            size = self.call(lambda: self.store.size(self.path))
        validator = tuple((name, str(info[name])) for name in _VALIDATORS if name in info)
        self.pin(int(size), validator)

    def _signed_call(self, action: Callable[[HttpFile], _Result]) -> _Result | _Unsigned:
        """`action` on the file behind a signed URL, where the filesystem signs one; the
        signed URL refused at its first use (a bucket that wants more than a signature),
        fsspec's own reads from then on."""
        signed = self._signed_file()
        if signed is None:
            return _UNSIGNED
        try:
            result = action(signed)
        except ShortRead:
            self.size = signed.size  # (for the error: where the file ends)
            raise
        except RemoteError as error:
            if error.status is None or not 400 <= error.status < 500:
                raise
            if self.signing:  # it was good before: expired (a file read again, later)
                if error.status != 403:
                    raise
                signed = self._resigned(signed)
                result = action(signed)
            else:
                self.signing, self._signed = False, None
                return _UNSIGNED
        self.signing = True
        self.size, self.pinned = signed.size, signed.pinned  # its identity is the file's
        return result

    def prepare(self) -> None:
        if self._signed_file() is None and not self.pinned:
            self._info()

    def first_read_size(self) -> int:
        if self._signed_file() is None and not self.pinned:
            self._info()
        return super().first_read_size()

    def first(self, count: int, clock: Clock) -> bytes:
        return self.read(0, count, clock)

    def document(self, limit: int, clock: Clock) -> bytes:
        # Through a signed URL, read as the HTTP client reads one: as long as it is, never a
        # buffer of `limit` bytes made ready for it (an index's limit is 10^8).
        signed = self._signed_call(lambda file: file.document(limit, clock))
        if not isinstance(signed, _Unsigned):
            return signed
        return super().document(limit, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        signed = self._signed_call(lambda file: file.read(start, stop, clock))
        if not isinstance(signed, _Unsigned):
            return signed
        if not self.pinned:
            self._info()
        stop = min(stop, self.size or 0)
        if start >= stop:
            return b""  # (s3fs refuses a range of an empty file, or past its end)
        [data] = self._cat([(start, stop)])
        if len(data) != stop - start:
            raise self.short(start, stop - start, len(data))
        return data

    def release(self) -> None:
        if self._signed is not None:
            self._signed.release()

    def requests(self, reads: list[Read]) -> list[Read]:
        if self._signed_file() is not None:
            return parts(reads, self.options.part_size, self.options.max_workers)
        # fsspec's cat_ranges, a batch at a time: parts of part_size, several to a batch.
        return cut(reads, self.options.part_size)

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        reads = list(reads)
        if not isinstance(self._signed_call(lambda file: file.read_into(reads, clock)), _Unsigned):
            return
        if not self.pinned:
            self._info()
        batch: list[Read] = []
        held = 0
        for read in reads:
            batch.append(read)
            held += read[1] - read[0]
            if held >= _BATCH:
                self._fill(batch)
                batch, held = [], 0
        if batch:
            self._fill(batch)
        self._info()  # the file is still the one pinned: nothing was mixed

    def _fill(self, reads: list[Read]) -> None:
        found = self._cat([(start, stop) for start, stop, _ in reads])
        for (start, stop, segments), data in zip(reads, found, strict=True):
            if len(data) < stop - start:
                raise ShortRead(start + len(data))
            for offset, view in segments:
                view[:] = memoryview(data)[offset - start : offset - start + len(view)]

    def _cat(self, spans: Sequence[tuple[int, int]]) -> list[bytes]:
        """``cat_ranges`` of the spans; pieces longer than asked (a range ignored) refused."""
        count = len(spans)
        pieces = self.call(
            lambda: self.store.cat_ranges(
                [self.path] * count,
                [start for start, _ in spans],
                [stop for _, stop in spans],
                on_error="raise",
            )
        )
        # Older fsspec (2024.12) returns a range's error in the list even with "raise".
        failed = next((piece for piece in pieces if isinstance(piece, BaseException)), None)
        if failed is not None:
            self.call(lambda: _raise(failed))
        out = [piece if isinstance(piece, bytes) else bytes(memoryview(piece)) for piece in pieces]
        for piece, (start, stop) in zip(out, spans, strict=True):
            if len(piece) > stop - start:  # fsspec's HTTPFileSystem, on a 200 to a Range
                raise RemoteError(
                    f"could not read {self.shown}: {len(piece):,} bytes came for the "
                    f"{stop - start:,} of bytes {start:,}-{stop - 1:,} (the range was ignored)",
                    url=self.shown,
                )
        return out

    def _signed_file(self) -> HttpFile | None:
        """The file behind a URL signed by the filesystem (s3fs, gcsfs, adlfs), read with
        the HTTP client: every byte read once into its buffer, the parts in parallel on
        kept-alive connections. None where the filesystem cannot sign one, or the URL
        signed was refused."""
        if self.signing is False:
            return None
        if self._signed is not None:
            return self._signed
        from fsspec import AbstractFileSystem

        url: object = None
        if type(self.store).sign is not AbstractFileSystem.sign and not self.pinned:
            try:
                url = self.store.sign(self.path, expiration=_SIGNED_FOR)
            except Exception:  # no credentials to sign with, or not for this filesystem
                url = None
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            self.signing = False
            return None
        from ._http import HttpFile

        signed = HttpFile(url, self.options.replace(headers=None))
        signed.shown = self.shown  # (the signature is a credential: never shown)
        signed.expected_size = self.expected_size
        self._signed = signed
        return signed

    def _resigned(self, old: HttpFile) -> HttpFile:
        """A new signature for the same file, its identity kept (checked at every read)."""
        from ._http import HttpFile

        url = self.call(lambda: self.store.sign(self.path, expiration=_SIGNED_FOR))
        signed = HttpFile(url, old.options)
        signed.shown, signed.final = old.shown, url
        signed.pinned, signed.size, signed.ranged = old.pinned, old.size, old.ranged
        signed.etag, signed.modified = old.etag, old.modified
        self._signed = signed
        return signed

    def sibling(self, name: str) -> FsspecFile:
        path = posixpath.join(posixpath.dirname(self.path), name)
        if self.url is not None:
            url = self.url.split("?", 1)[0].rsplit("/", 1)[0] + "/" + name
            return FsspecFile(self.store, path, self.options, shown=redact(url), url=url)
        return FsspecFile(
            self.store, path, self.options, shown=f"{path} in {type(self.store).__name__}"
        )


def _raise(error: BaseException) -> None:
    raise error


class _Unsigned:
    """What `FsspecFile._signed_call` returns when there is no signed URL to read."""


_UNSIGNED: Final = _Unsigned()
