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

Each call builds its own opener and keeps its state in locals: calls from many threads share
nothing mutable. No format rule lives here: `bytes_needed` and `parse_header` judge every byte.
"""

from __future__ import annotations

import functools
import random
import re
import time
from urllib.parse import urlsplit, urlunsplit

from ._errors import RemoteError
from ._format import HEADER_LENGTH_SIZE, bytes_needed
from ._parser import parse_header

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    import urllib.request
    from collections.abc import Callable, Mapping
    from typing import IO, Final, TypeVar

    from ._header import Header

    _Result = TypeVar("_Result")

# urllib.request, http.client, ssl and email take as long to import as the rest of the package,
# and most callers never read a URL: they are imported on the first URL read (hence the
# `noqa: PLC0415` on the imports inside functions below).

__all__ = ["fetch_document", "read_url", "redact"]

_BACKOFF: Final = 0.25  # seconds before the first retry, doubled for each further one
# The most bytes asked of one response.read(): http.client allocates read(n) in full
# before any byte arrives.
_BODY_READ_SIZE: Final = 1 << 20
# Sent only to the origin (scheme, host, port) of the URL given: never on to a CDN or mirror.
_CREDENTIALS: Final = frozenset({"authorization", "cookie"})
_RANGE_HEADERS: Final = frozenset({"range", "if-range"})  # always ours
# Range units are case-insensitive (RFC 9110, section 14.1).
_CONTENT_RANGE: Final = re.compile(r"bytes[ \t]+(\d+)-(\d+)/(\d+|\*)", re.ASCII | re.IGNORECASE)
_UNSATISFIED: Final = re.compile(r"bytes[ \t]+\*/(\d+)", re.ASCII | re.IGNORECASE)
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
    timeout: float,
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
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout}")
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, not {retries}")
    client = _Client(url, headers or {}, timeout, retries, max_header_size)
    first = client.get(0, first_read)
    data, size = first.data, first.size
    need = bytes_needed(data, file_size=size, max_header_size=max_header_size)
    # A 200 was read as far as the header needs, and a 206 short of first_read bytes was the
    # whole file: either way there is nothing more to ask for, and `parse_header` judges it.
    if need > len(data) and not first.whole and len(data) == first_read:
        rest = client.get(len(data), need, if_range=first.etag)
        if rest.whole:  # the file changed (If-Range), or Range stopped being honoured
            data, size = rest.data, rest.size  # read from 0 as far as its header needs
        elif rest.size != size:
            raise RemoteError(
                f"the file at {client.shown} changed between two requests: its size was "
                f"{size} and is now {rest.size}",
                url=client.shown,
            )
        else:
            data += rest.data
    return parse_header(data, file_size=size, max_header_size=max_header_size)


def fetch_document(
    url: str, /, *, limit: int, headers: Mapping[str, str] | None, timeout: float, retries: int
) -> bytes:
    """The whole body at `url` (a JSON index, say): at most `limit` bytes, else RemoteError.

    The same client as `read_url`: redirects without credentials to other origins, bounded
    retries, `RemoteError` for HTTP and network failures.
    """
    return _Client(url, headers or {}, timeout, retries, limit).document(limit)


class _Reply:
    """What one request brought back. (A plain class: a dataclass costs import time.)"""

    __slots__ = ("data", "etag", "size", "whole")

    def __init__(
        self, data: bytes, size: int | None, *, whole: bool, etag: str | None = None
    ) -> None:
        self.data = data  # from file offset `start` of the request, or from 0 when `whole`
        self.size = size  # the file's size, when the server said
        self.whole = whole  # a 200: data is the file's start, read as far as the header needs
        self.etag = etag  # a strong validator, for If-Range


class _Client:
    """The requests of one call. Never shared: every call makes its own."""

    def __init__(
        self, url: str, headers: Mapping[str, str], timeout: float, retries: int, limit: int
    ) -> None:
        import urllib.request

        self.origin = _origin(url)
        self.given = url
        self.url = url  # where the next request goes: after one, its final URL
        self.shown = redact(url)
        self.headers = {k: v for k, v in headers.items() if k.lower() not in _RANGE_HEADERS}
        self.timeout = timeout
        self.retries = retries
        self.limit = limit
        self.opener = urllib.request.build_opener(_redirect_handler())  # one per call

    def get(self, start: int, stop: int, *, if_range: str | None = None) -> _Reply:
        """Bytes ``[start, stop)`` (or a whole-body reply), retried on transient failures."""
        return self._retried(lambda: self._attempt(start, stop, if_range))

    def document(self, limit: int) -> bytes:
        """A whole (small) document, such as an index JSON, of at most `limit` bytes."""
        return self._retried(lambda: self._whole_document(limit))

    def _whole_document(self, limit: int) -> bytes:
        import urllib.error
        import urllib.request

        headers = self._headers_here()
        request = urllib.request.Request(self.url, headers=headers)
        try:
            response: http.client.HTTPResponse = self.opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as error:
            with error:
                raise self._status_error(error.code, error.geturl() or self.url) from None
        with response:
            self.url = response.geturl() or self.url
            data = _read(response, limit + 1, _content_length(response))
        if len(data) > limit:
            raise RemoteError(f"{self._where()} is larger than {limit:,} bytes", url=self.shown)
        return data

    def _headers_here(self) -> dict[str, str]:
        """The caller's headers for a request to `self.url`: credentials only to the origin."""
        if _origin(self.url) == self.origin:
            return dict(self.headers)
        return {k: v for k, v in self.headers.items() if k.lower() not in _CREDENTIALS}

    def _retried(self, attempt_once: Callable[[], _Result]) -> _Result:
        import http.client

        attempts = self.retries + 1
        for attempt in range(attempts):
            if attempt:
                delay = _BACKOFF * 2 ** (attempt - 1)
                _sleep(delay * (0.5 + random.random() / 2))  # jitter: clients retry apart
            try:
                return attempt_once()
            except RemoteError as error:
                status = error.status
                if status is None or status < 500 or status in _PERMANENT_5XX:
                    raise
                failure: BaseException = error
            except (OSError, http.client.HTTPException) as error:
                cause = _cause(error)
                if not _transient(cause):
                    raise RemoteError(
                        f"could not read {self.shown}: {_failure_reason(cause)}", url=self.shown
                    ) from cause
                failure = cause
        tries = f"{attempts} attempts" if attempts > 1 else "1 attempt, no retries"
        if isinstance(failure, RemoteError):
            raise RemoteError(
                f"{failure} ({tries})", url=self.shown, status=failure.status
            ) from None
        raise RemoteError(
            f"could not read {self.shown}: {_failure_reason(failure)} ({tries})", url=self.shown
        ) from failure

    def _attempt(self, start: int, stop: int | None, if_range: str | None) -> _Reply:
        import urllib.error
        import urllib.request

        headers = self._headers_here()
        if stop is not None:
            headers["Range"] = f"bytes={start}-{stop - 1}"  # inclusive: stop - start bytes
            if if_range is not None:
                headers["If-Range"] = if_range
        request = urllib.request.Request(self.url, headers=headers)
        try:
            response: http.client.HTTPResponse = self.opener.open(request, timeout=self.timeout)
        except urllib.error.HTTPError as error:
            with error:
                location = error.geturl() or self.url
                if error.code == 416 and start == 0 and stop is not None:
                    return self._unsatisfiable(error.headers.get("Content-Range"))
                raise self._status_error(error.code, location) from None
        with response:
            self.url = response.geturl() or self.url
            encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise RemoteError(
                    f"{self._where()} sent the body with Content-Encoding {encoding}: its bytes "
                    "are not the file's (do not pass an Accept-Encoding header)",
                    url=self.shown,
                )
            if response.status == 206 and stop is not None:
                return self._partial(response, start, stop)
            if response.status == 200:
                return self._whole(response)
            raise RemoteError(
                f"{self._where()} answered HTTP {response.status} {response.reason} to a GET "
                f"with {headers.get('Range', 'no Range')}",
                url=self.shown,
                status=response.status,
            )

    def _partial(self, response: http.client.HTTPResponse, start: int, stop: int) -> _Reply:
        """A 206: check that Content-Range is the range asked for, then read its body."""
        value = response.headers.get("Content-Range")
        match = _CONTENT_RANGE.fullmatch(value.strip()) if value else None
        if match is None:
            raise RemoteError(
                f"{self._where()} answered 206 without a usable Content-Range ({value!r})",
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
                f"{self._where()} answered Range bytes={start}-{stop - 1} with Content-Range "
                f"{value!r}; expected bytes {start}-{expected}/{'*' if size is None else size}",
                url=self.shown,
            )
        count = last - first + 1
        length = _content_length(response)
        if length is not None and length != count:
            raise RemoteError(
                f"{self._where()} sent Content-Length {length} with Content-Range {value!r} "
                f"({count} bytes)",
                url=self.shown,
            )
        data = _read(response, count, count)
        etag = response.headers.get("ETag")
        strong = etag is not None and not etag.startswith("W/")  # If-Range needs a strong one
        return _Reply(data, size, whole=False, etag=etag if strong else None)

    def _whole(self, response: http.client.HTTPResponse) -> _Reply:
        """A 200 (Range ignored): the body as far as `bytes_needed` asks, then stop.

        That is the 8 bytes of the length prefix, then exactly N more (or, for a bad prefix,
        the bytes up to 64 that let its error say what the file is, then the error).
        """
        size = _content_length(response)
        data = b""
        need = bytes_needed(data, file_size=size, max_header_size=self.limit)
        while len(data) < need:
            # A body shorter than its Content-Length is a broken connection (`_read` says so).
            data += _read(response, need - len(data), None if size is None else size - len(data))
            if len(data) < need:
                break  # the body ended, and had no length: `parse_header` judges it as it is
            need = bytes_needed(data, file_size=size, max_header_size=self.limit)
        # Returning closes the response (`with` in _attempt): the rest is never downloaded.
        return _Reply(data, size, whole=True)

    def _unsatisfiable(self, content_range: str | None) -> _Reply:
        """A 416 for bytes from 0: the file is empty (or the server cannot range at all)."""
        match = _UNSATISFIED.fullmatch(content_range.strip()) if content_range else None
        if match is not None and int(match[1]) < HEADER_LENGTH_SIZE:
            # Nothing to read: parse_header(b"", file_size=L) gives HeaderTooSmall.
            return _Reply(b"", int(match[1]), whole=True)
        return self._attempt(0, None, None)  # ask for the body without Range (read as a 200)

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

    def _where(self) -> str:
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
        chunk = response.read(min(remaining, _BODY_READ_SIZE))
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


def _content_length(response: http.client.HTTPResponse) -> int | None:
    value = response.headers.get("Content-Length")
    if value is None or not value.strip().isdigit():
        return None
    return int(value)


@functools.cache  # the class, made on the first URL read (urllib is imported then)
def _redirect_handler() -> type[urllib.request.HTTPRedirectHandler]:
    import urllib.request

    class CredentialSafeRedirects(urllib.request.HTTPRedirectHandler):
        """urllib's redirects (Range kept), but credentials stay with the origin given.

        urllib's own handler re-sends every header to wherever it is redirected; the Hub
        redirects to a CDN, which must not receive the Hub token.
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
                    if name.lower() in _CREDENTIALS:
                        new.remove_header(name)
            return new

    return CredentialSafeRedirects


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
    if isinstance(reason, str):
        return reason
    return str(error) or type(error).__name__
