"""One exchange with an HTTP(S) server: a request, its reply checked, retried.

Layer: sources. `Exchange` makes the requests of one call to one `http_file.HttpFile`: a
ranged GET (``Range``, and ``If-Range`` once the file is identified), its reply checked
against the request (a ``206``'s ``Content-Range`` and ``Content-Length``, a ``200`` read
as the whole file, a ``416`` answered from its ``Content-Range``, a body in a transfer
coding, a ``Content-Encoding`` or a multipart envelope refused), its body read with
``readinto`` straight into the caller's memory (`fill`), and transient failures (a
connection error, a timeout, a body cut short, a 5xx) retried within the call's `Clock`. A
rate limit (a 429, or a 503 with ``Retry-After``) is waited out as long as the server asks,
within that clock, without using a retry; a 401, 403 or 410 from the URL a file was
redirected to (a signed URL past its life) sends the request to the URL given again, once.
What a reply says of the file goes to the file (`HttpFile.answered`): the exchange keeps
nothing of it. The wire it travels on is `http_wire`'s.
"""

from __future__ import annotations

import random
import time
from urllib.parse import urlsplit

from .._errors import RemoteError
from .base import Restart, ShortRead, changed
from .http_replies import (
    CONTENT_LENGTH,
    CONTENT_RANGE,
    SKIP_SIZE,
    UNSATISFIED,
    Held,
    RateLimited,
    failure_reason,
    fill,
    linked_identity,
    network_cause,
    plain,
    retry_after,
    skip,
    transient,
    waited,
)
from .http_wire import RANGE_HEADERS, SAFE_ACROSS_ORIGINS, get, keep_alive, origin, quoted
from .hub import hub_hint
from .urls import redact, scrub

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    from collections.abc import Callable, Iterable
    from email.message import Message
    from typing import Final, Protocol, TypeVar

    from .base import Validators
    from .options import Clock, Options
    from .planning import Read, Segment

    _Result = TypeVar("_Result")

    class HttpFile(Protocol):
        """What an exchange asks of its file (`http_file.HttpFile`), and tells it."""

        url: str
        given: str
        shown: str
        final: str | None
        ranged: bool | None
        identified: bool
        options: Options

        @property
        def if_range(self) -> str | None: ...
        def answered(
            self, size: int | None, validators: Validators | None, *, ranged: bool
        ) -> None: ...
        def redirected(self, url: str | None) -> None: ...
        def target(self) -> tuple[str, bool]: ...
        def refused(self, url: str) -> None: ...
        @property
        def linked(self) -> bool: ...
        def hold(self, held: Held) -> None: ...
        def holds(self, response: http.client.HTTPResponse) -> bool: ...
        def _forget(self) -> None: ...


__all__ = ["Exchange", "sleep"]

_BACKOFF: Final = 0.25  # seconds before the first retry, doubled for each further one
_PERMANENT_5XX: Final = frozenset({501, 505})  # Not Implemented, Version Not Supported
# What a signed URL answers once its signature has expired (or is refused): S3 and CloudFront
# 403, others 401 or 410 Gone. The URL given is then asked again, once a request.
_REFUSED_SIGNATURE: Final = frozenset({401, 403, 410})
# A rate limit's waits (429, or 503 with Retry-After) within one request, at most: each as
# long as the server asks (the Hub's windows are 5 minutes) and the call's timeout allows.
_RATE_LIMIT_WAITS: Final = 8
_LONGEST_RATE_LIMIT_WAIT: Final = 300.0
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
    429: (
        "the server's rate limit: too many requests in its window (the Hugging Face Hub "
        "counts requests per 5 minutes, more for a token: HF_TOKEN)"
    ),
}

#: Waits between attempts: replaceable (tests run retries without waiting, and count them).
sleep: Callable[[float], None] = time.sleep


class Exchange:
    """The requests of one call to one file: each sent, its reply checked against the
    request, retried on transient failures. Never shared between calls. What a reply says
    of the file is told to the file (`HttpFile.answered`), which keeps it."""

    def __init__(self, file: HttpFile, clock: Clock) -> None:
        self.file = file
        self.clock = clock
        self.retries = file.options.retries
        self.origin = origin(file.url)
        self.given = file.url
        self.shown = file.shown
        self.headers = {
            name: value
            for name, value in (file.options.headers or {}).items()
            if name.lower() not in RANGE_HEADERS
        }
        self.last_count = 0
        self.keep = keep_alive(file.options.keep_alive)  # the process's kept connections

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
        """The 2xx reply to a GET of `url`, its redirects followed (`http_wire.get`)."""
        hops: list[Message] = []  # what its redirects said
        urlsplit(url)  # a URL that cannot be read is the caller's ValueError (as urllib's)
        try:
            response = get(url, headers, self.clock, keep=self.keep, hops=hops)
        except (ValueError, OverflowError) as error:
            # http.client and urllib on a reply they cannot read (a redirect's body with a
            # Content-Length of 30 digits, ...): what the server sent, not a caller's mistake.
            raise RemoteError(
                f"{self.where()} sent a reply that could not be read: "
                f"{type(error).__name__}: {scrub(plain(str(error), 200), self.file.given)}",
                url=self.shown,
            ) from error
        response.hops = hops  # type: ignore[attr-defined]
        return response

    def _whole_document(self, limit: int, *, again: bool = False) -> bytes:
        import urllib.error

        file = self.file
        url, resolving = file.target()
        try:
            response = self._open(url, self._headers_here(url))
        except urllib.error.HTTPError as error:
            with error:
                if error.code in _REFUSED_SIGNATURE and url != file.url and not again:
                    file.refused(url)  # (as `_attempt`: a signed URL past its life)
                    return self._whole_document(limit, again=True)
                raise self._status_error(error.code, error.geturl() or url, error.headers) from None
        with response:
            if resolving:
                file.redirected(response.geturl())
            self._check_body(response)
            # One byte past the limit says the document is larger; the caller says so. Read
            # a piece at a time: a document is small, its bound is not.
            length = self._content_length(response)
            wanted = limit + 1 if length is None else min(length, limit + 1)
            pieces = []
            got = 0
            while got < limit + 1:
                piece = bytearray(min(limit + 1 - got, max(wanted - got, 1), SKIP_SIZE))
                count = fill(response, [(got, memoryview(piece))], got, got + len(piece), None)
                pieces.append(memoryview(piece)[:count])
                got += count
                if count < len(piece):
                    break
            if length is not None and got < wanted:
                raise ConnectionError(f"the connection closed after {got:,} of {wanted:,} bytes")
            return b"".join(pieces)

    def _headers_here(self, url: str) -> dict[str, str]:
        """The caller's headers for a request to `url`: all of them only to the origin."""
        if origin(url) == self.origin:
            return dict(self.headers)
        return {k: v for k, v in self.headers.items() if k.lower() in SAFE_ACROSS_ORIGINS}

    def _retried(self, attempt_once: Callable[[], _Result]) -> _Result:
        import http.client

        attempts = self.retries + 1
        failure: BaseException | None = None
        done = 0  # attempts made that failed
        waits: list[float] = []  # the rate limit's, which use no retry
        while True:
            try:
                return attempt_once()
            except RateLimited as error:
                if error.status == 429 or error.wait is not None:
                    # As long as the server asks, and never shorter than the backoff would
                    # be (a Retry-After of 0, or a date past, would ask again at once).
                    delay = max(error.wait or 0.0, _BACKOFF * 2 ** len(waits))
                    why = self._no_wait(delay, len(waits))
                    if why is not None:
                        raise RateLimited(
                            f"{error} (rate limited: {waited(waits)}; the server asks for "
                            f"{delay:g} s more, {why})",
                            url=self.shown,
                            status=error.status or 429,
                            wait=delay,
                        ) from None
                    waits.append(delay)
                    sleep(delay)
                    continue
                failure = error  # a 503 that says nothing: a 5xx as any other
            except RemoteError as error:
                status = error.status
                if status is None or status < 500 or status in _PERMANENT_5XX:
                    raise
                failure = error
            except (OSError, http.client.HTTPException) as error:
                cause = network_cause(error)
                if not transient(cause):
                    raise RemoteError(
                        f"could not read {self.shown}: {self._reason(cause)}", url=self.shown
                    ) from cause
                failure = cause
            done += 1
            if self.clock.expired() or done >= attempts:
                break
            delay = _BACKOFF * 2 ** (done - 1) * (0.5 + random.random() / 2)  # jitter
            if not self.clock.allows(delay):
                break  # no time left for another attempt
            sleep(delay)
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
            f"could not read {self.shown}: {self._reason(failure)} ({tries})", url=self.shown
        ) from failure

    def _no_wait(self, delay: float, count: int) -> str | None:
        """Why a rate limit's wait of `delay` seconds is not waited out (None: it is)."""
        if count >= _RATE_LIMIT_WAITS:
            return f"after the {_RATE_LIMIT_WAITS} waits a request may make"
        if delay > _LONGEST_RATE_LIMIT_WAIT:
            return f"longer than the {_LONGEST_RATE_LIMIT_WAIT:g} s a wait may be"
        if not self.clock.allows(delay):
            return f"more than the call's timeout of {self.clock.timeout:g} s leaves"
        return None

    def _attempt(
        self,
        start: int,
        stop: int,
        segments: list[Segment],
        rest: Callable[[], Iterable[Read]] | None,
        *,
        ranged: bool = True,
        header: bool = False,
        again: bool = False,
    ) -> int:
        import urllib.error

        file = self.file
        url, resolving = file.target()  # read once: another thread's reply may change it
        headers = self._headers_here(url)
        if ranged:
            headers["Range"] = f"bytes={start}-{stop - 1}"  # inclusive: stop - start bytes
            if file.identified and file.if_range is not None:
                headers["If-Range"] = file.if_range
        try:
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
                if error.code in _REFUSED_SIGNATURE and url != file.url and not again:
                    # A signed URL past its life, or refused: the URL given is asked again
                    # (its identity still pinned), for the same bytes.
                    file.refused(url)
                    return self._attempt(
                        start, stop, segments, rest, ranged=ranged, header=header, again=True
                    )
                raise self._status_error(error.code, location, error.headers) from None
        # (what `_identify` asks: whether this reply answers the URL given, redirects and all)
        response.resolving = resolving  # type: ignore[attr-defined]
        try:
            if resolving:
                file.redirected(response.geturl())
            self._check_body(response)
            if response.status == 206 and ranged:
                return self._partial(response, start, stop, segments)
            if response.status == 200:
                return self._whole(response, start, stop, segments, rest, header=header)
            raise RemoteError(
                f"{self.where()} answered HTTP {response.status} {plain(response.reason)} to "
                f"a GET with {headers.get('Range', 'no Range')}",
                url=self.shown,
                status=response.status,
            )
        finally:
            # Closing it is what stops a 200's body: the rest is never sent. (Unless a header
            # read goes on along it.) Its connection is kept if it was read to its end.
            if not file.holds(response):
                response.close()

    def _check_body(self, response: http.client.HTTPResponse) -> None:
        """RemoteError for a body whose bytes are not the file's as they are."""
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise RemoteError(
                f"{self.where()} sent the body with Content-Encoding {plain(encoding)}: "
                "its bytes are not the file's (do not pass an Accept-Encoding header)",
                url=self.shown,
            )
        codings = response.headers.get_all("Transfer-Encoding") or []
        coding = ",".join(codings).strip().lower()
        # http.client decodes a lone "chunked" and nothing else: "gzip, chunked" would come
        # through as chunk-size lines and a gzip stream.
        if codings and coding != "chunked":
            raise RemoteError(
                f"{self.where()} sent the body in the transfer coding {quoted(coding)}: only "
                "a plain body or a lone 'chunked' is the file's bytes",
                url=self.shown,
            )
        kind = response.headers.get("Content-Type", "").strip().lower()
        if kind.startswith("multipart/"):
            raise RemoteError(
                f"{self.where()} sent a {quoted(kind.split(';')[0])} reply: its parts come in "
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
        match = CONTENT_RANGE.fullmatch(value.strip()) if value else None
        if match is None:
            raise RemoteError(
                f"{self.where()} answered 206 without a usable Content-Range ({quoted(value)})",
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
                f"{quoted(value)}; expected bytes {start}-{expected}/"
                f"{'*' if size is None else size}",
                url=self.shown,
            )
        count = last - first + 1
        length = self._content_length(response)
        if length is not None and length != count:
            raise RemoteError(
                f"{self.where()} sent Content-Length {length} with Content-Range "
                f"{quoted(value)} ({count} bytes)",
                url=self.shown,
            )
        self._identify(response, size, ranged=True)
        got = fill(response, segments, start, start + count, start + count)
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
        if file.identified and file.ranged:
            if header:
                # If-Range did not match: the file was replaced, and this is the new one,
                # whole. Its header is read again, from this body.
                file._forget()
                self._identify(response, size, ranged=True)
                file.hold(Held(response, 0, size, self.shown))
                raise Restart
            raise changed(
                self.where(),
                "a request with If-Range was answered with the whole file (200): it was "
                "replaced since the first request, or the server stopped honouring Range",
            )
        self._identify(response, size, ranged=False)
        # Bytes before `start` are dropped; a body that ends early is a broken connection
        # when its length was given, else the end of the file.
        if skip(response, start) < start:
            if size is not None:
                raise ConnectionError("the connection closed before the bytes asked for")
            return 0
        got = fill(response, segments, start, stop, size)
        if got < stop - start:
            if size is not None and start + got < min(stop, size):
                raise ConnectionError(
                    f"the connection closed after {start + got:,} of {min(stop, size):,} bytes"
                )
            return got
        if header and (size is None or size > stop):
            file.hold(Held(response, stop, size, self.shown))  # the header may go on
            return got
        at = stop
        for later_start, later_stop, later_segments in rest() if rest is not None else ():
            if skip(response, later_start - at) < later_start - at:
                raise ShortRead(at)
            filled = fill(response, later_segments, later_start, later_stop, size)
            if filled < later_stop - later_start:
                raise ShortRead(later_start + filled)
            at = later_stop
        return got

    def _identify(
        self, response: http.client.HTTPResponse, size: int | None, *, ranged: bool
    ) -> None:
        """What a reply says of the file (its size, ETag and Last-Modified, or what the
        redirect to it named it by: `LINKED`), told to it."""
        validators: Validators | None
        linked = linked_identity(getattr(response, "hops", None) or ())
        if linked is not None:
            validators, linked_size = linked
            if linked_size is not None and size is not None and linked_size != size:
                raise RemoteError(
                    f"{self.where()} sent a file of {size:,} bytes where the redirect to it "
                    f"said X-Linked-Size {linked_size:,}",
                    url=self.shown,
                )
        elif self.file.linked:
            if getattr(response, "resolving", False):
                # The URL given asked again (a signed URL expired or was refused): a reply
                # that no longer names the file by its sha256 is not known to be that file.
                raise changed(
                    self.where(),
                    "it was pinned by the sha256 the Hub's X-Linked-Etag named, and the "
                    "reply to its URL, asked again, names none",
                )
            validators = None  # the server the redirect led to: its validators are its own
        else:
            etag = response.headers.get("ETag")
            modified = response.headers.get("Last-Modified")
            validators = (() if etag is None else (("etag", etag),)) + (
                () if modified is None else (("last-modified", modified),)
            )
        self.file.answered(size, validators, ranged=ranged)

    def _unsatisfiable(self, start: int, content_range: str | None) -> int | None:
        """A 416: the range starts at or past the end of the file (None: a bare 416)."""
        match = UNSATISFIED.fullmatch(content_range.strip()) if content_range else None
        if match is None or int(match[1]) > start:
            return None
        # (A 416 describes no representation: its size alone is the file's.)
        self.file.answered(int(match[1]), None, ranged=True)
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
        known = hub_hint(str(code))
        hint = known or _HINTS.get(status)
        message = f"HTTP {status} {phrase} for {where}" + (f": {hint}" if hint else "")
        if status in (429, 503):
            return RateLimited(message, url=self.shown, status=status, wait=retry_after(headers))
        # (A code the hints know, only: the server's own text is kept from the record too.)
        return RemoteError(
            message, url=self.shown, status=status, code=str(code) if known else None
        )

    def _content_length(self, response: http.client.HTTPResponse) -> int | None:
        """The Content-Length: None when absent, RemoteError unless a plain byte count."""
        value = response.headers.get("Content-Length")
        if value is None:
            return None
        if CONTENT_LENGTH.fullmatch(value.strip()) is None:
            raise RemoteError(
                f"{self.where()} sent an unusable Content-Length ({quoted(value)}): not a "
                "decimal byte count of at most 19 digits",
                url=self.shown,
            )
        return int(value)

    def _reason(self, error: BaseException) -> str:
        """What went wrong, for a message: the URL's secrets taken out (http.client quotes
        a URL's parts in its errors: 'nonnumeric port: ...')."""
        return scrub(failure_reason(error), self.file.given)

    def where(self) -> str:
        url = self.url
        if url == self.given:
            return self.shown
        return f"{self.shown} (redirected to {redact(url)})"
