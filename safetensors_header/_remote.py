"""Headers over HTTP(S): one ranged request for a typical header, one more for a big one.

With F the first read (``first_read``) and ``8 + N`` the bytes the header occupies:

1. ``GET`` with ``Range: bytes=0-(F-1)`` (inclusive: F bytes). A ``206`` must carry a
   ``Content-Range`` that matches the request (first byte, last byte, body length); its total
   is the file size, which the coverage rule needs. `bytes_needed` then says where the header
   ends, or gives the verdict on the length prefix (limit, file size) before anything more is
   asked for.
2. Only when the header ends past F: ``Range: bytes=F-(8+N-1)``, the missing remainder and
   nothing else, sent straight to the URL the first request was redirected to (with
   ``If-Range`` when the first reply had a strong ETag, so that a file replaced in between is
   noticed). (With F under 64 and a bad length prefix, the remainder is the bytes up to 64 that
   let the error say what the file is.)

`parse_header` is then called once, on the bytes fetched. A server that ignores Range (``200``
and the whole body) is not downloaded: the body is read as far as `bytes_needed` asks (8
bytes, then exactly N more) and the connection is closed; the size is its Content-Length.
A ``416`` for the first read (an empty file) is answered from its ``Content-Range: bytes */L``.

`read_url_ranges` fetches byte ranges with the same client: the first request alone (it
follows redirects and learns the file's size and ETag), the others in parallel, straight to
the final URL with ``If-Range``. A server that ignores Range is read once, from byte 0 as far
as the last range ends, and every range is cut from that one body.

``timeout`` bounds a whole call: every connect and every socket read (each line of a status
or header block, each piece of a body) waits at most what is left of it, so a server that
trickles a byte at a time, or answers ``100 Continue`` without end, is cut off when the time
is up. Each call builds its own opener and keeps its state in locals: calls from many threads
share nothing mutable. No format rule lives here: `bytes_needed` and `parse_header` judge
every byte.
"""

from __future__ import annotations

import functools
import io
import random
import re
import socket
import threading
import time
from urllib.parse import urlsplit, urlunsplit

from ._errors import RemoteError
from ._format import HEADER_LENGTH_SIZE, bytes_needed
from ._parser import parse_header
from ._sources import TIMEOUT

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    import urllib.request
    from collections.abc import Callable, Mapping, Sequence
    from typing import IO, Final, TypeVar

    from ._header import Header

    _Result = TypeVar("_Result")

# urllib.request, http.client, ssl and email take as long to import as the rest of the package,
# and most callers never read a URL: they are imported on the first URL read.

__all__ = ["fetch_document", "read_url", "read_url_ranges", "redact"]

_BACKOFF: Final = 0.25  # seconds before the first retry, doubled for each further one
# The most bytes asked of one response.read(): http.client allocates read(n) in full
# before any byte arrives.
_BODY_READ_SIZE: Final = 1 << 20
# The caller's headers that may go on to another origin (scheme, host, port) than the URL
# given; every other one (Authorization, Cookie, Proxy-Authorization, X-Api-Key, a signed
# token...) goes only to that origin, never on to a CDN or mirror it redirects to.
SAFE_ACROSS_ORIGINS: Final = frozenset({"accept", "accept-language", "user-agent"})
_RANGE_HEADERS: Final = frozenset({"range", "if-range"})  # always ours
# A byte count: decimal digits, ASCII only (str.isdigit() is true for "²", which int()
# refuses), and at most 19 of them (a u64 has 20; int() refuses over 4,300 digits).
_NUMBER: Final = "[0-9]{1,19}"
_LENGTH: Final = re.compile(_NUMBER)
# Range units are case-insensitive (RFC 9110, section 14.1).
_CONTENT_RANGE: Final = re.compile(
    rf"bytes[ \t]+({_NUMBER})-({_NUMBER})/({_NUMBER}|\*)", re.ASCII | re.IGNORECASE
)
_UNSATISFIED: Final = re.compile(rf"bytes[ \t]+\*/({_NUMBER})", re.ASCII | re.IGNORECASE)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
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

# Waits between attempts; tests replace it to run without sleeping.
_sleep: Callable[[float], None] = time.sleep


def read_url(
    url: str,
    /,
    *,
    max_header_size: int,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    first_read: int,
    retries: int,
) -> Header:
    """Read and validate the header of the safetensors file at an ``http(s)://`` URL.

    See `read_header` for the options. At most two requests (each retried on its own): one
    when ``8 + N <= first_read``, and one more for exactly the missing ``8 + N - first_read``
    bytes otherwise, so no more than ``first_read + N`` bytes are asked for. `bytes_needed`
    says how many bytes that is (and judges the length prefix first); `parse_header` is
    called once, on them.
    """
    if first_read < HEADER_LENGTH_SIZE:
        raise ValueError(
            f"first_read must be at least 8 bytes (the header length), not {first_read}"
        )
    client = _Client(url, headers, _Clock(timeout), retries, max_header_size)
    first = client.get(0, first_read)
    data, size = first.data, first.size
    need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    # A 200 was read as far as the header needs, and a 206 short of first_read bytes was the
    # whole file: either way there is nothing more to ask for, and `parse_header` judges it.
    if need > len(data) and not first.whole and len(data) == first_read:
        rest = client.get(len(data), need, if_range=first.etag)
        if rest.whole:  # the file changed (If-Range), or Range stopped being honoured
            data, size = rest.data, rest.size  # read from 0 as far as its header needs
        else:
            client.same_size(size, rest.size)
            data += rest.data
    return parse_header(data, file_size=size, max_header_size=max_header_size)


def read_url_ranges(
    url: str,
    spans: Sequence[tuple[int, int]],
    /,
    *,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    retries: int,
    max_workers: int,
) -> tuple[list[bytes], int | None]:
    """The bytes of each ``[start, stop)`` span (non-empty), and the file's size if known.

    A span is cut short only where the file ends. The first span is asked for first: once
    its reply's headers are in (redirects followed, the size and ETag known), the others go
    in parallel on at most `max_workers` threads, to the final URL, with ``If-Range``: a file
    replaced in between is a `RemoteError`, not a mix of two files. A server that ignores
    Range is read once, from byte 0 as far as the last span ends, and every span is cut from
    that body.
    """
    client = _Client(url, headers, _Clock(timeout), retries, 0)
    end = max(stop for _, stop in spans)
    learned: list[tuple[int | None, str | None]] = []  # (size, ETag) of the first 206
    ready = threading.Event()

    def seen(size: int | None, etag: str | None) -> None:
        # A retry of the first request (after its body broke) may find another file: the
        # others may already have been answered from the one it saw the first time.
        if learned and learned[0] != (size, etag):
            raise RemoteError(
                f"the file at {client.shown} changed between two requests: size and ETag "
                f"were {learned[0]} and are now {(size, etag)}",
                url=client.shown,
            )
        learned.append((size, etag))
        ready.set()

    def refuse(response: http.client.HTTPResponse, size: int | None) -> bytes:
        raise RemoteError(
            f"{client.where()} answered a ranged request with the whole file (200): it was "
            "replaced since the first request (If-Range), or stopped honouring Range",
            url=client.shown,
        )

    def first() -> _Reply:
        return client.get(
            *spans[0], whole=lambda response, size: _read(response, end, size), seen=seen
        )

    def fetch(span: tuple[int, int]) -> bytes:
        size, etag = learned[0]
        if size is not None and span[0] >= size:
            return b""  # past the end the first reply gave: nothing to ask for
        reply = client.get(*span, if_range=etag, whole=refuse)
        client.same_size(size, reply.size)
        if etag is not None and reply.etag is not None and reply.etag != etag:
            # A server that ignores If-Range answers 206 from the new file.
            raise RemoteError(
                f"the file at {client.shown} changed between two requests: its ETag was "
                f"{etag} and is now {reply.etag}",
                url=client.shown,
            )
        return reply.data

    if len(spans) == 1 or max_workers <= 1:
        reply = first()
        if reply.whole or not learned:  # a 200; or a 416: every span starts past the end
            return [reply.data[start:stop] for start, stop in spans], reply.size
        return [reply.data, *map(fetch, spans[1:])], reply.size
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=min(max_workers, len(spans)))
    try:
        # The others start as soon as the first reply's headers are checked (redirects
        # followed, the size and ETag known), while its body is still coming.
        leading = pool.submit(first)
        leading.add_done_callback(lambda _: ready.set())  # a 200, or a failure
        ready.wait()
        if not learned:  # done without a 206: the whole file, or an error (raised here)
            reply = leading.result()
            return [reply.data[start:stop] for start, stop in spans], reply.size
        others = [pool.submit(fetch, span) for span in spans[1:]]
        lead = leading.result()
        if lead.whole:  # its retry, sent without If-Range, got a 200: maybe another file
            raise RemoteError(
                f"{client.where()} answered the retry of a ranged request with the whole file "
                "(200), after answering it with 206",
                url=client.shown,
            )
        pieces = [lead.data, *(future.result() for future in others)]
    finally:
        pool.shutdown(cancel_futures=True)  # after a failure, the requests not yet sent
    return pieces, learned[0][0]


def fetch_document(
    url: str,
    /,
    *,
    limit: int,
    headers: Mapping[str, str] | None,
    timeout: float | None,
    retries: int,
) -> bytes:
    """The body at `url` (a JSON index, say), read to at most ``limit + 1`` bytes.

    More than `limit` bytes means the document is larger: the caller decides what that is.

    The same client as `read_url`: redirects without credentials to other origins, bounded
    retries and time, `RemoteError` for HTTP and network failures.
    """
    return _Client(url, headers, _Clock(timeout), retries, limit).document(limit)


def check_options(*, timeout: float | None, retries: int) -> None:
    """ValueError for options out of range (before any request is sent)."""
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout}")
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, not {retries}")


class _Clock:
    """The deadline of one call: what every connect, socket read and retry may still wait."""

    __slots__ = ("deadline", "timeout")

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float:
        """Seconds the next wait may take; TimeoutError when the call's time is up."""
        if self.deadline is None:
            return TIMEOUT  # no bound on the call: each wait still ends after a stall
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the call's timeout of {self.timeout:g} s is up")
        return left

    def allows(self, delay: float) -> bool:
        """Whether there is time for a wait of `delay` seconds and another attempt."""
        return self.deadline is None or time.monotonic() + delay < self.deadline

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline


class _Reply:
    """What one request brought back. (A plain class: a dataclass costs import time.)"""

    __slots__ = ("data", "etag", "size", "whole")

    def __init__(
        self, data: bytes, size: int | None, *, whole: bool, etag: str | None = None
    ) -> None:
        self.data = data  # from file offset `start` of the request, or from 0 when `whole`
        self.size = size  # the file's size, when the server said
        self.whole = whole  # a 200: data is the file's start, as far as the caller asked
        self.etag = etag  # a strong validator, for If-Range


class _Client:
    """The requests of one call. Never shared between calls: every call makes its own."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None,
        clock: _Clock,
        retries: int,
        limit: int,
    ) -> None:
        import urllib.request

        check_options(timeout=clock.timeout, retries=retries)
        self.origin = _origin(url)
        self.given = url
        self.url = url  # where the next request goes: after one, its final URL
        self.shown = redact(url)
        self.headers = {
            name: value
            for name, value in (headers or {}).items()
            if name.lower() not in _RANGE_HEADERS
        }
        self.clock = clock
        self.retries = retries
        self.limit = limit
        http_handler, https_handler = _timed_handlers()
        handlers = [_redirect_handler()(), http_handler(clock)]
        if https_handler is not None:
            handlers.append(https_handler(clock))
        self.opener = urllib.request.build_opener(*handlers)  # one per call

    def get(
        self,
        start: int,
        stop: int,
        *,
        if_range: str | None = None,
        whole: Callable[[http.client.HTTPResponse, int | None], bytes] | None = None,
        seen: Callable[[int | None, str | None], None] | None = None,
    ) -> _Reply:
        """Bytes ``[start, stop)``, retried on transient failures.

        A server that ignores Range answers 200 with the whole file: `whole` reads what the
        caller wants of it (from byte 0), by default as far as the header needs. `seen` is
        told the size and ETag of a 206 once its headers are checked, before its body.
        """
        return self._retried(
            lambda: self._attempt(start, stop, if_range, whole or self._header, seen)
        )

    def document(self, limit: int) -> bytes:
        """A whole (small) document, such as an index JSON, read to ``limit + 1`` bytes."""
        return self._retried(lambda: self._whole_document(limit))

    def same_size(self, size: int | None, now: int | None) -> None:
        """RemoteError when two replies disagree on the file's size: it changed in between."""
        if now != size:
            raise RemoteError(
                f"the file at {self.shown} changed between two requests: its size was "
                f"{size} and is now {now}",
                url=self.shown,
            )

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
            url = self.url  # read once: other threads' redirects rewrite it
            response = self._open(url, self._headers_here(url))
        except urllib.error.HTTPError as error:
            with error:
                raise self._status_error(error.code, error.geturl() or self.url) from None
        with response:
            self.url = response.geturl() or self.url
            # One byte past the limit says the document is larger; the caller says so.
            return _read(response, limit + 1, self._content_length(response))

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
        stop: int | None,
        if_range: str | None,
        whole: Callable[[http.client.HTTPResponse, int | None], bytes],
        seen: Callable[[int | None, str | None], None] | None = None,
    ) -> _Reply:
        import urllib.error

        url = self.url  # read once: other threads' redirects rewrite it
        headers = self._headers_here(url)
        if stop is not None:
            headers["Range"] = f"bytes={start}-{stop - 1}"  # inclusive: stop - start bytes
            if if_range is not None:
                headers["If-Range"] = if_range
        try:
            response = self._open(url, headers)
        except urllib.error.HTTPError as error:
            with error:
                location = error.geturl() or url
                if error.code == 416 and stop is not None:
                    reply = self._unsatisfiable(start, error.headers.get("Content-Range"), whole)
                    if reply is not None:
                        return reply
                raise self._status_error(error.code, location) from None
        with response:
            self.url = response.geturl() or self.url
            encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise RemoteError(
                    f"{self.where()} sent the body with Content-Encoding {_plain(encoding)}: "
                    "its bytes are not the file's (do not pass an Accept-Encoding header)",
                    url=self.shown,
                )
            if response.status == 206 and stop is not None:
                return self._partial(response, start, stop, seen)
            if response.status == 200:
                # Returning closes the response (`with`): the rest is never downloaded.
                size = self._content_length(response)
                return _Reply(whole(response, size), size, whole=True)
            raise RemoteError(
                f"{self.where()} answered HTTP {response.status} {_plain(response.reason)} to "
                f"a GET with {headers.get('Range', 'no Range')}",
                url=self.shown,
                status=response.status,
            )

    def _partial(
        self,
        response: http.client.HTTPResponse,
        start: int,
        stop: int,
        seen: Callable[[int | None, str | None], None] | None,
    ) -> _Reply:
        """A 206: check that Content-Range is the range asked for, then read its body."""
        value = response.headers.get("Content-Range")
        match = _CONTENT_RANGE.fullmatch(value.strip()) if value else None
        if match is None:
            raise RemoteError(
                f"{self.where()} answered 206 without a usable Content-Range ({_shown(value)})",
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
                f"{_shown(value)}; expected bytes {start}-{expected}/"
                f"{'*' if size is None else size}",
                url=self.shown,
            )
        count = last - first + 1
        length = self._content_length(response)
        if length is not None and length != count:
            raise RemoteError(
                f"{self.where()} sent Content-Length {length} with Content-Range "
                f"{_shown(value)} ({count} bytes)",
                url=self.shown,
            )
        etag = response.headers.get("ETag")
        if etag is not None and etag.startswith("W/"):
            etag = None  # If-Range needs a strong validator
        if seen is not None:
            seen(size, etag)
        return _Reply(_read(response, count, count), size, whole=False, etag=etag)

    def _header(self, response: http.client.HTTPResponse, size: int | None) -> bytes:
        """A 200 for a header read: the body as far as `bytes_needed` asks, then stop.

        That is the 8 bytes of the length prefix, then exactly N more (or, for a bad prefix,
        the bytes up to 64 that let its error say what the file is, then the error).
        """
        data = b""
        need = bytes_needed(data, file_size=size, max_header_size=self.limit)
        while len(data) < need:
            # A body shorter than its Content-Length is a broken connection (`_read` says so).
            data += _read(response, need - len(data), None if size is None else size - len(data))
            if len(data) < need:
                break  # the body ended, and had no length: `parse_header` judges it as it is
            need = bytes_needed(data, file_size=size, max_header_size=self.limit)
        return data

    def _unsatisfiable(
        self,
        start: int,
        content_range: str | None,
        whole: Callable[[http.client.HTTPResponse, int | None], bytes],
    ) -> _Reply | None:
        """A 416: the range starts at or past the end of the file (None: a bare 416)."""
        match = _UNSATISFIED.fullmatch(content_range.strip()) if content_range else None
        if match is not None and int(match[1]) <= start:
            # Nothing there: an empty piece, and the file's size (for bytes from 0 of an empty
            # file, parse_header(b"", file_size=L) then gives HeaderTooSmall).
            return _Reply(b"", int(match[1]), whole=start == 0)
        if start == 0:
            # A 416 for bytes from 0 of a file that has them: the server cannot range at all.
            return self._attempt(0, None, None, whole)  # ask without Range (read as a 200)
        return None

    def _status_error(self, status: int, location: str) -> RemoteError:
        import http

        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "(an unknown status)"
        where = self.shown
        if location != self.given:
            where += f" (redirected to {redact(location)})"
        hint = _HINTS.get(status)
        message = f"HTTP {status} {phrase} for {where}" + (f": {hint}" if hint else "")
        return RemoteError(message, url=self.shown, status=status)

    def _content_length(self, response: http.client.HTTPResponse) -> int | None:
        """The Content-Length: None when absent, RemoteError unless a plain byte count."""
        value = response.headers.get("Content-Length")
        if value is None:
            return None
        if _LENGTH.fullmatch(value.strip()) is None:
            raise RemoteError(
                f"{self.where()} sent an unusable Content-Length ({_shown(value)}): not a "
                "decimal byte count of at most 19 digits",
                url=self.shown,
            )
        return int(value)

    def where(self) -> str:
        if self.url == self.given:
            return self.shown
        return f"{self.shown} (redirected to {redact(self.url)})"


def _read(response: http.client.HTTPResponse, count: int, available: int | None) -> bytes:
    """`count` bytes of the body, in bounded chunks.

    Fewer are returned only at the end of a body of unknown length (``available`` is None);
    a body that ends before ``min(count, available)`` bytes is a broken connection.
    """
    chunks: list[bytes] = []
    remaining = count
    while remaining > 0:
        try:
            chunk = response.read(min(remaining, _BODY_READ_SIZE))
        except (ValueError, OverflowError) as error:  # a chunked body http.client cannot read
            raise ConnectionError(
                f"the body could not be read: {_plain(str(error), 200)}"
            ) from error
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    data = b"".join(chunks)
    if available is not None and len(data) < min(count, available):
        raise ConnectionError(
            f"the connection closed after {len(data):,} of {min(count, available):,} bytes"
        )
    return data


def _plain(text: str, limit: int = 100) -> str:
    """Text from a server, for a message: as it is if printable ASCII, else escaped."""
    text = text[:limit]
    return text if text.isascii() and text.isprintable() else ascii(text)[1:-1]


def _shown(text: str | None, limit: int = 100) -> str:
    """Text from a server, for a message: quoted and escaped, and cut to `limit` characters."""
    if text is None:
        return "None"
    return ascii(text[:limit]) + ("..." if len(text) > limit else "")


@functools.cache  # the class, made on the first URL read (urllib is imported then)
def _redirect_handler() -> type[urllib.request.HTTPRedirectHandler]:
    import urllib.request
    from urllib.parse import urljoin

    class SafeRedirects(urllib.request.HTTPRedirectHandler):
        """urllib's redirects (Range kept), but only to http(s), and headers kept in check.

        urllib's own handler re-sends every header to wherever it is redirected (the Hub
        redirects to a CDN, which must not receive the Hub token), follows ``ftp://`` too,
        and lets a malformed Location out as a bare ValueError.
        """

        def redirect_request(  # noqa: PLR0917 - urllib's signature
            self,
            req: urllib.request.Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: http.client.HTTPMessage,
            newurl: str,
        ) -> urllib.request.Request | None:
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None and _origin(new.full_url) != _origin(req.full_url):
                for name in list(new.headers):
                    if name.lower() not in SAFE_ACROSS_ORIGINS | _RANGE_HEADERS:
                        new.remove_header(name)
            return new

        def http_error_302(
            self,
            req: urllib.request.Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: http.client.HTTPMessage,
        ) -> IO[bytes] | None:
            location = headers.get("Location") or headers.get("URI")
            if location is not None:
                problem = None
                try:
                    target = urljoin(req.full_url, location)
                    scheme = urlsplit(target).scheme.lower()
                    _ = urlsplit(target).port  # a bad port is a ValueError here
                except ValueError:
                    problem = f"a malformed URL ({_shown(location)})"
                else:
                    if scheme not in ("http", "https"):
                        problem = f"a {_shown(scheme)} URL: only http and https are followed"
                if problem is not None:
                    fp.close()
                    raise RemoteError(
                        f"{redact(req.full_url)} answered {code} with a redirect to {problem}",
                        url=redact(req.full_url),
                        status=code,
                    )
            return super().http_error_302(req, fp, code, msg, headers)

        http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302

    return SafeRedirects


@functools.cache  # the classes, made on the first URL read (http.client is imported then)
def _timed_handlers() -> tuple[
    Callable[[_Clock], urllib.request.BaseHandler],
    Callable[[_Clock], urllib.request.BaseHandler] | None,
]:
    """urllib's HTTP(S) handlers, with connections whose every wait is bounded by a `_Clock`."""
    import http.client
    import urllib.request

    class TimedReader(io.RawIOBase):
        """The socket's reader, the socket's timeout set to the time left before each read."""

        def __init__(self, raw: io.RawIOBase, sock: socket.socket, clock: _Clock) -> None:
            super().__init__()
            self.raw, self.sock, self.clock = raw, sock, clock

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: memoryview) -> int | None:  # type: ignore[override]
            self.sock.settimeout(self.clock.left())
            return self.raw.readinto(buffer)

        def close(self) -> None:
            self.raw.close()
            super().close()

    class TimedResponse(http.client.HTTPResponse):
        def __init__(self, sock: socket.socket, *args: object, clock: _Clock, **kwargs: object):
            super().__init__(sock, *args, **kwargs)  # type: ignore[arg-type]
            raw = self.fp.detach()  # nothing is read yet: no buffered byte is lost
            self.fp = io.BufferedReader(TimedReader(raw, sock, clock))

    def timed(base: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        class TimedConnection(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: object, clock: _Clock, **kwargs: object) -> None:
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

    http_connection = timed(http.client.HTTPConnection)

    class TimedHTTPHandler(urllib.request.HTTPHandler):
        def __init__(self, clock: _Clock) -> None:
            super().__init__()
            self.clock = clock

        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(functools.partial(http_connection, clock=self.clock), req)

    if not hasattr(urllib.request, "HTTPSHandler"):  # Python built without ssl
        return TimedHTTPHandler, None
    https_connection = timed(http.client.HTTPSConnection)

    class TimedHTTPSHandler(urllib.request.HTTPSHandler):
        def __init__(self, clock: _Clock) -> None:
            super().__init__()
            self.clock = clock

        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            options: dict[str, object] = {"context": self._context}  # type: ignore[attr-defined]
            if hasattr(self, "_check_hostname"):  # Python < 3.12 passes it on
                options["check_hostname"] = self._check_hostname
            return self.do_open(
                functools.partial(https_connection, clock=self.clock), req, **options
            )

    return TimedHTTPHandler, TimedHTTPSHandler


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port): where credentials may go. An unreadable URL matches nothing."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", url, None


def redact(url: str) -> str:
    """The URL without user info or query (signed links carry credentials there)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<an unreadable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "<redacted>@" + netloc.rpartition("@")[2]
    query = "<redacted>" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


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
