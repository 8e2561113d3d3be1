"""Content hashes: a digest per tensor equal to hashlib's over the reference's bytes, from every
kind of source; a flipped bit named; a metadata change that changes no digest."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import bounded, reference_header
from hypothesis import given
from hypothesis import strategies as st
from loopback import Site
from test_data_path import FILE, HEADER

from safetensors_header import open_file, read_checkpoint, update_metadata, write_file
from safetensors_header.integrity import TensorHashes, hash_tensors, verify_tensors

REFERENCE = reference_header(FILE)  # name -> (dtype, shape, bytes), as the reference reads
ROOT = Path(__file__).resolve().parent.parent


def _expected(algorithm: str = "sha256") -> dict[str, str]:
    return {name: hashlib.new(algorithm, REFERENCE[name][2]).hexdigest() for name in HEADER.tensors}


@pytest.mark.parametrize("kind", ["path", "bytes", "file object", "http", "obstore", "fsspec"])
def test_digests_are_hashlibs_over_the_references_bytes(
    kind: str, site: Site, tmp_path: Path
) -> None:
    path = tmp_path / "every.safetensors"
    path.write_bytes(FILE)
    site.files["every.safetensors"] = FILE
    if kind == "obstore":
        store = pytest.importorskip("obstore.store").MemoryStore()
        store.put("every.safetensors", FILE)
        source: Any = (store, "every.safetensors")
    elif kind == "fsspec":
        memory = pytest.importorskip("fsspec").filesystem("memory")
        memory.pipe("/hashes/every.safetensors", FILE)
        source = (memory, "/hashes/every.safetensors")
    else:
        source = {
            "path": path,
            "bytes": FILE,
            "file object": io.BytesIO(FILE),
            "http": site.url("every.safetensors"),
        }[kind]
    hashes = hash_tensors(source)
    assert dict(hashes.tensors) == _expected()
    assert list(hashes.tensors) == list(HEADER.tensors)  # in file order
    content = hashlib.sha256(b"".join(bytes.fromhex(d) for d in hashes.tensors.values()))
    assert hashes.content == content.hexdigest()


@pytest.mark.parametrize("algorithm", ["sha256", "blake2b", "sha1", "md5"])
def test_every_algorithm_of_fixed_size(tmp_path: Path, algorithm: str) -> None:
    hashes = hash_tensors(open_file(FILE), algorithm=algorithm, max_workers=1)
    assert dict(hashes.tensors) == _expected(algorithm)


def test_algorithms_that_cannot_be_used() -> None:
    with pytest.raises(ValueError, match="unknown hash algorithm 'sha3'"):
        hash_tensors(FILE, algorithm="sha3")
    with pytest.raises(ValueError, match="no fixed digest size"):
        hash_tensors(FILE, algorithm="shake_128")
    with pytest.raises(TypeError, match="algorithm must be a str"):
        hash_tensors(FILE, algorithm=1)  # type: ignore[arg-type]


def _checkpoint(folder: Path) -> None:
    rows = {f"layer.{i}.weight": ("U8", [4096 + i], bytes([i]) * (4096 + i)) for i in range(6)}
    names = list(rows)
    write_file(folder / "a.safetensors", {n: rows[n] for n in names[:3]}, metadata={"k": "v"})
    write_file(folder / "b.safetensors", {n: rows[n] for n in names[3:]})
    weight_map = {n: "a.safetensors" if i < 3 else "b.safetensors" for i, n in enumerate(names)}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def test_a_checkpoint_its_url_and_a_flipped_bit(tmp_path: Path, site: Site) -> None:
    _checkpoint(tmp_path)
    hashes = hash_tensors(tmp_path)
    assert list(hashes.tensors) == [f"layer.{i}.weight" for i in range(6)]
    assert hash_tensors(read_checkpoint(tmp_path)) == hashes
    assert hash_tensors(tmp_path / "model.safetensors.index.json") == hashes
    for file in tmp_path.iterdir():
        site.files[file.name] = file.read_bytes()
    assert hash_tensors(site.url("model.safetensors.index.json")) == hashes
    assert verify_tensors(tmp_path, hashes) == {}
    # One bit of layer.4's bytes.
    shard = tmp_path / "b.safetensors"
    data = bytearray(shard.read_bytes())
    info = read_checkpoint(tmp_path).tensors["layer.4.weight"]
    data[info.start + 100] ^= 0x10
    shard.write_bytes(data)
    assert verify_tensors(tmp_path, hashes.manifest()) == {"layer.4.weight": "changed"}


def test_a_metadata_change_keeps_every_digest(tmp_path: Path) -> None:
    _checkpoint(tmp_path)
    before = hash_tensors(tmp_path)
    update_metadata(tmp_path / "a.safetensors", {"k": "v" * 5000, "other": "x"})
    update_metadata(tmp_path / "b.safetensors", {"format": "pt"}, in_place=True)
    assert (tmp_path / "a.safetensors").read_bytes()[:8] != b""  # (rewritten, header longer)
    assert hash_tensors(tmp_path) == before


def test_manifests_round_trip_and_are_checked() -> None:
    hashes = hash_tensors(FILE)
    again = TensorHashes.from_manifest(json.loads(json.dumps(hashes.manifest())))
    assert again == hashes
    first = next(iter(hashes.tensors))
    other = TensorHashes(
        "sha256", {**hashes.tensors, first: "0" * 64, "extra": "1" * 64}, hashes.content
    )
    fewer = dict(hashes.tensors)
    del fewer[first]
    assert hashes.differences(other) == {first: "changed", "extra": "added"}
    assert hashes.differences(TensorHashes("sha256", fewer, "")) == {first: "missing"}
    with pytest.raises(ValueError, match="do not compare"):
        hashes.differences(TensorHashes("md5", {}, ""))
    for bad in ({}, {"algorithm": "sha256", "content": "x", "tensors": {}}, []):
        with pytest.raises(ValueError, match=r"manifest|hex digits"):
            TensorHashes.from_manifest(bad)
    with pytest.raises(ValueError, match="tensors are an object"):
        TensorHashes.from_manifest({"algorithm": "sha256", "content": "0" * 64, "tensors": []})


@pytest.mark.parametrize(
    "digest",
    [
        " " * 64,
        "\t" * 64,
        "0" * 62 + "  ",
        " 0" * 32,
        "0" * 63 + "\n",
        "\u0660" * 64,
        "0x" + "0" * 62,
    ],
    ids=["spaces", "tabs", "trailing", "spaced", "newline", "arabic-digits", "prefixed"],
)
def test_a_digest_is_hex_digits_only(digest: str) -> None:
    """bytes.fromhex skips whitespace: a digest of spaces would pass, and an intact tensor
    would then be reported changed. A digest is the algorithm's count of hex digits."""
    hashes = hash_tensors(FILE)
    first = next(iter(hashes.tensors))
    for document in (
        {"algorithm": "sha256", "content": digest, "tensors": {}},
        {**hashes.manifest(), "tensors": {**hashes.tensors, first: digest}},
    ):
        with pytest.raises(ValueError, match="a sha256 digest is 64 hex digits"):
            TensorHashes.from_manifest(document)
    upper = {**hashes.manifest(), "tensors": {first: hashes.tensors[first].upper()}}
    assert TensorHashes.from_manifest(upper).tensors[first] == hashes.tensors[first]
    assert repr(hashes).startswith(f"<TensorHashes sha256, {len(hashes.tensors)} tensors")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "safetensors_header", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


def test_the_command_line_hashes_and_validates(tmp_path: Path) -> None:
    _checkpoint(tmp_path)
    text = _run("hash", str(tmp_path))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    hashes = hash_tensors(tmp_path, files=True)
    assert lines[:6] == [f"{digest}  {name}" for name, digest in hashes.tensors.items()]
    assert lines[6:] == [
        f"{hashes.files['a.safetensors']}  (sha256 of the file a.safetensors)",
        f"{hashes.files['b.safetensors']}  (sha256 of the file b.safetensors)",
        f"{hashes.fingerprint}  (sha256 fingerprint of the 6 tensors: names, dtypes, shapes, "
        "bytes)",
        f"{hashes.content}  (sha256 of the 6 tensor digests of {tmp_path})",
    ]
    manifest = tmp_path / "manifest.json"
    made = _run("hash", "--json", str(tmp_path))
    manifest.write_text(made.stdout)
    assert json.loads(made.stdout)["content"] == hashes.content
    ok = _run("validate", "--hashes", str(manifest), str(tmp_path))
    assert (ok.returncode, ok.stdout) == (0, f"{tmp_path}: ok (6 tensors)\n")
    shard = tmp_path / "a.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 1
    shard.write_bytes(data)
    bad = _run("validate", "--hashes", str(manifest), str(tmp_path))
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == [
        f"{tmp_path}: hashes: 1 tensor not as the manifest says",
        f"{tmp_path}: hashes: layer.2.weight: changed",
    ]
    (tmp_path / "junk.json").write_text("{}")
    usage = _run("validate", "--hashes", str(tmp_path / "junk.json"), str(tmp_path))
    assert usage.returncode == 2
    assert "not a manifest of hash" in usage.stderr
    stdin = subprocess.run(
        [sys.executable, "-m", "safetensors_header", "hash", "-"],
        input=FILE,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert stdin.returncode == 1
    assert b"standard input" in stdin.stderr


def test_a_manifest_of_several_sources_is_matched_by_path(tmp_path: Path) -> None:
    one, two = tmp_path / "one.safetensors", tmp_path / "two.safetensors"
    write_file(one, {"a": ("U8", [3], b"abc")})
    write_file(two, {"b": ("U8", [2], b"xy")})
    made = _run("hash", "--json", str(one), str(two))
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(made.stdout)
    assert len(made.stdout.splitlines()) == 2
    ok = _run("validate", "--hashes", str(manifest), str(two), str(one))
    assert ok.returncode == 0, ok.stdout
    other = tmp_path / "other.safetensors"
    write_file(other, {"a": ("U8", [3], b"abc")})
    unknown = _run("validate", "--hashes", str(manifest), str(other))
    assert unknown.returncode == 1
    assert unknown.stdout == f"{other}: KeyError: {manifest} has no manifest made from {other}\n"


# --- manifests: any case of hex, any bad document a usage error, both outputs of hash --------


def test_hex_digits_of_either_case_are_read(tmp_path: Path) -> None:
    _checkpoint(tmp_path)
    manifest = hash_tensors(tmp_path).manifest()
    upper = {
        **manifest,
        "content": manifest["content"].upper(),
        "tensors": {name: digest.upper() for name, digest in manifest["tensors"].items()},
    }
    read = TensorHashes.from_manifest(upper)
    assert read == TensorHashes.from_manifest(manifest)  # kept in lower case
    assert verify_tensors(tmp_path, upper) == {}  # not every tensor "changed"
    (tmp_path / "upper.json").write_text(json.dumps(upper))
    ok = _run("validate", "--hashes", str(tmp_path / "upper.json"), str(tmp_path))
    assert (ok.returncode, ok.stdout) == (0, f"{tmp_path}: ok (6 tensors)\n"), ok.stderr


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=70),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
_HEX = st.text("0123456789abcdefABCDEF", min_size=0, max_size=130)
_NEAR = st.fixed_dictionaries(
    {
        "algorithm": st.sampled_from(["sha256", "md5", "blake3", "shake_128", "nope", ""]) | _JSON,
        "content": _HEX | _JSON,
        "tensors": st.dictionaries(st.text(max_size=8), _HEX | _JSON, max_size=3) | _JSON,
    },
    optional={
        "fingerprint": _HEX | _JSON,
        "fingerprints": st.dictionaries(st.text(max_size=8), _HEX, max_size=3) | _JSON,
        "files": st.dictionaries(st.text(max_size=8), _HEX, max_size=3) | _JSON,
        "path": _JSON,
    },
)


@bounded(400)
@given(document=_JSON | _NEAR)
def test_any_json_value_is_a_manifest_or_a_value_error(document: Any) -> None:
    try:
        hashes = TensorHashes.from_manifest(document)
    except ValueError:  # (HeaderError is one too) and nothing else
        return
    assert all(digest == digest.lower() for digest in hashes.tensors.values())
    assert TensorHashes.from_manifest(json.loads(json.dumps(hashes.manifest()))) == hashes


@bounded(300)
@given(
    text=st.text(max_size=300)
    | _JSON.map(json.dumps)
    | _NEAR.map(json.dumps)
    | st.lists(_NEAR.map(json.dumps), max_size=3).map("\n".join)
    | st.lists(
        st.tuples(_HEX, st.text(max_size=40)).map(lambda pair: f"{pair[0]}  {pair[1]}"),
        max_size=5,
    ).map("\n".join)
)
def test_any_file_is_manifests_or_a_value_error(text: str) -> None:
    import tempfile

    from safetensors_header._cli.hash import load_manifests

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".json", delete=False) as file:
        file.write(text)
    try:
        load_manifests(file.name)
    except ValueError:  # and nothing else
        pass
    finally:
        Path(file.name).unlink()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested too deeply"),
        ("[" * 100_000, "line 1 is not a line of hash's output"),
        ('{"algorithm": 5, "content": "", "tensors": {}}', "algorithm is a string, not a number"),
        ('{"algorithm": ["sha256"], "content": "", "tensors": {}}', "not a list"),
        ('{"algorithm": "sha256", "content": {"a": 1}, "tensors": {}}', "not an object"),
        ('{"algorithm": "sha3", "content": "", "tensors": {}}', "unknown hash algorithm 'sha3'"),
        ("{}\n[]", "keys algorithm, content, tensors"),
        ("\n", "holds no manifest; write one with `safetensors-header hash --json"),
        (b"\xff\xfe".decode("latin-1"), "not a line of hash's output"),
    ],
    ids=["deep", "deep-list", "number", "list", "object", "sha3", "two-bad", "empty", "binary"],
)
def test_a_bad_manifest_is_a_usage_error(tmp_path: Path, text: str, said: str) -> None:
    _checkpoint(tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(text)
    result = _run("validate", "--hashes", str(manifest), str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"safetensors-header: --hashes {manifest}: not a manifest")
    assert said in result.stderr


def test_hash_plain_output_is_a_manifest(tmp_path: Path) -> None:
    _checkpoint(tmp_path)
    one = tmp_path / "one.safetensors"
    write_file(one, {"a": ("U8", [3], b"abc"), "b": ("BF16", [2], b"abcd")})
    made = _run("hash", str(tmp_path), str(one))
    plain = tmp_path / "hashes.txt"
    plain.write_text(made.stdout)
    ok = _run("validate", "--hashes", str(plain), str(one), str(tmp_path))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # The same as --json's, read back.
    from safetensors_header._cli.hash import load_manifests

    as_json = tmp_path / "hashes.jsonl"
    as_json.write_text(_run("hash", "--json", str(tmp_path), str(one)).stdout)
    assert [(w, h.manifest()) for w, h in load_manifests(str(plain))] == [
        (w, {k: v for k, v in h.manifest().items() if k != "fingerprints"})
        for w, h in load_manifests(str(as_json))
    ]
    # Upper case (sha256sum -c takes it), and a changed tensor.
    pairs = [line.split("  ", 1) for line in made.stdout.splitlines()]
    plain.write_text("".join(f"{digest.upper()}  {rest}\n" for digest, rest in pairs))
    data = bytearray(one.read_bytes())
    data[-1] ^= 1
    one.write_bytes(data)
    bad = _run("validate", "--hashes", str(plain), str(one))
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[1:] == [f"{one}: hashes: a: changed"]
    # Cut short: what it misses, and how to write a manifest.
    plain.write_text("\n".join(made.stdout.splitlines()[:3]))
    cut = _run("validate", "--hashes", str(plain), str(one))
    assert cut.returncode == 2
    assert "it ends before the line that closes hash's output of a SOURCE" in cut.stderr
    assert "hash --json SOURCE > manifest.json" in cut.stderr
    lines = made.stdout.splitlines()
    plain.write_text("\n".join([*lines[:2], *lines[3:]]))  # a tensor's line left out
    fewer = _run("validate", "--hashes", str(plain), str(one))
    assert fewer.returncode == 2
    assert "counts 6 tensor digests, but 5 lines come before it" in fewer.stderr


def test_validate_sees_a_relabel_through_the_fingerprints(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    write_file(path, {"w": ("BF16", [4], bytes(range(8))), "b": ("F32", [1], bytes(4))})
    manifest = tmp_path / "manifest.json"
    manifest.write_text(_run("hash", "--json", str(path)).stdout)
    write_file(path, {"w": ("F16", [4], bytes(range(8))), "b": ("F32", [1], bytes(4))})
    result = _run("validate", "--hashes", str(manifest), str(path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{path}: hashes: 1 tensor not as the manifest says",
        f"{path}: hashes: w: changed",
    ]


def test_plain_output_without_files_and_fingerprint_lines_is_read(tmp_path: Path) -> None:
    # hash's plain output of before (each tensor's line, then the content line) is read too.
    _checkpoint(tmp_path)
    hashes = hash_tensors(tmp_path)
    plain = tmp_path / "hashes.txt"
    lines = [f"{digest}  {name}" for name, digest in hashes.tensors.items()]
    lines.append(f"{hashes.content}  (sha256 of the 6 tensor digests of {tmp_path})")
    plain.write_text("\n".join(lines) + "\n")
    ok = _run("validate", "--hashes", str(plain), str(tmp_path))
    assert (ok.returncode, ok.stdout) == (0, f"{tmp_path}: ok (6 tensors)\n"), ok.stderr


def test_an_algorithm_there_is_not_is_said_for_each_source(tmp_path: Path) -> None:
    _checkpoint(tmp_path)
    result = _run("hash", "--algorithm", "sha3", str(tmp_path))
    assert result.returncode == 1
    assert "unknown hash algorithm 'sha3'" in result.stderr
    assert "blake3 with its package" in result.stderr


def test_a_manifest_of_hash_json_from_before_is_read(tmp_path: Path) -> None:
    # hash --json wrote path, algorithm, content, tensors and error, nothing else.
    _checkpoint(tmp_path)
    hashes = hash_tensors(tmp_path)
    old = {"path": str(tmp_path), "algorithm": "sha256", "content": hashes.content}
    old.update(tensors=dict(hashes.tensors), error=None)
    (tmp_path / "old.json").write_text(json.dumps(old))
    ok = _run("validate", "--hashes", str(tmp_path / "old.json"), str(tmp_path))
    assert (ok.returncode, ok.stdout) == (0, f"{tmp_path}: ok (6 tensors)\n"), ok.stderr


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("mmap", [False, True])
def test_a_fifo_is_refused_as_a_stream_mapped_or_not_never_opened_again(
    tmp_path: Path, mmap: bool
) -> None:
    # The FIFO's header is read from the one descriptor opened (kept for its data); hashing
    # reads ranges, which a stream has not: the same ValueError with mmap=True, never a
    # second open of the FIFO (which would wait for a writer that is gone: the child's
    # timeout) nor a second reader of the pipe, its bytes taken from the first.
    from helpers import FEED_A_FIFO, run_child

    fifo = tmp_path / "pipe.safetensors"
    code = f"""
        from safetensors_header import open_file
        from safetensors_header.integrity import hash_tensors

        writer = feed({str(fifo)!r}, {FILE!r})
        file = open_file({str(fifo)!r})
        writer.join(10)
        try:
            hash_tensors(file, mmap={mmap})
        except ValueError as error:
            print(error)
        """
    result = run_child(FEED_A_FIFO + textwrap.dedent(code), timeout=60)
    assert result.returncode == 0, result.stderr
    assert "needs a file it can seek in" in result.stdout
    assert "is a stream" in result.stdout
