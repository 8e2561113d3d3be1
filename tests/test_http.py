"""read_header over HTTP(S), against a real server on loopback; and fsspec/obstore-like files.

The server (standard library only) counts every request and every body byte it sends, so the
tests assert the cost of a read, not only its result.
"""

from __future__ import annotations

import array
import io
import pickle
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import HeaderError, RemoteError, parse_header, read_header, read_ranges
from safetensors_header._sources import base as sources
from safetensors_header._sources.options import FIRST_READ

SMALL_READ = 1024  # a first read that keeps the test files small


def with_header_size(n: int, data: int = 16) -> bytes:
    """A valid file whose header is exactly `n` bytes (the JSON, then spaces)."""
    text = '{"a":' + f'{{"dtype":"U8","shape":[{data}],"data_offsets":[0,{data}]}}}}'
    assert len(text) <= n
    return build(text + " " * (n - len(text)), data)


GOOD = build({"__metadata__": {"k": "v"}, "a": tensor("F32", [2], 0, 8)}, b"abcdefgh", pad=True)


# --- the cost of a read: requests and bytes -------------------------------------------------


def test_small_header_is_one_request_with_the_default_first_read(site: Site) -> None:
    data = with_header_size(100_000)  # N < 100 KB, as for 97 % of popular models
    site.files["m.safetensors"] = data + bytes(0)
    header = read_header(site.url("m.safetensors"))
    assert header == read_header(data)
    [hit] = site.done(1)
    assert hit.range == f"bytes=0-{FIRST_READ - 1}"
    assert hit.sent == len(data) <= FIRST_READ


def test_large_header_is_two_requests_the_second_only_the_remainder(site: Site) -> None:
    n = 200_000
    data = with_header_size(n, data=300_000)
    site.files["m.safetensors"] = data
    header = read_header(site.url("m.safetensors"))
    assert header == read_header(data)
    assert header.file_size == len(data)
    first, second = site.done(2)
    assert first.range == f"bytes=0-{FIRST_READ - 1}"
    assert second.range == f"bytes={FIRST_READ}-{8 + n - 1}"
    assert (first.sent, second.sent) == (FIRST_READ, 8 + n - FIRST_READ)
    assert site.sent == 8 + n <= FIRST_READ + n


@pytest.mark.parametrize(
    ("stop", "requests"),
    [(SMALL_READ - 1, 1), (SMALL_READ, 1), (SMALL_READ + 1, 2)],
    ids=["one-less", "equal", "one-more"],
)
def test_range_arithmetic_at_the_boundary(site: Site, stop: int, requests: int) -> None:
    data = with_header_size(stop - 8)  # 8 + N == stop
    site.files["m.safetensors"] = data
    header = read_header(site.url("m.safetensors"), first_read=SMALL_READ)
    assert header.data_start == stop
    assert header == read_header(data)
    hits = site.done(requests)
    assert len(hits) == requests
    assert hits[0].range == f"bytes=0-{SMALL_READ - 1}"
    if requests == 2:
        assert hits[1].range == f"bytes={SMALL_READ}-{SMALL_READ}"  # one byte, inclusive
        assert hits[1].sent == 1
    assert site.sent <= SMALL_READ + header.header_size


def test_file_smaller_than_the_first_read(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    header = read_header(site.url("m.safetensors"))
    assert header.file_size == len(GOOD)
    [hit] = site.done(1)
    assert hit.status == 206
    assert hit.sent == len(GOOD)


def test_content_range_total_is_the_file_size_for_the_coverage_rule(site: Site) -> None:
    site.files["m.safetensors"] = GOOD + b"x"
    with pytest.raises(HeaderError) as info:
        read_header(site.url("m.safetensors"))
    assert info.value.kind == "MetadataIncompleteBuffer"
    site.files["n.safetensors"] = with_header_size(4000) + b"trailing"
    with pytest.raises(HeaderError) as info:
        read_header(site.url("n.safetensors"), first_read=SMALL_READ)
    assert info.value.kind == "MetadataIncompleteBuffer"


def test_length_prefix_is_judged_before_a_second_request(site: Site) -> None:
    site.files["big-n"] = with_header_size(5000)
    site.files["lying-n"] = build("{}", n=50_000)  # 8 + N past the end of the file
    site.files["html"] = b"<!DOCTYPE html><html>" + bytes(2000)
    with pytest.raises(HeaderError) as info:
        read_header(site.url("big-n"), first_read=SMALL_READ, max_header_size=4000)
    assert info.value.kind == "HeaderTooLarge"
    with pytest.raises(HeaderError) as info:
        read_header(site.url("lying-n"), first_read=SMALL_READ)
    assert info.value.kind == "InvalidHeaderLength"
    with pytest.raises(HeaderError, match="starts with b'<!DOCTYP'") as info:
        read_header(site.url("html"), first_read=SMALL_READ)
    assert info.value.kind == "HeaderTooLarge"
    assert len(site.done(3)) == 3  # one request each


def test_empty_and_tiny_files(site: Site) -> None:
    site.files["empty"] = b""
    site.files["tiny"] = b"1234567"
    for name in ("empty", "tiny"):
        with pytest.raises(HeaderError) as info:
            read_header(site.url(name))
        assert info.value.kind == "HeaderTooSmall"
    assert [hit.status for hit in site.done(2)] == [416, 206]


def test_416_without_content_range_falls_back_to_a_plain_get(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    site.mode = "bare-416"
    assert read_header(site.url("m.safetensors")).file_size == len(GOOD)
    first, second = site.done(2)
    assert (first.status, second.status) == (416, 200)
    assert second.range is None


def test_bad_length_prefix_with_a_tiny_first_read_fetches_the_bytes_for_the_hint(
    site: Site,
) -> None:
    site.files["page.html"] = b"<!DOCTYPE html><html><body>Log in</body></html>" + bytes(4000)
    with pytest.raises(HeaderError, match="HTML") as info:
        read_header(site.url("page.html"), first_read=8)
    assert info.value.kind == "HeaderTooLarge"
    first, second = site.done(2)
    assert (first.range, second.range) == ("bytes=0-7", "bytes=8-63")  # 64 bytes in all


# --- one parse per read: the size comes from bytes_needed, not from a failed parse ----------


@dataclass
class Counted:
    """What one read_header(url) did inside the package."""

    parses: int = 0  # calls of parse_header by the remote source
    built: list[str] = field(default_factory=list)  # the kind of every HeaderError made


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counted:
    seen = Counted()
    real_init = HeaderError.__init__

    def counting_parse_header(*args: Any, **kwargs: Any) -> Any:
        seen.parses += 1
        return parse_header(*args, **kwargs)

    def init(self: HeaderError, kind: str, message: str, **kwargs: Any) -> None:
        seen.built.append(kind)
        real_init(self, kind, message, **kwargs)

    monkeypatch.setattr(sources, "parse_header", counting_parse_header)
    monkeypatch.setattr(HeaderError, "__init__", init)
    return seen


def _serve(site: Site, case: str) -> tuple[str, int, int]:
    """Set the site up for `case`: the path to read, its header size N, the requests it takes."""
    site.files["m"] = with_header_size(3000)
    if case == "one-request":
        site.files["m"] = with_header_size(500)
        return "m", 500, 1
    if case == "range-ignored":
        site.mode = "ignore"
        return "m", 3000, 1
    if case == "range-ignored-no-length":
        site.mode, site.send_length = "ignore", False
        return "m", 3000, 1
    if case == "unknown-total":
        site.mode = "star"
    elif case == "replaced":  # If-Range does not match: the second reply is a 200
        site.replace_after_first = {"m": with_header_size(2000, data=24)}
        return "m", 2000, 2
    elif case == "redirected":
        return "away/m", 3000, 3
    return "m", 3000, 2


@pytest.mark.parametrize(
    "case",
    [
        "one-request",
        "remainder",
        "range-ignored",
        "range-ignored-no-length",
        "unknown-total",
        "replaced",
        "redirected",
    ],
)
def test_a_read_parses_once_and_never_learns_a_size_from_an_error(
    site: Site, counted: Counted, case: str
) -> None:
    path, n, requests = _serve(site, case)
    header = read_header(site.url(path), first_read=SMALL_READ)
    assert header.header_size == n
    assert counted.parses == 1
    assert counted.built == []  # no PrefixTooShort (or any error) made and caught on the way
    assert len(site.done(requests)) == requests


HTML = b"<!DOCTYPE html><html>" + bytes(2000)
# id -> (the file, the site's mode, first_read, the verdict)
FAILED_READS: dict[str, tuple[bytes, str, int, str]] = {
    "coverage": (GOOD + b"x", "range", SMALL_READ, "MetadataIncompleteBuffer"),
    "coverage-after-the-remainder": (
        with_header_size(3000) + b"x",
        "range",
        SMALL_READ,
        "MetadataIncompleteBuffer",
    ),
    "coverage-range-ignored": (
        with_header_size(3000) + b"x",
        "ignore",
        SMALL_READ,
        "MetadataIncompleteBuffer",
    ),
    "html": (HTML, "range", SMALL_READ, "HeaderTooLarge"),
    "html-tiny-first-read": (HTML, "range", 8, "HeaderTooLarge"),
    "html-range-ignored": (HTML, "ignore", SMALL_READ, "HeaderTooLarge"),
    "lying-length": (build("{}", n=50_000), "range", SMALL_READ, "InvalidHeaderLength"),
    "empty": (b"", "range", SMALL_READ, "HeaderTooSmall"),
    "tiny-range-ignored": (b"1234", "ignore", SMALL_READ, "HeaderTooSmall"),
}


@pytest.mark.parametrize("case", list(FAILED_READS))
def test_a_failed_read_makes_one_error_the_verdict(site: Site, counted: Counted, case: str) -> None:
    content, site.mode, first_read, kind = FAILED_READS[case]
    site.files["m"] = content
    with pytest.raises(HeaderError) as info:
        read_header(site.url("m"), first_read=first_read)
    assert info.value.kind == kind
    assert counted.built == [kind]  # the verdict, and no error caught to learn a size
    assert counted.parses <= 1


# --- servers that do not honour Range -------------------------------------------------------


def test_range_ignored_reads_only_the_header_and_hangs_up(site: Site) -> None:
    data = with_header_size(4000, data=32 << 20)  # a 32 MiB body, sent slowly
    site.files["m.safetensors"] = data
    site.mode = "ignore"
    started = time.monotonic()
    header = read_header(site.url("m.safetensors"), first_read=SMALL_READ)
    elapsed = time.monotonic() - started
    assert header == read_header(data)
    assert header.file_size == len(data)  # from Content-Length
    [hit] = site.done(1)
    assert hit.status == 200
    # The client read 8 + N bytes and closed; the server sent what socket buffers took.
    print(f"200 case: server sent {hit.sent:,} bytes, client needed {header.data_start:,}")
    assert hit.sent < 4 << 20
    assert elapsed < 1


def test_range_ignored_without_content_length(site: Site) -> None:
    site.files["m.safetensors"] = GOOD + b"trailing"
    site.mode = "ignore"
    site.send_length = False
    header = read_header(site.url("m.safetensors"))
    assert header.file_size is None  # no size: the coverage rule is skipped
    assert header.data_start == read_header(GOOD).data_start


def test_range_ignored_and_coverage_checked_from_content_length(site: Site) -> None:
    site.files["m.safetensors"] = GOOD + b"x"
    site.mode = "ignore"
    with pytest.raises(HeaderError) as info:
        read_header(site.url("m.safetensors"))
    assert info.value.kind == "MetadataIncompleteBuffer"


def test_range_ignored_bad_length_prefix_stops_early(site: Site) -> None:
    site.files["m"] = (10**9).to_bytes(8, "little") + bytes(4 << 20)
    site.files["page.html"] = b"<!DOCTYPE html><html><body>Log in</body></html>" + bytes(4 << 20)
    site.mode = "ignore"
    with pytest.raises(HeaderError) as info:
        read_header(site.url("m"))
    assert info.value.kind == "HeaderTooLarge"
    with pytest.raises(HeaderError, match="HTML") as info:  # enough bytes for the hint
        read_header(site.url("page.html"))
    assert info.value.kind == "HeaderTooLarge"
    assert all(hit.sent < 1 << 20 for hit in site.done(2))


def test_unknown_total_in_content_range(site: Site) -> None:
    site.files["m.safetensors"] = GOOD + b"trailing"
    site.mode = "star"
    header = read_header(site.url("m.safetensors"))
    assert header.file_size is None
    data = with_header_size(3000)
    site.files["n.safetensors"] = data
    header = read_header(site.url("n.safetensors"), first_read=SMALL_READ)
    assert header.file_size is None
    assert header.data_start == 3008
    assert [hit.range for hit in site.done(3)][1:] == ["bytes=0-1023", "bytes=1024-3007"]


def test_file_replaced_between_the_two_requests(site: Site) -> None:
    old, new = with_header_size(3000), with_header_size(2000, data=24)
    site.files["m.safetensors"] = old
    site.replace_after_first = {"m.safetensors": new}
    header = read_header(site.url("m.safetensors"), first_read=SMALL_READ)
    assert header == read_header(new)  # If-Range did not match: the new file, from a 200
    first, second = site.done(2)
    assert second.if_range is not None
    assert (first.status, second.status) == (206, 200)
    assert second.sent < 4 << 20


def test_file_replaced_between_the_two_requests_without_an_etag(site: Site) -> None:
    site.files["m.safetensors"] = with_header_size(3000)
    site.replace_after_first = {"m.safetensors": with_header_size(3000, data=24)}
    site.send_etag = False
    with pytest.raises(
        HeaderError,
        match=r"changed between two reads \(its size was 3,024 bytes and is 3,032 now\)",
    ):
        read_header(site.url("m.safetensors"), first_read=SMALL_READ)
    assert site.done(2)[1].if_range is None


def test_range_ignored_on_a_tiny_file(site: Site) -> None:
    site.files["tiny"] = b"1234"
    site.mode = "ignore"
    with pytest.raises(HeaderError) as info:
        read_header(site.url("tiny"))
    assert info.value.kind == "HeaderTooSmall"


def test_scheme_is_case_insensitive(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    assert read_header(site.url("m.safetensors").replace("http:", "HTTP:")).file_size == len(GOOD)


# --- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (401, "HTTP 401 Unauthorized .* pass headers="),
        (403, "HTTP 403 Forbidden .* gated"),
        (404, "HTTP 404 Not Found .* check the URL"),
        (410, "HTTP 410 Gone for"),
        (499, r"HTTP 499 \(an unknown status\) for"),
    ],
    ids=["401", "403", "404", "410", "499"],
)
def test_client_errors_say_so_and_are_not_retried(site: Site, status: int, words: str) -> None:
    url = site.url(f"status/{status}")
    with pytest.raises(RemoteError, match=words) as info:
        read_header(url)
    assert info.value.status == status
    assert isinstance(info.value, OSError)
    assert info.value.strerror == str(info.value)
    assert "too large" not in str(info.value)
    assert info.value.__cause__ is None
    assert len(site.done(1)) == 1


def test_missing_file_is_a_404(site: Site) -> None:
    with pytest.raises(RemoteError, match="404") as info:
        read_header(site.url("nothing.safetensors"))
    assert info.value.url == site.url("nothing.safetensors")


def test_query_string_and_user_info_are_redacted(site: Site) -> None:
    url = site.url("status/403?X-Amz-Signature=secret&token=hunter2")
    url = url.replace("http://", "http://user:pw@")
    with pytest.raises(RemoteError) as info:
        read_header(url)
    for secret in ("secret", "hunter2", "user", "pw@"):
        assert secret not in str(info.value)
        assert secret not in info.value.url
    assert "status/403?<redacted>" in info.value.url


def test_5xx_is_retried_with_backoff_then_reported(site: Site) -> None:
    site.failures = [503, 503, 503]
    with pytest.raises(RemoteError, match=r"HTTP 503 Service Unavailable .*\(3 attempts\)") as info:
        read_header(site.url("m.safetensors"))
    assert info.value.status == 503
    assert len(site.done(3)) == 3
    delays = site.delays  # type: ignore[attr-defined]
    assert len(delays) == 2
    assert 0.125 <= delays[0] <= 0.25
    assert 0.25 <= delays[1] <= 0.5


def test_a_transient_failure_then_success(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    site.failures = [500, "close"]  # a 500, then a body cut short
    assert read_header(site.url("m.safetensors")) == read_header(GOOD)
    assert [hit.status for hit in site.done(3)] == [500, 206, 206]


def test_no_retries_when_asked(site: Site) -> None:
    site.failures = [502]
    with pytest.raises(RemoteError, match="no retries"):
        read_header(site.url("m.safetensors"), retries=0)
    assert len(site.done(1)) == 1


def test_501_is_not_retried(site: Site) -> None:
    site.failures = [501]
    with pytest.raises(RemoteError) as info:
        read_header(site.url("m.safetensors"))
    assert info.value.status == 501
    assert len(site.done(1)) == 1


def test_server_that_closes_mid_body(site: Site) -> None:
    site.files["m.safetensors"] = with_header_size(4000)
    site.failures = ["close", "close", "close"]
    with pytest.raises(
        RemoteError, match=r"closed after 512 of 1,024 bytes \(3 attempts\)"
    ) as info:
        read_header(site.url("m.safetensors"), first_read=SMALL_READ)
    assert info.value.status is None
    assert isinstance(info.value.__cause__, ConnectionError)


def test_server_that_closes_mid_body_on_a_200(site: Site) -> None:
    site.files["m.safetensors"] = with_header_size(4000)
    site.mode = "ignore"
    site.failures = ["close"]
    with pytest.raises(RemoteError, match="closed after 2,012 of 4,024 bytes"):
        read_header(site.url("m.safetensors"), retries=0)


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        (
            "bad-range",
            r"\(redirected to .*\) answered Range bytes=0-131071 with Content-Range "
            r"'bytes 1-\d+/\d+'; expected bytes 0-",
        ),
        ("no-content-range", "answered 206 without a usable Content-Range"),
        ("bad-length", "sent Content-Length 95 with Content-Range 'bytes 0-95/96'"),
    ],
    ids=["bad-range", "no-content-range", "bad-length"],
)
def test_wrong_content_range_is_an_error_not_retried(site: Site, mode: str, words: str) -> None:
    site.files["m.safetensors"] = GOOD
    site.mode = mode
    with pytest.raises(RemoteError, match=words) as info:
        read_header(site.url("away/m.safetensors"))
    assert info.value.status is None
    assert len(site.done(2)) == 2  # the redirect, then one request: never retried


def test_unexpected_success_status(site: Site) -> None:
    site.failures = [204]
    with pytest.raises(RemoteError, match="answered HTTP 204 No Content to a GET with bytes=0-"):
        read_header(site.url("m.safetensors"))


def test_encoded_body_is_refused(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    site.mode = "gzip"
    with pytest.raises(RemoteError, match="Content-Encoding gzip"):
        read_header(site.url("m.safetensors"))


def test_connection_refused_is_a_remote_error_after_retries(site: Site) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(RemoteError, match=r"could not read .*refused.*\(3 attempts\)") as info:
        read_header(f"http://127.0.0.1:{port}/m.safetensors")
    assert info.value.status is None
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_timeout_is_a_remote_error(site: Site) -> None:
    site.failures = ["stall"]
    started = time.monotonic()
    with pytest.raises(RemoteError, match="timed out") as info:
        read_header(site.url("m.safetensors"), timeout=0.2, retries=0)
    assert time.monotonic() - started < 0.9
    assert isinstance(info.value.__cause__, TimeoutError)


def test_malformed_url_is_not_retried(site: Site) -> None:
    with pytest.raises(RemoteError, match="could not read") as info:
        read_header("http://127.0.0.1:notaport/x")
    assert not site.delays  # type: ignore[attr-defined]
    assert info.value.status is None


def test_url_without_a_host(site: Site) -> None:
    with pytest.raises(RemoteError, match="could not read http:///x: no host given"):
        read_header("http:///x")
    assert not site.delays  # type: ignore[attr-defined]


def test_unreadable_url_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="IPv6"):
        read_header("http://[::1/x")


def test_certificate_errors_are_not_retried() -> None:
    import ssl
    import urllib.error

    from safetensors_header._sources.http_replies import transient
    from safetensors_header._sources.urls import redact

    assert not transient(ssl.SSLCertVerificationError("certificate verify failed"))
    assert not transient(urllib.error.URLError("unknown url type"))
    assert transient(ConnectionResetError())
    assert redact("http://[::1/x") == "<an unreadable URL>"


def test_remote_error_pickles() -> None:
    error = RemoteError("HTTP 404 Not Found for u", url="u", status=404)
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.url, copy.status, copy.strerror) == (str(error), "u", 404, str(error))


@pytest.mark.parametrize(
    ("option", "value"),
    [("first_read", 7), ("timeout", 0), ("retries", -1)],
    ids=["first_read", "timeout", "retries"],
)
def test_options_out_of_range(site: Site, option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=option):
        read_header(site.url("m.safetensors"), **{option: value})
    assert not site.hits


def test_url_options_are_ignored_for_local_sources(tmp_path: Path) -> None:
    path = tmp_path / "f.safetensors"
    path.write_bytes(GOOD)
    options: dict[str, Any] = {"headers": {"Authorization": "x"}, "timeout": 1, "first_read": 8}
    assert read_header(path, **options) == read_header(str(path), **options) == read_header(GOOD)


# --- credentials and redirects --------------------------------------------------------------


def test_redirect_to_another_host_drops_credentials_and_keeps_range(site: Site) -> None:
    n = 3000
    site.files["m.safetensors"] = with_header_size(n)
    secrets = {"Authorization": "Bearer hf_secret", "Cookie": "session=1", "X-Trace": "t"}
    header = read_header(site.url("away/m.safetensors"), headers=secrets, first_read=SMALL_READ)
    assert header.data_start == 8 + n
    redirect, first, second = site.done(3)
    assert (redirect.status, redirect.authorization, redirect.cookie) == (
        302,
        "Bearer hf_secret",
        "session=1",
    )
    assert first.host == f"localhost:{site.port}"
    assert (first.authorization, first.cookie) == (None, None)
    assert first.range == f"bytes=0-{SMALL_READ - 1}"
    # The remainder goes straight to where the first request ended up, still without them.
    assert second.host == f"localhost:{site.port}"
    assert second.path == "/m.safetensors"
    assert (second.authorization, second.cookie) == (None, None)
    assert second.range == f"bytes={SMALL_READ}-{8 + n - 1}"


def test_redirect_on_the_same_origin_keeps_credentials(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    read_header(site.url("here/m.safetensors"), headers={"authorization": "Bearer t"})
    redirect, hit = site.done(2)
    assert redirect.status == 302
    assert hit.authorization == "Bearer t"
    assert hit.range == f"bytes=0-{FIRST_READ - 1}"


def test_error_after_a_redirect_names_both_urls(site: Site) -> None:
    with pytest.raises(
        RemoteError, match=r"status/404 \(redirected to http://localhost:\d+/status/404\)"
    ):
        read_header(site.url("away/status/404"))


def test_caller_range_headers_are_replaced(site: Site) -> None:
    site.files["m.safetensors"] = GOOD
    read_header(site.url("m.safetensors"), headers={"range": "bytes=5-6", "If-Range": '"x"'})
    [hit] = site.done(1)
    assert hit.range == f"bytes=0-{FIRST_READ - 1}"
    assert hit.if_range is None


# --- threads --------------------------------------------------------------------------------


def test_many_threads_at_once(site: Site) -> None:
    files = {f"{n}.safetensors": with_header_size(n) for n in (500, 1500, 2500, 3500)}
    site.files.update(files)
    names = sorted(files) * 8

    def read(name: str) -> tuple[str, int]:
        header = read_header(site.url(name), first_read=SMALL_READ)
        return name, header.header_size

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(read, names))
    assert results == [(name, int(name.split(".")[0])) for name in names]
    # 500 fits the first read; the others need exactly one more request each.
    assert len(site.done(8 * 7)) == 8 * 7


# --- file-like objects: fsspec, obstore ------------------------------------------------------


def test_fsspec_memory_file() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    data = with_header_size(3000, data=1 << 20)
    with fs.open("/models/m.safetensors", "wb") as file:
        file.write(data)
    try:
        with fs.open("/models/m.safetensors", "rb") as file:
            header = read_header(file)
            assert file.tell() == header.data_start  # read only the header
        assert header == read_header(data)
        assert header.file_size == len(data)
    finally:
        fs.rm("/models/m.safetensors")


def test_fsspec_local_file(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    data = with_header_size(3000, data=1 << 20)
    (tmp_path / "m.safetensors").write_bytes(data)
    with fsspec.open(f"file://{tmp_path / 'm.safetensors'}", "rb") as file:
        header = read_header(file)
        assert file.tell() == header.data_start
    assert header == read_header(data)


class BufferReader:
    """Like obstore's ReadableFile: read() returns a buffer that is not bytes (obstore.Bytes)."""

    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._inner.seek(offset, whence)

    def read(self, size: int = -1) -> array.array[int]:
        return array.array("B", self._inner.read(size))


def test_reader_returning_another_buffer_type() -> None:
    assert read_header(BufferReader(GOOD)) == read_header(GOOD)


def test_obstore_reader() -> None:
    obstore = pytest.importorskip("obstore")
    from obstore.store import MemoryStore

    store = MemoryStore()
    data = with_header_size(3000, data=1 << 20)
    obstore.put(store, "m.safetensors", data)
    reader = obstore.open_reader(store, "m.safetensors")
    assert read_header(reader) == read_header(data)


def test_a_plain_http_store_refused_by_obstore_says_what_to_pass(site: Site) -> None:
    store_module = pytest.importorskip("obstore.store")
    site.files["m.safetensors"] = GOOD
    base = site.url("")
    refused = store_module.HTTPStore.from_url(base)
    with pytest.raises(RemoteError) as info:
        read_header((refused, "m.safetensors"))
    assert str(info.value).startswith(
        "could not read m.safetensors in HTTPStore: obstore refuses plain http:// unless the "
        "store allows it: make it with client_options={'allow_http': True}"
    )
    allowed = store_module.HTTPStore.from_url(base, client_options={"allow_http": True})
    assert read_header((allowed, "m.safetensors")).file_size == len(GOOD)


def test_a_range_past_the_end_of_a_url_is_the_error_a_local_file_gives(site: Site) -> None:
    """Not a buffer of the range's length made first (4.5 PB: a MemoryError)."""
    site.files["m"] = with_header_size(100)
    size = len(site.files["m"])
    for ranges in ([(0, 1 << 52)], [(size - 10, 100)], [(1 << 40, 1 << 22)]):
        with pytest.raises(HeaderError, match=f"the file is {size:,} bytes") as caught:
            read_ranges(site.url("m"), ranges)
        assert caught.value.kind == "MetadataIncompleteBuffer"


@pytest.mark.parametrize("timeout", [1e10, 1e300, float("inf")])
def test_a_timeout_longer_than_a_socket_takes_is_no_bound(site: Site, timeout: float) -> None:
    site.files["m"] = with_header_size(100)
    assert read_header(site.url("m"), timeout=timeout) == read_header(site.files["m"])
    assert read_ranges(site.url("m"), [(0, 8)], timeout=timeout) == [site.files["m"][:8]]
