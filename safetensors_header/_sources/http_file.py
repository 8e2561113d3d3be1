"""HTTP(S) URLs as a `RangeFile`: Range requests, checked, retried, in parallel.

Layer: sources. This module is the file; `http_exchange` makes one call's requests and
checks their replies, `http_wire` carries them. With F the first read (``first_read``) and
``8 + N`` the bytes the header occupies, a header read (`header_of`) is:

1. ``GET`` with ``Range: bytes=0-(F-1)`` (inclusive: F bytes). A ``206`` must carry a
   ``Content-Range`` that matches the request (first byte, last byte, body length); its total
   is the file size, which the coverage rule needs. `bytes_needed` then says where the header
   ends, or gives the verdict on the length prefix (limit, file size) before anything more is
   asked for.
2. Only when the header ends past F: ``Range: bytes=F-(8+N-1)``, the missing remainder and
   nothing else, sent straight to the URL the first request was redirected to.

The first reply pins the file's identity (its size, ``ETag`` and ``Last-Modified``:
`RangeFile._identify`) and says where its bytes are: the URL its redirects ended at (`final`).
Every later request of the same `HttpFile` goes there with ``If-Range`` (a strong ETag, else
the date), and its reply must agree: a file replaced in between (a new commit on a
``resolve/main`` URL, a re-uploaded object), or a reply whose validators differ in kind (an
ETag dropped or added), is the ``FileChanged`` error, never a mix of two files. A total the
server did not give at first (``Content-Range: bytes a-b/*``) may be learned later; that is
not a change.

A redirect to a signed URL (the Hugging Face Hub's to its CDN: valid for an hour) is not
kept past its life: when its query says when it expires (`urls.signed_until`: ``Expires``,
``X-Amz-Date`` and ``X-Amz-Expires``...), a request after that (less a margin) asks the URL
given again; a 401, 403 or 410 from the signed URL does the same, once a request. Where the
redirect named the file (the Hub's ``X-Linked-Etag``, its sha256, and ``X-Xet-Hash``), those
are its identity (the CDN's own validators are the CDN's), so that a file asked for again is
checked to be the same file. A pickle holds the URL given, never a signed one.

Ranged reads cut long reads into equal parts (`HttpFile._requests`: of ``part_size`` bytes, or
one per thread up to four times that when there would be more) and send them
(`HttpFile._read_into`) on up to ``max_workers`` threads, 2 a core at most (or 4: `streams`),
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

import _thread
import base64
import time

from .base import RangeFile, ShortRead
from .http_exchange import Exchange
from .http_replies import LINKED
from .hub import linked_sha256
from .options import REMOTE_GAP
from .planning import parts, streams, with_segments
from .threads import run_parallel
from .urls import beside, credentials, normal_url, redact, signed_until, url_place

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    from collections.abc import Iterable
    from typing import Any, Final

    from .base import Validators
    from .http_replies import Held
    from .options import Clock, Options
    from .planning import Read

__all__ = ["HttpFile"]

# A signed URL is asked for again this long before its signature expires (at most a tenth of
# its life): a request must arrive before the expiry, and the two clocks may differ a little.
_RENEW_MARGIN: Final = 10.0
_RENEW_FRACTION: Final = 0.1
_RENEWAL: Final = _thread.allocate_lock()  # one thread a file asks for a new signed URL


class HttpFile(RangeFile):
    """A file at an ``http://`` or ``https://`` URL.

    Attributes:
        url: The URL requested (user info, if the URL given had any, is sent as an
            ``Authorization: Basic`` header to the URL's origin instead).
        given: The URL as given.
        final: Where requests go once the first has been answered (its redirects followed):
            ``None`` until then, and again once a signed URL expires or is refused.
        ranged: Whether the server honours Range (``None`` until the first reply).
    """

    default_gap = REMOTE_GAP
    remote = True

    final: str | None
    ranged: bool | None
    # When `final` is to be asked for again (seconds since the epoch): its signature's
    # expiry, less a margin; None when it does not expire (or says nothing of it).
    renew_at: float | None
    # A 200's body that a header read goes on reading (a server that ignores Range is asked
    # once): open between the reads of one header, closed by release().
    _held: Held | None

    def __init__(self, url: str, options: Options) -> None:
        plain, userinfo = credentials(url)
        if userinfo is not None and not any(
            name.lower() == "authorization" for name in options.headers or {}
        ):
            basic = base64.b64encode(userinfo.encode()).decode("ascii")
            options = options.replace(
                headers={**(options.headers or {}), "Authorization": f"Basic {basic}"}
            )
        super().__init__(options, redact(plain))
        self.url, self.given = plain, url
        self.final = self.renew_at = self.ranged = self._held = None

    @property
    def _place(self) -> str:
        """The URL given, as `urls.url_place` makes it a place (a query as a digest)."""
        return url_place(self.url)

    @property
    def location(self) -> str:
        return self.given

    def _same_place(self, location: str) -> bool:
        """The same URL, compared in its normal form (RFC 3986: ``/./m`` and ``/%6d`` are
        ``/m``; scheme and host in any case; the default port or none)."""
        place = self._place
        return location == place or normal_url(location) == normal_url(place)

    @property
    def if_range(self) -> str | None:
        """The validator for ``If-Range``: a strong ETag, else the Last-Modified date."""
        found = dict(self.validators or ())
        etag = found.get("etag")
        if isinstance(etag, str) and not etag.startswith("W/"):
            return etag
        modified = found.get("last-modified")
        return modified if isinstance(modified, str) else None

    def answered(self, size: int | None, validators: Validators | None, *, ranged: bool) -> None:
        """What a reply said of the file: its identity (`_identify`), and at the first,
        whether the server honours Range."""
        first = not self.identified
        self._identify(size, validators)
        if first:
            self.ranged = ranged

    @property
    def linked(self) -> bool:
        """Whether the file's identity is what a redirect named it by (the Hub's sha256 or
        Xet hash), not the validators of the server its bytes come from."""
        return any(name in LINKED for name, _ in self.validators or ())

    @property
    def published_sha256(self) -> str | None:
        """The file's sha256 as the Hugging Face Hub publishes it (`hub.linked_sha256`),
        once a request has been answered; None for a file the Hub did not redirect, or
        another server."""
        return linked_sha256(self.validators)

    def target(self) -> tuple[str, bool]:
        """Where the next request goes, and whether that is the URL given (whose redirects
        are then followed, and say where the later ones go): `final`, unless its signature
        is about to expire. Then one request (the first to see it) asks the URL given again,
        while the others go on to `final` (its margin is theirs)."""
        while True:
            final, renew_at = self.final, self.renew_at
            if final is None:
                return self.url, True
            if renew_at is None or time.time() < renew_at:
                return final, False
            with _RENEWAL:
                if self.final == final and self.renew_at == renew_at:
                    self.renew_at = None  # this request renews it
                    return self.url, True
            # Renewed, or being renewed, by another thread: looked at again, the lock let go
            # (it is not reentrant: a new URL whose renewal time has passed too asks for it).

    def redirected(self, url: str | None) -> None:
        """Where a request to the URL given ended (its redirects followed): later requests
        go there, until its signature (if its query says when) expires."""
        final = url or self.url
        renew_at = None
        until = signed_until(final) if final != self.url else None
        if until is not None:
            life = until - time.time()
            # A signature that seems expired when just made: the clocks disagree; the
            # server's refusal says when it is (`refused`).
            if life > 0:
                renew_at = until - min(_RENEW_MARGIN, life * _RENEW_FRACTION)
        self.final, self.renew_at = final, renew_at

    def refused(self, url: str) -> None:
        """`url`, where `final` sent requests, refused one (its signature expired, or was
        refused): the next request asks the URL given again."""
        if self.final == url:
            self.final = None

    def hold(self, held: Held) -> None:
        """Keep a 200's open body for the rest of a header read."""
        self._held = held

    def holds(self, response: http.client.HTTPResponse) -> bool:
        return self._held is not None and self._held.response is response

    def _settle(self, clock: Clock) -> None:
        if not self.identified:
            self.read(0, 1, clock)  # its reply says the size (and the validators)

    def _first(self, count: int, clock: Clock) -> bytes:
        return self.read(0, count, clock)

    def read(self, start: int, stop: int, clock: Clock) -> bytes:
        held = self._held
        if held is not None and held.position == start:
            return held.take(stop - start)  # on along a 200's body, kept open for this
        self._release()
        buffer = bytearray(stop - start)
        got = Exchange(self, clock).fetch(start, stop, [(start, memoryview(buffer))], header=True)
        return bytes(memoryview(buffer)[:got])

    def _release(self) -> None:
        if self._held is not None:
            self._held.response.close()
            self._held = None

    def _requests(self, reads: list[Read]) -> list[Read]:
        return parts(reads, self.options.part_size, self.options.max_workers)

    def _read_into(self, reads: Iterable[Read], clock: Clock) -> None:
        reads = list(reads)
        if not reads:
            return
        exchange = Exchange(self, clock)
        pending = reads
        if not self.identified:
            # The first request alone, at most part_size: it follows redirects, and learns
            # the size, the validator and whether the server honours Range, for the others.
            start, stop, segments = reads[0]
            if stop - start > self.options.part_size:
                middle = start + self.options.part_size
                reads = [*with_segments([(start, middle), (middle, stop)], segments), *reads[1:]]
                start, stop, segments = reads[0]
            got = exchange.fetch(start, stop, segments, rest=lambda: iter(reads[1:]))
            if got < stop - start:
                raise ShortRead(self._end(start + got))
            if self.ranged is False:
                return  # a 200: its body held every read
            pending = reads[1:]
        elif self.ranged is False:
            # The server ignores Range: one body from byte 0, read once for every read.
            start, stop, segments = reads[0]
            got = exchange.fetch(start, stop, segments, rest=lambda: iter(reads[1:]))
            if got < stop - start:
                raise ShortRead(self._end(start + got))
            return

        def one(read: Read) -> None:
            start, stop, segments = read
            if self.size is not None and start >= self.size:
                raise ShortRead(self.size)  # past the end the first reply gave: not asked
            got = exchange.fetch(start, stop, segments)
            if got < stop - start:
                raise ShortRead(self._end(start + got))

        run_parallel(one, pending, streams(self.options.max_workers))

    def _end(self, where: int) -> int:
        """Where the file ends, for a read that stopped at `where`."""
        return where if self.size is None else min(self.size, where)

    def document(self, limit: int, clock: Clock) -> bytes:
        return Exchange(self, clock).document(limit)

    def sibling(self, name: str) -> HttpFile:
        return HttpFile(beside(self.given, name), self.options)

    def __getstate__(self) -> dict[str, Any]:
        # Never a signed URL: it expires, and it is a credential. The identity is kept.
        return {**self.__dict__, "_held": None, "final": None, "renew_at": None}
