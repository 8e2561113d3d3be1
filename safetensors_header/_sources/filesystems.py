"""fsspec filesystems as a `RangeFile` backend: fsspec URLs and ``(filesystem, path)`` pairs.

Layer: sources. The file's size and identity come from ``fs.info`` (one metadata request, a
HEAD for s3fs), the header from one ranged read (two for a long header). Tensors: where the
filesystem can sign a URL (s3fs, gcsfs, adlfs), through the HTTP client with that URL, each
byte read once into the memory it is returned in; elsewhere ``fs.cat_ranges``, a few parts
at a time (concurrent on async filesystems), and the file's identity checked after.
"""

from __future__ import annotations

import posixpath

from .._errors import RemoteError
from .base import ShortRead
from .planning import cut, parts
from .stores import StoreBase
from .urls import beside, redact

__all__ = ["FsspecFile", "url_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, Final, TypeVar

    from .http_file import HttpFile
    from .options import Clock, Options
    from .planning import Read

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


def url_file(url: str, options: Options) -> FsspecFile:
    """The file at an fsspec URL (``s3://``, ``gs://``, ``memory://``...), its filesystem
    made by ``fsspec.core.url_to_fs(url, **storage_options)``."""
    try:
        import fsspec.core  # type: ignore[import-untyped]  # optional: only for such URLs
    except ImportError:
        scheme = url.partition("://")[0]
        raise ImportError(
            f"reading a {scheme}:// URL needs fsspec and the package for {scheme}:// (s3fs, "
            "gcsfs, adlfs, huggingface_hub, ...): pip install fsspec s3fs, for example"
        ) from None
    filesystem, path = fsspec.core.url_to_fs(url, **(options.storage_options or {}))
    return FsspecFile(filesystem, path, options, shown=redact(url), url=url)


class FsspecFile(StoreBase):
    """A file of an fsspec filesystem (given as a URL, or as a ``(filesystem, path)`` pair)."""

    def __init__(
        self, filesystem: Any, path: str, options: Options, *, shown: str, url: str | None = None
    ) -> None:
        super().__init__(filesystem, path, options, shown)
        self.url = url
        self.signing: bool | None = None  # unknown until tried
        self._signed: HttpFile | None = None

    def _info(self) -> None:
        if hasattr(self.store, "invalidate_cache") and self.identified:
            self.call(lambda: self.store.invalidate_cache(self.path))
        info = self.call(lambda: self.store.info(self.path))
        size = info.get("size")
        if size is None:
            size = self.call(lambda: self.store.size(self.path))
        validators = tuple((name, str(info[name])) for name in _VALIDATORS if name in info)
        self._identify(int(size), validators)

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
        # Its identity is the file's.
        self.size, self.identified, self.validators = (
            signed.size,
            signed.identified,
            signed.validators,
        )
        return result

    @property
    def location(self) -> str:
        return self.shown if self.url is None else self.url

    def _prepare(self) -> None:
        if self._signed_file() is None and not self.identified:
            self._info()

    def _first_read_size(self) -> int:
        if self._signed_file() is None and not self.identified:
            self._info()
        return super()._first_read_size()

    def _first(self, count: int, clock: Clock) -> bytes:
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
        if not self.identified:
            self._info()
        stop = min(stop, self.size or 0)
        if start >= stop:
            return b""  # (s3fs refuses a range of an empty file, or past its end)
        [data] = self._cat([(start, stop)])
        if len(data) != stop - start:
            raise self.short(start, stop - start, len(data))
        return data

    def _release(self) -> None:
        if self._signed is not None:
            self._signed._release()

    def _requests(self, reads: list[Read]) -> list[Read]:
        if self._signed_file() is not None:
            return parts(reads, self.options.part_size, self.options.max_workers)
        # fsspec's cat_ranges, a batch at a time: parts of part_size, several to a batch.
        return cut(reads, self.options.part_size)

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        reads = list(reads)
        if not isinstance(self._signed_call(lambda file: file._read_into(reads, clock)), _Unsigned):
            return
        if not self.identified:
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
        # A file identified through a signed URL (`signing`) signs again where it was
        # unpickled (a pickle holds no signature); one identified through fsspec's own
        # reads goes on with them (its validators are fsspec's, not the URL's).
        if type(self.store).sign is not AbstractFileSystem.sign and (
            not self.identified or self.signing
        ):
            try:
                url = self.store.sign(self.path, expiration=_SIGNED_FOR)
            except Exception:  # no credentials to sign with, or not for this filesystem
                url = None
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            if self.identified and self.signing:
                raise RemoteError(
                    f"could not sign a URL for {self.shown} again (its identity was read "
                    "through a signed URL): the filesystem has no credentials here",
                    url=self.shown,
                )
            self.signing = False
            return None
        from .http_file import HttpFile

        signed = HttpFile(url, self.options.replace(headers=None))
        signed.shown = self.shown  # (the signature is a credential: never shown)
        signed.expected = self.expected
        if self.identified:  # signed again: held to the identity pinned before
            signed.identified, signed.size, signed.validators = (
                True,
                self.size,
                self.validators,
            )
            signed.ranged = True  # (an object store's signed URL honours Range)
        self._signed = signed
        return signed

    def __getstate__(self) -> dict[str, Any]:
        # Never a signed URL (a credential, and it expires): signed again once unpickled.
        return {**self.__dict__, "_signed": None}

    def _resigned(self, old: HttpFile) -> HttpFile:
        """A new signature for the same file, its identity kept (checked at every read)."""
        from .http_file import HttpFile

        url = self.call(lambda: self.store.sign(self.path, expiration=_SIGNED_FOR))
        signed = HttpFile(url, old.options)
        signed.shown, signed.final, signed.ranged = old.shown, url, old.ranged
        signed.identified, signed.size, signed.validators = (
            old.identified,
            old.size,
            old.validators,
        )
        self._signed = signed
        return signed

    def sibling(self, name: str) -> FsspecFile:
        path = posixpath.join(posixpath.dirname(self.path), name)
        if self.url is not None:
            url = beside(self.url, name)
            return FsspecFile(self.store, path, self.options, shown=redact(url), url=url)
        return FsspecFile(
            self.store, path, self.options, shown=f"{path} in {type(self.store).__name__}"
        )


def _raise(error: BaseException) -> None:
    raise error


class _Unsigned:
    """What `FsspecFile._signed_call` returns when there is no signed URL to read."""


_UNSIGNED: Final = _Unsigned()
