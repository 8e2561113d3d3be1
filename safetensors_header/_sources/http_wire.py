"""The wire of HTTP(S): connections whose every wait is timed, kept alive from one call to
the next, redirects kept in check, and urllib's opener where a proxy is to be used.

Layer: sources. What a request travels on, never what it means (`http_exchange` checks the
replies; `http_file` is the file). Made once per process and shared by every thread: the
idle kept-alive connections (`CONNECTIONS`, by scheme, host, port and TLS context), the
urllib opener (`opener`, for the proxies of the moment), the TLS context (`ssl_context`, on
the first https URL); a connect, a send and every socket read wait at most what the call's
`Clock` has left.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import select
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

from .._errors import RemoteError
from .urls import redact

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    import http.client
    import ssl
    import urllib.request
    from collections.abc import Callable
    from email.message import Message
    from typing import IO, Any, Final, TypeAlias

    from .options import Clock

# urllib.request, http.client, ssl and email take as long to import as the rest of the package,
# and most callers never read a URL: they are imported on the first URL read.

__all__ = ["CONNECTIONS", "DEFAULT_PORTS", "DRAIN", "IDLE_SECONDS", "KEEP_ALIVE_VARIABLE"]
__all__ += ["KEEP_IDLE", "RANGE_HEADERS", "SAFE_ACROSS_ORIGINS", "USER_AGENT", "Connections"]
__all__ += ["get", "keep_alive", "opener", "origin", "poolable", "proxies", "quoted", "request"]
__all__ += ["ssl_context"]

# The caller's headers that may go on to another origin (scheme, host, port) than the URL
# given; every other one (Authorization, Cookie, Proxy-Authorization, X-Api-Key, a signed
# token...) goes only to that origin, never on to a CDN or mirror it redirects to.
SAFE_ACROSS_ORIGINS: Final = frozenset({"accept", "accept-language", "user-agent"})
RANGE_HEADERS: Final = frozenset({"range", "if-range"})  # always ours
DEFAULT_PORTS: Final = {"http": 80, "https": 443}
# What urllib sends as User-Agent, sent on the kept-alive connections too.
USER_AGENT: Final = f"Python-urllib/{sys.version_info[0]}.{sys.version_info[1]}"
#: Idle connections kept per origin (scheme, host, port, TLS context), at most: the shards of
#: a checkpoint read at once, or a long read's parts, leave as many; the oldest past this
#: are closed.
KEEP_IDLE: Final = 8
#: Seconds an idle connection is kept. Servers close theirs after 5 s (Apache, Node) to 75 s
#: (nginx; load balancers 60 s): one they closed is found so before it is used (it is
#: readable), or fails before its reply and is replaced once; a longer wait holds sockets
#: for calls that may never come.
IDLE_SECONDS: Final = 30.0
#: The environment variable that turns kept-alive connections off for the process: ``0``,
#: ``false``, ``no`` or ``off`` (the ``keep_alive=False`` of every call).
KEEP_ALIVE_VARIABLE: Final = "SAFETENSORS_HEADER_KEEP_ALIVE"
_OFF: Final = frozenset({"0", "false", "no", "off"})
#: A redirect's body is read (and its connection kept) only when its length says it is at
#: most this: the Hugging Face Hub's 302 carries a line of text with the URL it leads to.
DRAIN: Final = 16 * 1024
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})  # urllib's
_SAME_URL: Final = 4  # urllib's HTTPRedirectHandler.max_repeats
_REDIRECTIONS: Final = 10  # urllib's HTTPRedirectHandler.max_redirections

if TYPE_CHECKING:
    #: (scheme, host, port, the TLS context for https): connections to one are interchangeable.
    Key: TypeAlias = tuple[str, str, int, ssl.SSLContext | None]


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


class Connections:
    """The process's idle kept-alive connections, by `Key`: (scheme, host, port, TLS context).

    A connection is either lent to one request (taken) or idle here, never both, so that a
    connection carries one request at a time on any thread. A reply read to its end gives
    its connection back (`TimedResponse.close`); one left unread, cut short or that says
    ``Connection: close`` closes it. At most `KEEP_IDLE` idle connections an origin, none
    idle longer than `IDLE_SECONDS`; none used in a child process after a ``fork`` (its
    parent's sockets are the parent's). The lock is reentrant: a reply collected as garbage
    may give its connection back on a thread that holds it.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.idle: dict[Key, list[tuple[float, http.client.HTTPConnection]]] = {}
        self.pid = os.getpid()

    def take(self, key: Key) -> http.client.HTTPConnection | None:
        """An idle connection to `key`, alive as far as can be told without a request (the
        server has not closed it): the most recently used. None: there is none."""
        if self.pid != os.getpid():
            self.forget()
        now = time.monotonic()
        stale = []
        found = None
        with self.lock:
            stack = self.idle.get(key)
            while stack:
                since, connection = stack.pop()
                if now - since < IDLE_SECONDS and not _dropped(connection):
                    found = connection
                    break
                stale.append(connection)
        for connection in stale:
            connection.close()
        return found

    def give(self, key: Key, connection: http.client.HTTPConnection) -> None:
        """`connection`, its reply read to the end, kept idle for the next request to `key`
        (the oldest closed past `KEEP_IDLE`, and any idle past `IDLE_SECONDS`)."""
        if self.pid != os.getpid():
            connection.close()  # a reply read in a child, on a connection of its own
            return
        now = time.monotonic()
        closed = []
        with self.lock:
            self.idle.setdefault(key, []).append((now, connection))
            for where, stack in list(self.idle.items()):
                kept = [(since, c) for since, c in stack if now - since < IDLE_SECONDS]
                closed += [c for since, c in stack if now - since >= IDLE_SECONDS]
                closed += [c for _, c in kept[:-KEEP_IDLE]]
                if kept[-KEEP_IDLE:]:
                    self.idle[where] = kept[-KEEP_IDLE:]
                else:
                    del self.idle[where]
        for extra in closed:
            extra.close()

    def drop(self, key: Key) -> None:
        """Close every idle connection to `key` (one of them was found closed by the server:
        the others, as old or older, likely are too)."""
        with self.lock:
            stack = self.idle.pop(key, [])
        for _, connection in stack:
            connection.close()

    def forget(self) -> None:
        """In a child process after a ``fork``: the parent's connections closed here (their
        sockets stay open in the parent, which alone uses them), none kept."""
        stack = [c for entries in list(self.idle.values()) for _, c in entries]
        self.lock = threading.RLock()  # another thread of the parent may have held it
        self.idle = {}
        self.pid = os.getpid()
        for connection in stack:
            with contextlib.suppress(Exception):
                connection.close()


def _dropped(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle connection is readable: closed by its server (or sending what no
    request asked for). Either way not to be used again."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


CONNECTIONS: Final = Connections()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=CONNECTIONS.forget)


def keep_alive(asked: bool) -> bool:
    """Whether requests keep their connections: as the call asks (``keep_alive``), unless
    the environment's `KEEP_ALIVE_VARIABLE` says ``0`` (``false``, ``no``, ``off``)."""
    return asked and os.environ.get(KEEP_ALIVE_VARIABLE, "").strip().lower() not in _OFF


def get(
    url: str,
    headers: dict[str, str],
    clock: Clock,
    *,
    keep: bool,
    hops: list[Message],
) -> http.client.HTTPResponse:
    """The reply to a GET of `url` (a 2xx), its redirects followed as `SafeRedirects` follows
    them (``http(s)`` only; headers but `SAFE_ACROSS_ORIGINS` dropped on a hop to another
    origin; each redirect's headers appended to `hops`). Another status is raised as urllib
    raises it (`urllib.error.HTTPError`, holding the reply). On the process's kept-alive
    connections when `keep`; a URL a proxy is to reach goes through urllib's `opener`.

    A redirect's body is never read but when it says it is small (at most `DRAIN` bytes,
    its length given): then it is read, to keep the connection; otherwise the connection is
    closed with it unread (a server may stream one without end).
    """
    import urllib.error

    visited: dict[str, int] = {}
    headers = dict(headers)
    while True:
        if not poolable(url):
            return _through_opener(url, headers, clock, hops)
        response = request(url, headers, clock, keep=keep)
        status = response.status
        if status not in _REDIRECTS:
            if 200 <= status < 300:
                return response
            raise urllib.error.HTTPError(url, status, response.reason, response.headers, response)
        location = response.headers.get("Location") or response.headers.get("URI")
        if location is None:
            raise urllib.error.HTTPError(url, status, response.reason, response.headers, response)
        try:
            target = _redirect_target(url, location, status)
        except BaseException:
            response.close()
            raise
        # urllib's bounds: the same URL at most 4 times, 10 redirects in all.
        if visited.get(target, 0) >= _SAME_URL or len(visited) >= _REDIRECTIONS:
            raise urllib.error.HTTPError(
                url,
                status,
                "The HTTP server returned a redirect error that would lead to an infinite "
                f"loop.\nThe last 30x error message was:\n{response.reason}",
                response.headers,
                response,
            )
        visited[target] = visited.get(target, 0) + 1
        hops.append(response.headers)
        _drain(response)
        if origin(target) != origin(url):
            headers = {
                name: value
                for name, value in headers.items()
                if name.lower() in SAFE_ACROSS_ORIGINS | RANGE_HEADERS
            }
        url = target


def request(
    url: str, headers: dict[str, str], clock: Clock, *, keep: bool
) -> http.client.HTTPResponse:
    """The reply to one GET of `url` (an http(s) URL no proxy is to reach), whatever its
    status, on an idle connection of the process when `keep` (else a new one, closed with
    the reply). A reused connection that fails before any byte of the reply (the server
    closed it while idle) is replaced by a new one, once."""

    import http.client
    import urllib.error

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:  # as http.client and urllib say it
        raise http.client.InvalidURL(
            f"nonnumeric port: '{parts.netloc.rpartition(':')[2]}'"
        ) from None
    if not parts.hostname:
        raise urllib.error.URLError("no host given")
    key: Key = (scheme, parts.hostname or "", port, ssl_context() if scheme == "https" else None)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    fields = dict(headers)
    if not any(name.lower() == "user-agent" for name in fields):
        fields["User-Agent"] = USER_AGENT
    if not keep:
        fields["Connection"] = "close"
    connection = CONNECTIONS.take(key) if keep else None
    reused = connection is not None
    while True:
        if connection is None:
            connection = _connect(key)
        connection.use(clock)  # type: ignore[attr-defined]
        try:
            connection.request("GET", target, headers=fields)
            response: http.client.HTTPResponse = connection.getresponse()
        except OSError as error:
            connection.close()
            if not (reused and _stale(error)):
                raise
            CONNECTIONS.drop(key)
            connection, reused = None, False
            continue
        except BaseException:
            connection.close()
            raise
        break
    response.url = url  # (as urllib's replies say where they are from)
    response.release = functools.partial(_release, key, connection, keep)  # type: ignore[attr-defined]
    return response


def _stale(error: OSError) -> bool:
    """Whether a request on a kept connection failed before any byte of its reply, as one
    the server closed while it was idle fails: reset, a broken pipe, no status line
    (RemoteDisconnected), TLS cut short."""
    ssl = sys.modules.get("ssl")
    return isinstance(error, ConnectionError) or (
        ssl is not None and isinstance(error, ssl.SSLEOFError)
    )


def _release(
    key: Key,
    connection: http.client.HTTPConnection,
    keep: bool,
    done: bool,
) -> None:
    """A reply closed: its connection kept if the reply was read to its end (`done`) and
    the server keeps it open, else closed (unread bytes would be the next reply's)."""
    if keep and done and connection.sock is not None:
        CONNECTIONS.give(key, connection)
    else:
        connection.close()


def _connect(key: Key) -> http.client.HTTPConnection:
    scheme, host, port, context = key
    options: dict[str, Any] = {} if context is None else {"context": context}
    return _timed_connections()[scheme](host, port, **options)


def _drain(response: http.client.HTTPResponse) -> None:
    """A redirect's body: read when its length is given and at most `DRAIN` bytes (its
    connection then serves the next request), else left unread and its connection closed."""
    import http.client

    length = response.length
    try:
        if not response.chunked and length is not None and length <= DRAIN:
            response.read(length)
    except (OSError, ValueError, http.client.HTTPException):
        pass  # the connection is not kept: the next request opens one
    response.close()


def _redirect_target(url: str, location: str, status: int) -> str:
    """Where a redirect leads, as urllib makes it (a RemoteError for one not followed)."""
    import string
    from urllib.parse import quote, urljoin, urlparse, urlunparse

    _check_redirect(url, location, status)
    parts = urlparse(location)
    if not parts.path and parts.netloc:
        parts = parts._replace(path="/")
    quoted_location = quote(urlunparse(parts), encoding="iso-8859-1", safe=string.punctuation)
    target = urljoin(url, quoted_location).replace(" ", "%20")
    return target.partition("#")[0]


def _check_redirect(url: str, location: str, status: int) -> None:
    """RemoteError for a redirect from `url` to `location` that is not followed: a malformed
    URL, or one of another scheme than http and https (our requests' and urllib's alike)."""
    from urllib.parse import urljoin

    problem = None
    try:
        target = urljoin(url, location)
        scheme = urlsplit(target).scheme.lower()
        _ = urlsplit(target).port  # a bad port is a ValueError here
    except ValueError:
        problem = f"a malformed URL ({quoted(location)})"
    else:
        if scheme not in ("http", "https"):
            problem = f"a {quoted(scheme)} URL: only http and https are followed"
    if problem is not None:
        raise RemoteError(
            f"{redact(url)} answered {status} with a redirect to {problem}",
            url=redact(url),
            status=status,
        )


def _through_opener(
    url: str, headers: dict[str, str], clock: Clock, hops: list[Message]
) -> http.client.HTTPResponse:
    """A GET through urllib's `opener` (a proxy is to reach `url`)."""
    import urllib.request

    request = urllib.request.Request(url, headers=headers)
    request.clock = clock  # type: ignore[attr-defined]  # for the timed handlers
    request.hops = hops  # type: ignore[attr-defined]  # what its redirects said
    response: http.client.HTTPResponse = opener().open(request, timeout=clock.left())
    return response


def poolable(url: str) -> bool:
    """Whether `url` is asked on connections of our own (`request`): http(s), no proxy."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _timed_connections():
        return False
    if scheme not in proxies():
        return True
    import urllib.request

    return bool(urllib.request.proxy_bypass(parts.hostname or ""))


def ssl_context() -> Any:
    """The process's TLS context, the default one, made once (thread-safe to share), by one
    thread: threads that ask at once get the same one, and so share kept connections."""
    with _TLS_LOCK:
        return _default_context()


_TLS_LOCK: Final = threading.Lock()
_QUICKACK: Final[int | None] = getattr(socket, "TCP_QUICKACK", None)  # Linux


@functools.cache
def _default_context() -> Any:
    import ssl

    return ssl.create_default_context()


@functools.cache  # the class, made on the first URL read (urllib is imported then)
def _redirect_handler() -> type[urllib.request.HTTPRedirectHandler]:
    import http.client
    import urllib.request
    from http.client import HTTPMessage
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
                try:
                    _check_redirect(req.full_url, location, code)
                except RemoteError:
                    fp.close()
                    raise
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
            if _QUICKACK is not None:
                # Each segment acknowledged at once: a server that writes a reply's header
                # lines and its body apart, with Nagle's algorithm on (Python's http.server),
                # holds the body on a kept connection until the header lines are
                # acknowledged, 40 ms later with Linux's delayed ACKs (a new connection
                # starts in quick-ACK mode: it did not show when each call opened its own).
                self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            return self.raw.readinto(buffer)

        def close(self) -> None:
            self.raw.close()
            super().close()

    class TimedResponse(http.client.HTTPResponse):
        # Told whether the reply was read to its end when it is closed (`request` sets it):
        # its connection is then kept, else closed.
        release: Callable[[bool], None] | None = None

        def __init__(self, sock: socket.socket, *args: object, clock: Clock, **kwargs: object):
            super().__init__(sock, *args, **kwargs)  # type: ignore[arg-type]
            raw = self.fp.detach()  # nothing is read yet: no buffered byte is lost
            self.fp = io.BufferedReader(TimedReader(raw, sock, clock))

        def close(self) -> None:
            # http.client lets go of the body itself (fp None) at its end: its length all
            # read, or the last chunk; a body cut short leaves a length, or raises first.
            fp: object = self.fp  # (typeshed says never None; http.client sets it so)
            done = fp is None and not self.length and not self.will_close
            super().close()
            release, self.release = self.release, None
            if release is not None:
                release(done)

    def timed(base: type[http.client.HTTPConnection]) -> Callable[..., http.client.HTTPConnection]:
        class TimedConnection(base):  # type: ignore[valid-type,misc]
            def __init__(self, *args: object, clock: Clock | None = None, **kwargs: object):
                super().__init__(*args, **kwargs)
                if clock is not None:
                    self.use(clock)

            def use(self, clock: Clock) -> None:
                """Wait at most what `clock` has left (a kept connection serves many calls)."""
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


@functools.cache  # made on the first request (http.client is imported then)
def _timed_connections() -> dict[str, Callable[..., http.client.HTTPConnection]]:
    """The timed connection classes of `_timed_handlers`, by scheme, for `request`."""
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
