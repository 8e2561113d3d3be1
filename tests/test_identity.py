"""A file's identity: every source's file replaced between the read of its header and a read
of its data is the one ``FileChanged`` error, never another file's bytes.

For each backend, a file is read (its header, with the identity its source gave), then
replaced by another of the same size or of another size, then its data is read with that
header: through `open_file(source, header=h)`, `numpy.load(source, header=h)`,
`read_ranges(source, ranges, header=h)` and a checkpoint's header given back.
"""

from __future__ import annotations

import io
import json
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loopback import Site

from safetensors_header import (
    FileIdentity,
    HeaderError,
    open_file,
    read_checkpoint,
    read_header,
    read_ranges,
    write_file,
)


def _file(name: str = "a", fill: int = 1, *, size: int = 64, meta: str = "x") -> bytes:
    """A small file: one U8 tensor `name` of `size` bytes of `fill`, and metadata `meta`."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.safetensors")
        write_file(path, {name: ("U8", [size], bytes([fill]) * size)}, metadata={"m": meta})
        with open(path, "rb") as file:
            return file.read()


ORIGINAL = _file()
SAME_SIZE = _file("b", 2)  # another tensor name, other bytes: the same size
SAME_HEADER = _file(fill=3)  # the same header, other bytes
LONGER = _file(size=80)
assert len(SAME_SIZE) == len(ORIGINAL) == len(SAME_HEADER) != len(LONGER)
NEW_FILES = {"same size": SAME_SIZE, "another size": LONGER}
#: What a local file's identity holds beside its size.
LOCAL_VALIDATORS = {"device", "inode", "mtime_ns", "ctime_ns"}


def _changed(call: Callable[[], object]) -> HeaderError:
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        call()
    assert caught.value.kind == "FileChanged"
    return caught.value


def _readers(source: Any, header: Any) -> dict[str, Callable[[], object]]:
    """Every way to read the data with a header given."""
    from safetensors_header.numpy import load

    first = next(iter(header.tensors.values()))
    return {
        "open_file": lambda: open_file(source, header=header).read_tensors(),
        "numpy.load": lambda: load(source, header=header, mmap=False),
        "read_ranges": lambda: read_ranges(source, [(first.start, 1)], header=header),
    }


READERS = ["open_file", "numpy.load", "read_ranges"]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("new", list(NEW_FILES))
@pytest.mark.parametrize("how", ["renamed over", "rewritten in place"])
def test_a_path(tmp_path: Path, how: str, new: str, reader: str) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(ORIGINAL)
    header = read_header(path)
    assert isinstance(header.identity, FileIdentity)
    assert {name for name, _ in header.identity.validators} == LOCAL_VALIDATORS
    if how == "renamed over":
        (tmp_path / "new").write_bytes(NEW_FILES[new])
        os.replace(tmp_path / "new", path)
    else:
        stat = path.stat()
        path.write_bytes(NEW_FILES[new])
        # (a rewrite within the clock's tick keeps the time: as a later write would be)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    _changed(_readers(str(path), header)[reader])


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ["bytes", "bytearray", "BytesIO"])
def test_bytes_and_a_file_object_of_memory(kind: str, reader: str) -> None:
    def make(data: bytes) -> Any:
        return {"bytes": bytes, "bytearray": bytearray, "BytesIO": io.BytesIO}[kind](data)

    header = read_header(make(ORIGINAL))
    assert header.identity is not None
    assert header.identity.validators == ()
    assert header.identity.header_digest is not None
    _changed(_readers(make(SAME_SIZE), header)[reader])  # its header's bytes differ
    _changed(_readers(make(LONGER), header)[reader])
    # The same header's bytes (and only the data changed): nothing tells them apart.
    assert _readers(make(ORIGINAL), header)[reader]() is not None


@pytest.mark.parametrize("reader", READERS)
def test_a_file_object_over_a_descriptor(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(ORIGINAL)
    with open(path, "rb") as stream:
        header = read_header(stream)
        said = {name for name, _ in header.identity.validators}  # type: ignore[union-attr]
        assert said == LOCAL_VALIDATORS
        stat = path.stat()
        path.write_bytes(SAME_HEADER)  # in place: the same inode, the same header's bytes
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        _changed(_readers(stream, header)[reader])


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("new", list(NEW_FILES))
@pytest.mark.parametrize("validators", ["etag", "last-modified", "neither"])
def test_a_url(site: Site, validators: str, new: str, reader: str) -> None:
    site.send_etag = validators == "etag"
    site.send_last_modified = validators == "last-modified"
    site.files["m"] = ORIGINAL
    header = read_header(site.url("m"))
    said = {name for name, _ in header.identity.validators}  # type: ignore[union-attr]
    assert said == ({validators} - {"neither"})
    site.files["m"] = NEW_FILES[new]
    _changed(_readers(site.url("m"), header)[reader])


@pytest.mark.parametrize("dropped", [True, False], ids=["ETag dropped", "ETag added"])
def test_a_url_whose_validators_change_in_kind(site: Site, dropped: bool) -> None:
    """A later reply that drops its ETag (or gains one) while Last-Modified changes is a
    change, though neither reply contradicts the other's ETag."""
    site.send_last_modified = True
    site.send_etag = dropped
    site.files["m"] = ORIGINAL
    file = open_file(site.url("m"))
    site.send_etag = not dropped
    site.files["m"] = SAME_HEADER  # the same header's bytes: only the validators can tell
    error = _changed(file.read_tensors)  # (its If-Range answered with the whole new file)
    assert "etag" in str(error) or "If-Range" in str(error)
    from safetensors_header.numpy import load

    site.files["m"] = ORIGINAL
    site.send_etag = dropped
    header = read_header(site.url("m"))
    site.send_etag = not dropped
    site.files["m"] = SAME_HEADER
    _changed(lambda: load(site.url("m"), header=header))


def test_a_header_from_read_checkpoint_given_back(site: Site) -> None:
    """numpy.load(url, header=h), h from read_checkpoint: the shard replaced by a file of the
    same size and the same header's bytes in between (only its ETag tells)."""
    from safetensors_header.numpy import load

    site.files["c/shard.safetensors"] = ORIGINAL
    site.files["c/model.safetensors.index.json"] = json.dumps(
        {"metadata": {}, "weight_map": {"a": "shard.safetensors"}}
    ).encode()
    checkpoint = read_checkpoint(site.url("c/model.safetensors.index.json"))
    header = checkpoint.files["shard.safetensors"]
    assert dict(header.identity.validators)["etag"]  # type: ignore[union-attr]
    site.files["c/shard.safetensors"] = SAME_HEADER
    _changed(lambda: load(site.url("c/shard.safetensors"), header=header))
    _changed(checkpoint.shards["shard.safetensors"].read_tensors)


def test_a_local_checkpoints_header_given_back(tmp_path: Path) -> None:
    from safetensors_header.numpy import load

    (tmp_path / "shard.safetensors").write_bytes(ORIGINAL)
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "shard.safetensors"}})
    )
    header = read_checkpoint(tmp_path).files["shard.safetensors"]
    (tmp_path / "new").write_bytes(SAME_HEADER)
    os.replace(tmp_path / "new", tmp_path / "shard.safetensors")
    _changed(lambda: load(tmp_path / "shard.safetensors", header=header, mmap=True))
    _changed(lambda: load(tmp_path / "shard.safetensors", header=header, mmap=False))


@pytest.mark.parametrize("store", ["obstore", "fsspec"])
@pytest.mark.parametrize("new", list(NEW_FILES))
def test_a_store(store: str, new: str) -> None:
    import time

    if store == "obstore":
        memory: Any = pytest.importorskip("obstore.store").MemoryStore()
        source: Any = (memory, "m")

        def put(data: bytes) -> None:
            memory.put("m", data)
    else:
        fs = pytest.importorskip("fsspec").filesystem("memory")
        source = (fs, f"/identity-{new.replace(' ', '-')}/m")

        def put(data: bytes) -> None:
            time.sleep(0.01)  # (its creation time is what changes)
            fs.pipe(source[1], data)

    put(ORIGINAL)
    header = read_header(source)
    assert header.identity is not None
    assert header.identity.validators
    put(NEW_FILES[new])
    for reader in READERS:
        _changed(_readers(source, header)[reader])
        put(ORIGINAL)  # (numpy.load of the original: reads, then the next replacement)
        header = read_header(source)
        put(NEW_FILES[new])


def test_the_same_file_read_with_its_header_reads_and_a_copy_is_held_to_its_size_and_header(
    tmp_path: Path, site: Site
) -> None:
    from safetensors_header.numpy import load

    path = tmp_path / "m.safetensors"
    path.write_bytes(ORIGINAL)
    header = read_header(path)
    assert load(path, header=header)["a"].tobytes() == bytes([1]) * 64
    site.files["m"] = ORIGINAL
    before = len(site.hits)
    assert load(site.url("m"), header=header)["a"].tobytes() == bytes([1]) * 64
    # A copy elsewhere: its header's bytes read once and compared, then the data.
    assert len(site.done(before + 2)) == before + 2
    site.files["m"] = LONGER
    with pytest.raises(HeaderError, match="its size is") as caught:
        load(site.url("m"), header=header)
    assert caught.value.kind == "FileChanged"
    site.files["m"] = SAME_SIZE
    with pytest.raises(HeaderError, match="header's bytes are not those") as caught:
        load(site.url("m"), header=header)
    assert caught.value.kind == "FileChanged"


def test_the_identity_survives_a_pickle_and_is_not_compared(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(ORIGINAL)
    header = read_header(path)
    again = pickle.loads(pickle.dumps(header))
    assert again.identity == header.identity
    assert again == read_header(ORIGINAL)  # equal headers, whatever they were read from
    assert "m.safetensors" in repr(header.identity)


@pytest.mark.parametrize("given", [str, Path])
def test_a_local_headers_identity_is_the_stat_of_its_read_whenever_asked(
    tmp_path: Path, given: Callable[[Path], Any]
) -> None:
    # A local header's identity is made when first asked for, from the ``fstat`` of its read:
    # asked after the file was replaced, it still describes the file the header came from.
    path = tmp_path / "m.safetensors"
    path.write_bytes(ORIGINAL)
    status = path.stat()
    header = read_header(given(path))
    replacement = tmp_path / "new.safetensors"
    replacement.write_bytes(SAME_SIZE)
    os.replace(replacement, path)
    assert path.stat().st_ino != status.st_ino
    said = (
        ("device", status.st_dev),
        ("inode", status.st_ino),
        ("mtime_ns", status.st_mtime_ns),
        ("ctime_ns", status.st_ctime_ns),
    )
    expected = FileIdentity(str(path), len(ORIGINAL), said)
    assert header.identity == expected
    assert header.identity is header.identity  # made once, then kept
    assert pickle.loads(pickle.dumps(header)).identity == expected
    _changed(lambda: open_file(path, header=header).read_tensors())


def test_identify_pins_the_first_and_holds_every_later_reply_to_it() -> None:
    from safetensors_header._sources.base import RangeFile
    from safetensors_header._sources.options import Options

    def file() -> RangeFile:
        return RangeFile(Options(), "f")

    both = (("etag", '"a"'), ("last-modified", "Mon"))
    dated = (("last-modified", "Tue"),)
    for first, later in [(both, dated), (dated, (("etag", '"a"'), *dated)), (both, ())]:
        one = file()
        one._identify(10, first)
        with pytest.raises(HeaderError, match="changed between two reads") as caught:
            one._identify(10, later)
        assert caught.value.kind == "FileChanged"
    one = file()
    one._identify(None, both)  # 'bytes a-b/*': the size learned later is no change
    one._identify(10, both)
    one._identify(10, None)  # a 416 says nothing of the validators
    assert (one.size, one.validators) == (10, both)
    with pytest.raises(HeaderError, match="its size was 10 bytes and is 11 now"):
        one._identify(11, both)
    two = file()
    two._identify(10, None)  # a 416 first: the validators of the next reply are pinned
    two._identify(10, dated)
    with pytest.raises(HeaderError, match="it had no etag"):
        two._identify(10, (("etag", '"b"'), *dated))


@pytest.mark.parametrize("dropped", [True, False], ids=["ETag dropped", "ETag added"])
def test_a_server_that_ignores_if_range_and_changes_its_validators(
    serve: Callable[[Any], Any], dropped: bool
) -> None:
    """The same bytes (no 200 to If-Range to tell): the reply's validators alone."""
    from loopback import asked

    data = ORIGINAL

    def handler(number: int, headers: dict[str, str]) -> bytes:
        first, last = asked(headers)
        body = data[first:last]
        etag = dropped if number == 0 else not dropped
        fields = [
            "HTTP/1.1 206 Partial Content",
            f"Content-Range: bytes {first}-{last - 1}/{len(data)}",
            f"Content-Length: {len(body)}",
            f"Last-Modified: {'Mon' if number == 0 else 'Tue'}, 01 Jan 2024 00:00:00 GMT",
            *(['ETag: "v1"'] if etag else []),
            "Connection: close",
        ]
        return ("\r\n".join(fields) + "\r\n\r\n").encode() + body

    server = serve(handler)
    with pytest.raises(HeaderError, match="etag") as caught:
        read_ranges(server.url(), [(0, 8), (len(data) - 8, 8)], gap=0, max_workers=1)
    assert caught.value.kind == "FileChanged"
