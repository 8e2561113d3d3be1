"""The data path: bytes read into their buffers are the reference's, from every source; the
data belongs to the header it was read with; a checkpoint's shards are asked for at once.

Against real sources on loopback: the counting HTTP server of `loopback`, obstore's and
fsspec's memory stores, local files.
"""

from __future__ import annotations

import io
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import build, reference_header, tensor
from loopback import Site

from safetensors_header import (
    DTYPES,
    HeaderError,
    open_file,
    read_checkpoint,
    read_header,
    read_ranges,
    read_tensor,
)

np = pytest.importorskip("numpy")
pytest.importorskip("safetensors")


def every_dtype_file() -> bytes:
    """A valid file with tensors of every dtype (a zero-size one, a scalar, a long one whose
    bytes span several parts), random bytes, in a scrambled order of the data."""
    rng = random.Random(7)
    entries: list[tuple[str, str, list[int]]] = []
    for dtype, info in DTYPES.items():
        shape = [4, 6] if info.bits >= 8 else [4, 12]  # whole bytes for F4 and F6
        entries.append((f"t.{dtype}", dtype, shape))
    entries += [
        ("empty.F32", "F32", [0, 5]),
        ("scalar.I64", "I64", []),
        ("long.U8", "U8", [5000]),
        ("empty.BF16", "BF16", [3, 0]),
    ]
    rng.shuffle(entries)
    header: dict[str, Any] = {"__metadata__": {"kind": "every dtype"}}
    data = bytearray()
    for name, dtype, shape in entries:
        count = 1
        for dim in shape:
            count *= dim
        size = count * DTYPES[dtype].bits // 8
        header[name] = tensor(dtype, shape, len(data), len(data) + size)
        data += rng.randbytes(size)
    return build(header, bytes(data), pad=True)


FILE = every_dtype_file()
HEADER = read_header(FILE)
REFERENCE = reference_header(FILE)  # name -> (dtype, shape, bytes), as the reference reads
# What a RemoteError says of a file that changed (its ETag, date or size; or a 200 to If-Range).
CHANGED = r"changed between two reads"


def test_the_file_is_what_the_reference_reads() -> None:
    assert set(REFERENCE) == set(HEADER.tensors)
    assert {dtype for dtype, _, _ in REFERENCE.values()} == set(DTYPES)


@pytest.fixture
def sources(site: Site, tmp_path: Path) -> dict[str, Any]:
    """The file from every kind of source."""
    store_module = pytest.importorskip("obstore.store")
    fsspec = pytest.importorskip("fsspec")
    path = tmp_path / "every.safetensors"
    path.write_bytes(FILE)
    site.files["every.safetensors"] = FILE
    store = store_module.MemoryStore()
    store.put("every.safetensors", FILE)
    memory = fsspec.filesystem("memory")
    memory.pipe("/data-path/every.safetensors", FILE)
    return {
        "path": path,
        "bytes": FILE,
        "file object": io.BytesIO(FILE),
        "http": site.url("every.safetensors"),
        "obstore": (store, "every.safetensors"),
        "fsspec": (memory, "/data-path/every.safetensors"),
    }


KINDS = ["path", "bytes", "file object", "http", "obstore", "fsspec"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_tensor_into_its_buffer_is_the_references(sources: dict[str, Any], kind: str) -> None:
    source = sources[kind]
    infos = list(HEADER.tensors.values())
    # Into the caller's buffers, the ranges in a shuffled order, a small part size (the long
    # tensor and the spans cross part boundaries over HTTP), no gap: every path of the
    # planner.
    order = infos[::-1]
    buffers = [bytearray(info.nbytes) for info in order]
    views = read_ranges(
        source, [(i.start, i.nbytes) for i in order], into=buffers, gap=0, part_size=1000
    )
    for info, buffer, view in zip(order, buffers, views, strict=True):
        assert bytes(buffer) == REFERENCE[info.name][2], info.name
        assert view.obj is buffer or bytes(view) == bytes(buffer)
    # Without buffers: one span's buffer, every tensor a view of it.
    views = read_ranges(source, [(i.start, i.nbytes) for i in infos], part_size=1000)
    for info, view in zip(infos, views, strict=True):
        assert len(view) == info.nbytes
        assert bytes(view) == REFERENCE[info.name][2], info.name
    # One tensor, into a numpy array of the right size (a buffer of another dtype).
    long = HEADER.tensors["long.U8"]
    target = np.zeros(long.nbytes // 4, dtype=np.float32)
    read_tensor(source, long, into=target, part_size=1000)
    assert target.tobytes() == REFERENCE["long.U8"][2]


@pytest.mark.parametrize("kind", KINDS)
def test_open_file_reads_every_tensor_of_every_source(sources: dict[str, Any], kind: str) -> None:
    file = open_file(sources[kind], part_size=1000)
    assert file.header == HEADER
    got = file.read_tensors()
    assert {name: bytes(view) for name, view in got.items()} == {
        name: data for name, (_, _, data) in REFERENCE.items()
    }
    assert bytes(file.read_tensor("t.F32", np.s_[1:3, ::2])) == (
        np.frombuffer(REFERENCE["t.F32"][2], "<f4").reshape(4, 6)[1:3, ::2].tobytes()
    )


def test_views_share_their_span_and_bytes_sources_are_not_copied(tmp_path: Path) -> None:
    first, second = list(HEADER.tensors.values())[:2]
    a, b = read_ranges(FILE, [(first.start, first.nbytes), (second.start, second.nbytes)])
    assert a.obj is b.obj  # views of the caller's bytes, no copy
    assert a.readonly  # bytes are read-only, and so are views of them
    path = tmp_path / "f.safetensors"
    path.write_bytes(FILE)
    a, b = read_ranges(path, [(first.start, first.nbytes), (second.start, second.nbytes)])
    assert a.obj is b.obj  # one span, one buffer
    assert not a.readonly


def test_into_buffers_are_checked() -> None:
    info = HEADER.tensors["t.F32"]
    with pytest.raises(ValueError, match="holds 10 bytes, the range 96"):
        read_ranges(FILE, [(info.start, info.nbytes)], into=[bytearray(10)])
    with pytest.raises(TypeError, match="read-only"):
        read_ranges(FILE, [(info.start, info.nbytes)], into=[bytes(96)])
    with pytest.raises(ValueError, match="1 buffers for 2 ranges"):
        read_ranges(FILE, [(0, 1), (1, 1)], into=[bytearray(1)])


# --- the data belongs to the header it was read with ------------------------------------------


def _replaced(data: bytes) -> bytes:
    """The same header, other bytes in the tensors: a file that reads as valid, and wrong."""
    header = read_header(data)
    return data[: header.data_start] + bytes(b ^ 0xFF for b in data[header.data_start :])


def _longer(data: bytes) -> bytes:
    """Another valid file, of another size."""
    return build({"x": tensor("U8", [len(data)], 0, len(data))}, len(data))


@pytest.mark.parametrize(
    ("validators", "new"),
    [
        ("etag", _replaced),
        ("last-modified", _replaced),
        ("none", _longer),  # no validator at all: a change of size is still seen
    ],
)
@pytest.mark.parametrize("reader", ["read_tensor", "numpy.load", "open_tensors"])
def test_http_file_replaced_after_its_header_raises(
    site: Site, validators: str, new: Callable[[bytes], bytes], reader: str
) -> None:
    from safetensors_header.numpy import load, open_tensors

    site.send_etag = validators == "etag"
    site.send_last_modified = validators == "last-modified"
    site.files["m"] = FILE
    file = open_file(site.url("m"))
    lazy = open_tensors(site.url("m"))
    site.files["m"] = new(FILE)
    read = {
        "read_tensor": lambda: read_tensor(file, "long.U8"),
        "numpy.load": lambda: load(file, names=["long.U8"]),
        "open_tensors": lambda: lazy["long.U8"][10:20],
    }[reader]
    with pytest.raises(HeaderError, match=CHANGED):
        read()


def test_http_file_unchanged_reads_with_its_validator(site: Site) -> None:
    site.send_etag, site.send_last_modified = False, True
    site.files["m"] = FILE
    file = open_file(site.url("m"))
    assert bytes(file.read_tensor("long.U8")) == REFERENCE["long.U8"][2]
    hits = site.done(2)
    assert hits[1].if_range is not None
    assert hits[1].if_range.endswith("GMT")
    assert hits[1].status == 206


def test_a_header_given_is_held_to_the_files_size(site: Site) -> None:
    from safetensors_header.numpy import load

    site.files["m"] = _longer(FILE)
    with pytest.raises(HeaderError, match="changed between two reads"):
        load(site.url("m"), names=["long.U8"], header=HEADER)  # a header of another file


@pytest.mark.parametrize("store", ["obstore", "fsspec"])
def test_store_object_overwritten_after_its_header_raises(store: str) -> None:
    if store == "obstore":
        memory: Any = pytest.importorskip("obstore.store").MemoryStore()
        memory.put("m", FILE)
        source: Any = (memory, "m")

        def overwrite(data: bytes) -> None:
            memory.put("m", data)
    else:
        fs = pytest.importorskip("fsspec").filesystem("memory")
        fs.pipe("/overwritten/m", FILE)
        source = (fs, "/overwritten/m")

        def overwrite(data: bytes) -> None:
            time.sleep(0.01)  # (its modification time is what changes)
            fs.pipe("/overwritten/m", data)

    for new in (_replaced, _longer):
        file = open_file(source)
        overwrite(new(FILE))
        with pytest.raises(HeaderError, match="changed between two reads"):
            read_tensor(file, "long.U8")
        with pytest.raises(HeaderError, match="changed between two reads"):
            file.read_tensors()  # many ranges: get_ranges, then the object checked
        overwrite(FILE)


@pytest.mark.parametrize("how", ["rewritten in place", "replaced by a rename", "truncated"])
@pytest.mark.parametrize("reader", ["read_tensor", "numpy.load", "open_tensors"])
def test_local_file_changed_after_its_header_raises(tmp_path: Path, how: str, reader: str) -> None:
    from safetensors_header.numpy import load, open_tensors

    path = tmp_path / "m.safetensors"
    path.write_bytes(FILE)
    file = open_file(path)
    lazy = open_tensors(path)
    if how == "rewritten in place":
        stamp = path.stat().st_mtime_ns
        with path.open("r+b") as out:
            out.write(_replaced(FILE))
        os.utime(path, ns=(stamp + 10**9, stamp + 10**9))  # (a coarse clock's tick)
    elif how == "replaced by a rename":
        other = tmp_path / "new.safetensors"
        other.write_bytes(_replaced(FILE))
        other.replace(path)
    else:
        with path.open("r+b") as out:
            out.truncate(len(FILE) - 1)
    read = {
        "read_tensor": lambda: read_tensor(file, "long.U8"),
        "numpy.load": lambda: load(file, names=["long.U8"], mmap=False),
        "open_tensors": lambda: lazy["long.U8"][10:20],
    }[reader]
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        read()
    assert caught.value.kind == "FileChanged"


def test_local_file_unchanged_reads_again_and_again(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(FILE)
    file = open_file(path)
    for _ in range(3):
        assert bytes(file.read_tensor("long.U8")) == REFERENCE["long.U8"][2]


def test_an_opened_file_pickles_with_its_identity(site: Site, tmp_path: Path) -> None:
    import pickle

    site.files["m"] = FILE
    path = tmp_path / "m.safetensors"
    path.write_bytes(FILE)
    for source in (site.url("m"), path):
        file = pickle.loads(pickle.dumps(open_file(source)))
        assert bytes(file.read_tensor("long.U8")) == REFERENCE["long.U8"][2]
    site.files["m"] = _replaced(FILE)
    file = open_file(site.url("m"))
    copy = pickle.loads(pickle.dumps(file))
    site.files["m"] = FILE
    with pytest.raises(HeaderError, match=CHANGED):
        copy.read_tensor("long.U8")


# --- a checkpoint's shards: one round trip for all their headers ------------------------------


@pytest.fixture
def gathering(site: Site) -> Site:
    """A checkpoint of 10 shards whose shard requests are held until 10 are in flight."""
    import json

    weight_map = {}
    for shard in range(10):
        name = f"model-{shard:05d}-of-00010.safetensors"
        site.files[name] = build({f"w{shard}": tensor("U8", [4], 0, 4)}, 4)
        weight_map[f"w{shard}"] = name
    site.files["model.safetensors.index.json"] = json.dumps({"weight_map": weight_map}).encode()
    site.gather = 10
    return site


def test_ten_shards_headers_are_asked_for_at_once(gathering: Site) -> None:
    checkpoint = read_checkpoint(gathering.url("model.safetensors.index.json"))
    assert len(checkpoint.files) == 10
    shards = [hit for hit in gathering.done(11) if hit.path.endswith(".safetensors")]
    assert len(shards) == 10  # one request a shard
    assert gathering.most_in_flight == 10  # every one in flight at once: not waves


@pytest.mark.parametrize("max_workers", [3, 64])
def test_a_long_reads_parts_in_flight(gathering: Site, max_workers: int) -> None:
    # At most max_workers, and 2 a core (4 on one or two cores): more streams cost more CPU
    # than they add speed.
    from safetensors_header import open_file, read_ranges
    from safetensors_header.plan import plan_reads

    name = "model-00000-of-00010.safetensors"
    gathering.files[name] = build({"long": tensor("U8", [64_000], 0, 64_000)}, 64_000)
    gathering.gather = 0  # (not while the header is read)
    file = open_file(gathering.url(name), part_size=4_000, max_workers=max_workers)
    info = file.header.tensors["long"]
    parts = len(plan_reads(file, {"long": None}, part_size=4_000, max_workers=max_workers).requests)
    streams = min(max_workers, max(4, 2 * (os.cpu_count() or 1)))
    gathering.gather = min(streams, parts)
    gathering.most_in_flight, gathering.hold = 0, 0.1  # parts over the bound would show too
    [data] = read_ranges(file, [(info.start, info.nbytes)])
    assert bytes(data) == gathering.files[name][info.start : info.start + info.nbytes]
    assert gathering.most_in_flight == gathering.gather


def test_shard_reads_stay_bounded(gathering: Site) -> None:
    gathering.gather = 3
    read_checkpoint(gathering.url("model.safetensors.index.json"), max_workers=3)
    assert gathering.most_in_flight == 3
