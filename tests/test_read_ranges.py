"""read_ranges, TensorInfo.read: the bytes of a file, from every source, in the fewest requests.

Against the loopback server of `loopback`, which counts requests and body bytes.
"""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import bounded, run_child
from hypothesis import example, given
from hypothesis import strategies as st
from loopback import Site

from safetensors_header import HeaderError, RemoteError, read_header, read_ranges, read_tensor
from safetensors_header._sources.options import LOCAL_GAP, REMOTE_GAP
from safetensors_header.plan import plan_reads

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

ROWS, COLUMNS = 64, 256  # a row-major F32 matrix: a row is 1 KiB
TENSORS = {
    "embed": np.arange(ROWS * COLUMNS, dtype=np.float32).reshape(ROWS, COLUMNS),
    "bias": np.arange(COLUMNS, dtype=np.float32),
    "norm": np.ones(COLUMNS, dtype=np.float16),
    "empty": np.zeros((0, 4), dtype=np.int32),
}
FILE = safetensors_numpy.save(TENSORS)
HEADER = read_header(FILE)


def expected(ranges: list[tuple[int, int]], data: bytes = FILE) -> list[bytes]:
    return [data[offset : offset + length] for offset, length in ranges]


SOME_RANGES = [
    (HEADER.tensors["bias"].start, HEADER.tensors["bias"].nbytes),
    (0, 8),
    (100, 0),  # empty: b""
    (HEADER.tensors["embed"].start + 10, 5),  # overlaps the next one
    (HEADER.tensors["embed"].start + 12, 40),
    (len(FILE) - 3, 3),  # the very end
    (0, 8),  # twice
]


# --- every source gives the same bytes -----------------------------------------------------


def _sources(tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "m.safetensors"
    path.write_bytes(FILE)
    return {
        "path": path,
        "str-path": str(path),
        "bytes": FILE,
        "bytearray": bytearray(FILE),
        "memoryview": memoryview(FILE),
        "file-object": io.BytesIO(FILE),
    }


@pytest.mark.parametrize(
    "kind", ["path", "str-path", "bytes", "bytearray", "memoryview", "file-object"]
)
def test_every_local_source_gives_the_bytes(tmp_path: Path, kind: str) -> None:
    source = _sources(tmp_path)[kind]
    assert read_ranges(source, SOME_RANGES) == expected(SOME_RANGES)
    assert read_ranges(source, SOME_RANGES, gap=0) == expected(SOME_RANGES)


def test_a_file_object_keeps_its_position() -> None:
    file = io.BytesIO(FILE)
    file.seek(17)
    read_ranges(file, SOME_RANGES)
    assert file.tell() == 17


def test_fsspec_url_and_filesystem_pair() -> None:
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/ranges/m.safetensors", FILE)
    try:
        assert read_ranges("memory://ranges/m.safetensors", SOME_RANGES) == expected(SOME_RANGES)
        assert read_ranges((fs, "/ranges/m.safetensors"), SOME_RANGES) == expected(SOME_RANGES)
        assert read_header("memory://ranges/m.safetensors") == HEADER
        assert read_header((fs, "/ranges/m.safetensors")) == HEADER
    finally:
        fs.rm("/ranges/m.safetensors")


def test_obstore_pair() -> None:
    store_module = pytest.importorskip("obstore.store")
    store = store_module.MemoryStore()
    store.put("m.safetensors", FILE)
    assert read_ranges((store, "m.safetensors"), SOME_RANGES) == expected(SOME_RANGES)
    assert read_header((store, "m.safetensors")) == HEADER
    # Ranges past the end are cut before obstore sees them (it panics on those).
    with pytest.raises(HeaderError, match="ends before the range") as info:
        read_ranges((store, "m.safetensors"), [(0, 4), (len(FILE) + 10, 4)])
    assert info.value.kind == "MetadataIncompleteBuffer"


@bounded(100)
@given(
    data=st.binary(max_size=3000),
    ranges=st.lists(st.tuples(st.integers(0, 3100), st.integers(0, 400)), max_size=12),
    gap=st.integers(0, 5000),
)
def test_property_same_bytes_as_slicing(
    data: bytes, ranges: list[tuple[int, int]], gap: int
) -> None:
    file = io.BytesIO(data)
    if all(offset + length <= len(data) for offset, length in ranges if length):
        want = expected(ranges, data)
        assert read_ranges(data, ranges, gap=gap) == want
        assert read_ranges(file, ranges, gap=gap) == want
    else:
        for source in (data, file):
            with pytest.raises(HeaderError) as info:
                read_ranges(source, ranges, gap=gap)
            assert info.value.kind == "MetadataIncompleteBuffer"


# --- bad arguments --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ranges", "error", "words"),
    [
        ([(-1, 4)], ValueError, "0 or more"),
        ([(0, -4)], ValueError, "0 or more"),
        ([(0.5, 4)], TypeError, "pair of ints"),
        ([(0, 4, 5)], TypeError, "pair of ints"),
        ([7], TypeError, "pair of ints"),
    ],
    ids=["negative-offset", "negative-length", "float", "triple", "int"],
)
def test_bad_ranges(ranges: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        read_ranges(FILE, ranges)


def test_bad_gap_and_bad_source(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gap"):
        read_ranges(tmp_path / "none", [(0, 1)], gap=-1)  # before opening anything
    with pytest.raises(TypeError, match="expected a path, a URL"):
        read_ranges(12, [(0, 1)])  # type: ignore[arg-type]


def test_no_ranges_and_empty_ranges_read_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing.safetensors"
    assert read_ranges(missing, []) == []
    assert read_ranges(missing, [(10, 0), (99, 0)]) == [b"", b""]  # never opened


def test_past_the_end_of_a_file(tmp_path: Path) -> None:
    path = _sources(tmp_path)["path"]
    with pytest.raises(HeaderError, match=f"the file is {len(FILE):,} bytes") as info:
        read_ranges(path, [(len(FILE) - 2, 4)])
    assert info.value.kind == "MetadataIncompleteBuffer"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs POSIX pipes")
def test_a_pipe_cannot_be_read_in_ranges() -> None:
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(ValueError, match="needs a file it can seek in"):
            read_ranges(f"/dev/fd/{read_end}", [(0, 4)])
        with os.fdopen(os.dup(read_end), "rb") as pipe, pytest.raises(ValueError, match="seek"):
            read_ranges(pipe, [(0, 4)])
    finally:
        os.close(read_end)
        os.close(write_end)


def test_threads_share_one_path_safely(tmp_path: Path) -> None:
    path = _sources(tmp_path)["path"]
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for _ in range(50):
                assert read_ranges(path, [(offset, 64)]) == [FILE[offset : offset + 64]]
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(0, 800, 100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# --- read_tensor -----------------------------------------------------------------------------


def test_tensor_read_whole_and_a_slice(tmp_path: Path) -> None:
    path = _sources(tmp_path)["path"]
    embed = HEADER.tensors["embed"]
    assert read_tensor(path, embed) == TENSORS["embed"].tobytes()
    key = np.s_[3:9, 100:104]
    assert read_tensor(path, embed, key) == np.ascontiguousarray(TENSORS["embed"][key]).tobytes()
    assert read_tensor(path, "embed", key) == read_tensor(path, embed, key)  # by name
    assert read_tensor(FILE, HEADER.tensors["empty"]) == b""


# --- over HTTP: the cost ---------------------------------------------------------------------


def test_one_tensor_is_one_request(site: Site) -> None:
    site.files["m"] = FILE
    embed = HEADER.tensors["embed"]
    assert read_tensor(site.url("m"), embed) == TENSORS["embed"].tobytes()
    [hit] = site.done(1)
    assert hit.range == f"bytes={embed.start}-{embed.end - 1}"
    assert hit.sent == embed.nbytes


def test_adjacent_tensors_are_one_request(site: Site) -> None:
    site.files["m"] = FILE
    infos = [info for info in HEADER.tensors.values() if info.nbytes]
    pieces = read_ranges(site.url("m"), [(info.start, info.nbytes) for info in infos], gap=0)
    assert pieces == [FILE[info.start : info.end] for info in infos]
    [hit] = site.done(1)
    assert hit.sent == sum(info.nbytes for info in infos)


def test_a_column_slice_costs_what_the_gap_allows(site: Site) -> None:
    site.files["m"] = FILE
    embed = HEADER.tensors["embed"]
    key = np.s_[:, 8:16]  # 32 bytes of every 1 KiB row
    ranges = embed.byte_ranges(key)
    assert len(ranges) == ROWS
    want = np.ascontiguousarray(TENSORS["embed"][key]).tobytes()
    # gap=0: rows are 992 bytes apart, so every row is a request (in parallel).
    assert b"".join(read_ranges(site.url("m"), ranges, gap=0)) == want
    assert len(site.done(ROWS)) == ROWS
    assert site.sent == len(want)
    # A gap of a row: one request for the whole span, the bytes between dropped.
    assert b"".join(read_ranges(site.url("m"), ranges, gap=1024)) == want
    assert len(site.done(ROWS + 1)) == ROWS + 1
    assert site.hits[-1].sent == ranges[-1][0] + ranges[-1][1] - ranges[0][0]
    # Half a row: still one request per row.
    read_ranges(site.url("m"), ranges, gap=512)
    assert len(site.done(2 * ROWS + 1)) == 2 * ROWS + 1


def test_default_gaps() -> None:
    assert REMOTE_GAP == 1 << 20
    assert LOCAL_GAP == 4096


def test_empty_ranges_send_no_request(site: Site) -> None:
    site.files["m"] = FILE
    assert read_ranges(site.url("m"), [(5, 0), (0, 0)]) == [b"", b""]
    assert site.hits == []


def test_server_ignoring_range_is_read_once(site: Site) -> None:
    big = safetensors_numpy.save({"a": np.zeros(1 << 20, np.float32), "b": np.ones(4, np.int8)})
    header = read_header(big)
    site.files["m"] = big
    site.mode = "ignore"
    a, b = header.tensors["a"], header.tensors["b"]
    ranges = [(a.start, 64), (a.start + 2_000_000, 64), (b.start, 4)]
    assert read_ranges(site.url("m"), ranges, gap=0) == expected(ranges, big)
    [hit] = site.done(1)  # one body, not one per range
    assert hit.status == 200
    # Read as far as the last range ends, then closed; not the whole file per range.
    assert hit.sent <= b.end + (4 << 20)


def test_retried_after_a_5xx(site: Site) -> None:
    site.files["m"] = FILE
    site.failures = [503, 500]
    assert read_ranges(site.url("m"), SOME_RANGES) == expected(SOME_RANGES)
    assert [hit.status for hit in site.done(3)] == [503, 500, 206]


def test_a_file_replaced_between_requests_is_an_error(site: Site) -> None:
    site.files["m"] = FILE
    site.replace_after_first = {"m": FILE.replace(b"F32", b"F16")}
    far_apart = [(0, 8), (len(FILE) - 8, 8)]
    with pytest.raises(HeaderError, match="replaced since the first request") as caught:
        read_ranges(site.url("m"), far_apart, gap=0)
    assert caught.value.kind == "FileChanged"
    assert site.done(2)[1].if_range is not None


def test_past_the_end_over_http(site: Site) -> None:
    site.files["m"] = FILE
    with pytest.raises(HeaderError, match=f"the file is {len(FILE):,} bytes") as info:
        read_ranges(site.url("m"), [(0, 8), (len(FILE) + 100, 8)], gap=0)  # a 416
    assert info.value.kind == "MetadataIncompleteBuffer"
    with pytest.raises(HeaderError, match="ends before the range"):
        read_ranges(site.url("m"), [(len(FILE) - 4, 8)])  # cut short by the end


def test_redirected_once_then_straight_to_the_final_url(site: Site) -> None:
    site.files["m"] = FILE
    ranges = [(0, 8), (HEADER.tensors["bias"].start, 16), (len(FILE) - 8, 8)]
    assert read_ranges(site.url("here/m"), ranges, gap=0) == expected(ranges)
    paths = [hit.path for hit in site.done(4)]
    assert paths == ["/here/m", "/m", "/m", "/m"]


def test_only_safe_headers_cross_to_another_origin(site: Site) -> None:
    site.files["m"] = FILE
    headers = {
        "Authorization": "Bearer secret",
        "Cookie": "session=1",
        "Proxy-Authorization": "Basic x",
        "X-Api-Key": "k",
        "Private-Token": "t",
        "X-Amz-Security-Token": "s",
        "User-Agent": "loader/1",
        "Accept": "*/*",
    }
    read_ranges(site.url("away/m"), [(0, 8), (len(FILE) - 8, 8)], gap=0, headers=headers)
    first, *others = site.done(3)
    assert first.headers["x-api-key"] == "k"  # the origin gets every header
    for hit in others:  # the other origin: none but the safe ones
        assert hit.host.startswith("localhost")
        sent = {name for name in hit.headers if name in {h.lower() for h in headers}}
        assert sent == {"user-agent", "accept"}
        assert hit.headers["user-agent"] == "loader/1"


# --- hostile replies: RemoteError, in bounded time ---------------------------------------------


def _raw_server(
    reply: bytes, *, trickle: float = 0.0, repeat: int = 1, pause: float = 0.0
) -> tuple[str, Any]:
    """A socket server that answers every request with `reply`, `repeat` times, `pause` s
    apart (and a byte at a time, `trickle` s apart, if asked)."""
    import socket
    import time

    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.02)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            with connection:
                try:
                    connection.recv(65536)
                    for _ in range(repeat):
                        if trickle:
                            for byte in reply:
                                if stop.is_set():
                                    return
                                connection.sendall(bytes([byte]))
                                time.sleep(trickle)
                        else:
                            connection.sendall(reply)
                        if stop.wait(pause):
                            return
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def close() -> None:
        stop.set()
        thread.join()
        server.close()

    return f"http://127.0.0.1:{server.getsockname()[1]}/m", close


HOSTILE = {
    "superscript-content-length": b"HTTP/1.1 200 OK\r\nContent-Length: \xc2\xb2\r\n\r\nab",
    "5000-digit-content-length": b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
    "5000-digit-content-range": (
        b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-7/"
        + b"9" * 5000
        + b"\r\nContent-Length: 8\r\n\r\n12345678"
    ),
    "bad-location": b"HTTP/1.1 302 Found\r\nLocation: http://[::1/x\r\nContent-Length: 0\r\n\r\n",
    "ftp-location": b"HTTP/1.1 302 Found\r\nLocation: ftp://127.0.0.1/m\r\n\r\n",
    "file-location": b"HTTP/1.1 301 Moved\r\nLocation: file:///etc/passwd\r\n\r\n",
    "escape-in-reason": b"HTTP/1.1 299 \x1b]0;PWNED\x07\x1b[2J\r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("call", ["read_header", "read_ranges"])
def test_hostile_replies_are_remote_errors(case: str, call: str) -> None:
    url, close = _raw_server(HOSTILE[case])
    try:
        read = (
            (lambda: read_header(url, retries=0, timeout=5))
            if call == "read_header"
            else (lambda: read_ranges(url, [(0, 8)], retries=0, timeout=5))
        )
        with pytest.raises(RemoteError) as info:
            read()
        assert "\x1b" not in str(info.value)  # text from the server is escaped
        assert "\x07" not in str(info.value)
    finally:
        close()


# reply, seconds between its bytes, how many times it is sent, seconds between those
SLOW: dict[str, tuple[bytes, float, int, float]] = {
    # One byte every 0.2 s of a 206 body: each read is quick, the whole is not.
    "trickled-body": (
        b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-99/100\r\n"
        b"Content-Length: 100\r\n\r\n" + bytes(100),
        0.2,
        1,
        0.0,
    ),
    "endless-100-continue": (b"HTTP/1.1 100 Continue\r\n\r\n", 0.0, 10**9, 0.05),
    "slow-header-lines": (b"HTTP/1.1 200 OK\r\n", 0.0, 1, 0.0),
}


@pytest.mark.parametrize("case", list(SLOW))
def test_timeout_bounds_the_whole_call(case: str) -> None:
    reply, trickle, repeat, pause = SLOW[case]
    if case == "slow-header-lines":  # a status line, then a header line every 0.1 s
        reply += b"X-Slow: 1\r\n" * 100
        trickle = 0.01
    url, close = _raw_server(reply, trickle=trickle, repeat=repeat, pause=pause)
    # In a subprocess with a timeout of its own: a hang fails the test, it does not hang it.
    code = (
        "import time, sys\n"
        "from safetensors_header import read_header, read_ranges, RemoteError\n"
        "started = time.monotonic()\n"
        "try:\n"
        f"    read_ranges({url!r}, [(0, 100)], timeout=1.0, retries=1)\n"
        "except RemoteError as error:\n"
        "    print(round(time.monotonic() - started, 2), error)\n"
    )
    try:
        done = run_child(code, timeout=20)
    finally:
        close()
    assert done.returncode == 0, done.stderr
    elapsed, _, message = done.stdout.partition(" ")
    assert "timeout of 1 s" in message
    assert float(elapsed) < 3  # 1 s, and what a retry's backoff and a process exit add


@pytest.mark.parametrize(
    ("part_size", "max_workers", "count"),
    [
        (30_000, 4, 3),  # parts of part_size: 4 streams are enough for them
        (1_000, 4, 17),  # 66 parts of 1,000 for 4 streams: 4,000 each (at most 4x)
        (4_000, 4, 5),  # one part per stream would be 16,384: 16,000 (4x) at most
        (20_000, 2, 2),  # one part per stream: 32,768 each
        (100_000, 4, 1),  # shorter than a part
    ],
)
def test_a_long_read_is_cut_into_equal_parts(
    site: Site, part_size: int, max_workers: int, count: int
) -> None:
    from safetensors_header import open_file

    site.files["m"] = FILE
    embed = HEADER.tensors["embed"]
    assert embed.nbytes == 65536
    file = open_file(site.url("m"), part_size=part_size, max_workers=max_workers)
    before = len(site.done(1))
    pieces = read_ranges(file, [(embed.start, embed.nbytes)])
    assert pieces == [TENSORS["embed"].tobytes()]
    hits = site.done(before + count)[before:]
    sizes = sorted(hit.sent for hit in hits)
    assert len(sizes) == count
    assert sum(sizes) == embed.nbytes
    assert sizes[-1] - sizes[0] <= 1  # equal parts: every worker busy as long as the others
    assert sizes[-1] <= 4 * part_size
    # The plan of the same read counts the same requests.
    plan = plan_reads(file, {"embed": None}, part_size=part_size, max_workers=max_workers)
    assert sorted(stop - start for _, start, stop in plan.requests) == sizes
    with pytest.raises(ValueError, match="part_size"):
        read_ranges(site.url("m"), [(0, 8)], part_size=0)


def test_the_first_request_to_a_url_is_one_part(site: Site) -> None:
    # Made alone (it learns the redirect, the size and the validator): no longer than
    # part_size, though the parts after it are twice as long.
    site.files["m"] = FILE
    embed = HEADER.tensors["embed"]
    pieces = read_ranges(
        site.url("m"), [(embed.start, embed.nbytes)], part_size=20_000, max_workers=2
    )
    assert pieces == [TENSORS["embed"].tobytes()]
    hits = site.done(3)
    assert [hit.sent for hit in hits[:1]] == [20_000]
    assert sorted(hit.sent for hit in hits[1:]) == [32_768 - 20_000, 32_768]


def test_a_split_read_past_the_end(site: Site) -> None:
    site.files["m"] = FILE
    with pytest.raises(HeaderError, match=f"the file is {len(FILE):,} bytes"):
        read_ranges(site.url("m"), [(len(FILE) - 100, 5000)], part_size=1000)  # 416s after


def test_a_header_already_read_is_not_read_again(site: Site) -> None:
    from safetensors_header.numpy import load, open_tensors

    site.files["m"] = FILE
    header = read_header(site.url("m"))
    site.done(1)
    site.hits.clear()
    site.finished = 0
    arrays = load(site.url("m"), names=["bias"], header=header)
    assert np.array_equal(arrays["bias"], TENSORS["bias"])
    assert np.array_equal(
        open_tensors(site.url("m"), header=header)["embed"][3], TENSORS["embed"][3]
    )
    assert len(site.done(2)) == 2  # one request each: no header read
    # A header of a copy (bytes): the URL's header bytes read and compared, once a call.
    arrays = load(site.url("m"), names=["bias"], header=HEADER)
    assert np.array_equal(arrays["bias"], TENSORS["bias"])
    hits = site.done(4)
    assert len(hits) == 4
    assert hits[2].range == f"bytes=0-{HEADER.data_start - 1}"


NASTY = [
    "",
    "0",
    "²",
    "9" * 30,
    "-1",
    " 12 ",
    "bytes 0-7/8",
    "bytes 0-7/*",
    "bytes */8",
    "bytes 5-2/8",
    "bytes 0-7/" + "9" * 40,
    "http://[::1/x",
    "ftp://127.0.0.1/",
    "//127.0.0.1:1/x",
    "gzip",
    "\x1b[2J",
    'W/"x"',
    "chunked",
    "gzip, chunked",
    "chunked, chunked",
    "multipart/byteranges; boundary=x",
    "bytes 0-63/*",
    "/next",
]
header_values = st.one_of(st.sampled_from(NASTY), st.text(max_size=20).filter(str.isprintable))


@bounded(int(os.environ.get("REPLY_EXAMPLES", "60")))
@example(  # found by this test: http.client's OverflowError reading a redirect's body
    status=301,
    fields={"Content-Length": "9" * 30, "Location": ""},
    body=b"",
    call="read_header",
)
@example(  # a transfer coding http.client does not decode: its bytes are not the file's
    status=206,
    fields={"Content-Range": "bytes 0-63/*", "Transfer-Encoding": "gzip, chunked"},
    body=b"5\r\nabcde\r\n0\r\n\r\n",
    call="read_ranges",
)
@example(  # a multipart envelope
    status=206,
    fields={"Content-Range": "bytes 0-7/64", "Content-Type": "multipart/byteranges; boundary=x"},
    body=b"--x\r\n\r\n12345678\r\n--x--",
    call="read_header",
)
@example(  # a redirect with a body, to itself
    status=302,
    fields={"Location": "/next", "Content-Length": "64"},
    body=bytes(64),
    call="read_ranges",
)
@given(
    status=st.sampled_from([200, 204, 206, 301, 302, 307, 308, 404, 416, 500, 599, 999]),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "Content-Length",
                "Content-Range",
                "Location",
                "ETag",
                "Content-Encoding",
                "Transfer-Encoding",
                "Content-Type",
                "Last-Modified",
            ]
        ),
        header_values,
        max_size=4,
    ),
    body=st.binary(max_size=64),
    call=st.sampled_from(["read_header", "read_ranges"]),
)
def test_property_any_reply_is_a_verdict_or_a_remote_error(
    status: int, fields: dict[str, str], body: bytes, call: str
) -> None:
    lines = [f"HTTP/1.1 {status} Whatever"] + [f"{k}: {v}" for k, v in fields.items()]
    reply = ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body
    url, close = _raw_server(reply)
    try:
        if call == "read_header":
            read_header(url, retries=0, timeout=2)
        else:
            read_ranges(url, [(0, 8), (40, 8)], gap=0, retries=0, timeout=2)
    except (RemoteError, HeaderError):
        pass  # the only two ways a read may fail on what a server sends
    finally:
        close()


def test_retries_stop_when_the_timeout_has_no_room_for_them(site: Site) -> None:
    site.files["m"] = FILE
    site.failures = [503] * 10
    # 1.5 s: room for the first attempts on a loaded machine (0.3 s once let a CI run's first
    # request time out before the server saw it), none for the backoff's 0.25 + 0.5 + 1 s.
    with pytest.raises(RemoteError, match=r"attempts?, the timeout of 1.5 s used up\)") as info:
        read_ranges(site.url("m"), [(0, 8)], retries=9, timeout=1.5)
    assert info.value.status == 503
    made = len(site.hits)
    assert 1 <= made < 10  # the backoff (0.25 s, 0.5 s, ...) outgrew the time left
    assert f"({made} attempt" in str(info.value)


def test_local_reads_import_no_store_or_http_module(tmp_path: Path) -> None:
    path = _sources(tmp_path)["path"]
    code = (
        "import sys\n"
        "from safetensors_header import read_header, read_ranges\n"
        f"header = read_header({str(path)!r})\n"
        f"read_ranges({str(path)!r}, [(header.data_start, 8)])\n"
        "read_ranges(b'0123456789', [(2, 3)])\n"
        "loaded = [m for m in ('fsspec', 'obstore', 'urllib.request', 'http.client',\n"
        "          'safetensors_header._sources.stores',\n"
        "          'safetensors_header._sources.http_file', 'threading')\n"
        "          if m in sys.modules]\n"
        "print(loaded)\n"
    )
    done = run_child(code, timeout=60, flags=("-S",))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_ranges_past_a_known_end_are_not_asked_for(site: Site) -> None:
    site.files["m"] = FILE
    ranges = [(0, 8), (len(FILE) + 10, 8), (len(FILE) + 100, 8), (len(FILE) + 1000, 8)]
    with pytest.raises(HeaderError, match=f"the file is {len(FILE):,} bytes"):
        read_ranges(site.url("m"), ranges, gap=0)
    assert len(site.done(1)) == 1  # the first reply said the size: the rest start past it


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="Linux's smaps")
def test_fresh_buffers_take_no_huge_page_advice() -> None:
    # A huge page's fault zeroes 2 MiB and may wait on compaction: loads were less steady.
    import ctypes

    from safetensors_header._sources.planning import allocate

    buffer = allocate(8 << 20)
    address = ctypes.addressof(ctypes.c_char.from_buffer(buffer))
    flags = None
    with open("/proc/self/smaps") as smaps:
        inside = False
        for line in smaps:
            first = line.split(" ", 1)[0]
            if "-" in first and not first.endswith(":"):
                low, high = (int(bound, 16) for bound in first.split("-"))
                inside = low <= address < high
            elif inside and line.startswith("VmFlags:"):
                flags = line.split()[1:]
                break
    assert flags is not None  # the buffer's mapping was found
    assert "wr" in flags
    assert "hg" not in flags  # MADV_HUGEPAGE
    buffer[:] = bytes(len(buffer))  # writable, whole
