"""Sharded checkpoints: index files, directories, and their consistency."""

from __future__ import annotations

import json
import os
import re
import time
import tracemalloc
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from helpers import build, run_child, tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from loopback import Site

from safetensors_header import HeaderError, parse_header
from safetensors_header._checkpoint import (
    _MAX_INDEX_SIZE,
    DtypeTotal,
    _check_against_shards,
    _check_shard_name,
    by_dtype,
    read_checkpoint,
)


def shard(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A valid file holding the given tensors, packed in this order."""
    sizes = {"F32": 4, "U8": 1, "BF16": 2}
    header: dict[str, Any] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        header[name] = tensor(dtype, shape, offset, offset + count * sizes[dtype])
        offset += count * sizes[dtype]
    return build(header, offset, pad=True)


SHARDS = {
    "model-00001-of-00002.safetensors": {"embed": ("F32", [4, 2]), "l0.w": ("BF16", [2, 2])},
    "model-00002-of-00002.safetensors": {"l1.w": ("BF16", [2, 2]), "head": ("U8", [3])},
}


def write(
    folder: Path,
    *,
    shards: dict[str, dict[str, tuple[str, list[int]]]] = SHARDS,
    weight_map: dict[str, str] | None = None,
    metadata: Any = None,
    index_name: str = "model.safetensors.index.json",
) -> Path:
    for name, tensors in shards.items():
        (folder / name).write_bytes(shard(tensors))
    if weight_map is None:
        weight_map = {t: name for name, tensors in shards.items() for t in tensors}
    if metadata is None:
        metadata = {"total_size": 32 + 8 + 8 + 3}
    index = folder / index_name
    index.write_text(json.dumps({"metadata": metadata, "weight_map": weight_map}))
    return index


def test_a_consistent_checkpoint(tmp_path: Path) -> None:
    index = write(tmp_path)
    for source in (index, str(index), tmp_path):
        checkpoint = read_checkpoint(source)
        assert list(checkpoint.files) == list(SHARDS)
        assert checkpoint.weight_map["head"] == "model-00002-of-00002.safetensors"
        assert checkpoint.metadata == {"total_size": 51}
        assert list(checkpoint.tensors) == ["embed", "l0.w", "l1.w", "head"]
        assert checkpoint.problems == ()
        assert checkpoint.numel == 8 + 4 + 4 + 3
        assert checkpoint.nbytes == 51
        totals = checkpoint.by_dtype()
        assert list(totals) == ["BF16", "F32", "U8"]
        assert (totals["BF16"].tensors, totals["BF16"].numel, totals["BF16"].nbytes) == (2, 8, 16)
        head = checkpoint.tensors["head"]
        data = (tmp_path / checkpoint.weight_map["head"]).read_bytes()
        assert len(data[head.start : head.end]) == 3


def test_by_dtype_of_any_tensors(tmp_path: Path) -> None:
    checkpoint = read_checkpoint(write(tmp_path))
    assert by_dtype(checkpoint.tensors.values()) == checkpoint.by_dtype()
    assert by_dtype(checkpoint.files["model-00001-of-00002.safetensors"].tensors.values()) == {
        "BF16": DtypeTotal(tensors=1, numel=4, nbytes=8),
        "F32": DtypeTotal(tensors=1, numel=8, nbytes=32),
    }
    assert by_dtype([]) == {}


def test_a_single_file_and_a_directory_holding_one(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(shard({"a": ("U8", [2])}))
    for source in (tmp_path, tmp_path / "model.safetensors"):
        checkpoint = read_checkpoint(source)
        assert list(checkpoint.files) == ["model.safetensors"]
        assert dict(checkpoint.weight_map) == {"a": "model.safetensors"}
        assert checkpoint.metadata is None


def test_diffusers_names(tmp_path: Path) -> None:
    write(
        tmp_path,
        shards={"diffusion_pytorch_model-00001-of-00001.safetensors": {"a": ("U8", [2])}},
        index_name="diffusion_pytorch_model.safetensors.index.json",
        metadata={"total_size": 2},
    )
    assert list(read_checkpoint(tmp_path).tensors) == ["a"]


def test_an_empty_directory_names_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"model\.safetensors\.index\.json"):
        read_checkpoint(tmp_path)


def test_a_missing_shard_names_the_file(tmp_path: Path) -> None:
    index = write(tmp_path)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError) as info:
        read_checkpoint(index)
    assert info.value.filename == str(tmp_path / "model-00002-of-00002.safetensors")


def test_a_tensor_missing_from_its_shard(tmp_path: Path) -> None:
    weight_map = {t: n for n, ts in SHARDS.items() for t in ts}
    weight_map["ghost"] = "model-00001-of-00002.safetensors"
    with pytest.raises(HeaderError, match="'ghost'") as info:
        read_checkpoint(write(tmp_path, weight_map=weight_map))
    assert (info.value.kind, info.value.tensor) == ("IndexMismatch", "ghost")


def test_a_tensor_in_the_wrong_shard(tmp_path: Path) -> None:
    weight_map = {t: n for n, ts in SHARDS.items() for t in ts}
    weight_map["head"] = "model-00001-of-00002.safetensors"
    with pytest.raises(HeaderError) as info:
        read_checkpoint(write(tmp_path, weight_map=weight_map))
    assert info.value.kind == "IndexMismatch"


def test_a_tensor_in_two_shards(tmp_path: Path) -> None:
    shards = {
        "a.safetensors": {"x": ("U8", [1]), "y": ("U8", [1])},
        "b.safetensors": {"y": ("U8", [1])},
    }
    weight_map = {"x": "a.safetensors", "y": "b.safetensors"}
    with pytest.raises(HeaderError, match="in two shards") as info:
        read_checkpoint(write(tmp_path, shards=shards, weight_map=weight_map))
    assert (info.value.kind, info.value.tensor) == ("IndexMismatch", "y")


def test_unlisted_tensor_and_total_size_are_problems_or_errors(tmp_path: Path) -> None:
    weight_map = {t: n for n, ts in SHARDS.items() for t in ts}
    del weight_map["l1.w"]
    index = write(tmp_path, weight_map=weight_map, metadata={"total_size": 50})
    checkpoint = read_checkpoint(index)
    assert [problem.kind for problem in checkpoint.problems] == ["UnlistedTensor", "TotalSize"]
    assert checkpoint.problems[0].tensor == "l1.w"
    assert "l1.w" in checkpoint.tensors
    with pytest.raises(HeaderError, match="total_size") as info:
        read_checkpoint(index, strict=True)
    assert info.value.kind == "IndexMismatch"


@pytest.mark.parametrize(
    "name",
    [
        "../model.safetensors",
        "/etc/passwd",
        "a/../../b.safetensors",
        "https://x/y.safetensors",
        "..\\x.safetensors",
        "",
        "a\0b",
        ".",
        "C:x.safetensors",  # drive-relative: C:'s current directory, on Windows
        "c:",
        "C:\\x.safetensors",
        "C:/x.safetensors",
        "//server/share/x.safetensors",
        "x.safetensors:stream",  # an NTFS alternate data stream
    ],
)
def test_shard_names_outside_the_directory_are_refused(tmp_path: Path, name: str) -> None:
    (tmp_path / "index.json").write_text(json.dumps({"weight_map": {"a": name}}))
    with pytest.raises(HeaderError, match="not a file name inside") as info:
        read_checkpoint(tmp_path / "index.json")
    assert info.value.kind == "InvalidIndex"
    with pytest.raises(HeaderError, match="not a file name inside"):
        _check_shard_name(name, "index.json")  # the same verdict on every system


@pytest.mark.parametrize("name", ["a.safetensors", "sub/a.safetensors", "a b.safetensors", "é"])
def test_shard_names_inside_the_directory_pass(name: str) -> None:
    _check_shard_name(name, "index.json")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not a JSON document"),
        ("[]", "expected a JSON object"),
        ('{"metadata": {}}', 'no "weight_map" object'),
        ('{"weight_map": []}', 'no "weight_map" object'),
        ('{"weight_map": {"a": 1}}', "strings"),
        ('{"weight_map": {}, "metadata": 3}', '"metadata" must be an object'),
        (b"\xff\xfe", "not a JSON document"),
    ],
)
def test_invalid_indexes(tmp_path: Path, text: str | bytes, problem: str) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(HeaderError, match=problem) as info:
        read_checkpoint(tmp_path)
    assert info.value.kind == "InvalidIndex"


def test_a_bad_shard_raises_its_own_kind(tmp_path: Path) -> None:
    index = write(tmp_path)
    (tmp_path / "model-00001-of-00002.safetensors").write_bytes(b"version https://git-lfs")
    with pytest.raises(HeaderError) as info:
        read_checkpoint(index)
    assert info.value.kind == "HeaderTooLarge"
    assert info.value.hint is not None


@pytest.mark.slow
def test_an_index_of_500000_tensors(tmp_path: Path) -> None:
    count, shards = 500_000, 50
    per = count // shards
    names = [f"model.layers.{i // 10}.mlp.experts.{i % 10}.weight" for i in range(count)]
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        chunk = names[s * per : (s + 1) * per]
        text = ",".join(  # (as build() would dump it, in a third of the time)
            f'"{n}":{{"dtype":"U8","shape":[1],"data_offsets":[{i},{i + 1}]}}'
            for i, n in enumerate(chunk)
        )
        (tmp_path / file).write_bytes(build("{" + text + "}", per))
        weight_map.update(dict.fromkeys(chunk, file))
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": count}, "weight_map": weight_map}))
    assert index.stat().st_size > 30_000_000
    start = time.perf_counter()
    checkpoint = read_checkpoint(index)
    elapsed = time.perf_counter() - start
    assert len(checkpoint.tensors) == count
    assert checkpoint.problems == ()
    print(f"500,000-entry index ({index.stat().st_size:,} bytes): {elapsed:.2f} s")


@pytest.fixture
def served(tmp_path: Path, site: Site) -> tuple[str, Site]:
    """tmp_path over HTTP on loopback (Range ignored: whole-file 200s)."""
    site.root, site.mode = str(tmp_path), "ignore"
    return site.url(""), site


def test_a_remote_index_and_its_shards(tmp_path: Path, served: tuple[str, Site]) -> None:
    base, site = served
    write(tmp_path)
    checkpoint = read_checkpoint(base + "model.safetensors.index.json")
    assert list(checkpoint.tensors) == ["embed", "l0.w", "l1.w", "head"]
    requests = [hit.path for hit in site.done(1 + len(SHARDS))]
    assert sorted(requests) == sorted(["/model.safetensors.index.json", *(f"/{n}" for n in SHARDS)])
    assert checkpoint == read_checkpoint(tmp_path)


def test_a_remote_single_file(tmp_path: Path, served: tuple[str, Site]) -> None:
    base, _ = served
    (tmp_path / "model.safetensors").write_bytes(shard({"a": ("U8", [2])}))
    checkpoint = read_checkpoint(base + "model.safetensors")
    assert dict(checkpoint.weight_map) == {"a": "model.safetensors"}


def test_a_remote_index_cannot_point_elsewhere(tmp_path: Path, served: tuple[str, Site]) -> None:
    base, site = served
    (tmp_path / "index.json").write_text(json.dumps({"weight_map": {"a": "../secret"}}))
    with pytest.raises(HeaderError, match="not a file name inside") as info:
        read_checkpoint(base + "index.json")
    assert info.value.kind == "InvalidIndex"
    assert [hit.path for hit in site.done(1)] == ["/index.json"]


def test_a_missing_remote_index(served: tuple[str, Site]) -> None:
    from safetensors_header import RemoteError

    base, _ = served
    with pytest.raises(RemoteError) as info:
        read_checkpoint(base + "missing.index.json")
    assert info.value.status == 404


# --- hostile checkpoints: links, FIFOs, devices, sizes ------------------------------------------

SECRET = b"TOKEN=hf_secret_value"
needs_links = pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")


def _index_of(folder: Path, names: dict[str, str]) -> Path:
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": names}))
    return index


def _outside(tmp_path: Path) -> Path:
    """A directory next to the checkpoint's, holding a secret that is not safetensors."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_bytes(SECRET)
    (outside / "a.safetensors").write_bytes(shard({"a": ("U8", [1])}))
    return outside


def _refused(source: Path, match: str, **options: Any) -> HeaderError:
    with pytest.raises(HeaderError, match=match) as info:
        read_checkpoint(source, **options)
    assert info.value.kind == "InvalidIndex"
    for text in (str(info.value), repr(info.value), str(info.value.hint)):
        assert SECRET[:8].decode() not in text
        assert "hf_secret" not in text
    return info.value


@needs_links
def test_a_shard_linked_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "a.safetensors").symlink_to(outside / "token")
    index = _index_of(checkpoint, {"a": "a.safetensors"})
    error = _refused(index, "leads out of the checkpoint's directory")
    assert "'a.safetensors'" in str(error)
    with pytest.raises(HeaderError) as info:  # asked for: read, and judged as any file
        read_checkpoint(index, follow_links=True)
    assert info.value.kind == "HeaderTooLarge"


@needs_links
def test_a_shard_under_a_linked_directory_is_refused(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "sub").symlink_to(outside, target_is_directory=True)
    index = _index_of(checkpoint, {"a": "sub/token"})
    _refused(index, "'sub/token' leads out")
    (index).write_text(json.dumps({"weight_map": {"a": "sub/a.safetensors"}}))
    _refused(index, "'sub/a.safetensors' leads out")  # even a valid file
    assert list(read_checkpoint(index, follow_links=True).tensors) == ["a"]


@needs_links
def test_a_dangling_link_out_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "a.safetensors").symlink_to(tmp_path / "nowhere")
    _refused(_index_of(checkpoint, {"a": "a.safetensors"}), "leads out")


@needs_links
def test_links_within_the_directory_are_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.safetensors").write_bytes(shard({"a": ("U8", [1])}))
    (tmp_path / "a.safetensors").symlink_to(Path("real") / "a.safetensors")
    (tmp_path / "linked").symlink_to("real", target_is_directory=True)
    (tmp_path / "b.safetensors").write_bytes(shard({"b": ("U8", [1])}))
    index = _index_of(tmp_path, {"a": "a.safetensors", "b": "b.safetensors"})
    assert list(read_checkpoint(index).tensors) == ["a", "b"]
    index = _index_of(tmp_path, {"a": "linked/a.safetensors"})
    assert list(read_checkpoint(index).tensors) == ["a"]


@needs_links
def test_a_hugging_face_cache_snapshot_reads_its_blobs(tmp_path: Path) -> None:
    # huggingface_hub's cache: snapshots/<revision>/<file> -> ../../blobs/<hash>
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    weight_map = {}
    for number, (name, tensors) in enumerate(SHARDS.items()):
        (repo / "blobs" / f"hash{number}").write_bytes(shard(tensors))
        (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / f"hash{number}")
        weight_map.update(dict.fromkeys(tensors, name))
    index_blob = repo / "blobs" / "index-hash"
    index_blob.write_text(json.dumps({"metadata": {"total_size": 51}, "weight_map": weight_map}))
    (snapshot / "model.safetensors.index.json").symlink_to(
        Path("..") / ".." / "blobs" / "index-hash"
    )
    assert read_checkpoint(snapshot).problems == ()
    assert len(read_checkpoint(snapshot / "model.safetensors.index.json").files) == 2
    outside = _outside(tmp_path)  # but not out of the repository
    (snapshot / "x.safetensors").symlink_to(outside / "token")
    _refused(_index_of(snapshot, {"a": "x.safetensors"}), "leads out")


@needs_links
@pytest.mark.parametrize("picked", ["model.safetensors.index.json", "model.safetensors"])
def test_the_file_picked_from_a_directory_must_be_inside_it(tmp_path: Path, picked: str) -> None:
    outside = _outside(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / picked).symlink_to(outside / "token")
    _refused(checkpoint, f"'{picked}' in the directory leads out")
    with pytest.raises(HeaderError) as info:  # named by the caller: read as given
        read_checkpoint(checkpoint / picked)
    assert info.value.kind == ("InvalidIndex" if picked.endswith(".json") else "HeaderTooLarge")


def test_a_directory_named_as_a_shard_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.safetensors").mkdir()
    _refused(_index_of(tmp_path, {"a": "a.safetensors"}), "not a regular file but a directory")


@needs_links
@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="a character device")
def test_a_device_is_never_read(tmp_path: Path) -> None:
    (tmp_path / "a.safetensors").symlink_to("/dev/zero")
    index = _index_of(tmp_path, {"a": "a.safetensors"})
    _refused(index, "leads out")
    _refused(index, "not a regular file but a character device", follow_links=True)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_fifo_never_hangs(tmp_path: Path) -> None:
    # Opened without O_NONBLOCK, a FIFO waits for a writer forever: the timeout is the test.
    os.mkfifo(tmp_path / "model-00001-of-00002.safetensors")
    (tmp_path / "model-00002-of-00002.safetensors").write_bytes(shard({"b": ("U8", [1])}))
    _index_of(
        tmp_path, {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    )
    (tmp_path / "single").mkdir()
    os.mkfifo(tmp_path / "single" / "model.safetensors")
    code = f"""
        from safetensors_header import HeaderError, read_checkpoint
        try:
            read_checkpoint({str(tmp_path)!r})
        except HeaderError as error:
            assert error.kind == "InvalidIndex", error
            assert "a FIFO" in str(error), error
        else:
            raise AssertionError("read")
        try:  # a FIFO is not a file: not picked, so the directory has no checkpoint
            read_checkpoint({str(tmp_path / "single")!r})
        except FileNotFoundError as error:
            assert "model.safetensors in the directory is not a regular" in str(error), error
        else:
            raise AssertionError("read")
        print("ok")
    """
    result = run_child(code)
    assert result.stdout == "ok\n", result.stderr


def test_the_index_size_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "a.safetensors").write_bytes(shard({"a": ("U8", [1])}))
    index = _index_of(tmp_path, {"a": "a.safetensors"})
    size = index.stat().st_size
    assert list(read_checkpoint(index, max_index_size=size).tensors) == ["a"]
    with pytest.raises(HeaderError, match=f"larger than {size - 1} bytes") as info:
        read_checkpoint(index, max_index_size=size - 1)
    assert info.value.kind == "InvalidIndex"
    assert _MAX_INDEX_SIZE == 100_000_000  # the documented default


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="an endless file")
@needs_links
def test_an_endless_local_index_is_read_only_to_its_bound(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").symlink_to("/dev/zero")
    tracemalloc.start()
    try:
        with pytest.raises(HeaderError, match="larger than 4,000,000 bytes") as info:
            read_checkpoint(tmp_path / "model.safetensors.index.json", max_index_size=4_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.kind == "InvalidIndex"
    assert peak < 3 * 4_000_000


@pytest.fixture
def endless(site: Site) -> tuple[str, Site]:
    """A loopback server whose every answer is a 200 with an endless body (no length)."""
    site.endless["model.safetensors.index.json"] = b'{"weight_map": {"a": "'
    return site.url("model.safetensors.index.json"), site


def test_an_endless_index_url_is_read_only_to_its_bound(endless: tuple[str, Site]) -> None:
    # Before the bound, such an index cost a 1 GiB download and 2 GiB of memory. The child's
    # timeout bounds the time; it measures its own memory.
    url, site = endless
    limit = 8_000_000
    code = f"""
        import tracemalloc
        from safetensors_header import HeaderError, read_checkpoint
        tracemalloc.start()
        try:
            read_checkpoint({url!r}, max_index_size={limit}, retries=0)
        except HeaderError as error:  # InvalidIndex, as for a local index
            assert error.kind == "InvalidIndex", error
            assert "larger than 8,000,000 bytes" in str(error), error
        else:
            raise AssertionError("read")
        print(tracemalloc.get_traced_memory()[1])
    """
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # loopback only
    result = run_child(code, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    peak = int(result.stdout)
    assert peak < 3 * limit, peak
    # What the server wrote before the client hung up: the bound, and the sockets' buffers.
    sent = site.done(1)[0].sent
    assert sent < limit + 64 * 2**20, sent
    print(f"endless index: {peak:,} bytes at the peak, {sent:,} sent")


def _remote_checkpoint(metadata: dict[str, str]) -> dict[str, bytes]:
    """An index and 3 shards of 2 tensors each: small headers, 300,000 bytes of data each."""
    files: dict[str, bytes] = {}
    weight_map: dict[str, str] = {}
    for number in range(3):
        shard = f"model-{number + 1:05d}-of-00003.safetensors"
        header = {
            "__metadata__": metadata,
            f"layers.{number}.w": tensor("U8", [299_992], 0, 299_992),
            f"layers.{number}.b": tensor("U8", [8], 299_992, 300_000),
        }
        files[shard] = build(header, 300_000)
        weight_map.update({f"layers.{number}.w": shard, f"layers.{number}.b": shard})
    files["model.safetensors.index.json"] = json.dumps({"weight_map": weight_map}).encode()
    return files


def test_a_remote_shards_first_read_is_sized_by_the_names_in_the_index(site: Any) -> None:
    site.files.update(_remote_checkpoint({"format": "pt"}))
    checkpoint = read_checkpoint(site.url("model.safetensors.index.json"))
    assert len(checkpoint.tensors) == 6
    shard_hits = [hit for hit in site.done(4) if hit.path.endswith(".safetensors")]
    assert len(shard_hits) == 3  # one request a shard
    for hit in shard_hits:
        assert hit.range is not None
        first, last = (int(part) for part in hit.range[6:].split("-"))
        header = 8 + int.from_bytes(site.files[hit.path[1:]][:8], "little")
        # The header in one read, not 128 KiB of the shard's tensor data with it.
        assert first == 0
        assert header <= last + 1 <= 8192


def test_a_shard_header_longer_than_its_estimate_costs_one_read_of_the_rest(site: Any) -> None:
    site.files.update(_remote_checkpoint({"notes": "x" * 20_000}))
    checkpoint = read_checkpoint(site.url("model.safetensors.index.json"))
    assert checkpoint.files["model-00002-of-00003.safetensors"].metadata == {"notes": "x" * 20_000}
    shard_hits = [hit for hit in site.done(7) if hit.path.endswith("00002-of-00003.safetensors")]
    header = 8 + int.from_bytes(site.files["model-00002-of-00003.safetensors"][:8], "little")
    first = int(shard_hits[0].range[6:].split("-")[1]) + 1
    assert [hit.range for hit in shard_hits] == [
        f"bytes=0-{first - 1}",
        f"bytes={first}-{header - 1}",
    ]


def _posix_path_verdict(name: str) -> bool:
    """The shard-name rule written with PurePosixPath: whether `name` is refused."""
    path = PurePosixPath(name)
    return (
        not path.parts
        or any(char in name for char in ":\\\0?#")
        or path.is_absolute()
        or ".." in path.parts
    )


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="a./:\\?#\0é", max_size=8))
def test_shard_names_are_judged_as_a_path_parses_them(name: str) -> None:
    refused = _posix_path_verdict(name)
    if refused:
        with pytest.raises(HeaderError, match="not a file name inside"):
            _check_shard_name(name, "index.json")
    else:
        _check_shard_name(name, "index.json")


def _one_name_at_a_time(files: dict[str, Any], weight_map: dict[str, str]) -> tuple[str, list[str]]:
    """The cross-check written a name at a time: the error, or the unlisted tensors."""
    owner: dict[str, str] = {}
    for file, header in files.items():
        for name in header.tensors:
            if name in owner:
                return f"tensor {name!r} is in two shards: {owner[name]!r} and {file!r}", []
            owner[name] = file
    for name, file in weight_map.items():
        if owner.get(name) != file:
            return f"the index puts tensor {name!r} in {file!r}", []
    return "", [name for name in owner if name not in weight_map]


@settings(max_examples=150, deadline=None)
@given(
    shards=st.lists(
        st.lists(st.sampled_from("abcdefgh"), max_size=4, unique=True), min_size=1, max_size=3
    ),
    changes=st.lists(
        st.tuples(
            st.sampled_from(["drop", "move", "add"]),
            st.sampled_from("abcdefghz"),
            st.integers(0, 2),
        ),
        max_size=3,
    ),
)
def test_the_cross_check_finds_what_a_check_of_each_name_finds(
    shards: list[list[str]], changes: list[tuple[str, str, int]]
) -> None:
    files = {
        f"s{i}": parse_header(shard({name: ("U8", [1]) for name in names}))
        for i, names in enumerate(shards)
    }
    weight_map = {name: f"s{i}" for i, names in enumerate(shards) for name in names}
    for change, name, to in changes:
        if change == "drop":
            weight_map.pop(name, None)
        else:
            weight_map[name] = f"s{to % len(shards)}"
    error, unlisted = _one_name_at_a_time(files, weight_map)
    if error:
        with pytest.raises(HeaderError, match=re.escape(error)) as info:
            _check_against_shards(files, weight_map, None)
        assert info.value.kind == "IndexMismatch"
        return
    tensors, problems = _check_against_shards(files, weight_map, None)
    assert [problem.tensor for problem in problems] == unlisted
    assert all(problem.kind == "UnlistedTensor" for problem in problems)
    assert list(tensors) == [name for header in files.values() for name in header.tensors]
    assert all(tensors[name] == files[f].tensors[name] for name, f in weight_map.items())
