"""A loopback HTTP server that counts every request and every body byte it sends.

Standard library only. Tests set a `Site`'s files, mode and faults, and read its `hits`, so
that they assert the cost of a read, not only its result. `loopback_hub` is the Hugging Face
Hub made of two of them: resolve URLs, and a CDN on another port that serves signed URLs.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import http.server
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from safetensors_header._sources import http_exchange as remote

# A fault a `Site` answers one request with (see `Site.failures`).
Fault = int | str | tuple[int, dict[str, str]]


@dataclass
class Hit:
    """One request as the server saw it."""

    path: str
    host: str
    range: str | None
    authorization: str | None
    cookie: str | None
    if_range: str | None
    status: int = 0
    sent: int = 0  # body bytes written to the socket before the handler finished
    headers: dict[str, str] = field(default_factory=dict)  # every request header, lowercased
    method: str = "GET"
    peer: int = 0  # the client's port: one a connection


@dataclass
class Site:
    """The server's state; tests set `files`, `mode` and `failures`, and read `hits`."""

    port: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    # How Range is answered: "range" (honoured), "ignore" (200, whole body, slowly), "star"
    # (206 with an unknown total), "bad-range" (Content-Range off by one byte), "bare-416"
    # (416 without Content-Range for every ranged request), "gzip" (a Content-Encoding),
    # "no-content-range" (a 206 without one), "bad-length" (Content-Length one byte short).
    mode: str = "range"
    # Faults for the next requests, one per request: an HTTP status, "close" (half the body,
    # of a 206 or a 200, then the connection is closed), "stall" (no answer for a second), or
    # a status with headers ((429, {"Retry-After": "1"}): a rate limit).
    failures: list[Fault] = field(default_factory=list)
    send_length: bool = True  # Content-Length on a 200
    send_etag: bool = True
    send_last_modified: bool = False  # a Last-Modified date that changes with the contents
    replace_after_first: dict[str, bytes] = field(default_factory=dict)  # from request 2 on
    delay: float = 0.0  # seconds before each answer (a slow server)
    # Paths answered with an error as the Hugging Face Hub gives it: (status, X-Error-Code).
    hub_errors: dict[str, tuple[int, str]] = field(default_factory=dict)
    # A folder whose files are served too (under their names), for paths not in `files`.
    root: str | None = None
    # Paths answered 200 with no length and a body without end: these bytes, then "x"s.
    endless: dict[str, bytes] = field(default_factory=dict)
    # Requests for paths ending so are held until `gather` of them are in flight at once (at
    # most `gather_wait` seconds), then `hold` seconds more: `most_in_flight` is then how
    # many a client sends at once, and more than the bound it keeps would show.
    gather: int = 0
    gather_suffix: str = ".safetensors"
    gather_wait: float = 10.0
    hold: float = 0.0
    in_flight: int = 0
    most_in_flight: int = 0
    gathered: threading.Condition = field(default_factory=threading.Condition)
    # The Hub's large files: a resolve path answered 302 to `cdn` (another origin), at a
    # signed URL of the file's sha256, with X-Linked-Size, X-Linked-Etag and X-Xet-Hash.
    linked: dict[str, bytes] = field(default_factory=dict)
    cdn: Site | None = None
    # Paths answered with a bare 302 to another URL (or path): no header names the file.
    redirects: dict[str, str] = field(default_factory=dict)
    # Request paths taken as a server normalises them (nginx): the escapes of unreserved
    # characters decoded and dot-segments removed, so /./m and /%6d are the file m.
    normalise: bool = False
    # As a CDN: every request must carry a signature that `linked` made, unexpired (else
    # 403): one lasts `life` seconds, and its expiry is in the query (Expires=, as
    # CloudFront's) unless `expiry_in_query` is False (the CDN alone knows it).
    signing: bool = False
    life: float = 3600.0
    expiry_in_query: bool = True
    signatures: dict[str, float] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)  # in the order the requests arrived
    # HTTP/1.1 with connections kept open between requests (else HTTP/1.0: one a request);
    # an idle connection closed after `idle_timeout` seconds, as servers do.
    keep_alive: bool = False
    idle_timeout: float | None = None
    connections: int = 0  # accepted, counted by the server
    scheme: str = "http"
    finished: int = 0  # handlers done (their `sent` and `status` are final)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}/{path}"

    def done(self, count: int) -> list[Hit]:
        """The hits, once `count` handlers have finished."""
        deadline = time.monotonic() + 5
        while self.finished < count and time.monotonic() < deadline:
            time.sleep(0.005)
        return list(self.hits)

    @property
    def sent(self) -> int:
        return sum(hit.sent for hit in self.hits)


def last_modified(data: bytes) -> str:
    """An HTTP date that changes with the contents (the same contents, the same date)."""
    digest = hashlib.sha256(data).hexdigest()
    return email.utils.formatdate(1_700_000_000 + int(digest[:6], 16), usegmt=True)


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server
    # TCP_NODELAY, as nginx's tcp_nodelay: on a kept connection, a reply's body (a second
    # write) would otherwise wait for the client's delayed ACK of its header lines (40 ms).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        self.timeout = self.server.site.idle_timeout  # then the connection is closed
        super().setup()
        if self.server.tls is not None:
            self.request.do_handshake()  # here, on the connection's thread

    def parse_request(self) -> bool:
        if self.server.site.keep_alive:
            self.protocol_version = "HTTP/1.1"  # the connection stays open after a reply
        return super().parse_request()

    head_only = False

    def do_HEAD(self) -> None:
        """What a GET would answer, without its body (obstore asks an index's size so)."""
        self.head_only = True
        self.do_GET()

    def do_GET(self) -> None:
        site = self.server.site
        hit = Hit(
            method="HEAD" if self.head_only else "GET",
            path=self.path,
            host=self.headers.get("Host", ""),
            range=self.headers.get("Range"),
            authorization=self.headers.get("Authorization"),
            cookie=self.headers.get("Cookie"),
            if_range=self.headers.get("If-Range"),
            headers={name.lower(): value for name, value in self.headers.items()},
            peer=self.client_address[1],
        )
        # Logged on arrival, under the lock: a client sends its next request only after this
        # one's answer, so `hits` is in request order even when handlers finish out of order.
        with site.lock:
            site.hits.append(hit)
            fault: Fault | None = site.failures.pop(0) if site.failures else None
            if len(site.hits) > 1:
                site.files.update(site.replace_after_first)
        try:
            self._answer(site, hit, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up: what a stopped 200 looks like
        finally:
            with site.lock:
                site.finished += 1

    def _answer(self, site: Site, hit: Hit, fault: Fault | None) -> None:
        path = self.path.split("?")[0]
        if site.normalise:  # as nginx does: every escape decoded, then dot-segments removed
            import posixpath
            from urllib.parse import unquote

            path = posixpath.normpath(unquote(path))
        path = path.lstrip("/")
        if site.gather and path.endswith(site.gather_suffix):
            with site.gathered:
                site.in_flight += 1
                site.most_in_flight = max(site.most_in_flight, site.in_flight)
                site.gathered.notify_all()
                site.gathered.wait_for(
                    lambda: site.most_in_flight >= site.gather, timeout=site.gather_wait
                )
            try:
                time.sleep(site.hold)
            finally:
                # Out of flight before the reply is sent: a client that has read it may ask
                # again before this thread would run on (a loaded machine counted one more).
                with site.gathered:
                    site.in_flight -= 1
        return self._answer_now(site, hit, fault, path)

    def _answer_now(self, site: Site, hit: Hit, fault: Fault | None, path: str) -> None:
        refused = site.signing and not self._signed(site)  # judged on arrival, as a CDN does
        if site.delay:
            time.sleep(site.delay)
        if fault == "stall":
            time.sleep(1)
            return self._status(hit, 503)
        if isinstance(fault, int):
            return self._status(hit, fault)
        if isinstance(fault, tuple):
            return self._status(hit, *fault)
        if refused:
            return self._status(hit, 403, {"X-Error-Code": "AccessDenied"})
        if path.startswith("status/"):
            return self._status(hit, int(path.split("/")[1]))
        if path.startswith("away/"):  # to another host name (same server): another origin
            return self._redirect(hit, site.url(path.removeprefix("away/"), host="localhost"))
        if path.startswith("here/"):  # to another path on the same origin
            return self._redirect(hit, "/" + path.removeprefix("here/"))
        if path in site.hub_errors:
            status, code = site.hub_errors[path]
            return self._status(hit, status, {"X-Error-Code": code})
        if path in site.redirects:
            return self._redirect(hit, site.redirects[path])
        if path in site.linked and site.cdn is not None:
            return self._to_cdn(hit, site.linked[path], site.cdn)
        if path in site.endless:
            return self._endless(hit, site.endless[path])
        data = site.files.get(path)
        if data is None and site.root is not None and ".." not in path.split("/"):
            try:
                with open(os.path.join(site.root, path), "rb") as file:
                    data = file.read()
            except OSError:
                data = None
        if data is None:
            return self._status(hit, 404)
        digest = hashlib.sha256(data).hexdigest()
        etag = '"' + digest[:16] + '"'
        modified = last_modified(data)
        validators = {
            etag if site.send_etag else None,
            modified if site.send_last_modified else None,
        }
        ranged = hit.range is not None and (hit.if_range is None or hit.if_range in validators)
        if site.mode == "ignore" or not ranged or self.head_only:
            return self._whole(site, hit, data, etag, fault)
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", hit.range or "")
        assert match, hit.range
        first, last = int(match[1]), int(match[2])
        if site.mode == "bare-416" or first >= len(data):
            hit.status = 416
            self.send_response(416)
            if site.mode != "bare-416":
                self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        last = min(last, len(data) - 1)
        body = data[first : last + 1]
        total = "*" if site.mode == "star" else str(len(data))
        shift = 1 if site.mode == "bad-range" else 0
        hit.status = 206
        self.send_response(206)
        if site.mode != "no-content-range":
            self.send_header("Content-Range", f"bytes {first + shift}-{last + shift}/{total}")
        self.send_header("Content-Length", str(len(body) - (site.mode == "bad-length")))
        if site.send_etag:
            self.send_header("ETag", etag)
        if site.send_last_modified:
            self.send_header("Last-Modified", modified)
        if site.mode == "gzip":
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        if fault == "close":
            body = body[: len(body) // 2]
        self.wfile.write(body)
        hit.sent = len(body)
        return None

    def _whole(
        self, site: Site, hit: Hit, data: bytes, etag: str, fault: Fault | None = None
    ) -> None:
        hit.status = 200
        self.send_response(200)
        if site.send_length:
            self.send_header("Content-Length", str(len(data)))
        if site.send_etag:
            self.send_header("ETag", etag)
        if site.send_last_modified:
            self.send_header("Last-Modified", last_modified(data))
        self.end_headers()
        if self.head_only:
            return
        if fault == "close":
            data = data[: len(data) // 2]
        # Slowly, in small chunks, so that a client that stops reading is seen to stop.
        for start in range(0, len(data), 16384):
            self.wfile.write(data[start : start + 16384])
            hit.sent += len(data[start : start + 16384])
            if len(data) > 1 << 20:
                time.sleep(0.001)

    def _endless(self, hit: Hit, first: bytes) -> None:
        hit.status = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(first)
        chunk = b"x" * 65536
        try:
            while True:
                self.wfile.write(chunk)
                hit.sent += len(chunk)
        except OSError:  # the client hung up: what a test of it wants
            self.close_connection = True

    def _status(self, hit: Hit, status: int, headers: dict[str, str] | None = None) -> None:
        hit.status = status
        body = b"<html><body>no</body></html>"
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(
        self, hit: Hit, location: str, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        hit.status = 302
        self.send_response(302)
        self.send_header("Location", location)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _to_cdn(self, hit: Hit, data: bytes, cdn: Site) -> None:
        """The Hub's answer for a large file: 302 to the CDN, signed, the file named."""
        digest = hashlib.sha256(data).hexdigest()
        blob = f"blobs/{digest}"
        token = os.urandom(8).hex()
        expires = time.time() + cdn.life
        with cdn.lock:
            cdn.files[blob] = data
            cdn.signatures[token] = expires
        query = f"Expires={expires:.3f}&" if cdn.expiry_in_query else ""
        query += f"Signature={token}&Key-Pair-Id=K"
        etag = f'"{digest}"'
        target = cdn.url(f"{blob}?{query}")
        self._redirect(
            hit,
            target,
            {
                "X-Linked-Size": str(len(data)),
                "X-Linked-Etag": etag,
                "X-Xet-Hash": hashlib.sha256(b"xet" + data).hexdigest(),
                "ETag": etag,
            },
            f"Found. Redirecting to {target}".encode(),  # as the Hub's
        )

    def _signed(self, site: Site) -> bool:
        """Whether the request carries a signature the CDN made, unexpired."""
        match = re.search(r"[?&]Signature=([0-9a-f]+)", self.path)
        expires = site.signatures.get(match[1]) if match else None
        return expires is not None and time.time() < expires


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # many threads connect at once; 5 would drop SYNs (1 s retries)
    site: Site
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        with self.site.lock:
            self.site.connections += 1
        if self.tls is not None:  # the handshake on the connection's thread (`setup`)
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up mid-body is part of the tests


@contextlib.contextmanager
def _serving(delays: list[float], tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    """A `Site` served on 127.0.0.1 until the block ends (over TLS with `tls`)."""
    server = Server(("127.0.0.1", 0), Handler)
    server.tls = tls
    server.site = Site(port=server.server_address[1], scheme="http" if tls is None else "https")
    server.site.delays = delays  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server.site
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)  # loopback only, never through a proxy
    delays: list[float] = []
    monkeypatch.setattr(remote, "sleep", delays.append)  # retries without waiting
    with _serving(delays) as served:
        yield served


@pytest.fixture
def loopback_hub(site: Site, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Site]:
    """The Hugging Face Hub as it serves files: `site` answers the resolve URLs (HF_ENDPOINT),
    the large files (`Site.linked`) with a 302 to its `cdn` (another port: another origin),
    which serves them at signed URLs only. No token of this machine, no offline mode."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_IMPLICIT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no saved login
    monkeypatch.setenv("HF_ENDPOINT", site.url("").rstrip("/"))
    with _serving(site.delays) as cdn:  # type: ignore[attr-defined]
        cdn.signing = True
        site.cdn = cdn
        yield site


# --- a scripted raw-socket server ----------------------------------------------------------

Reply = bytes | Callable[[socket.socket], None]
RawHandler = Callable[[int, dict[str, str]], Reply]


class RawServer:
    """HTTP on 127.0.0.1, scripted: ``handler(request number, headers)`` gives the reply (the
    headers lowercased; the request's path as ``":path"``)."""

    def __init__(self, handler: RawHandler) -> None:
        self.handler = handler
        self.requests: list[dict[str, str]] = []
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._loop, daemon=True).start()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/f"

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                request, *lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
                headers = {":path": request.split(" ")[1] if " " in request else ""}
                for line in lines:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                with self.lock:
                    number = len(self.requests)
                    self.requests.append(headers)
                reply = self.handler(number, headers)
                if callable(reply):
                    reply(conn)
                else:
                    conn.sendall(reply)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve() -> Iterator[Callable[[RawHandler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: RawHandler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def asked(headers: dict[str, str]) -> tuple[int, int]:
    match = re.fullmatch(r"bytes=(\d+)-(\d+)", headers.get("range", ""))
    assert match, headers
    return int(match[1]), int(match[2]) + 1


def partial(
    data: bytes, span: tuple[int, int], *, etag: str = '"v1"', cut: int | None = None
) -> bytes:
    start, stop = span[0], min(span[1], len(data))
    head = (
        f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{stop - 1}/{len(data)}\r\n"
        f"Content-Length: {stop - start}\r\nETag: {etag}\r\nConnection: close\r\n\r\n"
    )
    body = data[start:stop]
    return head.encode() + (body if cut is None else body[:cut])


def whole(data: bytes) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    return head.encode() + data


# --- HTTPS on loopback ---------------------------------------------------------------------


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, signed by its own key, and the key (PEM):
    made with the ``cryptography`` package, else the ``openssl`` command; the test is
    skipped when neither is here."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        if shutil.which("openssl") is None:
            pytest.skip("no certificate to serve HTTPS with: neither cryptography nor openssl")
        command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2"
        command += " -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1,DNS:localhost"
        subprocess.run(
            [*command.split(), "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
        )
        return cert, key
    import datetime
    import ipaddress

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    public = private.public_key()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


@pytest.fixture(params=["http", "https"])
def kept_site(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Site]:
    """`site` over HTTP/1.1 with connections kept open, and over HTTPS (a certificate of
    its own that the process's TLS context trusts: ``SSL_CERT_FILE``), counting the
    connections it accepts. The process's idle connections are closed before and after."""
    from safetensors_header._sources import http_wire

    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(http_wire.KEEP_ALIVE_VARIABLE, raising=False)
    delays: list[float] = []
    monkeypatch.setattr(remote, "sleep", delays.append)
    tls = None
    if request.param == "https":
        cert, key = self_signed(tmp_path)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    http_wire._default_context.cache_clear()  # made again, trusting it
    _close_idle()
    try:
        with _serving(delays, tls) as served:
            served.keep_alive = True
            yield served
    finally:
        _close_idle()
        http_wire._default_context.cache_clear()


def _close_idle() -> None:
    from safetensors_header._sources import http_wire

    for key in list(http_wire.CONNECTIONS.idle):
        http_wire.CONNECTIONS.drop(key)
