"""What an HTTP reply says, and its body read: the parts of `http_exchange` that hold no
request.

Layer: sources. Byte counts and ranges parsed strictly (ASCII digits, at most 19), a body
read with ``readinto`` straight into the caller's memory (`fill`) or dropped (`skip`), the
open body of a 200 a header read goes on reading (`Held`), what a redirect named the file by
(`linked`), how long a rate limit asks the client to wait (`retry_after`), and a failure's
reason in words, with the server's text escaped (`plain`, `failure_reason`).
"""

from __future__ import annotations

import re
import time

from .._errors import RemoteError

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    from collections.abc import Iterable
    from email.message import Message
    from typing import Final

    from .base import Validators
    from .planning import Segment

__all__ = [
    "CONTENT_LENGTH",
    "CONTENT_RANGE",
    "LINKED",
    "SKIP_SIZE",
    "UNSATISFIED",
    "Held",
    "RateLimited",
    "failure_reason",
    "fill",
    "linked_identity",
    "network_cause",
    "plain",
    "retry_after",
    "skip",
    "transient",
    "waited",
]

#: The headers of a redirect that name the file it leads to (the Hugging Face Hub's resolve
#: reply: the LFS object's sha256 and the Xet hash), kept as its validators under these names.
LINKED: Final = ("x-linked-etag", "x-xet-hash")

# The most bytes asked of one socket read of a body that is dropped (between two ranges, or
# before the first one of a 200).
SKIP_SIZE: Final = 1 << 20
# A byte count: decimal digits, ASCII only (str.isdigit() is true for "²", which int()
# refuses), and at most 19 of them (a u64 has 20; int() refuses over 4,300 digits).
_DECIMAL: Final = "[0-9]{1,19}"
CONTENT_LENGTH: Final = re.compile(_DECIMAL)
# Range units are case-insensitive (RFC 9110, section 14.1).
CONTENT_RANGE: Final = re.compile(
    rf"bytes[ \t]+({_DECIMAL})-({_DECIMAL})/({_DECIMAL}|\*)", re.ASCII | re.IGNORECASE
)
UNSATISFIED: Final = re.compile(rf"bytes[ \t]+\*/({_DECIMAL})", re.ASCII | re.IGNORECASE)
_RATE_LIMIT: Final = re.compile(r"r\s*=\s*([0-9]{1,9})\s*;\s*t\s*=\s*([0-9]{1,9})")


class RateLimited(RemoteError):
    """A 429, or a 503 with ``Retry-After``: `wait` is how long the server asks the client
    to wait (None: it does not say)."""

    def __init__(self, message: str, *, url: str, status: int, wait: float | None) -> None:
        super().__init__(message, url=url, status=status)
        self.wait = wait


class Held:
    """The open body of a 200, at `position`: a header read goes on reading it."""

    def __init__(
        self, response: http.client.HTTPResponse, position: int, size: int | None, shown: str
    ) -> None:
        self.response, self.position, self.size, self.shown = response, position, size, shown

    def take(self, count: int) -> bytes:
        buffer = bytearray(count)
        start = self.position
        try:
            got = fill(self.response, [(start, memoryview(buffer))], start, start + count, None)
        except OSError as error:
            raise RemoteError(
                f"could not read {self.shown}: {failure_reason(error)}", url=self.shown
            ) from error
        if got < count and self.size is not None and start + got < self.size:
            raise RemoteError(
                f"could not read {self.shown}: the connection closed after {start + got:,} of "
                f"{self.size:,} bytes",
                url=self.shown,
            )
        self.position += got
        return bytes(memoryview(buffer)[:got])


def fill(
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
        skipped = skip(response, offset - at)
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
                    f"the body could not be read: {plain(str(error), 200)}"
                ) from error
            if not count:
                return at + got - start
            got += count
        at += total
    if stop > at:
        at += skip(response, stop - at)
    return at - start


def skip(response: http.client.HTTPResponse, count: int) -> int:
    """Read and drop `count` bytes of the body; how many there were."""
    if count <= 0:
        return 0
    scratch = memoryview(bytearray(min(count, SKIP_SIZE)))
    done = 0
    while done < count:
        try:
            got = response.readinto(scratch[: min(count - done, len(scratch))])
        except (ValueError, OverflowError) as error:
            raise ConnectionError(
                f"the body could not be read: {plain(str(error), 200)}"
            ) from error
        if not got:
            break
        done += got
    return done


def plain(text: str, limit: int = 100) -> str:
    """Text from a server, for a message: as it is if printable ASCII, else escaped."""
    text = text[:limit]
    return text if text.isascii() and text.isprintable() else ascii(text)[1:-1]


def network_cause(error: BaseException) -> BaseException:
    """The network error inside a urllib URLError (its `reason`), else the error itself."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        return reason
    return error


def transient(error: BaseException) -> bool:
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


def failure_reason(error: BaseException) -> str:
    reason = getattr(error, "reason", None)
    if not isinstance(reason, str):
        reason = str(error) or type(error).__name__
    # Escaped: http.client quotes what the server sent (a bad status line, say) in its errors.
    return plain(reason, 200)


def linked_identity(hops: Iterable[Message]) -> tuple[Validators, int | None] | None:
    """What the last redirect that named the file said of it: its `LINKED` validators (its
    sha256 alone where the redirect gave one: a Xet hash that appears or goes away, as a
    repository moves to Xet storage, is not another file) and its ``X-Linked-Size`` (None: no
    redirect named it)."""
    found = None
    for headers in hops:
        validators = tuple(
            (name, plain(str(value), 200))
            for name in LINKED
            if (value := headers.get(name)) is not None
        )
        if len(validators) > 1 and validators[0][0] == "x-linked-etag":
            validators = validators[:1]
        if validators:
            size = headers.get("X-Linked-Size", "")
            found = (validators, int(size) if CONTENT_LENGTH.fullmatch(size.strip()) else None)
    return found


def retry_after(headers: Message | None) -> float | None:
    """How long a 429 or 503 asks the client to wait: ``Retry-After`` (seconds, or a date),
    else the reset time of an exhausted ``RateLimit`` (``"api";r=0;t=55``), else None."""
    if headers is None:
        return None
    value = (headers.get("Retry-After") or "").strip()
    if CONTENT_LENGTH.fullmatch(value):
        return float(value)
    if value:
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            when = None
        if when is not None:
            return max(when - time.time(), 0.0)
    match = _RATE_LIMIT.search(headers.get("RateLimit") or "")
    if match is not None and int(match[1]) == 0:
        return float(match[2])
    return None


def waited(waits: list[float]) -> str:
    if not waits:
        return "no wait made"
    return f"waited {len(waits)} time{'s' if len(waits) > 1 else ''}, {sum(waits):g} s in all"
