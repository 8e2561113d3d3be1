"""`verify_files`: each file's sha256, whole, against the one the Hugging Face Hub publishes
(a loopback Hub's ``X-Linked-Etag``), for ``hf://`` sources and for local copies (a folder
with its repository named, and the Hub's cache)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from helpers import build, tensor
from loopback import Site

from safetensors_header import RemoteError, open_file, read_header
from safetensors_header.integrity import FileCheck, published_sha256, verify_files

NAMES = [f"model-0000{i}-of-00002.safetensors" for i in (1, 2)]


def _shard(i: int) -> bytes:
    return build(
        {"__metadata__": {"format": "pt"}, f"t{i}": tensor("U8", [64], 0, 64)},
        bytes((i * 31 + j) % 256 for j in range(64)),
    )


SHARDS = {name: _shard(i) for i, name in enumerate(NAMES, 1)}
INDEX = json.dumps({"weight_map": {f"t{i}": name for i, name in enumerate(NAMES, 1)}})


def _publish(hub: Site, repo: str = "org/model", revision: str = "main") -> None:
    """The checkpoint on the loopback Hub: its shards in LFS (302 to the CDN), its index in
    git (served by the Hub itself)."""
    for name, data in SHARDS.items():
        hub.linked[f"{repo}/resolve/{revision}/{name}"] = data
    hub.files[f"{repo}/resolve/{revision}/model.safetensors.index.json"] = INDEX.encode()


def _copy(folder: Path) -> Path:
    folder.mkdir(parents=True)
    for name, data in SHARDS.items():
        (folder / name).write_bytes(data)
    (folder / "model.safetensors.index.json").write_text(INDEX)
    return folder


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_hf_checkpoint_is_the_hubs(loopback_hub: Site) -> None:
    _publish(loopback_hub)
    checks = verify_files("hf://org/model")
    assert [check.name for check in checks] == NAMES
    for check in checks:
        assert check.sha256 == _sha256(SHARDS[check.name])  # hashlib's, header included
        assert check.published == _sha256(SHARDS[check.name])  # the X-Linked-Etag served
        assert check.matches
        assert check.verdict == "ok"
        assert check.source == f"hf://org/model/{check.name}"
    # One resolve a shard (its header's): the published digests came with the headers.
    paths = [hit.path for hit in loopback_hub.hits]
    assert sorted(paths) == sorted(
        ["/org/model/resolve/main/model.safetensors.index.json"]
        + [f"/org/model/resolve/main/{name}" for name in NAMES]
    )


def test_an_hf_file_whose_cdn_serves_other_bytes_is_named(loopback_hub: Site) -> None:
    _publish(loopback_hub)
    name = NAMES[1]
    [check] = verify_files(f"hf://org/model/{name}")
    assert check.matches
    cdn = loopback_hub.cdn
    assert cdn is not None
    damaged = bytearray(SHARDS[name])
    damaged[-1] ^= 1
    cdn.files[f"blobs/{_sha256(SHARDS[name])}"] = bytes(damaged)
    cdn.replace_after_first = {f"blobs/{_sha256(SHARDS[name])}": bytes(damaged)}
    [check] = verify_files(f"hf://org/model/{name}")
    assert not check.matches
    assert check.name == name
    assert check.sha256 == _sha256(bytes(damaged))
    assert f"but the Hub publishes {_sha256(SHARDS[name])}" in check.verdict


def test_a_local_copy_with_its_repository_named(loopback_hub: Site, tmp_path: Path) -> None:
    _publish(loopback_hub, "org/model", "v1.0")
    folder = _copy(tmp_path / "copy")
    checks = verify_files(folder, repo="org/model", revision="v1.0")
    assert [(check.name, check.matches) for check in checks] == [(name, True) for name in NAMES]
    assert {hit.path for hit in loopback_hub.hits} == {
        f"/org/model/resolve/v1.0/{name}" for name in NAMES
    }
    # One file of the copy, by itself.
    [check] = verify_files(folder / NAMES[0], repo="org/model", revision="v1.0")
    assert check.name == NAMES[0]
    assert check.matches


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "where",
    ["the last data byte", "a metadata byte", "the header's JSON", "the length prefix"],
)
def test_a_byte_changed_anywhere_is_found(loopback_hub: Site, tmp_path: Path, where: str) -> None:
    _publish(loopback_hub)
    folder = _copy(tmp_path / "copy")
    damaged = folder / NAMES[1]
    data = damaged.read_bytes()
    at = {
        "the last data byte": len(data) - 1,
        "a metadata byte": data.index(b'"pt"') + 1,  # "pt" -> "qt": still a valid header
        "the header's JSON": data.index(b"{"),  # "{" -> "z": no longer one
        "the length prefix": 0,
    }[where]
    _flip(damaged, at)
    checks = verify_files(folder, repo="org/model")
    assert [check.matches for check in checks] == [True, False]
    bad = checks[1]
    assert bad.name == NAMES[1]
    assert bad.sha256 == _sha256(damaged.read_bytes())
    assert bad.published == _sha256(data)


def test_the_hubs_cache_says_its_repository_and_revision(
    loopback_hub: Site, tmp_path: Path
) -> None:
    revision = "0123456789abcdef0123456789abcdef01234567"
    for name, data in SHARDS.items():
        loopback_hub.linked[f"datasets/org/data/resolve/{revision}/sub/{name}"] = data
    snapshot = tmp_path / "hub" / "datasets--org--data" / "snapshots" / revision
    blobs = tmp_path / "hub" / "datasets--org--data" / "blobs"
    blobs.mkdir(parents=True)
    (snapshot / "sub").mkdir(parents=True)
    for name, data in SHARDS.items():  # huggingface_hub's layout: links to the blobs
        blob = blobs / _sha256(data)
        blob.write_bytes(data)
        (snapshot / "sub" / name).symlink_to(blob)
    checks = verify_files(snapshot)
    assert [(check.name, check.matches) for check in checks] == [
        (f"sub/{name}", True) for name in NAMES
    ]
    assert sorted(hit.path for hit in loopback_hub.hits) == sorted(
        f"/datasets/org/data/resolve/{revision}/sub/{name}" for name in NAMES
    )
    # A folder inside the snapshot: its files' paths in the repository are under it.
    checks = verify_files(snapshot / "sub")
    assert [check.name for check in checks] == [f"sub/{name}" for name in NAMES]


def test_a_local_copy_needs_its_repository(tmp_path: Path) -> None:
    folder = _copy(tmp_path / "copy")
    with pytest.raises(ValueError, match=r"say which repository it is a copy of \(repo="):
        verify_files(folder)


def test_a_file_kept_in_git_is_not_verified(loopback_hub: Site, tmp_path: Path) -> None:
    loopback_hub.files["org/small/resolve/main/model.safetensors"] = SHARDS[NAMES[0]]
    folder = tmp_path / "copy"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(SHARDS[NAMES[0]])
    [check] = verify_files(folder, repo="org/small")
    assert check.published is None
    assert not check.matches
    assert "publishes no sha256 for it" in check.verdict


def test_a_file_the_repository_lacks(loopback_hub: Site, tmp_path: Path) -> None:
    _publish(loopback_hub)
    folder = _copy(tmp_path / "copy")
    shutil.copy(folder / NAMES[0], folder / "extra.safetensors")
    loopback_hub.hub_errors["org/model/resolve/main/extra.safetensors"] = (404, "EntryNotFound")
    with pytest.raises(RemoteError, match="no such file at this revision"):
        verify_files(folder, repo="org/model")


def test_published_sha256_of_a_file_and_a_header(loopback_hub: Site, tmp_path: Path) -> None:
    _publish(loopback_hub)
    file = open_file(f"hf://org/model/{NAMES[0]}")
    assert published_sha256(file) == _sha256(SHARDS[NAMES[0]])
    assert published_sha256(file.header) == published_sha256(file)
    header = read_header(f"hf://org/model/{NAMES[1]}")
    assert published_sha256(header) == _sha256(SHARDS[NAMES[1]])
    local = tmp_path / "m.safetensors"
    local.write_bytes(SHARDS[NAMES[0]])
    assert published_sha256(read_header(local)) is None


def test_the_record() -> None:
    check = FileCheck("m.safetensors", "m.safetensors", "ab" * 32, "ab" * 32)
    assert check.matches
    assert FileCheck("m", "m", "ab" * 32, "cd" * 32).matches is False
    with pytest.raises(AttributeError):
        check.name = "x"  # type: ignore[misc]


def test_transport_keywords_are_checked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeot'"):
        verify_files(tmp_path, repo="o/r", timeot=1)  # type: ignore[call-arg]


def test_validate_against_the_hub(
    loopback_hub: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors_header._cli import main

    _publish(loopback_hub, "org/model", "v2")
    folder = _copy(tmp_path / "copy")
    assert main(["validate", "--against-hub", str(folder), "--repo", "org/model@v2"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"{folder}: ok (2 tensors), 2 files as the Hub publishes"
    # A byte of the second shard's data changed: that file is named, the status is 1.
    _flip(folder / NAMES[1], -1 % len(SHARDS[NAMES[1]]))
    assert main(["validate", "--against-hub", str(folder), "--repo", "org/model@v2"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{folder}: hub: 1 file not the Hub's"
    assert lines[1].startswith(f"{folder}: hub: {NAMES[1]}: sha256 ")
    assert f"but the Hub publishes {_sha256(SHARDS[NAMES[1]])}" in lines[1]
    # The header's first byte: the file cannot be read, and the Hub's check still names it.
    _flip(folder / NAMES[1], -1 % len(SHARDS[NAMES[1]]))
    _flip(folder / NAMES[0], 0)
    assert main(["validate", "--json", "--against-hub", str(folder), "--repo", "org/model@v2"]) == 1
    [document] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert document["valid"] is False
    assert document["error"] is not None
    assert [(item["file"], item["matches"]) for item in document["hub"]] == [
        (NAMES[0], False),
        (NAMES[1], True),
    ]


def test_validate_against_the_hub_without_a_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors_header._cli import main

    folder = _copy(tmp_path / "copy")
    assert main(["validate", "--against-hub", str(folder)]) == 1
    out = capsys.readouterr().out
    assert "say which repository it is a copy of" in out
    assert main(["validate", str(folder), "--repo", "org/model"]) == 2
    assert "--repo org/model: says what --against-hub compares with" in capsys.readouterr().err


def test_validate_an_hf_repository_against_the_hub(
    loopback_hub: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    from safetensors_header._cli import main

    _publish(loopback_hub)
    assert main(["validate", "--against-hub", "org/model"]) == 0
    assert capsys.readouterr().out.strip() == (
        "hf://org/model: ok (2 tensors), 2 files as the Hub publishes"
    )
