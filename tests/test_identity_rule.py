"""The identity rule: a file is the same by what it is, never by how it was spelled.

Every backend runs through one table of cases: a header is read, the file is replaced (or
rewritten in place, or copied), and its data is read with that header through a spelling of
its location that differs from the one the header was read with. The file the header was
read from, however it is reached, is held to all its validators; a copy elsewhere is held to
its size, to what names the content wherever it is, and to its header's bytes. What cannot
be detected (a copy, or a server without validators, whose header's bytes are the same and
whose data differ) is pinned too, as docs/errors.md says it.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from loopback import Site

from safetensors_header import HeaderError, open_file, read_header, read_ranges, write_file


def _file(name: str = "a", fill: int = 1, *, size: int = 64) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.safetensors")
        write_file(path, {name: ("U8", [size], bytes([fill]) * size)}, metadata={"m": "x"})
        return Path(path).read_bytes()


ORIGINAL = _file()
SAME_SIZE = _file("b", 2)  # another header of the same length, other bytes: the same size
SAME_HEADER = _file(fill=3)  # the same header's bytes, other data
assert len(SAME_SIZE) == len(ORIGINAL) == len(SAME_HEADER)
assert SAME_HEADER[:80] == ORIGINAL[:80] != SAME_SIZE[:80]


def _readers(source: Any, header: Any) -> dict[str, Callable[[], bytes]]:
    """Every way to read the data with a header given, each returning tensor a's bytes."""
    from safetensors_header.numpy import load

    first = next(iter(header.tensors.values()))

    def loaded(mmap: bool) -> bytes:
        return bytes(load(source, header=header, mmap=mmap)[first.name].tobytes())

    readers: dict[str, Callable[[], bytes]] = {
        "open_file": lambda: bytes(open_file(source, header=header).read_tensors()[first.name]),
        "numpy.load": lambda: loaded(False),
        "read_ranges": lambda: bytes(
            read_ranges(source, [(first.start, first.nbytes)], header=header)[0]
        ),
    }
    if isinstance(source, (str, Path)) and "://" not in str(source):
        readers["numpy.load mapped"] = lambda: loaded(True)
    return readers


def _changed(call: Callable[[], object]) -> HeaderError:
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        call()
    assert caught.value.kind == "FileChanged"
    return caught.value


# --- local files ------------------------------------------------------------------------------

#: How the path read with is spelled, from the folder `base`, the file at `base/m.safetensors`.
SPELLINGS: dict[str, Callable[[Path], Any]] = {
    "as read": lambda base: str(base / "m.safetensors"),
    "./": lambda base: "./m.safetensors",  # (the test runs in `base`)
    "bare name": lambda base: "m.safetensors",
    "absolute": lambda base: str((base / "m.safetensors").resolve()),
    "Path": lambda base: base / "m.safetensors",
    "with ..": lambda base: str(base / "sub" / ".." / "m.safetensors"),
    "doubled slashes": lambda base: str(base) + "//m.safetensors",
    "through a link": lambda base: str(base / "link.safetensors"),
    "through a linked folder": lambda base: str(base / "folder-link" / "m.safetensors"),
}


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "m.safetensors").write_bytes(ORIGINAL)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.safetensors").symlink_to("m.safetensors")
    (tmp_path / "folder-link").symlink_to(tmp_path, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("new", [SAME_HEADER, SAME_SIZE], ids=["same header", "same size"])
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_local_file_replaced_is_found_however_its_path_is_spelled(
    base: Path, spelling: str, new: bytes
) -> None:
    for read_with in SPELLINGS.values():  # (the header read through each spelling too)
        header = read_header(read_with(base))
        (base / "new").write_bytes(new)
        os.replace(base / "new", base / "m.safetensors")
        for name, reader in _readers(SPELLINGS[spelling](base), header).items():
            error = _changed(reader)
            assert "another file is at its path" in str(error), name
        (base / "m.safetensors").write_bytes(ORIGINAL)


def _rewrite_keeping_the_time(path: Path, data: bytes, was: os.stat_result) -> None:
    """`data` written over `path` in place, its modification time set back to `was`'s (as
    ``cp -p`` and ``rsync -t`` do), until its change time has moved on from `was`'s (the
    kernel's clock for it ticks in milliseconds)."""
    with open(path, "r+b") as file:
        file.write(data)
    for _ in range(400):
        os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))
        now = path.stat()
        if now.st_ctime_ns != was.st_ctime_ns:
            break
        time.sleep(0.005)
    now = path.stat()
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (was.st_ino, was.st_size, was.st_mtime_ns)
    assert now.st_ctime_ns != was.st_ctime_ns


@pytest.mark.parametrize("spelling", [*SPELLINGS, "a hard link"])
def test_a_rewrite_in_place_with_its_time_set_back_is_a_change(base: Path, spelling: str) -> None:
    os.link(base / "m.safetensors", base / "hard.safetensors")
    spell = SPELLINGS.get(spelling, lambda base: str(base / "hard.safetensors"))
    header = read_header(base / "m.safetensors")
    was = (base / "m.safetensors").stat()
    _rewrite_keeping_the_time(base / "m.safetensors", SAME_HEADER, was)
    for name, reader in _readers(spell(base), header).items():
        error = _changed(reader)
        assert "change time" in str(error), name


def test_a_hard_link_or_another_spelling_of_an_unchanged_file_reads(base: Path) -> None:
    os.link(base / "m.safetensors", base / "hard.safetensors")
    header = read_header("m.safetensors")
    for spell in [*SPELLINGS.values(), lambda base: base / "hard.safetensors"]:
        for name, reader in _readers(spell(base), header).items():
            assert reader() == bytes([1]) * 64, name


@pytest.mark.parametrize("how", ["copied", "copied with its times"])
def test_a_local_copy_is_held_to_its_header_bytes(base: Path, how: str) -> None:
    import shutil

    copy = shutil.copy2 if how == "copied with its times" else shutil.copyfile
    header = read_header(base / "m.safetensors")
    copy(base / "m.safetensors", base / "copy.safetensors")
    for name, reader in _readers(base / "copy.safetensors", header).items():
        assert reader() == bytes([1]) * 64, name  # the same bytes: read
    (base / "copy.safetensors").write_bytes(SAME_SIZE)  # another header, the same size
    for name, reader in _readers(base / "copy.safetensors", header).items():
        error = _changed(reader)
        assert "header's bytes are not those of the header given" in str(error), name
    # The same header's bytes, other data: no source can tell (docs/errors.md says so).
    (base / "copy.safetensors").write_bytes(SAME_HEADER)
    for name, reader in _readers(base / "copy.safetensors", header).items():
        assert reader() == bytes([3]) * 64, name


def test_a_pickled_header_is_held_to_the_rule_in_another_process(base: Path) -> None:
    header = pickle.loads(pickle.dumps(read_header("m.safetensors")))
    opened = pickle.loads(pickle.dumps(open_file("m.safetensors")))
    (base / "new").write_bytes(SAME_HEADER)
    os.replace(base / "new", base / "m.safetensors")
    for reader in _readers(str(base / "m.safetensors"), header).values():
        _changed(reader)
    _changed(opened.read_tensors)


# --- URLs -------------------------------------------------------------------------------------


def test_normal_url() -> None:
    """RFC 3986's normal form: what two spellings of one resource share."""
    from safetensors_header._sources.urls import normal_url

    same = [
        "http://h/m.safetensors",
        "HTTP://H/m.safetensors",
        "http://h:80/m.safetensors",
        "http://h/./m.safetensors",
        "http://h/a/../m.safetensors",
        "http://h/a/b/../../m.safetensors",
        "http://h/%6d.safetensors",
        "http://h/%6D%2Esafetensors",
        "http://h//../m.safetensors",
    ]
    assert {normal_url(url) for url in same} == {"http://h/m.safetensors"}
    assert normal_url("https://h:443") == "https://h/"
    assert normal_url("https://h:8443/a/.") == "https://h:8443/a/"
    assert normal_url("http://h/a/%2f/%7e?x=%7e") == "http://h/a/%2F/~?x=~"  # / stays escaped
    assert normal_url("http://[::1]:80/m") == "http://[::1]/m"
    assert normal_url("http://u@h:80/m") == "http://u@h/m"
    # Not the same resource: another host, port, case of the path, or an escaped slash.
    assert normal_url("http://h:8080/m") != normal_url("http://h/m")
    assert normal_url("http://h/M") != normal_url("http://h/m")
    assert normal_url("http://h/a%2Fm") != normal_url("http://h/a/m")
    assert normal_url("http://[bad") == "http://[bad"  # cannot be split: as it is


#: How the URL read with is spelled (the loopback server normalises paths, as nginx does).
URL_SPELLINGS: dict[str, Callable[[Site], str]] = {
    "as read": lambda site: site.url("m"),
    "dot segment": lambda site: site.url("./m"),
    "dot-dot segment": lambda site: site.url("x/../m"),
    "escaped": lambda site: site.url("%6d"),
    "scheme in capitals": lambda site: "HTTP" + site.url("m")[4:],
}


@pytest.mark.parametrize("spelling", list(URL_SPELLINGS))
@pytest.mark.parametrize("validators", ["etag", "last-modified", "both"])
def test_a_url_replaced_is_found_however_it_is_spelled(
    site: Site, validators: str, spelling: str
) -> None:
    site.normalise = True
    site.send_etag = validators in ("etag", "both")
    site.send_last_modified = validators in ("last-modified", "both")
    site.files["m"] = ORIGINAL
    header = read_header(site.url("m"))
    site.files["m"] = SAME_HEADER  # the same header's bytes: only the validators can tell
    for name, reader in _readers(URL_SPELLINGS[spelling](site), header).items():
        _changed(reader)
        assert name


@pytest.mark.parametrize("spelling", list(URL_SPELLINGS))
def test_a_url_of_an_unchanged_file_reads_however_it_is_spelled(site: Site, spelling: str) -> None:
    site.normalise = True
    site.files["m"] = ORIGINAL
    header = read_header(site.url("m"))
    before = len(site.done(1))
    for name, reader in _readers(URL_SPELLINGS[spelling](site), header).items():
        assert reader() == bytes([1]) * 64, name
    # The same place: its ETag decides, no header read again (one request a reader).
    assert len(site.done(before + 3)) == before + 3


def test_a_copy_at_another_url_is_held_to_its_header_bytes(site: Site, tmp_path: Path) -> None:
    site.files["m"] = ORIGINAL
    site.files["copy"] = ORIGINAL
    for header in (read_header(site.url("m")), read_header(ORIGINAL), _local(tmp_path)):
        for name, reader in _readers(site.url("copy"), header).items():
            assert reader() == bytes([1]) * 64, name
        site.files["copy"] = SAME_SIZE
        for name, reader in _readers(site.url("copy"), header).items():
            error = _changed(reader)
            assert "header's bytes are not those" in str(error), name
        site.files["copy"] = ORIGINAL


def _local(folder: Path) -> Any:
    (folder / "m.safetensors").write_bytes(ORIGINAL)
    return read_header(folder / "m.safetensors")


@pytest.mark.parametrize("validators", ["etag", "last-modified"])
def test_validators_first_learned_after_a_416_are_held_to_the_header(
    site: Site, validators: str
) -> None:
    """The first request of a file opened with a header is a range past its end (a 416
    that says only the size); the next reply's validators are compared with the header's
    when they are learned."""
    site.send_etag = validators == "etag"
    site.send_last_modified = validators == "last-modified"
    site.files["m"] = ORIGINAL
    header = read_header(site.url("m"))
    file = open_file(site.url("m"), header=header)
    site.files["m"] = SAME_HEADER
    if validators == "last-modified":
        # A date alone is not decisive: the header's bytes are read first, and the date of
        # that reply is the new file's.
        _changed(lambda: file.read_ranges([(len(ORIGINAL), 1)]))
        return
    with pytest.raises(HeaderError) as caught:
        file.read_ranges([(len(ORIGINAL), 1)])
    assert caught.value.kind == "MetadataIncompleteBuffer"
    assert site.done(2)[-1].status == 416
    _changed(file.read_tensors)
    # The same with the unchanged file: read.
    site.files["m"] = ORIGINAL
    header = read_header(site.url("m"))
    file = open_file(site.url("m"), header=header)
    with pytest.raises(HeaderError):
        file.read_ranges([(len(ORIGINAL), 1)])
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64


def test_a_server_without_validators_has_its_header_read_again(site: Site) -> None:
    """No ETag, no Last-Modified: open_file(url) reads the header's bytes again before its
    first data read, so a file replaced by one with another header is found."""
    from safetensors_header.numpy import load

    site.send_etag = site.send_last_modified = False
    site.files["m"] = ORIGINAL
    file = open_file(site.url("m"))
    site.files["m"] = SAME_SIZE
    error = _changed(file.read_tensors)
    assert "header's bytes are not those" in str(error)
    # Within one call: numpy.load reads the header, then (the file replaced) its data.
    site.files["n"] = ORIGINAL
    site.done(len(site.hits))
    site.hits.clear()  # (`replace_after_first` counts from the first request on)
    site.finished = 0
    site.replace_after_first = {"n": SAME_SIZE}
    _changed(lambda: load(site.url("n")))
    # A file that stays the same: the header's bytes once more, then the data.
    site.replace_after_first = {}
    site.files["m"] = ORIGINAL
    before = len(site.done(len(site.hits)))
    file = open_file(site.url("m"))
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64  # (compared once)
    assert len(site.done(before + 4)) == before + 4
    # What no source can tell: the same header's bytes, other data (docs/errors.md).
    file = open_file(site.url("m"))
    site.files["m"] = SAME_HEADER
    assert bytes(file.read_tensors()["a"]) == bytes([3]) * 64


def test_a_bytearray_changed_under_an_open_file_is_found() -> None:
    data = bytearray(ORIGINAL)
    file = open_file(data)
    data[:] = SAME_SIZE
    _changed(file.read_tensors)


# --- the Hub ----------------------------------------------------------------------------------

MODEL_URL = "hf://org/repo/model.safetensors"
MODEL = "org/repo/resolve/main/model.safetensors"


@pytest.mark.parametrize("how", ["served directly", "redirected unnamed"])
def test_a_hub_renewal_that_no_longer_names_the_file_is_not_that_file(
    loopback_hub: Site, how: str
) -> None:
    """A file pinned by X-Linked-Etag (its sha256): its signed URL refused, the resolve URL
    asked again answers without naming it: the file is not known to be the same."""
    hub = loopback_hub
    assert hub.cdn is not None
    hub.linked[MODEL] = ORIGINAL
    file = open_file(MODEL_URL)
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64
    header = file.header
    hub.cdn.signatures.clear()  # every signature refused from now on: asked again
    del hub.linked[MODEL]
    if how == "served directly":
        hub.files[MODEL] = SAME_HEADER
    else:
        hub.files["elsewhere"] = SAME_HEADER
        hub.redirects[MODEL] = hub.url("elsewhere")
    error = _changed(file.read_tensors)
    assert "X-Linked-Etag" in str(error)
    # A header given back, read again through another file: the same verdict.
    for reader in _readers(MODEL_URL, header).values():
        _changed(reader)


def test_a_hub_renewal_that_names_the_file_again_reads(loopback_hub: Site) -> None:
    hub = loopback_hub
    assert hub.cdn is not None
    hub.linked[MODEL] = ORIGINAL
    file = open_file(MODEL_URL)
    hub.cdn.signatures.clear()
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64
    hub.cdn.signatures.clear()
    hub.linked[MODEL] = SAME_HEADER  # another sha256
    _changed(file.read_tensors)


def test_a_malformed_signing_date_is_a_url_without_a_known_expiry(site: Site) -> None:
    from safetensors_header._sources.urls import signed_until

    for date in ("20241301T000000Z", "00000101T000000Z", "20240230T000000Z", "20240101T250000Z"):
        for prefix in ("X-Amz", "X-Goog"):
            query = f"?{prefix}-Date={date}&{prefix}-Expires=3600&{prefix}-Signature=ab"
            assert signed_until("https://h/blob" + query) is None
    site.files["blob"] = ORIGINAL
    site.redirects["m"] = site.url("blob") + "?X-Amz-Date=20241301T000000Z&X-Amz-Expires=60"
    file = open_file(site.url("m"))
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64


# --- object stores ----------------------------------------------------------------------------


@pytest.mark.parametrize("store", ["obstore", "fsspec"])
def test_a_store_copy_is_held_to_its_header_bytes(store: str) -> None:
    if store == "obstore":
        memory: Any = pytest.importorskip("obstore.store").MemoryStore()

        def source(name: str) -> Any:
            return (memory, name)

        def put(name: str, data: bytes) -> None:
            memory.put(name, data)
    else:
        fs = pytest.importorskip("fsspec").filesystem("memory")

        def source(name: str) -> Any:
            return (fs, f"/identity-rule/{name}")

        def put(name: str, data: bytes) -> None:
            fs.pipe(f"/identity-rule/{name}", data)

    put("m", ORIGINAL)
    put("copy", ORIGINAL)
    header = read_header(source("m"))
    for name, reader in _readers(source("copy"), header).items():
        assert reader() == bytes([1]) * 64, name
    put("copy", SAME_SIZE)
    for name, reader in _readers(source("copy"), header).items():
        _changed(reader)
        assert name


# --- places, decisive validators, headers without an identity ---------------------------------


def test_two_queries_of_one_path_are_two_places(serve: Callable[[Any], Any]) -> None:
    """A server that picks the file by its query, with one Last-Modified for both: a header
    of ?file=a given for ?file=b is held to its bytes (the validators are another file's)."""
    from loopback import asked

    files = {"a": ORIGINAL, "b": SAME_SIZE}

    def handler(number: int, headers: dict[str, str]) -> bytes:
        first, last = asked(headers)
        data = files[headers[":path"].rpartition("=")[2]]
        body = data[first:last]
        return (
            "HTTP/1.1 206 Partial Content\r\n"
            f"Content-Range: bytes {first}-{first + len(body) - 1}/{len(data)}\r\n"
            f'Content-Length: {len(body)}\r\nETag: "same"\r\nConnection: close\r\n\r\n'
        ).encode() + body

    server = serve(handler)
    header = read_header(server.url() + "dl?file=a")
    assert "?<query " in header.identity.location  # (the query, as a digest)
    for reader in _readers(server.url() + "dl?file=b", header).values():
        _changed(reader)
    # A signature's parameters are not the query: signed again, the same place.
    from safetensors_header._sources.urls import url_place

    signed = url_place("https://h/m?X-Amz-Signature=1&X-Amz-Date=2&Expires=3&Signature=4")
    assert signed == url_place("https://h/m") == "https://h/m"
    assert url_place("https://h/m?b=2&a=1") == url_place("https://h/m?a=1&b=2")


@pytest.mark.parametrize("validators", ["weak etag", "last-modified", "neither"])
def test_a_header_given_for_a_source_without_decisive_validators_is_held_to_its_bytes(
    serve: Callable[[Any], Any], validators: str
) -> None:
    """open_file(url, header=h): the header's bytes compared before the first data read (not
    when the file is opened), on a server whose validators do not tell two files apart."""
    from loopback import asked

    current = {"data": ORIGINAL}

    def handler(number: int, headers: dict[str, str]) -> bytes:
        first, last = asked(headers)
        data = current["data"]
        body = data[first:last]
        said = {
            "weak etag": 'ETag: W/"1"\r\n',
            "last-modified": "Last-Modified: Mon, 01 Jan 2024 00:00:00 GMT\r\n",
            "neither": "",
        }[validators]
        return (
            "HTTP/1.1 206 Partial Content\r\n"
            f"Content-Range: bytes {first}-{first + len(body) - 1}/{len(data)}\r\n"
            f"Content-Length: {len(body)}\r\n{said}Connection: close\r\n\r\n"
        ).encode() + body

    server = serve(handler)
    header = read_header(server.url())
    opened = open_file(server.url(), header=header)
    plain = open_file(server.url())
    current["data"] = SAME_SIZE
    _changed(opened.read_tensors)
    _changed(plain.read_tensors)
    # In a worker process: a pickle of a file opened (and read) before the replacement.
    current["data"] = ORIGINAL
    worker = open_file(server.url())
    worker.read_tensors()
    pickled = pickle.dumps(worker)
    current["data"] = SAME_SIZE
    _changed(pickle.loads(pickled).read_tensors)


def test_a_header_without_an_identity_is_held_to_its_bytes(base: Path) -> None:
    """write_file's header and parse_header's carry no identity: a file replaced by another
    of the same size is found by its header's bytes."""
    from safetensors_header import parse_header

    written = write_file("w.safetensors", {"a": ("U8", [64], bytes([1]) * 64)}, metadata={"m": "x"})
    parsed = parse_header(ORIGINAL)
    assert written.identity is None
    assert parsed.identity is None
    for header in (written, parsed):
        (base / "w.safetensors").write_bytes(SAME_SIZE)
        for name, reader in _readers(base / "w.safetensors", header).items():
            error = _changed(reader)
            assert "header's bytes" in str(error), name
        (base / "w.safetensors").write_bytes(ORIGINAL)
        for name, reader in _readers(base / "w.safetensors", header).items():
            assert reader() == bytes([1]) * 64, name


def test_a_relative_path_is_the_working_directorys_at_the_read(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = read_header("m.safetensors")
    assert header.identity.location == str(base / "m.safetensors")
    (base / "sub" / "m.safetensors").write_bytes(SAME_HEADER)  # another file, that name
    monkeypatch.chdir(base / "sub")
    for reader in _readers(str(base / "m.safetensors"), header).values():
        assert reader() == bytes([1]) * 64  # the file it was read from, by its own path
    (base / "new").write_bytes(SAME_HEADER)
    os.replace(base / "new", base / "m.safetensors")
    for reader in _readers(str(base / "m.safetensors"), header).values():
        _changed(reader)


def test_a_file_object_and_its_path_are_one_place(base: Path) -> None:
    with open(base / "m.safetensors", "rb") as stream:
        header = read_header(stream)
    assert header.identity.location == str(base / "m.safetensors")
    (base / "new").write_bytes(SAME_HEADER)
    os.replace(base / "new", base / "m.safetensors")
    for reader in _readers(str(base / "m.safetensors"), header).values():
        _changed(reader)
    header = read_header("m.safetensors")
    (base / "new").write_bytes(ORIGINAL)
    os.replace(base / "new", base / "m.safetensors")
    with open(base / "m.safetensors", "rb") as stream:
        _changed(lambda: open_file(stream, header=header).read_tensors())


def test_a_xet_hash_that_appears_with_the_same_sha256_is_the_same_file(
    loopback_hub: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository moved to Xet storage: a renewal names the same sha256 and a Xet hash."""
    from safetensors_header._sources import http_replies

    hub = loopback_hub
    assert hub.cdn is not None
    hub.linked[MODEL] = ORIGINAL
    monkeypatch.setattr(http_replies, "LINKED", ("x-linked-etag",))  # no Xet hash at first
    file = open_file(MODEL_URL)
    monkeypatch.setattr(http_replies, "LINKED", ("x-linked-etag", "x-xet-hash"))
    hub.cdn.signatures.clear()  # refused: the resolve URL asked again, now with both
    assert bytes(file.read_tensors()["a"]) == bytes([1]) * 64


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_a_config_in_any_encoding_json_reads_is_read(tmp_path: Path, encoding: str) -> None:
    from safetensors_header.model import describe_model

    write_file(tmp_path / "model.safetensors", {"lm_head.weight": ("F32", [4, 4], bytes(64))})
    config = '{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}'
    (tmp_path / "config.json").write_bytes(config.encode(encoding))
    info = describe_model(tmp_path)
    assert not any("config.json" in note and "not" in note for note in info.notes), info.notes
