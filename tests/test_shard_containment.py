"""A plain shard name is resolved by one lstat beside a folder resolved once a checkpoint:
the cases that shortcut must judge as a full resolution of every shard's path would; and the
roots a checkpoint's links may lead into."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
from helpers import run_child

from safetensors_header import HeaderError, read_checkpoint, read_tensor

INDEX = "model.safetensors.index.json"
SECRET = b"TOKEN=hf_secret_value"
needs_links = pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links")


def _shard(path: Path, tensor: str, data: bytes = b"\x01\x02") -> None:
    header = json.dumps({tensor: {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]}}).encode()
    header += b" " * (-len(header) % 8)
    path.write_bytes(len(header).to_bytes(8, "little") + header + data)


def _index(folder: Path, weight_map: dict[str, str]) -> Path:
    (folder / INDEX).write_text(json.dumps({"weight_map": weight_map}))
    return folder / INDEX


def _outside(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "token").write_bytes(SECRET)
    _shard(outside / "c.safetensors", "c", b"XX")
    return outside


def _refused(source: str | os.PathLike[str], match: str) -> None:
    with pytest.raises(HeaderError, match=match) as info:
        read_checkpoint(source)
    assert info.value.kind == "InvalidIndex"
    assert "hf_secret" not in str(info.value)


@needs_links
@pytest.mark.parametrize("form", ["directory", "index", ".", "./", "bare index", "dir link"])
@pytest.mark.parametrize("last", [True, False])
def test_every_plain_shard_is_judged_however_the_index_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str, last: bool
) -> None:
    # The folder and its containment are worked out at the first shard: a link out among
    # later (or earlier) plain names is still found, for a relative, "." or "" folder too.
    outside = _outside(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    _shard(checkpoint / "a.safetensors", "a")
    _shard(checkpoint / "b.safetensors", "b")
    (checkpoint / "c.safetensors").symlink_to(outside / "c.safetensors")
    names = ["a.safetensors", "b.safetensors"]
    names.insert(2 if last else 0, "c.safetensors")
    _index(checkpoint, {name[0]: name for name in names})
    (tmp_path / "link").symlink_to(checkpoint, target_is_directory=True)
    monkeypatch.chdir(checkpoint)
    source = {"directory": str(checkpoint), "index": str(checkpoint / INDEX), ".": "."}
    source |= {"./": "./", "bare index": INDEX, "dir link": str(tmp_path / "link")}
    _refused(source[form], "shard 'c.safetensors' leads out")
    (checkpoint / "c.safetensors").unlink()
    _shard(checkpoint / "c.safetensors", "c")
    assert sorted(read_checkpoint(source[form]).tensors) == ["a", "b", "c"]


@needs_links
@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("in.safetensors", None),  # a link to a link to a file inside: read
        ("out.safetensors", "leads out"),  # a link to a link out
        (".", "leads out"),  # the folder itself is not inside it
        ("..", "leads out"),
        ("/", "leads out"),
        ("nowhere", FileNotFoundError),  # dangling inside: missing, named as the index names it
        ("x.safetensors", OSError),  # a loop: ELOOP, never read
    ],
)
def test_a_plain_name_that_is_a_link_is_resolved_all_the_way(
    tmp_path: Path, target: str, problem: str | type[OSError] | None
) -> None:
    outside = _outside(tmp_path)
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    _shard(checkpoint / "real.safetensors", "a")
    (checkpoint / "in.safetensors").symlink_to("real.safetensors")
    (checkpoint / "out.safetensors").symlink_to(outside / "token")
    (checkpoint / "x.safetensors").symlink_to(target)
    index = _index(checkpoint, {"a": "x.safetensors"})
    if problem is None:
        assert list(read_checkpoint(index).tensors) == ["a"]
    elif isinstance(problem, str):
        _refused(index, f"shard 'x.safetensors' {problem}")
    else:
        with pytest.raises(problem) as info:
            read_checkpoint(index)
        assert not isinstance(info.value, HeaderError)
        assert "x.safetensors" in str(info.value)


@needs_links
def test_an_index_named_through_a_link_has_its_shards_beside_the_link(tmp_path: Path) -> None:
    real, view = tmp_path / "real", tmp_path / "view"
    real.mkdir()
    view.mkdir()
    _shard(real / "a.safetensors", "a")
    _index(real, {"a": "a.safetensors"})
    (view / INDEX).symlink_to(real / INDEX)  # named as given: shards are looked for in view/
    with pytest.raises(FileNotFoundError, match="view"):
        read_checkpoint(view / INDEX)
    (view / "a.safetensors").symlink_to(real / "a.safetensors")  # out of view/
    _refused(view / INDEX, "shard 'a.safetensors' leads out")
    (view / "a.safetensors").unlink()
    _shard(view / "a.safetensors", "a", b"VV")
    assert bytes(read_tensor(read_checkpoint(view / INDEX), "a")) == b"VV"


@needs_links
def test_a_directory_link_retargeted_between_two_reads_is_judged_again(tmp_path: Path) -> None:
    outside = _outside(tmp_path)
    good, evil = tmp_path / "good", tmp_path / "evil"
    good.mkdir()
    evil.mkdir()
    _shard(good / "c.safetensors", "c")
    _index(good, {"c": "c.safetensors"})
    (evil / "c.safetensors").symlink_to(outside / "c.safetensors")
    _index(evil, {"c": "c.safetensors"})
    (tmp_path / "link").symlink_to(good, target_is_directory=True)
    assert list(read_checkpoint(tmp_path / "link").tensors) == ["c"]
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to(evil, target_is_directory=True)
    _refused(tmp_path / "link", "leads out")


def test_shards_stay_the_files_resolved_when_the_directory_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for where, data in (("one", b"\x01\x01"), ("two", b"\x02\x02")):
        (tmp_path / where / "ck").mkdir(parents=True)
        _shard(tmp_path / where / "ck" / "a.safetensors", "a", data)
        _index(tmp_path / where / "ck", {"a": "a.safetensors"})
    monkeypatch.chdir(tmp_path / "one")
    checkpoint = read_checkpoint("ck")
    monkeypatch.chdir(tmp_path / "two")  # the same relative names, other files
    assert bytes(read_tensor(checkpoint, "a")) == b"\x01\x01"


@needs_links
def test_a_shard_swapped_for_a_link_after_it_was_resolved_is_not_followed(
    tmp_path: Path,
) -> None:
    # Resolved by one lstat as a regular file, then replaced by a link out before it is read:
    # opened without following links, it is an error, not the file the link names.
    outside = _outside(tmp_path)
    _shard(tmp_path / "a.safetensors", "a")
    _shard(tmp_path / "c.safetensors", "c")
    index = _index(tmp_path, {"a": "a.safetensors", "c": "c.safetensors"})

    def swap(done: int, total: int) -> None:
        if done == 1:
            (tmp_path / "c.safetensors").unlink()
            (tmp_path / "c.safetensors").symlink_to(outside / "c.safetensors")

    with pytest.raises(OSError, match=r"c\.safetensors") as info:
        read_checkpoint(index, progress=swap)
    assert not isinstance(info.value, HeaderError)


@needs_links
def test_a_hugging_face_snapshot_reads_only_its_own_blobs(tmp_path: Path) -> None:
    repo = tmp_path / "hub" / "models--org--name"
    snapshot, sibling = repo / "snapshots" / "rev", repo / "snapshots" / "rev2"
    for folder in (repo / "blobs", snapshot, sibling, tmp_path / "hub" / "models--o--m" / "blobs"):
        folder.mkdir(parents=True)
    _shard(repo / "blobs" / "hash", "a")
    _shard(sibling / "x.safetensors", "a")
    _shard(repo / "top.safetensors", "a")
    _shard(tmp_path / "hub" / "models--o--m" / "blobs" / "hash", "a")
    links = {
        "a.safetensors": "../../blobs/hash",
        "sibling.safetensors": "../rev2/x.safetensors",  # another revision: not blobs/
        "top.safetensors": "../../top.safetensors",  # the repository, not its blobs/
        "other.safetensors": "../../../models--o--m/blobs/hash",  # another repository's
    }
    for name, target in links.items():
        (snapshot / name).symlink_to(target)
    (tmp_path / "snap").symlink_to(snapshot, target_is_directory=True)
    for name in links:
        index = _index(snapshot, {"a": name})
        if name == "a.safetensors":
            assert list(read_checkpoint(tmp_path / "snap").tensors) == ["a"]
            assert list(read_checkpoint(index).tensors) == ["a"]
        else:
            _refused(tmp_path / "snap", f"shard {name!r} leads out")


@needs_links
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_a_link_to_a_fifo_inside_the_directory_never_hangs(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.safetensors").symlink_to("pipe")
    _index(tmp_path, {"a": "a.safetensors"})
    code = f"""
        from safetensors_header import HeaderError, read_checkpoint
        try:
            read_checkpoint({str(tmp_path / INDEX)!r})
        except HeaderError as error:
            assert error.kind == "InvalidIndex" and "a FIFO" in str(error), error
            print("ok")
    """
    result = run_child(code)
    assert result.stdout == "ok\n", result.stderr


@pytest.mark.skipif(os.sep != "/", reason="a directory named 'http:'")
def test_a_local_path_that_reads_like_a_url_has_its_shards_read_as_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.scandir("http://h") names its entries "http://h/d": a local path (an os.PathLike), in
    # a directory named "http:". Its shard "a b.safetensors" is joined as a path, not
    # percent-quoted as beside a URL ("a%20b.safetensors", another file of the directory).
    folder = tmp_path / "http:" / "h" / "d"
    folder.mkdir(parents=True)
    _shard(folder / "a b.safetensors", "a")
    _shard(folder / "a%20b.safetensors", "a", b"QQ")
    _index(folder, {"a": "a b.safetensors"})
    monkeypatch.chdir(tmp_path)
    entry = next(entry for entry in os.scandir("http://h") if entry.name == "d")
    assert os.fspath(entry) == "http://h/d"
    assert bytes(read_tensor(read_checkpoint(entry), "a")) == b"\x01\x02"


@needs_links
def test_a_snapshots_blobs_that_lead_elsewhere_are_not_a_root(tmp_path: Path) -> None:
    # <repo>/blobs linked to "/" (or anywhere) would make every link of the snapshot "inside".
    outside = _outside(tmp_path)
    repo = tmp_path / "models--org--name"
    snapshot = repo / "snapshots" / "rev"
    snapshot.mkdir(parents=True)
    (repo / "blobs").symlink_to(outside, target_is_directory=True)
    (snapshot / "a.safetensors").symlink_to("../../blobs/c.safetensors")
    _index(snapshot, {"c": "a.safetensors"})
    _refused(snapshot, "shard 'a.safetensors' leads out")
    assert list(read_checkpoint(snapshot, follow_links=True).tensors) == ["c"]


@needs_links
def test_a_loop_of_links_in_the_directory_does_not_stop_its_reading(tmp_path: Path) -> None:
    _shard(tmp_path / "a.safetensors", "a")
    _index(tmp_path, {"a": "a.safetensors"})
    (tmp_path / "loop").symlink_to("loop")
    assert list(read_checkpoint(tmp_path).tensors) == ["a"]


def test_a_shard_name_with_a_lone_surrogate_is_not_a_file_name(tmp_path: Path) -> None:
    _shard(tmp_path / "a.safetensors", "a")
    (tmp_path / INDEX).write_text('{"weight_map": {"a": "\\ud800.safetensors"}}')
    _refused(tmp_path, "is not a file name inside")


@needs_links
@pytest.mark.skipif(not hasattr(os, "link"), reason="hard links")
def test_an_index_read_twice_is_judged_against_its_folder_of_the_time(tmp_path: Path) -> None:
    # The folder worked out for one read is not kept for the next (nor in a pickle): a link
    # retargeted in between is resolved again.
    from safetensors_header._sources.local import PathFile
    from safetensors_header._sources.options import Options

    good, evil = tmp_path / "good", tmp_path / "evil"
    good.mkdir()
    evil.mkdir()
    os.link(_index(good, {"a": "a.safetensors"}), evil / INDEX)  # the same file: one identity
    _shard(good / "a.safetensors", "a")
    _shard(evil / "a.safetensors", "a", b"EV")
    (tmp_path / "ck").symlink_to(evil, target_is_directory=True)
    index = PathFile(str(tmp_path / "ck" / INDEX), Options())
    assert bytes(read_tensor(read_checkpoint(index), "a")) == b"EV"  # (evil is its roots)
    (tmp_path / "ck").unlink()
    (tmp_path / "ck").symlink_to(good, target_is_directory=True)
    assert bytes(read_tensor(read_checkpoint(index), "a")) == b"\x01\x02"
    assert pickle.loads(pickle.dumps(index))._folder is None
