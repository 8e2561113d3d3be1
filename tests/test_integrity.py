"""Whole-file digests, the layout-independent fingerprint and blake3: each equal to what an
independent implementation of docs/integrity.md's definitions computes with hashlib (and the
blake3 package), unchanged by what must not change it, changed by what must."""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import build, tensor
from loopback import Site
from test_data_path import FILE

from safetensors_header import HeaderError, open_file, read_checkpoint, update_metadata, write_file
from safetensors_header import _hashes as hashes_module
from safetensors_header.integrity import TensorHashes, hash_tensors, verify_tensors

Tensors = dict[str, tuple[str, tuple[int, ...], bytes]]


def _tensors() -> Tensors:
    """Tensors of several dtypes and shapes (a 0-d one, an empty one), random bytes."""
    rng = random.Random(42)
    shapes = {
        "model.embed.weight": ("BF16", (64, 48)),
        "model.layers.0.attn.q.weight": ("F32", (48, 48)),
        "model.layers.0.attn.q.bias": ("F32", (48,)),
        "model.layers.0.norm.weight": ("F16", (48,)),
        "model.layers.1.attn.q.weight": ("F32", (48, 48)),
        "model.scale": ("F64", ()),
        "model.empty": ("I8", (0, 3)),
        "lm_head.weight": ("BF16", (64, 48)),
    }
    sizes = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I8": 1}
    out: Tensors = {}
    for name, (dtype, shape) in shapes.items():
        count = sizes[dtype]
        for dim in shape:
            count *= dim
        out[name] = (dtype, shape, rng.randbytes(count))
    return out


# --- the definitions, written again from docs/integrity.md ------------------------------


def _u64(number: int) -> bytes:
    return struct.pack("<Q", number)


def _record(name: str, dtype: str, shape: tuple[int, ...], digest: bytes) -> bytes:
    encoded = name.encode("utf-8")
    return b"".join(
        [
            _u64(len(encoded)),
            encoded,
            _u64(len(dtype)),
            dtype.encode("ascii"),
            _u64(len(shape)),
            b"".join(_u64(dim) for dim in shape),
            digest,
        ]
    )


def _independent(tensors: Tensors, new: Callable[[], Any]) -> tuple[str, dict[str, str]]:
    """The model's fingerprint and each tensor's, from the definition."""

    def digest(data: bytes) -> bytes:
        hasher = new()
        hasher.update(data)
        return bytes(hasher.digest())

    fingerprints = {
        name: digest(_record(name, dtype, shape, digest(data)))
        for name, (dtype, shape, data) in tensors.items()
    }
    ordered = sorted(fingerprints, key=lambda name: name.encode("utf-8"))
    model = new()
    model.update(b"".join(fingerprints[name] for name in ordered))
    return model.hexdigest(), {name: value.hex() for name, value in fingerprints.items()}


def _save(
    folder: Path, tensors: Tensors, shards: int, metadata: dict[str, str] | None = None
) -> Path:
    """`tensors` as 1 file, or as `shards` files with an index (names dealt round-robin)."""
    folder.mkdir(parents=True, exist_ok=True)
    if shards == 1:
        write_file(folder / "model.safetensors", tensors, metadata=metadata)
        return folder / "model.safetensors"
    names = list(tensors)
    weight_map = {}
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = names[shard::shards]
        write_file(folder / file, {name: tensors[name] for name in part}, metadata=metadata)
        weight_map.update(dict.fromkeys(part, file))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


def _in_order(path: Path, tensors: Tensors, names: list[str], metadata: dict[str, str]) -> None:
    """A file with the tensors' bytes in the order of `names` (write_file keeps the
    reference's order), the header's keys in that order too."""
    header: dict[str, Any] = {"__metadata__": metadata}
    data, at = b"", 0
    for name in names:
        dtype, shape, raw = tensors[name]
        header[name] = tensor(dtype, list(shape), at, at + len(raw))
        data += raw
        at += len(raw)
    path.write_bytes(build(header, data, pad=True))


# --- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["sha256", "blake2b", "sha3_256", "md5"])
def test_the_fingerprint_is_the_definitions(tmp_path: Path, algorithm: str) -> None:
    tensors = _tensors()
    path = _save(tmp_path, tensors, 1)
    hashes = hash_tensors(path, algorithm=algorithm)
    model, fingerprints = _independent(tensors, lambda: hashlib.new(algorithm))
    assert hashes.fingerprint == model
    assert dict(hashes.fingerprints) == fingerprints
    assert dict(hashes.tensors) == {
        name: hashlib.new(algorithm, data).hexdigest() for name, (_, _, data) in tensors.items()
    }


def test_the_fingerprint_survives_resharding_order_and_metadata(tmp_path: Path) -> None:
    tensors = _tensors()
    one = hash_tensors(_save(tmp_path / "one", tensors, 1))
    three = hash_tensors(_save(tmp_path / "three", tensors, 3, {"format": "pt", "note": "x"}))
    assert len(read_checkpoint(tmp_path / "three").shards) == 3
    names = list(tensors)
    random.Random(7).shuffle(names)
    shuffled_path = tmp_path / "shuffled.safetensors"
    _in_order(shuffled_path, tensors, names, {"another": "metadata"})
    shuffled = hash_tensors(shuffled_path)
    assert list(shuffled.tensors) == names  # the file's order is another one...
    assert list(shuffled.tensors) != list(one.tensors)
    assert shuffled.content != one.content  # ...which the hash list sees
    assert one.fingerprint == three.fingerprint == shuffled.fingerprint  # the fingerprint not
    assert dict(one.fingerprints) == dict(three.fingerprints) == dict(shuffled.fingerprints)
    update_metadata(shuffled_path, {"padding": "p" * 300})  # more header, more padding
    assert hash_tensors(shuffled_path).fingerprint == one.fingerprint


def _changed(tensors: Tensors, how: str) -> Tensors:
    changed = dict(tensors)
    if how == "relabel":  # BF16 -> F16: the same bytes, another meaning
        dtype, shape, data = changed["model.embed.weight"]
        assert dtype == "BF16"
        changed["model.embed.weight"] = ("F16", shape, data)
    elif how == "reshape":
        dtype, shape, data = changed["model.layers.0.attn.q.weight"]
        changed["model.layers.0.attn.q.weight"] = (dtype, (shape[1] * 2, shape[0] // 2), data)
    elif how == "rename":
        changed["model.layers.0.attn.k.weight"] = changed.pop("model.layers.0.attn.q.weight")
    else:  # a bit flipped
        dtype, shape, data = changed["lm_head.weight"]
        flipped = bytearray(data)
        flipped[17] ^= 0x04
        changed["lm_head.weight"] = (dtype, shape, bytes(flipped))
    return changed


@pytest.mark.parametrize("how", ["relabel", "reshape", "rename", "bit-flip"])
def test_the_fingerprint_changes_with_any_tensor(tmp_path: Path, how: str) -> None:
    tensors = _tensors()
    before = hash_tensors(_save(tmp_path / "before", tensors, 1))
    after = hash_tensors(_save(tmp_path / "after", _changed(tensors, how), 1))
    assert after.fingerprint != before.fingerprint
    assert after.fingerprint == _independent(_changed(tensors, how), hashlib.sha256)[0]
    differences = before.differences(after)
    if how == "rename":
        assert differences == {
            "model.layers.0.attn.q.weight": "missing",
            "model.layers.0.attn.k.weight": "added",
        }
    else:  # the tensor's own fingerprint names it, its bytes the same or not
        changed = {"relabel": "model.embed.weight", "bit-flip": "lm_head.weight"}.get(
            how, "model.layers.0.attn.q.weight"
        )
        assert differences == {changed: "changed"}
    if how in ("relabel", "reshape"):
        assert after.content == before.content  # the bytes alone cannot tell
        # A manifest of before hash_tensors had fingerprints cannot either: nothing to see.
        old_manifest = {k: v for k, v in before.manifest().items() if k != "fingerprints"}
        assert verify_tensors(tmp_path / "after" / "model.safetensors", old_manifest) == {}


def _file_digest(path: Path, new: Callable[[], Any]) -> str:
    hasher = new()
    hasher.update(path.read_bytes())
    return str(hasher.hexdigest())


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_whole_file_digests_are_sha256sums(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    # Small pieces, so that pieces end inside tensors, between them and in the header.
    monkeypatch.setattr(hashes_module, "_PIECE", 1000)
    tensors = _tensors()
    folder = _save(tmp_path, tensors, 3, {"format": "pt"})
    hashes = hash_tensors(folder, files=True, max_workers=workers)
    shards = sorted(path.name for path in tmp_path.glob("*.safetensors"))
    assert len(shards) == 3
    assert dict(hashes.files) == {
        name: hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in shards
    }
    assert list(hashes.files) == list(read_checkpoint(folder).shards)  # the index's order
    # One pass gives the tensors' digests too: the same as without files.
    alone = hash_tensors(folder, max_workers=workers)
    assert hashes.tensors == alone.tensors
    assert (hashes.content, hashes.fingerprint) == (alone.content, alone.fingerprint)
    assert alone.files == {}


def test_whole_file_digests_of_every_kind_of_source(tmp_path: Path, site: Site) -> None:
    path = tmp_path / "every.safetensors"
    path.write_bytes(FILE)
    site.files["every.safetensors"] = FILE
    expected = hashlib.sha256(FILE).hexdigest()
    url = site.url("every.safetensors")
    for source, shown in ((path, str(path)), (url, url), (open_file(FILE), None)):
        files = hash_tensors(source, files=True).files
        assert list(files.values()) == [expected]
        if shown is not None:
            assert list(files) == [shown]


def test_a_file_changed_while_hashed_whole_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hashes_module, "_PIECE", 4096)
    path = _save(tmp_path, _tensors(), 1)
    file = open_file(path)
    path.write_bytes(path.read_bytes() + b"more")
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        hash_tensors(file, files=True)
    assert caught.value.kind == "FileChanged"


@pytest.mark.parametrize("mmap", [False, True])
@pytest.mark.parametrize("files", [False, True])
def test_a_file_rewritten_while_hashed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: bool, mmap: bool
) -> None:
    # A local file rewritten in place (same size) while it is hashed, read in copies or
    # through a map (its bytes seen at once): FileChanged, never digests of a mix.
    path = _save(tmp_path, _tensors(), 1)
    real = hashes_module._hasher
    rewritten = threading.Event()

    def rewriting(algorithm: object, threads: int = 1) -> Callable[[], Any]:
        new = real(algorithm, threads)

        class Rewriting:
            def __init__(self) -> None:
                self.inner = new()

            def update(self, data: Any) -> None:
                self.inner.update(data)
                if rewritten.is_set():
                    return
                rewritten.set()
                status = path.stat()
                with path.open("r+b") as file:  # the last byte flipped, in place
                    file.seek(-1, 2)
                    last = file.read(1)[0]
                    file.seek(-1, 2)
                    file.write(bytes([last ^ 1]))
                # (a later write: the clock's tick may be coarser than the test)
                os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 10**9))

            def digest(self) -> bytes:
                return bytes(self.inner.digest())

            def hexdigest(self) -> str:
                return str(self.inner.hexdigest())

        return Rewriting

    monkeypatch.setattr(hashes_module, "_hasher", rewriting)
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        hash_tensors(path, files=files, mmap=mmap)
    assert caught.value.kind == "FileChanged"


@pytest.mark.parametrize("files", [False, True])
def test_a_map_and_copies_give_the_same_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: bool
) -> None:
    # Pieces that end inside tensors, between them and in the header; the local files read
    # in copies through the data path (as a URL's are: the default), then mapped.
    monkeypatch.setattr(hashes_module, "_PIECE", 1000)
    tensors = _tensors()
    folder = _save(tmp_path, tensors, 3)
    made: list[object] = []
    real = hashes_module._map

    def recorded(file: Any) -> Any:
        made.append(real(file))
        return made[-1]

    monkeypatch.setattr(hashes_module, "_map", recorded)
    copied = hash_tensors(folder, files=files, max_workers=3)
    assert dict(copied.tensors) == {
        name: hashlib.sha256(data).hexdigest() for name, (_, _, data) in tensors.items()
    }
    assert made == []  # no file mapped unless asked
    assert hash_tensors(folder, files=files, max_workers=3, mmap=True) == copied
    assert len(made) == 3  # every local file was mapped
    assert None not in made


def test_a_checkpoint_of_many_shards_has_a_few_maps_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each map keeps a descriptor: a file's is made when a worker first needs it and closed
    # after its last tensor, so that thousands of shards do not run out of descriptors.
    tensors = _tensors()
    folder = _save(tmp_path, tensors, 8)
    live, most = [0], [0]
    lock = threading.Lock()
    real_init, real_close = hashes_module._Bytes.__init__, hashes_module._Bytes.close

    def init(self: Any, file: Any, mapped: bool) -> None:
        real_init(self, file, mapped)
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])

    def close(self: Any, *, check: bool) -> None:
        if self.map is not None:
            with lock:
                live[0] -= 1
        real_close(self, check=check)

    monkeypatch.setattr(hashes_module._Bytes, "__init__", init)
    monkeypatch.setattr(hashes_module._Bytes, "close", close)
    hashes = hash_tensors(folder, max_workers=2, mmap=True)
    assert dict(hashes.tensors) == {
        name: hashlib.sha256(data).hexdigest() for name, (_, _, data) in tensors.items()
    }
    assert live == [0]  # every map closed
    assert 1 <= most[0] <= 3  # (a worker a file, and one more as a worker moves on)


def test_a_failure_while_hashing_tensors_of_a_whole_file_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second thread (the tensors' digests) fails: the reading thread stops and raises it.
    monkeypatch.setattr(hashes_module, "_PIECE", 4096)
    path = _save(tmp_path, _tensors(), 1)
    real = hashes_module._hasher

    def failing_after(algorithm: object, threads: int = 1) -> Callable[[], Any]:
        new = real(algorithm, threads)

        class Failing:
            def __init__(self) -> None:
                self.inner = new()

            def update(self, data: Any) -> None:
                if threading.current_thread().name == "hash-tensors":  # a tensor's digest
                    raise MemoryError("hashing failed")
                self.inner.update(data)

            def digest(self) -> bytes:
                return bytes(self.inner.digest())

            def hexdigest(self) -> str:
                return str(self.inner.hexdigest())

        return Failing

    monkeypatch.setattr(hashes_module, "_hasher", failing_after)
    with pytest.raises(MemoryError, match="hashing failed"):
        hash_tensors(path, files=True)


def test_progress_counts_the_bytes_read(tmp_path: Path) -> None:
    folder = _save(tmp_path, _tensors(), 3)
    for files, total in (
        (False, sum(h.data_size for h in read_checkpoint(folder).files.values())),
        (True, sum(p.stat().st_size for p in tmp_path.glob("*.safetensors"))),
    ):
        seen: list[tuple[int, int]] = []
        hash_tensors(
            folder, files=files, progress=lambda done, of, seen=seen: seen.append((done, of))
        )
        assert seen[-1] == (total, total)
        assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_timeout_that_is_up_is_a_timeout_error(tmp_path: Path) -> None:
    path = _save(tmp_path, _tensors(), 1)
    for files in (False, True):
        with pytest.raises(TimeoutError, match="timeout of 1e-09 s is up"):
            hash_tensors(path, files=files, timeout=1e-9)


def test_manifests_carry_the_fingerprint_and_files(tmp_path: Path) -> None:
    path = _save(tmp_path, _tensors(), 1)
    hashes = hash_tensors(path, files=True)
    document = json.loads(json.dumps(hashes.manifest()))
    assert set(document) == {
        "algorithm",
        "content",
        "tensors",
        "fingerprint",
        "fingerprints",
        "files",
    }
    assert TensorHashes.from_manifest(document) == hashes
    # A manifest of before the fingerprint is read as it is, and still verifies.
    old = {key: document[key] for key in ("algorithm", "content", "tensors")}
    read = TensorHashes.from_manifest(old)
    assert (read.fingerprint, dict(read.fingerprints), dict(read.files)) == (None, {}, {})
    assert verify_tensors(path, old) == {}
    assert set(hash_tensors(path).manifest()) == set(document) - {"files"}


# --- blake3 ---------------------------------------------------------------------------------


def test_blake3_digests_are_the_packages(tmp_path: Path) -> None:
    blake3 = pytest.importorskip("blake3")
    tensors = _tensors()
    folder = _save(tmp_path, tensors, 3)
    hashes = hash_tensors(folder, algorithm="blake3", files=True)
    assert hashes.algorithm == "blake3"
    assert dict(hashes.tensors) == {
        name: blake3.blake3(data).hexdigest() for name, (_, _, data) in tensors.items()
    }
    assert dict(hashes.files) == {
        path.name: _file_digest(path, blake3.blake3) for path in tmp_path.glob("*.safetensors")
    }
    assert (hashes.fingerprint, dict(hashes.fingerprints)) == _independent(tensors, blake3.blake3)
    content = blake3.blake3(b"".join(bytes.fromhex(d) for d in hashes.tensors.values()))
    assert hashes.content == content.hexdigest()
    assert verify_tensors(folder, json.loads(json.dumps(hashes.manifest()))) == {}
    # One worker: blake3's own threads on every core; the same digests.
    assert hash_tensors(folder, algorithm="blake3", files=True, max_workers=1) == hashes
    # A tensor larger than a worker's share: hashed on blake3's threads; the same digest.
    large = {"large": ("U8", (3 << 20,), bytes(range(256)) * (3 << 12)), **tensors}
    path = _save(tmp_path / "large", large, 1)
    for workers in (1, 2, 3):
        found = hash_tensors(path, algorithm="blake3", max_workers=workers)
        assert found.tensors["large"] == blake3.blake3(large["large"][2]).hexdigest()


def test_blake3_without_its_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "blake3", None)  # import blake3 -> ImportError
    with pytest.raises(ValueError, match=r"pip install 'safetensors_header\[blake3\]'"):
        hash_tensors(FILE, algorithm="blake3")
    with pytest.raises(ValueError, match="blake3 package"):
        TensorHashes.from_manifest({"algorithm": "blake3", "content": "0" * 64, "tensors": {}})


def test_records_pickle_and_old_manifests_write_what_they_read(tmp_path: Path) -> None:
    import pickle

    hashes = hash_tensors(_save(tmp_path, _tensors(), 1), files=True)
    assert pickle.loads(pickle.dumps(hashes)) == hashes
    old = TensorHashes(hashes.algorithm, hashes.tensors, hashes.content)
    assert old.manifest() == {
        "algorithm": "sha256",
        "content": hashes.content,
        "tensors": dict(hashes.tensors),
    }
    assert pickle.loads(pickle.dumps(old)) == old


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ({"algorithm": b"sha256", "content": "", "tensors": {}}, "not a bytes"),
        ({"algorithm": "md5", "content": "g" * 32, "tensors": {}}, "content: a md5 digest is 32"),
        ({"algorithm": "md5", "content": "0" * 32, "tensors": {1: "0" * 32}}, "not a number"),
        ({"algorithm": "md5", "content": "0" * 32, "tensors": {}, "files": []}, "files are an"),
        ({"algorithm": "md5", "content": "0" * 32, "tensors": {"a": None}}, "'a': a md5 .* null"),
        ({"algorithm": "shake_128", "content": "", "tensors": {}}, "no fixed digest size"),
    ],
    ids=["bytes", "not-hex", "name", "files", "null", "shake"],
)
def test_what_is_not_a_manifest_is_said(document: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        TensorHashes.from_manifest(document)


def test_a_failure_in_a_worker_is_raised_and_a_timeout_left_is_no_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _save(tmp_path, _tensors(), 3)
    assert hash_tensors(path, timeout=600) == hash_tensors(path)
    real = hashes_module._tensor_digest

    def failing(file: Any, info: Any, *args: Any) -> bytes:
        if info.name == "model.layers.0.attn.q.weight":
            raise OSError(5, "Input/output error")
        return real(file, info, *args)

    monkeypatch.setattr(hashes_module, "_tensor_digest", failing)
    with pytest.raises(OSError, match="Input/output error"):
        hash_tensors(path, max_workers=3)
