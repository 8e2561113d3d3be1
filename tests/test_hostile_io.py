"""Hostile input and faults of the data path, awkward files, Zarr names and writers.

The findings of the third adversarial review (the issue numbers its cases 1-17), each
reproduced with a hostile source of its own: a scripted raw-socket HTTP server, a file whose
index buffers lie, a store that returns short, a FIFO. Hangs and crashes are run in a
subprocess with a timeout, so that they fail the test rather than hang or kill it; where a
case is about memory, the child measures its own.
"""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor
from loopback import RawHandler, RawServer, Reply, Site, asked, partial, whole

from safetensors_header import (
    HeaderError,
    RemoteError,
    open_file,
    read_checkpoint,
    read_header,
    read_ranges,
)

ROOT = Path(__file__).parents[1]
DATA = build({"w": tensor("U8", [4096], 0, 4096)}, bytes(range(256)) * 16)
W = read_header(DATA).tensors["w"]
CHANGED = r"changed between two reads"


# For a child's peak memory: VmHWM, the high-water mark of its own address space (getrusage's
# ru_maxrss keeps the parent's through fork and exec on Linux).
PEAK = """
def peak_kib():
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
"""


def child(code: str, *, timeout: float = 60, env: dict[str, str] | None = None) -> str:
    """Run `code` in a fresh interpreter (a hang is its timeout, a crash its exit status);
    what it printed. `peak_kib()` is defined for it."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# --- 2. a 206 whose body is not the file's bytes ----------------------------------------------


def _enveloped(extra: str, body: bytes) -> RawHandler:
    def handler(number: int, headers: dict[str, str]) -> bytes:
        start, stop = asked(headers)
        stop = min(stop, len(DATA))
        head = (
            f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{stop - 1}/"
            f"{len(DATA)}\r\n{extra}\r\nConnection: close\r\n\r\n"
        )
        return head.encode() + body

    return handler


ENVELOPES = {
    # http.client decodes only a lone "chunked": the rest would come through as file bytes.
    "gzip-then-chunked": ("Transfer-Encoding: gzip, chunked", b"a\r\n0123456789\r\n0\r\n\r\n"),
    "chunked-twice": ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", b""),
    "identity-then-chunked": ("Transfer-Encoding: identity, chunked", b"0\r\n\r\n"),
    "multipart": (
        "Content-Type: multipart/byteranges; boundary=THIS\r\nContent-Length: 64",
        b"--THIS\r\nContent-Type: application/octet-stream\r\n\r\n" + bytes(14),
    ),
}


@pytest.mark.parametrize("case", list(ENVELOPES))
@pytest.mark.parametrize("call", ["read_header", "read_ranges"])
def test_a_206_in_a_transfer_coding_or_an_envelope_is_refused(
    serve: Callable[[RawHandler], RawServer], case: str, call: str
) -> None:
    server = serve(_enveloped(*ENVELOPES[case]))
    read = {
        "read_header": lambda: read_header(server.url(), retries=0),
        "read_ranges": lambda: read_ranges(server.url(), [(8, 10)], retries=0),
    }[call]
    with pytest.raises(RemoteError, match=r"transfer coding|multipart") as caught:
        read()
    assert caught.value.status is None


def test_a_lone_chunked_206_is_read(serve: Callable[[RawHandler], RawServer]) -> None:
    def handler(number: int, headers: dict[str, str]) -> bytes:
        start, stop = asked(headers)
        stop = min(stop, len(DATA))
        body = DATA[start:stop]
        return (
            (
                f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{stop - 1}/"
                f"{len(DATA)}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                f"{len(body):x}\r\n"
            ).encode()
            + body
            + b"\r\n0\r\n\r\n"
        )

    server = serve(handler)
    assert read_ranges(server.url(), [(W.start, 100)]) == [DATA[W.start : W.start + 100]]


# --- 3. the header and the data of two files, against hostile servers ---------------------------


def _two_files(change: str) -> RawHandler:
    """The header's request answered from one file, the data's from another (or a 200)."""
    other = DATA[: W.start] + bytes(4096)
    longer = other + b"\0" * 8

    def handler(number: int, headers: dict[str, str]) -> bytes:
        span = asked(headers)
        if number == 0:
            return partial(DATA, span, etag='"v1"')
        if change == "etag":
            return partial(other, span, etag='"v2"')
        if change == "size":
            return partial(longer, span, etag='"v1"')  # the same ETag, another size
        return whole(other)  # a 200 after the 206s: If-Range did not match

    return handler


@pytest.mark.parametrize("change", ["etag", "size", "200-after-206"])
@pytest.mark.parametrize("reader", ["open_file", "numpy.load", "open_tensors"])
def test_header_and_data_of_two_files_are_refused(
    serve: Callable[[RawHandler], RawServer], change: str, reader: str
) -> None:
    np = pytest.importorskip("numpy")
    from safetensors_header.numpy import load, open_tensors

    server = serve(_two_files(change))
    read: dict[str, Callable[[], object]] = {
        "open_file": lambda: open_file(server.url()).read_tensor("w"),
        "numpy.load": lambda: load(server.url(), retries=0),
        "open_tensors": lambda: np.asarray(open_tensors(server.url())["w"][10:20]),
    }
    with pytest.raises(HeaderError, match=CHANGED):
        read[reader]()


# --- 4. update_metadata with readers and other updaters at work --------------------------------

_READER = """
import json, sys, time
from safetensors_header import read_header
path, until = sys.argv[1], float(sys.argv[2])
seen, reads = set(), 0
while time.time() < until or reads < 20:  # (a slow start under load still reads)
    try:
        header = read_header(path)
    except FileNotFoundError:
        continue  # (never: the rename replaces the name at once)
    reads += 1
    seen.add(json.dumps(dict(header.metadata or {}), sort_keys=True))
    assert list(header.tensors) == ["w"], header
print(json.dumps([reads, sorted(seen)]))
"""

_UPDATER = """
import sys, time
from safetensors_header import update_metadata
path, until, mine = sys.argv[1], float(sys.argv[2]), sys.argv[3]
updates = 0
while time.time() < until or updates < 10:  # (a slow start under load still updates)
    update_metadata(path, {"who": mine, "pad": mine * (updates % 7)})
    updates += 1
print(updates)
"""


def test_update_metadata_by_default_never_shows_a_mixed_header(tmp_path: Path) -> None:
    path = tmp_path / "shared.safetensors"
    path.write_bytes(build({"__metadata__": {"who": "none"}, "w": tensor("U8", [8], 0, 8)}, 8))
    until = str(time.time() + 2.5)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def start(code: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", code, str(path), until, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    processes = [start(_READER), start(_READER), start(_UPDATER, "a"), start(_UPDATER, "bb")]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err[-3000:]
        outputs.append(out)
    allowed = {("who", "none")} | {("who", who) for who in ("a", "bb")}
    for out in outputs[:2]:
        reads, seen = json.loads(out)
        assert reads > 0
        for text in seen:
            found = json.loads(text)
            assert ("who", found["who"]) in allowed
            assert set(found.get("pad", "")) <= set(found["who"])  # never a mix of two
    assert all(int(out) > 0 for out in outputs[2:])
    assert dict(read_header(path).metadata or {})["who"] in {"a", "bb"}


# --- 5. a redirect's body is never read -----------------------------------------------------


def test_a_redirects_endless_body_is_not_read(serve: Callable[[RawHandler], RawServer]) -> None:
    sent = [0]

    def handler(number: int, headers: dict[str, str]) -> Reply:
        if headers[":path"] == "/f":

            def endless(conn: socket.socket) -> None:
                conn.sendall(
                    b"HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 10000000000\r\n\r\n"
                )
                chunk = b"x" * 65536
                while True:
                    conn.sendall(chunk)
                    sent[0] += len(chunk)

            return endless
        return partial(DATA, asked(headers))

    server = serve(handler)
    out = child(
        f"""
        import time
        from safetensors_header import read_header, read_ranges
        started = time.monotonic()
        header = read_header({server.url()!r}, timeout=3)
        [piece] = read_ranges({server.url()!r}, [({W.start}, 16)])
        peak = peak_kib()
        print(len(header.tensors), bytes(piece).hex(), round(time.monotonic() - started, 2), peak)
        """,
        timeout=30,
    )
    tensors, piece, elapsed, peak = out.split()
    assert tensors == "1"
    assert bytes.fromhex(piece) == DATA[W.start : W.start + 16]
    assert float(elapsed) < 2
    print(f"redirect with an endless body: {sent[0]:,} bytes sent, peak RSS {int(peak):,} KiB")
    assert int(peak) < 100_000  # KiB: the interpreter and the package, not the body


# --- 6. a size of 2**52 ------------------------------------------------------------------------


def test_a_tensor_of_petabytes_fails_at_once(serve: Callable[[RawHandler], RawServer]) -> None:
    total = 2**52
    start = len(build({"huge": tensor("U8", [total], 0, total)}, 0, pad=True))  # 8 + N
    body = build({"huge": tensor("U8", [total - start], 0, total - start)}, 0, pad=True)
    assert len(body) == start  # the one tensor covers the rest of a file of 2**52 bytes

    def handler(number: int, headers: dict[str, str]) -> bytes:
        start, stop = asked(headers)
        stop = min(stop, start + (1 << 20))  # (a part of a planned read: never asked here)
        piece = (body + bytes(max(stop - len(body), 0)))[start:stop]
        return (
            f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-"
            f"{start + len(piece) - 1}/{total}\r\nContent-Length: {len(piece)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + piece

    server = serve(handler)
    out = child(
        f"""
        import time
        from safetensors_header.numpy import load
        started = time.monotonic()
        from safetensors_header import HeaderError
        try:
            load({server.url()!r})
        except HeaderError as error:
            assert "4,503,599,627,370," in str(error), error  # the size, named
            print(error.kind, round(time.monotonic() - started, 2), peak_kib())
        """,
        timeout=60,
    )
    kind, elapsed, peak = out.split()
    assert kind == "TooLarge"
    assert float(elapsed) < 5
    assert int(peak) < 100_000  # KiB: no part of the 2**28 planned, nothing allocated
    print(f"a 4 PiB tensor: TooLarge after {elapsed} s, peak RSS {int(peak):,} KiB")


def test_a_range_past_a_known_size_is_refused_before_any_request(site: Site) -> None:
    site.files["m"] = DATA
    file = open_file(site.url("m"))
    before = len(site.hits)
    with pytest.raises(HeaderError, match=f"the file is {len(DATA):,} bytes"):
        file.read_ranges([(0, 2**62)])
    assert len(site.hits) == before


# --- 7. one clock for a whole checkpoint ------------------------------------------------------


def test_read_checkpoint_is_bounded_by_its_timeout(
    serve: Callable[[RawHandler], RawServer],
) -> None:
    shards = {f"s{number:02d}.safetensors": f"t{number}" for number in range(40)}
    index = json.dumps({"weight_map": {t: s for s, t in shards.items()}}).encode()
    files = {f"/{name}": build({t: tensor("U8", [1], 0, 1)}, 1) for name, t in shards.items()}

    def handler(number: int, headers: dict[str, str]) -> bytes:
        path = headers[":path"]
        if path.endswith(".json"):
            return whole(index)
        time.sleep(0.3)  # each shard answered well inside the timeout
        return partial(files[path], asked(headers))

    server = serve(handler)
    url = server.url().removesuffix("/f") + "/model.safetensors.index.json"
    started = time.monotonic()
    with pytest.raises(RemoteError, match="timeout of 1 s"):
        read_checkpoint(url, timeout=1, max_workers=4)  # 10 waves of 0.3 s: 3 s
    assert time.monotonic() - started < 2


# --- 8, 9, 1, 12. awkward files ----------------------------------------------------------------

ak = pytest.importorskip("awkward")
np = pytest.importorskip("numpy")

from safetensors_header.awkward import AwkwardFileError, from_safetensors, to_safetensors  # noqa: E402


def _awkward_file(array: Any) -> bytes:
    buffer = io.BytesIO()
    to_safetensors(array, buffer)
    return buffer.getvalue()


def _with(data: bytes, *, metadata: dict[str, str] | None = None, **values: Any) -> bytes:
    """`data` with some tensors' values replaced (same dtype and size) or its metadata."""
    header = read_header(data)
    out = bytearray(data)
    for name, new in values.items():
        info = header.tensors[name.replace("_", "-")]
        dtype = {"I64": "<i8", "I32": "<i4", "U32": "<u4", "I8": "i1", "U8": "u1"}[info.dtype]
        raw = np.asarray(new).astype(dtype).tobytes()
        assert len(raw) == info.nbytes, name
        out[info.start : info.end] = raw
    if metadata is None:
        return bytes(out)
    entries: dict[str, Any] = {"__metadata__": {**(header.metadata or {}), **metadata}}
    for name, info in header.tensors.items():
        entries[name] = tensor(info.dtype, list(info.shape), *info.data_offsets)
    return build(entries, bytes(out[header.data_start :]), pad=True)


JAGGED = _awkward_file(ak.Array([[1, 2], [3], [4]]))  # node0-offsets [0 2 3 4], node1-data


@pytest.mark.parametrize(
    "offsets",
    [[0, 2**62, 2, 4], [0, -5, 2, 4], [1, 3, 2, 4], [-1, 0, 1, 4], [0, 2**63 - 1, -1, 4]],
    ids=["huge", "negative", "backwards", "start-below-0", "max-then-negative"],
)
@pytest.mark.parametrize("virtual", [False, True])
def test_awkward_offsets_outside_their_content_are_refused(
    offsets: list[int], virtual: bool
) -> None:
    data = _with(JAGGED, node0_offsets=offsets)

    def read_and_sum() -> None:
        array = from_safetensors(data, virtual=virtual)
        ak.sum(array, axis=1)  # (what read heap memory, or crashed, before)

    with pytest.raises(AwkwardFileError, match="offsets"):
        read_and_sum()


def _hand_made(form: dict[str, Any], length: int, buffers: dict[str, Any]) -> bytes:
    """A file of awkward's layout for a form that ak.to_safetensors would pack away."""
    entries: dict[str, Any] = {"__metadata__": {"form": json.dumps(form), "length": str(length)}}
    data = bytearray()
    for name, values in buffers.items():
        raw = np.asarray(values).tobytes()
        code = {"i": "I", "u": "U", "f": "F"}[values.dtype.kind] + str(8 * values.itemsize)
        entries[name] = tensor(code, [len(values)], len(data), len(data) + len(raw))
        data += raw
    return build(entries, bytes(data), pad=True)


NUMBERS = {"class": "NumpyArray", "primitive": "int32", "form_key": "node1"}
LISTARRAY = _hand_made(
    {
        "class": "ListArray",
        "starts": "i64",
        "stops": "i64",
        "content": NUMBERS,
        "form_key": "node0",
    },
    3,
    {
        "node0-starts": np.array([0, 3, 1], "<i8"),
        "node0-stops": np.array([2, 5, 1], "<i8"),
        "node1-data": np.arange(6, dtype="<i4"),
    },
)
INDEXED = _hand_made(
    {"class": "IndexedArray", "index": "i64", "content": NUMBERS, "form_key": "node0"},
    3,
    {"node0-index": np.array([2, 0, 1], "<i8"), "node1-data": np.arange(3, dtype="<i4")},
)


def test_awkward_index_buffers_of_every_kind_are_checked() -> None:
    union = _awkward_file(ak.Array([1, "two", 3]))  # node0-tags, node0-index
    assert ak.to_list(from_safetensors(LISTARRAY)) == [[0, 1], [3, 4], []]
    assert ak.to_list(from_safetensors(INDEXED)) == [2, 0, 1]
    cases = [
        (LISTARRAY, {"node0_starts": [0, 3, -1]}, "starts of the .* go below 0"),
        (LISTARRAY, {"node0_starts": [0, 4, 1], "node0_stops": [2, 3, 1]}, "pass their stops"),
        (INDEXED, {"node0_index": [2, -1, 1]}, "index of the .* goes below 0"),
        (union, {"node0_tags": [0, 5, 0]}, "tags of the .* name contents beyond"),
        (union, {"node0_index": [0, -3, 1]}, "index of the .* goes below 0"),
    ]
    for file, values, words in cases:
        data = _with(file, **values)
        for virtual in (False, True):
            with pytest.raises(AwkwardFileError, match=words):
                ak.to_list(from_safetensors(data, virtual=virtual))


@pytest.mark.parametrize(
    "change",
    ["union-without-contents", "bytemask-of-i64", "offsets-of-u8", "indexed-option-of-u32"],
)
def test_awkward_forms_awkward_cannot_build_are_refused(change: str) -> None:
    array = {
        "union-without-contents": ak.Array([1, "two"]),
        "bytemask-of-i64": ak.Array(
            ak.contents.ByteMaskedArray(
                ak.index.Index8(np.array([1, 0], dtype=np.int8)),
                ak.contents.NumpyArray(np.array([1, 2])),
                valid_when=True,
            )
        ),
        "offsets-of-u8": ak.Array([[1], [2, 3]]),
        "indexed-option-of-u32": ak.Array([1, None, 2]),
    }[change]
    data = _awkward_file(array)
    form = json.loads(dict(read_header(data).metadata or {})["form"])
    if change == "union-without-contents":
        form["contents"] = []
    elif change == "bytemask-of-i64":  # with a mask buffer long enough for int64 values
        form["mask"] = "i64"
        data = _hand_made(
            form, 2, {"node0-mask": np.array([1, 0], "<i8"), "node1-data": np.array([1, 2], "<i8")}
        )
    elif change == "offsets-of-u8":
        form["offsets"] = "u8"
    else:
        form["index"] = "u32"
    hostile = _with(data, metadata={"form": json.dumps(form)})
    for virtual in (False, True):
        with pytest.raises(AwkwardFileError):
            ak.to_list(from_safetensors(hostile, virtual=virtual))


@pytest.mark.slow
def test_a_recorded_buffer_key_cannot_format_its_fields() -> None:
    data = _with(JAGGED, metadata={"buffer_key": "{form_key:>1000000000}-{attribute}"})
    code = f"""
        import time, tracemalloc
        from safetensors_header.awkward import AwkwardFileError, from_safetensors
        tracemalloc.start()
        started = time.monotonic()
        try:
            from_safetensors(bytes.fromhex({data.hex()!r}))
        except AwkwardFileError as error:
            print(round(time.monotonic() - started, 3), tracemalloc.get_traced_memory()[1],
                  len(str(error)), "format spec or a conversion" in str(error))
    """
    elapsed, peak, length, said = child(code, timeout=60).split()
    print(f"a buffer_key of width 10^9: refused in {elapsed} s, {int(peak):,} B at the peak")
    assert float(elapsed) < 1
    assert int(peak) < 10_000_000
    assert int(length) < 500
    assert said == "True"
    for template in ("{form_key!r}-{attribute}", "{form_key}-{attribute:.3}", "{" * 5000):
        with pytest.raises(AwkwardFileError) as caught:
            from_safetensors(_with(JAGGED, metadata={"buffer_key": template}))
        assert len(str(caught.value)) < 500


@pytest.mark.slow
def test_inferring_a_buffer_key_from_long_names_takes_linear_time() -> None:
    # A form key and an attribute that are the same word, and a name of that word 2,000
    # times: every pair of its places was a template to try (4 million of them).
    form = {"class": "NumpyArray", "primitive": "int64", "form_key": "data"}
    entries: dict[str, Any] = {"__metadata__": {"form": json.dumps(form), "length": "1"}}
    entries["data" * 2000] = tensor("I64", [1], 0, 8)
    data = build(entries, bytes(8), pad=True)
    code = f"""
        import time, tracemalloc
        from safetensors_header.awkward import AwkwardFileError, from_safetensors
        tracemalloc.start()
        started = time.monotonic()
        try:
            from_safetensors(bytes.fromhex({data.hex()!r}))
        except AwkwardFileError:
            pass  # which template (if any) fits is not the question: the time is
        print(round(time.monotonic() - started, 3), tracemalloc.get_traced_memory()[1])
    """
    elapsed, peak = child(code, timeout=60).split()
    print(f"buffer_key inferred from a name of 8,000 characters: {elapsed} s, {int(peak):,} B")
    assert float(elapsed) < 2
    assert int(peak) < 50_000_000


# --- 10. a store that returns short -----------------------------------------------------------


@pytest.mark.slow
def test_a_store_whose_ranges_come_back_short_fails_at_once(tmp_path: Path) -> None:
    pytest.importorskip("virtualizarr")
    path = tmp_path / "m.safetensors"
    path.write_bytes(DATA)
    out = child(
        f"""
        from obstore.store import LocalStore
        from obspec_utils.registry import ObjectStoreRegistry
        from safetensors_header import RemoteError
        from safetensors_header.virtualizarr import SafetensorsParser

        class Truncated:
            # What head() says, then ranges cut short (the object truncated meanwhile).
            def __init__(self):
                self.inner, self.calls = LocalStore(), 0
            def head(self, path):
                return self.inner.head(path)
            def get_range(self, path, *, start, end=None, length=None):
                self.calls += 1
                data = bytes(self.inner.get_range(path, start=start, end=end, length=length))
                return data[: max(len(data) // 2, 0)]

        store = Truncated()
        registry = ObjectStoreRegistry({{"file://": store}})
        try:
            SafetensorsParser()({path.as_uri()!r}, registry)
        except RemoteError as error:
            print(store.calls, error)
        """,
        timeout=30,
    )
    calls, _, message = out.partition(" ")
    assert int(calls) <= 2
    assert "returned" in message


# --- 11. update_metadata of a FIFO -------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("in_place", [False, True])
def test_update_metadata_refuses_a_fifo_without_waiting(tmp_path: Path, in_place: bool) -> None:
    fifo = tmp_path / "m.safetensors"
    os.mkfifo(fifo)
    out = child(
        f"""
        from safetensors_header import update_metadata
        try:
            update_metadata({str(fifo)!r}, {{"a": "b"}}, in_place={in_place})
        except OSError as error:
            print(type(error).__name__, error)
        """,
        timeout=20,
    )
    assert "not a regular file but a FIFO" in out


# --- 13. Zarr node names ----------------------------------------------------------------------

HOSTILE_NAMES = [
    "..",
    ".",
    "a\\b",
    "x\\..\\y",
    "a/b",
    "/",
    "zarr.json",
    ".zarray",
    ".zattrs",
    "__private",
    "Upper",
    "upper",
    "caf\u00e9",  # NFC
    "cafe\u0301",  # NFD: the same text to a person, another name
    "tab\there",
    "%2F",
    "l" * 300,
]


def _named_file() -> bytes:
    entries: dict[str, Any] = {}
    data = bytearray()
    for number, name in enumerate(HOSTILE_NAMES):
        entries[name] = tensor("I16", [2], len(data), len(data) + 4)
        data += np.array([number, -number], "<i2").tobytes()
    return build(entries, bytes(data), pad=True)


def _expected() -> dict[str, Any]:
    return {name: np.array([number, -number], "<i2") for number, name in enumerate(HOSTILE_NAMES)}


def _same(got: dict[str, Any]) -> None:
    want = _expected()
    assert sorted(got) == sorted(want)
    for name in want:
        assert np.array_equal(np.asarray(got[name]), want[name]), name


def test_hostile_names_round_trip_through_zarr_and_kerchunk(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr")
    fsspec = pytest.importorskip("fsspec")
    from safetensors_header.zarr import node_name, read_tensors, to_kerchunk

    data = _named_file()
    path = tmp_path / "names.safetensors"
    path.write_bytes(data)
    keys = [node_name(name) for name in HOSTILE_NAMES]
    assert len(set(keys)) == len(keys)
    assert all("/" not in key and "\\" not in key and key not in {".", ".."} for key in keys)
    for zarr_format in (2, 3):
        references = to_kerchunk(read_header(path), str(path), zarr_format=zarr_format)
        mapper = fsspec.filesystem("reference", fo=references).get_mapper("")
        group = zarr.open_group(mapper, mode="r", zarr_format=zarr_format)
        _same(read_tensors(group))


def test_hostile_names_round_trip_through_virtualizarr(tmp_path: Path) -> None:
    pytest.importorskip("virtualizarr")
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_dataset

    from safetensors_header.virtualizarr import SafetensorsParser
    from safetensors_header.zarr import read_tensors

    path = tmp_path / "names.safetensors"
    path.write_bytes(_named_file())
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    dataset = open_virtual_dataset(
        path.as_uri(), registry=registry, parser=SafetensorsParser(), loadable_variables=[]
    )
    store = SafetensorsParser()(path.as_uri(), registry)
    zarr = pytest.importorskip("zarr")
    _same(read_tensors(zarr.open_group(store, mode="r", zarr_format=3)))
    assert len(dataset.data_vars) == len(HOSTILE_NAMES)


# --- 14. at interpreter shutdown ----------------------------------------------------------------


def test_read_ranges_works_in_an_atexit_handler(site: Site) -> None:
    site.files["m"] = DATA
    out = child(
        f"""
        import atexit
        import threading  # (as a program that used threads: it shuts threading down first)
        from safetensors_header import read_ranges

        def at_exit():
            pieces = read_ranges({site.url("m")!r}, [(0, 8), (4000, 8)], gap=0)
            print(b"".join(pieces).hex())

        atexit.register(at_exit)
        """,
        timeout=30,
    )
    assert bytes.fromhex(out.strip()) == DATA[:8] + DATA[4000:4008]


# --- 15. an unknown total is not a changed size ----------------------------------------------


def test_an_unknown_total_then_a_416_is_the_end_of_the_file(site: Site) -> None:
    import random

    site.files["m"] = DATA
    site.mode = "star"  # every 206 says bytes a-b/*
    rng = random.Random(15)

    def offset() -> int:  # anywhere, or near the end (where the 416s are)
        return (
            rng.randrange(len(DATA) + 50) if rng.random() < 0.5 else len(DATA) - rng.randrange(80)
        )

    for _ in range(60):
        ranges = [(offset(), rng.randrange(1, 80)) for _ in range(3)]
        if any(offset + length > len(DATA) for offset, length in ranges):
            with pytest.raises(HeaderError) as caught:  # never "the file changed"
                read_ranges(site.url("m"), ranges, gap=0)
            assert caught.value.kind == "MetadataIncompleteBuffer"
        else:
            got = read_ranges(site.url("m"), ranges, gap=0)
            assert got == [DATA[offset : offset + length] for offset, length in ranges]


# --- 16. a file object that reads more than it is asked ---------------------------------------


def test_numpy_load_of_a_file_object_that_reads_too_much() -> None:
    from safetensors_header.numpy import load

    values = np.arange(36, dtype="<f4")
    data = build(
        {"a": tensor("F32", [4, 8], 0, 128), "b": tensor("F32", [2, 2], 128, 144)}, values.tobytes()
    )

    class Generous(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            return super().read(None if size is None or size < 0 else size + 7)

    class Stream:  # the same, and it cannot seek
        def __init__(self) -> None:
            self.inner = Generous(data)

        def read(self, size: int = -1) -> bytes:
            return self.inner.read(size)

    for source in (Generous(data), Stream()):
        arrays = load(source)
        assert np.array_equal(arrays["a"], values[:32].reshape(4, 8))
        assert np.array_equal(arrays["b"], values[32:].reshape(2, 2))


# --- 17. timeout=inf -------------------------------------------------------------------------


def test_an_infinite_timeout_is_no_bound(site: Site) -> None:
    from safetensors_header.numpy import load

    site.files["m"] = DATA
    inf = float("inf")
    assert read_header(site.url("m"), timeout=inf) == read_header(DATA)
    assert read_ranges(site.url("m"), [(W.start, 4)], timeout=inf) == [DATA[W.start : W.start + 4]]
    assert load(site.url("m"), timeout=inf)["w"].tobytes() == DATA[W.start : W.end]
    for bad in (float("nan"), 0, -1.0):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            read_header(site.url("m"), timeout=bad)
