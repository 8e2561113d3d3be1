"""The wire of HTTP(S): connections whose every wait is timed, redirects kept in check,
kept-alive connections for the parts of a read, and one opener for the whole process.

Layer: sources. What a request travels on, never what it means (`http_exchange` checks the
replies; `http_file` is the file). Made once per process and shared by every thread: the
urllib opener (`opener`, for the proxies of the moment), the TLS context (`ssl_context`, on
the first https URL); a connect, a send and every socket read wait at most what the call's
`Clock` (carried by each request as ``request.clock``) has left.
"""

from __future__ import annotations

import functools
import io
import os
import socket
import sys
import threading
from urllib.parse import urlsplit

from .._errors import RemoteError
from .urls import redact

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    import urllib.request
    from collections.abc import Callable
    from typing import IO, Any, Final

    from .options import Clock

# urllib.request, http.client, ssl and email take as long to import as the rest of the package,
# and most callers never read a URL: they are imported on the first URL read.

__all__ = ["DEFAULT_PORTS", "RANGE_HEADERS", "SAFE_ACROSS_ORIGINS", "USER_AGENT", "Pool"]
__all__ += ["opener", "origin", "poolable", "proxies", "quoted", "ssl_context"]

# The caller's headers that may go on to another origin (scheme, host, port) than the URL
# given; every other one (Authorization, Cookie, Proxy-Authorization, X-Api-Key, a signed
# token...) goes only to that origin, never on to a CDN or mirror it redirects to.
SAFE_ACROSS_ORIGINS: Final = frozenset({"accept", "accept-language", "user-agent"})
RANGE_HEADERS: Final = frozenset({"range", "if-range"})  # always ours
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
# What urllib sends as User-Agent, sent on the kept-alive connections too.
USER_AGENT: Final = f"Python-urllib/{sys.version_info[0]}.{sys.version_info[1]}"


def opener() -> urllib.request.OpenerDirector:
    """urllib's opener with the timed handlers and the safe redirects: one per process (for
    the proxies the environment names now), shared by every call and thread. A request
    must carry its call's clock as ``request.clock``; one with a list as ``request.hops``
    gets the headers of every redirect it followed appended to it."""
    return _opener(_proxy_variables())


def proxies() -> dict[str, str]:
    """The proxies of the moment, by scheme (`urllib.request.getproxies`, read again only
    when a proxy variable of the environment changed: reading them all costs 0.6 ms)."""
    return dict(_proxies(_proxy_variables()))


# The environment's proxy variables for http(s) (urllib also reads them in upper case).
_PROXY_VARIABLES: Final = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
_PROXY_VARIABLES_BOTH: Final = (*_PROXY_VARIABLES, *(name.upper() for name in _PROXY_VARIABLES))


def _proxy_variables() -> tuple[str | None, ...]:
    get = os.environ.get
    return tuple(get(name) for name in _PROXY_VARIABLES_BOTH)


@functools.cache
def _proxies(variables: tuple[str | None, ...]) -> tuple[tuple[str, str], ...]:
    import urllib.request

    return tuple(sorted(urllib.request.getproxies().items()))


@functools.cache
def _opener(variables: tuple[str | None, ...]) -> urllib.request.OpenerDirector:
    import urllib.request

    http_handler, https_handler = _timed_handlers()
    handlers: list[urllib.request.BaseHandler] = [
        urllib.request.ProxyHandler(dict(_proxies(variables))),
        _redirect_handler()(),
        http_handler(),
    ]
    if https_handler is not None:
        handlers.append(https_handler())
    return urllib.request.build_opener(*handlers)


def quoted(text: str | None, limit: int = 100) -> str:
    """Text from a server, for a message: quoted and escaped, and cut to `limit` characters."""
    if text is None:
        return "None"
    return ascii(text[:limit]) + ("..." if len(text) > limit else "")


class Pool:
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
            options["context"] = ssl_context()
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


def poolable(url: str) -> bool:
    """Whether parts may go to `url` on connections of our own: http(s), and no proxy."""
    import urllib.request

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _timed_connections():
        return False
    return scheme not in proxies() or bool(urllib.request.proxy_bypass(parts.hostname or ""))


@functools.cache
def ssl_context() -> Any:
    """The process's TLS context, the default one, made once (thread-safe to share)."""
    import ssl

    return ssl.create_default_context()


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
            if new is not None:
                new.clock = req.clock  # type: ignore[attr-defined]  # (see `opener`)
                # What each redirect said (the Hub's names the file: X-Linked-Etag...), for
                # the caller that asked (``request.hops``, a list).
                hops = getattr(req, "hops", None)
                if hops is not None:
                    hops.append(headers)
                    new.hops = hops  # type: ignore[attr-defined]
            if new is not None and origin(new.full_url) != origin(req.full_url):
                for name in list(new.headers):
                    if name.lower() not in SAFE_ACROSS_ORIGINS | RANGE_HEADERS:
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
                    problem = f"a malformed URL ({quoted(location)})"
                else:
                    if scheme not in ("http", "https"):
                        problem = f"a {quoted(scheme)} URL: only http and https are followed"
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
    type[urllib.request.BaseHandler], type[urllib.request.BaseHandler] | None
]:
    """urllib's HTTP(S) handlers, with connections whose every wait is bounded by the `Clock`
    of the request (``request.clock``)."""
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

    http_connection = timed(http.client.HTTPConnection)

    class TimedHTTPHandler(urllib.request.HTTPHandler):
        connection = http_connection

        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            clock = req.clock  # type: ignore[attr-defined]
            return self.do_open(functools.partial(http_connection, clock=clock), req)

    if not hasattr(urllib.request, "HTTPSHandler"):  # Python built without ssl
        return TimedHTTPHandler, None
    https_connection = timed(http.client.HTTPSConnection)

    class TimedHTTPSHandler(urllib.request.HTTPSHandler):
        connection = https_connection

        def __init__(self) -> None:
            # Not HTTPSHandler's: on Python 3.12 and later it makes a TLS context (20 ms);
            # the process's one is made when the first https URL is read.
            urllib.request.AbstractHTTPHandler.__init__(self)

        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            clock = req.clock  # type: ignore[attr-defined]
            return self.do_open(
                functools.partial(https_connection, clock=clock), req, context=ssl_context()
            )

    return TimedHTTPHandler, TimedHTTPSHandler


@functools.cache  # made on the first kept-alive request (http.client is imported then)
def _timed_connections() -> dict[str, Callable[..., http.client.HTTPConnection]]:
    """The timed connection classes of `_timed_handlers`, by scheme, for `Pool`."""
    http_handler, https_handler = _timed_handlers()
    found: dict[str, Callable[..., http.client.HTTPConnection]] = {
        "http": http_handler.connection  # type: ignore[attr-defined]
    }
    if https_handler is not None:
        found["https"] = https_handler.connection  # type: ignore[attr-defined]
    return found


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port): where credentials may go. An unreadable URL matches nothing."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", url, None
