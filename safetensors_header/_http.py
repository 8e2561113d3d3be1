"""HTTP(S) URLs as a `RangeFile`: Range requests, checked, retried, in parallel.

Layer: sources. With F the first read (``first_read``) and ``8 + N`` the bytes the header
occupies, a header read (`header_of`) is:

1. ``GET`` with ``Range: bytes=0-(F-1)`` (inclusive: F bytes). A ``206`` must carry a
   ``Content-Range`` that matches the request (first byte, last byte, body length); its total
   is the file size, which the coverage rule needs. `bytes_needed` then says where the header
   ends, or gives the verdict on the length prefix (limit, file size) before anything more is
   asked for.
2. Only when the header ends past F: ``Range: bytes=F-(8+N-1)``, the missing remainder and
   nothing else, sent straight to the URL the first request was redirected to.

The first reply pins the file: its final URL (redirects followed once), its size and its
validator (a strong ``ETag``, else ``Last-Modified``). Every later request of the same
`HttpFile` goes to that URL with ``If-Range``, and its reply must agree (size, ETag): a file
replaced in between (a new commit on a ``resolve/main`` URL, a re-uploaded object) is a
`RemoteError`, never a mix of two files. A total the server did not give at first
(``Content-Range: bytes a-b/*``) may be learned later; that is not a change.

Ranged reads cut long reads into equal parts (`HttpFile.requests`: of ``part_size`` bytes, or
one per thread up to four times that when there would be more) and send them
(`HttpFile.read_into`) on up to ``max_workers`` threads, 2 a core at most (or 4: `streams`),
each reading its body with ``readinto`` straight into the memory the bytes are returned in.
A server that ignores Range (``200`` and the whole body) is read once, from byte 0 as far as
the last range ends, into the same memory; for a header, only as far as the header needs,
then the connection is closed. A ``416`` for the first read (an empty file) is answered from
its ``Content-Range: bytes */L``. A body in a transfer coding other than a lone ``chunked``,
in a ``Content-Encoding``, or in a ``multipart/byteranges`` envelope is refused: its bytes
are not the file's.

``timeout`` bounds a whole call: every connect and every socket read (each line of a status
or header block, each piece of a body) waits at most what is left of it, so a server that
trickles a byte at a time, or answers ``100 Continue`` without end, is cut off when the time
is up. A redirect's body is never read. No format rule lives here: `bytes_needed` and
`parse_header` judge every byte.
"""

from __future__ import annotations

import functools
import io
import random
import re
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

from ._errors import RemoteError
from ._options import REMOTE_GAP, Clock
from ._rangefile import (
    RangeFile,
    Restart,
    ShortRead,
    parts,
    redact,
    run_parallel,
    streams,
    url_sibling,
    with_segments,
)

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    import urllib.request
    from collections.abc import Callable, Iterable
    from email.message import Message
    from typing import IO, Any, Final, TypeVar

    from ._options import Options
    from ._rangefile import Read, Segment

    _Result = TypeVar("_Result")

# urllib.request, http.client, ssl and email take as long to import as the rest of the package,
# and most callers never read a URL: they are imported on the first URL read.

__all__ = ["SAFE_ACROSS_ORIGINS", "HttpFile"]

_BACKOFF: Final = 0.25  # seconds before the first retry, doubled for each further one
# The most bytes asked of one socket read of a body that is dropped (between two ranges, or
# before the first one of a 200).
_SKIP_SIZE: Final = 1 << 20
# The caller's headers that may go on to another origin (scheme, host, port) than the URL
# given; every other one (Authorization, Cookie, Proxy-Authorization, X-Api-Key, a signed
# token...) goes only to that origin, never on to a CDN or mirror it redirects to.
SAFE_ACROSS_ORIGINS: Final = frozenset({"accept", "accept-language", "user-agent"})
_RANGE_HEADERS: Final = frozenset({"range", "if-range"})  # always ours
# A byte count: decimal digits, ASCII only (str.isdigit() is true for "²", which int()
# refuses), and at most 19 of them (a u64 has 20; int() refuses over 4,300 digits).
_DECIMAL: Final = "[0-9]{1,19}"
_CONTENT_LENGTH: Final = re.compile(_DECIMAL)
# Range units are case-insensitive (RFC 9110, section 14.1).
_CONTENT_RANGE: Final = re.compile(
    rf"bytes[ \t]+({_DECIMAL})-({_DECIMAL})/({_DECIMAL}|\*)", re.ASCII | re.IGNORECASE
)
_UNSATISFIED: Final = re.compile(rf"bytes[ \t]+\*/({_DECIMAL})", re.ASCII | re.IGNORECASE)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_HUB_HINTS: Final = {
    "RepoNotFound": (
        "the Hugging Face Hub has no such repository, or it is private or gated and the "
        "request had no token for it (set HF_TOKEN, or pass headers={'Authorization': "
        "'Bearer <token>'})"
    ),
    "GatedRepo": (
        "the repository is gated: accept its conditions on its page on the Hub, then read "
        "it with a token of that account (HF_TOKEN)"
    ),
    "EntryNotFound": "the repository has no such file at this revision",
    "RevisionNotFound": "the repository has no such revision (branch, tag or commit)",
    "DisabledRepo": "the repository has been disabled on the Hub",
}
_PERMANENT_5XX: Final = frozenset({501, 505})  # Not Implemented, Version Not Supported
_HINTS: Final = {
    401: "the server wants credentials; pass headers={'Authorization': 'Bearer <token>'}",
    403: (
        "the credentials were refused or give no access to this file (a gated repository "
        "needs its terms accepted; a signed link may have expired)"
    ),
    404: (
        "check the URL (host, path, revision and file name); a private repository also "
        "answers 404 to a request without credentials"
    ),
    407: "the proxy wants credentials",
}
_PIN: Final = threading.Lock()  # a file's identity is set once, by the first reply
# What urllib sends as User-Agent, sent on the kept-alive connections too.
_USER_AGENT: Final = f"Python-urllib/{sys.version_info[0]}.{sys.version_info[1]}"

# Waits between attempts; tests replace it to run without sleeping.
_sleep: Callable[[float], None] = time.sleep


class HttpFile(RangeFile):
    """A file at an ``http://`` or ``https://`` URL.

    Attributes:
        url: The URL given.
        final: Where requests go once the first has been answered (its redirects followed).
        etag, modified: The validators of the first reply (``ETag``, ``Last-Modified``).
        ranged: Whether the server honours Range (``None`` until the first reply).
        expected_size: The size the file must have (a header read before says so).
    """

    default_gap = REMOTE_GAP

    def __init__(self, url: str, options: Options, *, expected_size: int | None = None) -> None:
        super().__init__(options, redact(url))
        self.url = url
        self.final: str | None = None
        self.etag: str | None = None
        self.modified: str | None = None
        self.ranged: bool | None = None
        self.pinned = False
        self.expected_size = expected_size
        # A 200's body that a header read goes on reading (a server that ignores Range is
        # asked once): open between the reads of one header, closed by release().
        self._held: _Held | None = None

    @property
    def if_range(self) -> str | None:
        """The validator for ``If-Range``: a strong ETag, else the Last-Modified date."""
        if self.etag is not None and not self.etag.startswith("W/"):
            return self.etag
        return self.modified

    def first(self, count: int, clock: Clock) -> bytes:
        return self.read(0, count, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        held = self._held
        if held is not None and held.position == start:
            return held.take(stop - start)  # on along a 200's body, kept open for this
        self.release()
        buffer = bytearray(stop - start)
        got = _Client(self, clock).fetch(start, stop, [(start, memoryview(buffer))], header=True)
        return bytes(memoryview(buffer)[:got])

    def release(self) -> None:
        if self._held is not None:
            self._held.response.close()
            self._held = None

    def requests(self, reads: list[Read]) -> list[Read]:
        return parts(reads, self.options.part_size, self.options.max_workers)

    def read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        reads = list(reads)
        if not reads:
            return
        client = _Client(self, clock)
        pending = reads
        if not self.pinned:
            # The first request alone, at most part_size: it follows redirects, and learns
            # the size, the validator and whether the server honours Range, for the others.
            start, stop, segments = reads[0]
            if stop - start > self.options.part_size:
                middle = start + self.options.part_size
                reads = [*with_segments([(start, middle), (middle, stop)], segments), *reads[1:]]
                start, stop, segments = reads[0]
            got = client.fetch(start, stop, segments, rest=lambda: iter(reads[1:]))
            if got < stop - start:
                raise ShortRead(self._end(start + got))
            if self.ranged is False:
                return  # a 200: its body held every read
            pending = reads[1:]
        elif self.ranged is False:
            # The server ignores Range: one body from byte 0, read once for every read.
            start, stop, segments = reads[0]
            got = client.fetch(start, stop, segments, rest=lambda: iter(reads[1:]))
            if got < stop - start:
                raise ShortRead(self._end(start + got))
            return

        # The parts go to the final URL on kept-alive connections, one per thread.
        client.pool = _Pool(clock) if _poolable(self.final or self.url) else None

        def one(read: Read) -> None:
            start, stop, segments = read
            if self.size is not None and start >= self.size:
                raise ShortRead(self.size)  # past the end the first reply gave: not asked
            got = client.fetch(start, stop, segments)
            if got < stop - start:
                raise ShortRead(self._end(start + got))

        try:
            run_parallel(one, pending, streams(self.options.max_workers))
        finally:
            if client.pool is not None:
                client.pool.close()

    def _end(self, where: int) -> int:
        """Where the file ends, for a read that stopped at `where`."""
        return where if self.size is None else min(self.size, where)

    def document(self, limit: int, clock: Clock) -> bytes:
        return _Client(self, clock).document(limit)

    def sibling(self, name: str) -> HttpFile:
        return HttpFile(url_sibling(self.url, name), self.options)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_held": None}

    def unpin(self) -> None:
        """Forget the file's identity (its header is read again, from a new file)."""
        self.pinned, self.size, self.etag, self.modified = False, None, None, None


class _Held:
    """The open body of a 200, at `position`: a header read goes on reading it."""

    def __init__(
        self, response: http.client.HTTPResponse, position: int, size: int | None, shown: str
    ) -> None:
        self.response, self.position, self.size, self.shown = response, position, size, shown

    def take(self, count: int) -> bytes:
        buffer = bytearray(count)
        start = self.position
        try:
            got = _fill(self.response, [(start, memoryview(buffer))], start, start + count, None)
        except OSError as error:
            raise RemoteError(
                f"could not read {self.shown}: {_failure_reason(error)}", url=self.shown
            ) from error
        if got < count and self.size is not None and start + got < self.size:
            raise RemoteError(
                f"could not read {self.shown}: the connection closed after {start + got:,} of "
                f"{self.size:,} bytes",
                url=self.shown,
            )
        self.position += got
        return bytes(memoryview(buffer)[:got])


class _Client:
    """The requests of one call to one file. Never shared between calls."""

    def __init__(self, file: HttpFile, clock: Clock) -> None:
        import urllib.request

        self.file = file
        self.clock = clock
        self.retries = file.options.retries
        self.origin = _origin(file.url)
        self.given = file.url
        self.shown = file.shown
        self.headers = {
            name: value
            for name, value in (file.options.headers or {}).items()
            if name.lower() not in _RANGE_HEADERS
        }
        self.last_count = 0
        self.pool: _Pool | None = None  # kept-alive connections, for the parts of a read
        http_handler, https_handler = _timed_handlers()
        handlers = [_redirect_handler()(), http_handler(clock)]
        if https_handler is not None:
            handlers.append(https_handler(clock))
        self.opener = urllib.request.build_opener(*handlers)  # one per call

    @property
    def url(self) -> str:
        return self.file.final or self.file.url

    def fetch(
        self,
        start: int,
        stop: int,
        segments: list[Segment],
        *,
        rest: Callable[[], Iterable[Read]] | None = None,
        header: bool = False,
    ) -> int:
        """Bytes ``[start, stop)`` into `segments`, retried on transient failures; how many
        bytes the file had there (fewer than asked only where it ends).

        A server that ignores Range answers 200 with the whole file: its body is read from
        byte 0 as far as `segments` need, and on through the reads that `rest` makes, in
        order (or `ShortRead` where the file ends before one of them). For a `header` read,
        a 200's body is kept open when there is more of it (`HttpFile.read` goes on along
        it); a 200 that answers If-Range (the file was replaced) raises `Restart` with the
        new file's body kept, from byte 0.
        """
        count = self._retried(lambda: self._attempt(start, stop, segments, rest, header=header))
        self.last_count = count
        return count

    def document(self, limit: int) -> bytes:
        """A whole (small) document, such as an index JSON, read to ``limit + 1`` bytes."""
        return self._retried(lambda: self._whole_document(limit))

    def _open(self, url: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        import urllib.request

        request = urllib.request.Request(url, headers=headers)
        try:
            response: http.client.HTTPResponse = self.opener.open(
                request, timeout=self.clock.left()
            )
        except (ValueError, OverflowError) as error:
            # http.client and urllib on a reply they cannot read (a redirect's body with a
            # Content-Length of 30 digits, ...): what the server sent, not a caller's mistake.
            raise RemoteError(
                f"{self.where()} sent a reply that could not be read: "
                f"{type(error).__name__}: {_plain(str(error), 200)}",
                url=self.shown,
            ) from error
        return response

    def _whole_document(self, limit: int) -> bytes:
        import urllib.error

        try:
            url = self.url
            response = self._open(url, self._headers_here(url))
        except urllib.error.HTTPError as error:
            with error:
                raise self._status_error(
                    error.code, error.geturl() or self.url, error.headers
                ) from None
        with response:
            if self.file.final is None:
                self.file.final = response.geturl() or self.file.url
            self._check_body(response)
            # One byte past the limit says the document is larger; the caller says so. Read
            # a piece at a time: a document is small, its bound is not.
            length = self._content_length(response)
            wanted = limit + 1 if length is None else min(length, limit + 1)
            pieces = []
            got = 0
            while got < limit + 1:
                piece = bytearray(min(limit + 1 - got, max(wanted - got, 1), _SKIP_SIZE))
                count = _fill(response, [(got, memoryview(piece))], got, got + len(piece), None)
                pieces.append(memoryview(piece)[:count])
                got += count
                if count < len(piece):
                    break
            if length is not None and got < wanted:
                raise ConnectionError(f"the connection closed after {got:,} of {wanted:,} bytes")
            return b"".join(pieces)

    def _headers_here(self, url: str) -> dict[str, str]:
        """The caller's headers for a request to `url`: all of them only to the origin."""
        if _origin(url) == self.origin:
            return dict(self.headers)
        return {k: v for k, v in self.headers.items() if k.lower() in SAFE_ACROSS_ORIGINS}

    def _retried(self, attempt_once: Callable[[], _Result]) -> _Result:
        import http.client

        attempts = self.retries + 1
        failure: BaseException | None = None
        done = 0  # attempts made
        for attempt in range(attempts):
            if attempt:
                delay = _BACKOFF * 2 ** (attempt - 1) * (0.5 + random.random() / 2)  # jitter
                if not self.clock.allows(delay):
                    break  # no time left for another attempt
                _sleep(delay)
            done += 1
            try:
                return attempt_once()
            except RemoteError as error:
                status = error.status
                if status is None or status < 500 or status in _PERMANENT_5XX:
                    raise
                failure = error
            except (OSError, http.client.HTTPException) as error:
                cause = _cause(error)
                if not _transient(cause):
                    raise RemoteError(
                        f"could not read {self.shown}: {_failure_reason(cause)}", url=self.shown
                    ) from cause
                failure = cause
            if self.clock.expired():
                break
        assert failure is not None  # the loop ran at least once, and every success returned
        tries = f"{done} attempt{'s' if done > 1 else ''}"
        if self.clock.expired() or done < attempts:
            tries += f", the timeout of {self.clock.timeout:g} s used up"
        elif attempts == 1:
            tries += ", no retries"
        if isinstance(failure, RemoteError):
            raise RemoteError(
                f"{failure} ({tries})", url=self.shown, status=failure.status
            ) from None
        raise RemoteError(
            f"could not read {self.shown}: {_failure_reason(failure)} ({tries})", url=self.shown
        ) from failure

    def _attempt(
        self,
        start: int,
        stop: int,
        segments: list[Segment],
        rest: Callable[[], Iterable[Read]] | None,
        *,
        ranged: bool = True,
        header: bool = False,
    ) -> int:
        import urllib.error

        file = self.file
        url = self.url  # read once: another thread's first reply may set it
        headers = self._headers_here(url)
        if ranged:
            headers["Range"] = f"bytes={start}-{stop - 1}"  # inclusive: stop - start bytes
            if file.pinned and file.if_range is not None:
                headers["If-Range"] = file.if_range
        try:
            if self.pool is not None and file.pinned:
                response = self._pooled(url, headers)
            else:
                response = self._open(url, headers)
        except urllib.error.HTTPError as error:
            with error:
                location = error.geturl() or url
                if error.code == 416 and ranged:
                    found = self._unsatisfiable(start, error.headers.get("Content-Range"))
                    if found is not None:
                        return found
                    if start == 0:
                        # A 416 for bytes from 0 of a file that has them: the server cannot
                        # range at all. Ask without Range (read as a 200).
                        return self._attempt(
                            start, stop, segments, rest, ranged=False, header=header
                        )
                raise self._status_error(error.code, location, error.headers) from None
        try:
            if not file.pinned:
                file.final = response.geturl() or file.url
            self._check_body(response)
            if response.status == 206 and ranged:
                return self._partial(response, start, stop, segments)
            if response.status == 200:
                return self._whole(response, start, stop, segments, rest, header=header)
            raise RemoteError(
                f"{self.where()} answered HTTP {response.status} {_plain(response.reason)} to "
                f"a GET with {headers.get('Range', 'no Range')}",
                url=self.shown,
                status=response.status,
            )
        finally:
            # Closing it is what stops a 200's body: the rest is never sent. (Unless a header
            # read goes on along it.)
            if file._held is None or file._held.response is not response:
                response.close()
            if self.pool is not None:
                self.pool.done(response)

    def _pooled(self, url: str, headers: dict[str, str]) -> http.client.HTTPResponse:
        """The reply to a GET of `url` on a kept-alive connection of the pool; a redirect
        (not expected once a file is pinned) is followed by urllib; an error status raised
        as urllib raises it."""
        import http.client
        import urllib.error

        assert self.pool is not None
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        key = (scheme, parts.hostname or "", parts.port or _DEFAULT_PORTS[scheme])
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        fields = {"User-Agent": _USER_AGENT, **headers}
        while True:
            connection, reused = self.pool.take(key)
            try:
                connection.request("GET", target, headers=fields)
                response = connection.getresponse()
            except (OSError, http.client.HTTPException):
                connection.close()
                if reused:
                    continue  # a kept-alive connection the server has closed meanwhile
                raise
            break
        response.url = url  # (urllib's replies say where they are from)
        self.pool.lend(response, key, connection)
        status = response.status
        if 300 <= status < 400:
            response.close()
            return self._open(url, headers)
        if not 200 <= status < 300:
            raise urllib.error.HTTPError(url, status, response.reason, response.headers, response)
        return response

    def _check_body(self, response: http.client.HTTPResponse) -> None:
        """RemoteError for a body whose bytes are not the file's as they are."""
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise RemoteError(
                f"{self.where()} sent the body with Content-Encoding {_plain(encoding)}: "
                "its bytes are not the file's (do not pass an Accept-Encoding header)",
                url=self.shown,
            )
        codings = response.headers.get_all("Transfer-Encoding") or []
        coding = ",".join(codings).strip().lower()
        # http.client decodes a lone "chunked" and nothing else: "gzip, chunked" would come
        # through as chunk-size lines and a gzip stream.
        if codings and coding != "chunked":
            raise RemoteError(
                f"{self.where()} sent the body in the transfer coding {_quoted(coding)}: only "
                "a plain body or a lone 'chunked' is the file's bytes",
                url=self.shown,
            )
        kind = response.headers.get("Content-Type", "").strip().lower()
        if kind.startswith("multipart/"):
            raise RemoteError(
                f"{self.where()} sent a {_quoted(kind.split(';')[0])} reply: its parts come in "
                "an envelope of boundaries and headers, not as the file's bytes (one range a "
                "request is asked for)",
                url=self.shown,
            )

    def _partial(
        self,
        response: http.client.HTTPResponse,
        start: int,
        stop: int,
        segments: list[Segment],
    ) -> int:
        """A 206: check that Content-Range is the range asked for, then read its body."""
        value = response.headers.get("Content-Range")
        match = _CONTENT_RANGE.fullmatch(value.strip()) if value else None
        if match is None:
            raise RemoteError(
                f"{self.where()} answered 206 without a usable Content-Range ({_quoted(value)})",
                url=self.shown,
            )
        first, last = int(match[1]), int(match[2])
        size = None if match[3] == "*" else int(match[3])
        # The last byte is the one asked for, or the file's last when it ends sooner; with an
        # unknown total ("*"), a range that ends sooner is taken as the end of the file.
        if size is None:
            expected = last if start <= last < stop else stop - 1
        else:
            expected = min(stop, size) - 1
        if first != start or last != expected:
            raise RemoteError(
                f"{self.where()} answered Range bytes={start}-{stop - 1} with Content-Range "
                f"{_quoted(value)}; expected bytes {start}-{expected}/"
                f"{'*' if size is None else size}",
                url=self.shown,
            )
        count = last - first + 1
        length = self._content_length(response)
        if length is not None and length != count:
            raise RemoteError(
                f"{self.where()} sent Content-Length {length} with Content-Range "
                f"{_quoted(value)} ({count} bytes)",
                url=self.shown,
            )
        self._identify(response, size, ranged=True)
        got = _fill(response, segments, start, start + count, start + count)
        if got < count:
            raise ConnectionError(f"the connection closed after {got:,} of {count:,} bytes")
        return count

    def _whole(
        self,
        response: http.client.HTTPResponse,
        start: int,
        stop: int,
        segments: list[Segment],
        rest: Callable[[], Iterable[Read]] | None,
        *,
        header: bool = False,
    ) -> int:
        """A 200: the whole file, from byte 0. Read as far as the reads need, then stop."""
        file = self.file
        size = self._content_length(response)
        if file.pinned and file.ranged:
            if header:
                # If-Range did not match: the file was replaced, and this is the new one,
                # whole. Its header is read again, from this body.
                file.unpin()
                self._identify(response, size, ranged=True)
                file._held = _Held(response, 0, size, self.shown)
                raise Restart
            raise RemoteError(
                f"{self.where()} answered a ranged request with the whole file (200): it was "
                "replaced since the first request (If-Range), or stopped honouring Range",
                url=self.shown,
            )
        self._identify(response, size, ranged=False)
        # Bytes before `start` are dropped; a body that ends early is a broken connection
        # when its length was given, else the end of the file.
        if _skip(response, start) < start:
            if size is not None:
                raise ConnectionError("the connection closed before the bytes asked for")
            return 0
        got = _fill(response, segments, start, stop, size)
        if got < stop - start:
            if size is not None and start + got < min(stop, size):
                raise ConnectionError(
                    f"the connection closed after {start + got:,} of {min(stop, size):,} bytes"
                )
            return got
        if header and (size is None or size > stop):
            file._held = _Held(response, stop, size, self.shown)  # the header may go on
            return got
        at = stop
        for later_start, later_stop, later_segments in rest() if rest is not None else ():
            if _skip(response, later_start - at) < later_start - at:
                raise ShortRead(at)
            filled = _fill(response, later_segments, later_start, later_stop, size)
            if filled < later_stop - later_start:
                raise ShortRead(later_start + filled)
            at = later_stop
        return got

    def _identify(
        self, response: http.client.HTTPResponse, size: int | None, *, ranged: bool
    ) -> None:
        """Pin the file's identity on its first reply; check every later one against it."""
        file = self.file
        etag = response.headers.get("ETag")
        modified = response.headers.get("Last-Modified")
        with _PIN:
            if not file.pinned:
                if (
                    file.expected_size is not None
                    and size is not None
                    and (size != file.expected_size)
                ):
                    raise self._changed(f"its size was {file.expected_size:,} bytes", size)
                file.size, file.etag, file.modified = size, etag, modified
                file.ranged = ranged
                file.pinned = True
                return
            if size is not None:
                if file.size is None:
                    file.size = size  # a total not given at first: learned, not changed
                elif size != file.size:
                    raise self._changed(f"its size was {file.size:,} bytes", size)
            if file.etag is not None and etag is not None and etag != file.etag:
                raise self._changed(f"its ETag was {_quoted(file.etag)}", _quoted(etag))
            if (
                file.etag is None
                and etag is None
                and file.modified is not None
                and (modified is not None and modified != file.modified)
            ):
                raise self._changed(
                    f"it was last modified {_quoted(file.modified)}", _quoted(modified)
                )

    def _changed(self, was: str, now: object) -> RemoteError:
        if isinstance(now, int):
            now = f"{now:,} bytes"
        return RemoteError(
            f"the file at {self.shown} changed between two requests: {was}, and is now {now} "
            "(its header and its data would be of two different files; read it again)",
            url=self.shown,
        )

    def _unsatisfiable(self, start: int, content_range: str | None) -> int | None:
        """A 416: the range starts at or past the end of the file (None: a bare 416)."""
        match = _UNSATISFIED.fullmatch(content_range.strip()) if content_range else None
        if match is None or int(match[1]) > start:
            return None
        size = int(match[1])
        file = self.file
        with _PIN:
            if not file.pinned:
                file.size, file.ranged, file.pinned = size, True, True
                return 0
            if file.size is None:
                file.size = size  # 'bytes a-b/*' at first: an unknown size, not a changed one
            elif file.size != size:
                raise self._changed(f"its size was {file.size:,} bytes", size)
        return 0

    def _status_error(
        self, status: int, location: str, headers: Message | None = None
    ) -> RemoteError:
        import http

        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "(an unknown status)"
        where = self.shown
        if location != self.given:
            where += f" (redirected to {redact(location)})"
        # The Hugging Face Hub says which of its errors it is (the code only: the server's
        # own message never reaches a terminal).
        code = headers.get("X-Error-Code", "") if headers is not None else ""
        hint = _HUB_HINTS.get(str(code)) or _HINTS.get(status)
        message = f"HTTP {status} {phrase} for {where}" + (f": {hint}" if hint else "")
        return RemoteError(message, url=self.shown, status=status)

    def _content_length(self, response: http.client.HTTPResponse) -> int | None:
        """The Content-Length: None when absent, RemoteError unless a plain byte count."""
        value = response.headers.get("Content-Length")
        if value is None:
            return None
        if _CONTENT_LENGTH.fullmatch(value.strip()) is None:
            raise RemoteError(
                f"{self.where()} sent an unusable Content-Length ({_quoted(value)}): not a "
                "decimal byte count of at most 19 digits",
                url=self.shown,
            )
        return int(value)

    def where(self) -> str:
        url = self.url
        if url == self.given:
            return self.shown
        return f"{self.shown} (redirected to {redact(url)})"


class _Pool:
    """The kept-alive connections of one read: one per thread and origin, used again part
    after part (each a new TCP connection, and over HTTPS a new handshake, otherwise)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.local = threading.local()
        self.lock = threading.Lock()
        self.opened: list[http.client.HTTPConnection] = []
        self.lent: dict[int, tuple[tuple[str, str, int], http.client.HTTPConnection]] = {}

    def take(self, key: tuple[str, str, int]) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection to `key`'s origin, and whether it was used before."""
        idle: dict[tuple[str, str, int], http.client.HTTPConnection] = (
            self.local.__dict__.setdefault("idle", {})
        )
        connection = idle.pop(key, None)
        if connection is not None:
            return connection, True
        scheme, host, port = key
        options: dict[str, Any] = {"clock": self.clock}
        if scheme == "https":
            options["context"] = _ssl_context()
        connection = _timed_connections()[scheme](host, port, **options)
        with self.lock:
            self.opened.append(connection)
        return connection, False

    def lend(
        self,
        response: http.client.HTTPResponse,
        key: tuple[str, str, int],
        connection: http.client.HTTPConnection,
    ) -> None:
        with self.lock:
            self.lent[id(response)] = (key, connection)

    def done(self, response: http.client.HTTPResponse) -> None:
        """A reply read: its connection kept for the next part if the whole body was read
        and the server keeps it open, closed otherwise (unread bytes would be the next
        reply's)."""
        with self.lock:
            found = self.lent.pop(id(response), None)
        if found is None:
            return
        key, connection = found
        if response.isclosed() and not response.will_close and response.length in (0, None):
            self.local.__dict__.setdefault("idle", {})[key] = connection
        else:
            connection.close()

    def close(self) -> None:
        with self.lock:
            for connection in self.opened:
                connection.close()
            self.opened.clear()


def _poolable(url: str) -> bool:
    """Whether parts may go to `url` on connections of our own: http(s), and no proxy."""
    import urllib.request

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _timed_connections():
        return False
    proxies = urllib.request.getproxies()
    return scheme not in proxies or bool(urllib.request.proxy_bypass(parts.hostname or ""))


@functools.cache
def _ssl_context() -> Any:
    """The default TLS context, as urllib's HTTPS handler makes it."""
    import ssl

    return ssl.create_default_context()


def _fill(
    response: http.client.HTTPResponse,
    segments: list[Segment],
    start: int,
    stop: int,
    length: int | None,
) -> int:
    """The body's bytes ``[start, stop)`` (it is at `start`) into the segments; the bytes
    between them dropped. How many bytes of the span the body had (fewer at its end)."""
    at = start
    for offset, view in segments:
        skipped = _skip(response, offset - at)
        if skipped < offset - at:
            return at + skipped - start
        at = offset
        got = 0
        total = len(view)
        while got < total:
            try:
                count = response.readinto(view[got:])
            except (ValueError, OverflowError) as error:  # a chunked body it cannot read
                raise ConnectionError(
                    f"the body could not be read: {_plain(str(error), 200)}"
                ) from error
            if not count:
                return at + got - start
            got += count
        at += total
    if stop > at:
        at += _skip(response, stop - at)
    return at - start


def _skip(response: http.client.HTTPResponse, count: int) -> int:
    """Read and drop `count` bytes of the body; how many there were."""
    if count <= 0:
        return 0
    scratch = memoryview(bytearray(min(count, _SKIP_SIZE)))
    done = 0
    while done < count:
        try:
            got = response.readinto(scratch[: min(count - done, len(scratch))])
        except (ValueError, OverflowError) as error:
            raise ConnectionError(
                f"the body could not be read: {_plain(str(error), 200)}"
            ) from error
        if not got:
            break
        done += got
    return done


def _plain(text: str, limit: int = 100) -> str:
    """Text from a server, for a message: as it is if printable ASCII, else escaped."""
    text = text[:limit]
    return text if text.isascii() and text.isprintable() else ascii(text)[1:-1]


def _quoted(text: str | None, limit: int = 100) -> str:
    """Text from a server, for a message: quoted and escaped, and cut to `limit` characters."""
    if text is None:
        return "None"
    return ascii(text[:limit]) + ("..." if len(text) > limit else "")


@functools.cache  # the class, made on the first URL read (urllib is imported then)
def _redirect_handler() -> type[urllib.request.HTTPRedirectHandler]:
    import http.client
    import urllib.request
    from http.client import HTTPMessage
    from urllib.parse import urljoin
    from urllib.request import Request

    class SafeRedirects(urllib.request.HTTPRedirectHandler):
        """urllib's redirects (Range kept), but only to http(s), and headers kept in check.

        urllib's own handler re-sends every header to wherever it is redirected (the Hub
        redirects to a CDN, which must not receive the Hub token), follows ``ftp://`` too,
        and lets a malformed Location out as a bare ValueError.
        """

        def redirect_request(  # noqa: PLR0917 - urllib's signature
            self,
            req: Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: HTTPMessage,
            newurl: str,
        ) -> Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None and _origin(new.full_url) != _origin(req.full_url):
                for name in list(new.headers):
                    if name.lower() not in SAFE_ACROSS_ORIGINS | _RANGE_HEADERS:
                        new.remove_header(name)
            return new

        def http_error_302(
            self, req: Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage
        ) -> IO[bytes] | None:
            location = headers.get("Location") or headers.get("URI")
            if location is not None:
                problem = None
                try:
                    target = urljoin(req.full_url, location)
                    scheme = urlsplit(target).scheme.lower()
                    _ = urlsplit(target).port  # a bad port is a ValueError here
                except ValueError:
                    problem = f"a malformed URL ({_quoted(location)})"
                else:
                    if scheme not in ("http", "https"):
                        problem = f"a {_quoted(scheme)} URL: only http and https are followed"
                if problem is not None:
                    fp.close()
                    raise RemoteError(
                        f"{redact(req.full_url)} answered {code} with a redirect to {problem}",
                        url=redact(req.full_url),
                        status=code,
                    )
            # urllib reads a redirect's body whole before it follows it (a server may stream
            # one without end): made empty here, it is left unread when the connection closes.
            if isinstance(fp, http.client.HTTPResponse):
                fp.chunked, fp.length = False, 0
            return super().http_error_302(req, fp, code, msg, headers)

        http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    return SafeRedirects


@functools.cache  # the classes, made on the first URL read (http.client is imported then)
def _timed_handlers() -> tuple[
    Callable[[Clock], urllib.request.BaseHandler],
    Callable[[Clock], urllib.request.BaseHandler] | None,
]:
    """urllib's HTTP(S) handlers, with connections whose every wait is bounded by a `Clock`."""
    import http.client
    import urllib.request

    class TimedReader(io.RawIOBase):
        """The socket's reader, the socket's timeout set to the time left before each read."""

        def __init__(self, raw: io.RawIOBase, sock: socket.socket, clock: Clock) -> None:
            super().__init__()
            self.raw, self.sock, self.clock = raw, sock, clock

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int | None:  # type: ignore[override]
            left = self.clock.left()
            if left != self.sock.gettimeout():  # (unchanged when the call has no bound)
                self.sock.settimeout(left)
            return self.raw.readinto(buffer)

        def close(self) -> None:
            self.raw.close()
            super().close()

    class TimedResponse(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: object, clock: Clock, **kwargs: object):
            super().__init__(sock, *args, **kwargs)  # type: ignore[arg-type]
            raw = self.fp.detach()  # nothing is read yet: no buffered byte is lost
            self.fp = io.BufferedReader(TimedReader(raw, sock, clock))

    def timed(base: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        class TimedConnection(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: object, clock: Clock, **kwargs: object) -> None:
                super().__init__(*args, **kwargs)
                self.clock = clock
                self.response_class = functools.partial(TimedResponse, clock=clock)

            def connect(self) -> None:
                self.timeout = self.clock.left()  # the TCP connect and the TLS handshake
                super().connect()

            def send(self, data: object) -> None:
                if self.sock is None:
                    self.connect()
                self.sock.settimeout(self.clock.left())
                super().send(data)

        return TimedConnection

    class Clocked:
        """A handler made for one call's clock."""

        def __init__(self, clock: Clock) -> None:
            super().__init__()
            self.clock = clock

    http_connection = timed(http.client.HTTPConnection)

    class TimedHTTPHandler(Clocked, urllib.request.HTTPHandler):
        connection = http_connection

        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(functools.partial(http_connection, clock=self.clock), req)

    if not hasattr(urllib.request, "HTTPSHandler"):  # Python built without ssl
        return TimedHTTPHandler, None
    https_connection = timed(http.client.HTTPSConnection)

    class TimedHTTPSHandler(Clocked, urllib.request.HTTPSHandler):
        connection = https_connection

        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            options: dict[str, object] = {"context": self._context}  # type: ignore[attr-defined]
            if hasattr(self, "_check_hostname"):  # Python < 3.12 passes it on
                options["check_hostname"] = self._check_hostname
            return self.do_open(
                functools.partial(https_connection, clock=self.clock), req, **options
            )

    return TimedHTTPHandler, TimedHTTPSHandler


@functools.cache  # made on the first kept-alive request (http.client is imported then)
def _timed_connections() -> dict[str, Callable[..., http.client.HTTPConnection]]:
    """The timed connection classes of `_timed_handlers`, by scheme, for `_Pool`."""
    http_handler, https_handler = _timed_handlers()
    found: dict[str, Callable[..., http.client.HTTPConnection]] = {
        "http": http_handler.connection  # type: ignore[attr-defined]
    }
    if https_handler is not None:
        found["https"] = https_handler.connection  # type: ignore[attr-defined]
    return found


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port): where credentials may go. An unreadable URL matches nothing."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", url, None


def _cause(error: BaseException) -> BaseException:
    """The network error inside a urllib URLError (its `reason`), else the error itself."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        return reason
    return error


def _transient(error: BaseException) -> bool:
    """Whether the same request may well succeed if sent again."""
    import http.client
    import urllib.error

    if isinstance(error, ValueError):  # ssl's certificate errors are ValueErrors too
        return False
    if isinstance(error, urllib.error.URLError):  # a reason that is text: "no host given", ...
        return False
    if isinstance(error, OSError):  # refused, reset, timed out, closed mid-body, DNS
        return True
    return isinstance(error, (http.client.IncompleteRead, http.client.BadStatusLine))


def _failure_reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    if not isinstance(reason, str):
        reason = str(error) or type(error).__name__
    # Escaped: http.client quotes what the server sent (a bad status line, say) in its errors.
    return _plain(reason, 200)
