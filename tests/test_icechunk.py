"""Icechunk end to end: file -> virtual dataset -> commit -> a new process reads every tensor.

icechunk 2 needs Python 3.12; these tests skip where it is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import build, reference_header, tensor

np = pytest.importorskip("numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
icechunk = pytest.importorskip("icechunk")
pytest.importorskip("virtualizarr")

import zarr  # noqa: E402
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from obstore.store import LocalStore  # noqa: E402
from virtualizarr import open_virtual_dataset  # noqa: E402

import safetensors_header  # noqa: E402
from safetensors_header import DTYPES  # noqa: E402
from safetensors_header import icechunk as st_icechunk  # noqa: E402
from safetensors_header.virtualizarr import SafetensorsParser  # noqa: E402
from safetensors_header.zarr import read_tensors  # noqa: E402

# The Rust core's warnings (a local repository is not safe for concurrent commits) are noise.
os.environ.setdefault("ICECHUNK_LOG", "error")


def _values() -> dict[str, Any]:
    rng = np.random.default_rng(1)
    return {
        "bf16": rng.standard_normal((4, 6)).astype(ml_dtypes.bfloat16),
        "e4m3": rng.standard_normal((8,)).astype(ml_dtypes.float8_e4m3fn),
        "f32": rng.standard_normal((6, 4)).astype(np.float32),
        "counts": np.array([0, 7, 0, 2**40], dtype=np.int64),  # zeros a fill value would mask
        "mask": np.array([True, False, False]),
        "scale": np.array(0.5, dtype=np.float64),
        "empty": np.zeros((0, 3), dtype=np.float16),
        "layers/0/w": rng.integers(-100, 100, (2, 2, 2), dtype=np.int8),
    }


_SAFETENSORS = {
    "bf16": "BF16",
    "e4m3": "F8_E4M3",
    "f32": "F32",
    "counts": "I64",
    "mask": "BOOL",
    "scale": "F64",
    "empty": "F16",
    "layers/0/w": "I8",
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A file of every kind that matters here, built byte by byte (numpy cannot save BF16)."""
    values = _values()
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, array in values.items():
        raw = array.tobytes()
        entries[name] = tensor(
            _SAFETENSORS[name], list(array.shape), len(data), len(data) + len(raw)
        )
        data += raw
    entries["f4"] = tensor("F4", [2, 4], len(data), len(data) + 4)  # packed: its bytes
    data += bytes([0x12, 0x34, 0x56, 0x78])
    folder = tmp_path_factory.mktemp("models")
    path = folder / "model.safetensors"
    path.write_bytes(build(entries, data, pad=True))
    return path, values


def _registry() -> ObjectStoreRegistry[Any]:
    return ObjectStoreRegistry({"file://": LocalStore()})


_READER = textwrap.dedent(
    """
    import json, sys
    import icechunk, zarr
    from safetensors_header.icechunk import open_store
    from safetensors_header.zarr import read_tensors

    out = {}
    for repo, prefix in json.loads(sys.argv[1]):
        store = open_store(icechunk.local_filesystem_storage(repo), [prefix])
        group = zarr.open_group(store, mode="r")
        out[repo] = {
            "attrs": dict(group.attrs),
            "tensors": {
                name: [str(array.dtype), list(array.shape), array.tobytes().hex()]
                for name, array in read_tensors(group).items()
            },
        }
    print(json.dumps(out))
    """
)


def _python(code: str, *args: str, cwd: Path | None = None) -> str:
    """`code` run by a new interpreter (icechunk's log quiet, this checkout importable), which
    must exit 0; its standard output."""
    package_root = str(Path(safetensors_header.__file__).resolve().parents[1])
    env = dict(os.environ, ICECHUNK_LOG="error")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _read_in_a_new_process(repos: list[tuple[str, str]]) -> dict[str, Any]:
    output = _python(_READER, json.dumps(repos))
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


CHUNKINGS = {"one-chunk": None, "16-bytes": 16, "mapping": {"bf16": (1, 3), "f4": (1, 2)}}


def test_round_trip_through_a_new_process(
    model: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, values = model
    reference = reference_header(path.read_bytes())  # the reference's dtype, shape and bytes
    repos = []
    for label, chunks in CHUNKINGS.items():
        vds = open_virtual_dataset(
            path.as_uri(), registry=_registry(), parser=SafetensorsParser(chunks=chunks)
        )
        prefixes = st_icechunk.url_prefixes(vds)
        assert prefixes == [path.parent.as_uri() + "/"]
        storage = icechunk.local_filesystem_storage(str(tmp_path / label))
        repository = st_icechunk.create_repository(storage, prefixes)
        snapshot = st_icechunk.commit_virtual(repository, vds, f"the model, {label}")
        assert isinstance(snapshot, str)
        assert snapshot
        repos.append((str(tmp_path / label), prefixes[0]))
    read = _read_in_a_new_process(repos)
    for repo, _ in repos:
        assert read[repo]["attrs"] == {"format": "pt"}
        tensors = read[repo]["tensors"]
        assert sorted(tensors) == sorted(reference)
        for name, (dtype, shape, raw) in reference.items():
            got_dtype, got_shape, got_hex = tensors[name]
            assert bytes.fromhex(got_hex) == raw, (repo, name)
            if DTYPES[dtype].packed:
                assert (got_dtype, got_shape) == ("uint8", [len(raw)])
            else:
                assert got_shape == list(shape)
                assert got_dtype == str(values[name].dtype), (repo, name)
    assert {tensors["bf16"][0], tensors["e4m3"][0]} == {"bfloat16", "float8_e4m3fn"}


def test_chunks_are_virtual_byte_ranges_of_the_file(
    model: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, values = model
    vds = open_virtual_dataset(
        path.as_uri(), registry=_registry(), parser=SafetensorsParser(chunks=16)
    )
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    prefixes = st_icechunk.url_prefixes(vds)
    st_icechunk.commit_virtual(st_icechunk.create_repository(storage, prefixes), vds, "chunked")
    store = st_icechunk.open_store(storage, prefixes)
    group = zarr.open_group(store, mode="r")
    assert group["f32"].chunks == (1, 4)  # rows of 16 bytes
    assert group["f32"][2].tolist() == values["f32"][2].tolist()  # one row: one chunk
    assert group["empty"].shape == (0, 3)
    assert dict(group["empty"].attrs)["safetensors_name"] == "empty"
    # Virtual, not copied: the repository holds no chunk of its own.
    chunk_files = [p for p in (tmp_path / "repo").rglob("*") if p.is_file() and "chunks" in p.parts]
    assert chunk_files == []


def test_reading_needs_the_containers_authorized(
    model: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    path, _ = model
    vds = open_virtual_dataset(path.as_uri(), registry=_registry(), parser=SafetensorsParser())
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    prefixes = st_icechunk.url_prefixes(vds)
    st_icechunk.commit_virtual(st_icechunk.create_repository(storage, prefixes), vds, "x")
    unauthorized = icechunk.Repository.open(storage).readonly_session("main").store
    with pytest.raises(icechunk.IcechunkError) as refused:
        zarr.open_group(unauthorized, mode="r")["f32"][...]
    # icechunk wraps its message at a width (where, depends on the path's length): the words
    # without the wrapping.
    said = " ".join(str(refused.value).replace("|", " ").split())
    assert "authorize the virtual chunk container" in said
    tensors = read_tensors(zarr.open_group(st_icechunk.open_store(storage, prefixes), mode="r"))
    assert tensors["f32"].shape == (6, 4)


def test_zero_size_tensors_are_written_on_every_virtualizarr(
    model: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    from importlib.metadata import version

    from packaging.version import Version

    path, _ = model
    vds = open_virtual_dataset(path.as_uri(), registry=_registry(), parser=SafetensorsParser())
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    repository = st_icechunk.create_repository(storage, st_icechunk.url_prefixes(vds))
    if Version(version("virtualizarr")) < Version("2.7.2"):  # the upstream trap, as it is
        with pytest.raises(ValueError, match="zero-sized operands"):
            vds.vz.to_icechunk(repository.writable_session("main").store)
    st_icechunk.commit_virtual(repository, vds, "with the empty tensor")
    store = st_icechunk.open_store(storage, st_icechunk.url_prefixes(vds))
    assert read_tensors(zarr.open_group(store, mode="r"), names=["empty"])["empty"].shape == (0, 3)


def test_a_checkpoint_index_to_one_repository(tmp_path: Path) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    shards = {
        "model-00001-of-00002.safetensors": {"a": np.arange(6, dtype=np.float32).reshape(2, 3)},
        "model-00002-of-00002.safetensors": {"b": np.arange(4, dtype=np.int16), "c": np.ones(2)},
    }
    folder = tmp_path / "ckpt"
    folder.mkdir()
    for shard, arrays in shards.items():
        safetensors_numpy.save_file(arrays, str(folder / shard))
    weight_map = {name: shard for shard, arrays in shards.items() for name in arrays}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    index = (folder / "model.safetensors.index.json").as_uri()
    vds = open_virtual_dataset(index, registry=_registry(), parser=SafetensorsParser(chunks=8))
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    prefixes = st_icechunk.url_prefixes(vds)
    assert prefixes == [folder.as_uri() + "/"]
    st_icechunk.commit_virtual(st_icechunk.create_repository(storage, prefixes), vds, "ckpt")
    group = zarr.open_group(st_icechunk.open_store(storage, prefixes), mode="r")
    tensors = read_tensors(group)
    for shard, arrays in shards.items():
        for name, array in arrays.items():
            assert group[name].attrs["safetensors_file"] == shard
            assert tensors[name].tobytes() == array.tobytes()


def test_url_prefixes_and_containers() -> None:
    urls = [
        "file:///models/a/x.safetensors",
        "file:///models/a/b/y.safetensors",
        "file:///models/c/z.safetensors",
        "s3://bucket/m/w.safetensors",
    ]
    assert st_icechunk.url_prefixes(urls) == [
        "file:///models/a/",
        "file:///models/c/",
        "s3://bucket/m/",
    ]
    assert (
        st_icechunk.virtual_chunk_container("https://host/dir/").url_prefix == "https://host/dir/"
    )
    with pytest.raises(ValueError, match="must end in '/'"):
        st_icechunk.virtual_chunk_container("file:///models")
    with pytest.raises(ValueError, match="no default object store for 'ftp://h/'"):
        st_icechunk.virtual_chunk_container("ftp://h/")
    custom = st_icechunk.virtual_chunk_container("ftp://h/", icechunk.http_store())
    assert custom.url_prefix == "ftp://h/"
    granted = st_icechunk.authorizations(["file:///m/", "s3://b/"], {"s3://b/": None})
    assert list(granted) == ["file:///m/", "s3://b/"]


def test_the_docs_example_runs(tmp_path: Path) -> None:
    # tests/test_readme.py runs it too where icechunk is installed (and skips it elsewhere);
    # here it also runs with the test's own environment (ICECHUNK_LOG), and fails if missing.
    readme = (Path(__file__).resolve().parents[1] / "docs" / "zarr.md").read_text()
    blocks = [b.split("```")[0] for b in readme.split("```python\n")[1:]]
    block = next(b for b in blocks if "commit_virtual(create_repository" in b)
    _python(blocks[0], cwd=tmp_path)  # the page's first example makes the file it reads
    assert _python(block, cwd=tmp_path).strip().endswith("float16 (8, 4)")


def test_a_process_that_opened_a_repository_pauses_once_at_exit(tmp_path: Path) -> None:
    # icechunk's threads may still drop Python objects when a program ends right after a read
    # (a crash at exit on 3.13, PyO3/pyo3-async-runtimes#40); one short pause is registered
    # with atexit by the first repository opened or created, and by no later one.
    code = textwrap.dedent(
        f"""
        import atexit, icechunk
        from safetensors_header import icechunk as st
        before = atexit._ncallbacks()
        storage = icechunk.local_filesystem_storage({str(tmp_path / "repo")!r})
        st.create_repository(storage, ["file:///models/"])
        st.open_store(storage, ["file:///models/"])
        st.open_repository(storage, ["file:///models/"])
        print(atexit._ncallbacks() - before)
        """
    )
    assert _python(code).strip() == "1"
