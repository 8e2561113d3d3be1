"""The VirtualiZarr parser: open_virtual_dataset on local files, loaded and compared."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import build, reference_header, tensor

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")
pytest.importorskip("virtualizarr")
pytest.importorskip("obstore")

from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from obstore.store import LocalStore  # noqa: E402
from virtualizarr import open_virtual_dataset  # noqa: E402
from virtualizarr.manifests import ManifestArray, ManifestStore  # noqa: E402
from virtualizarr.parsers import KerchunkJSONParser  # noqa: E402
from virtualizarr.parsers.typing import Parser  # noqa: E402

from safetensors_header import HeaderError, read_header  # noqa: E402
from safetensors_header.virtualizarr import SafetensorsParser  # noqa: E402
from safetensors_header.zarr import chunk_ranges, node_name, to_kerchunk  # noqa: E402


@pytest.fixture(scope="module")
def numeric(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A file written by the reference: numpy's dtypes, a scalar, an empty, odd names."""
    rng = np.random.default_rng(11)
    arrays = {
        "model.embed.weight": rng.standard_normal((6, 4)).astype(np.float32),
        "layers/0/bias": rng.standard_normal((4,)).astype(np.float16),
        "counts": rng.integers(0, 2**40, (2, 3), dtype=np.int64),
        "mask": rng.random((5,)) > 0.5,
        "u8": rng.integers(0, 255, (3, 1), dtype=np.uint8),
        "c64": (rng.standard_normal(2) + 1j).astype(np.complex64),
        "temperature": np.array(0.7, dtype=np.float64),
        "empty": np.zeros((0, 2), dtype=np.int32),
        "zeros": np.zeros((3,), dtype=np.float32),
    }
    path = tmp_path_factory.mktemp("vz") / "numeric.safetensors"
    safetensors_numpy.save_file(arrays, str(path), metadata={"format": "np", "step": "42"})
    return path, safetensors_numpy.load_file(str(path))


def _registry() -> ObjectStoreRegistry[Any]:
    return ObjectStoreRegistry({"file://": LocalStore()})


def _assert_same(actual: Any, expected: Any) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


def test_is_a_virtualizarr_parser() -> None:
    assert isinstance(SafetensorsParser(), Parser)


def test_virtual_dataset(numeric: tuple[Path, dict[str, Any]]) -> None:
    path, expected = numeric
    header = read_header(path)
    vds = open_virtual_dataset(path.as_uri(), registry=_registry(), parser=SafetensorsParser())
    assert vds.attrs == {"format": "np", "step": "42"}
    assert sorted(vds.data_vars) == sorted(node_name(name) for name in expected)
    for name, array in expected.items():
        node = node_name(name)
        variable = vds[node]
        assert isinstance(variable.data, ManifestArray)
        assert variable.dims == tuple(f"{node}/{i}" for i in range(array.ndim))
        assert (variable.dtype, variable.shape) == (array.dtype, array.shape)
        assert variable.attrs["safetensors_name"] == name
        # One chunk per tensor: the tensor's byte range in the file.
        manifest = variable.data.manifest
        info = header.tensors[name]
        if info.numel:
            assert manifest.shape_chunk_grid == (1,) * array.ndim
            assert manifest.dict() == {
                ".".join("0" * array.ndim): {
                    "path": path.as_uri(),
                    "offset": info.start,
                    "length": info.nbytes,
                }
            }
        else:  # a zero-size tensor: no chunk at all
            assert manifest.shape_chunk_grid == (0, 1)


def test_loaded_variables_equal_the_reference(numeric: tuple[Path, dict[str, Any]]) -> None:
    path, expected = numeric
    names = [node_name(name) for name in expected]
    dataset = open_virtual_dataset(
        path.as_uri(), registry=_registry(), parser=SafetensorsParser(), loadable_variables=names
    )
    for name, array in expected.items():
        _assert_same(dataset[node_name(name)].values, array)


def test_manifest_store_opens_as_zarr(numeric: tuple[Path, dict[str, Any]]) -> None:
    zarr = pytest.importorskip("zarr")
    path, expected = numeric
    store = SafetensorsParser()(path.as_uri(), _registry())
    assert isinstance(store, ManifestStore)
    # zarr formats str(store) into every path it opens: not a repr of every array (n x n).
    assert str(store) == f"ManifestStore(<{len(expected)} safetensors arrays>)"
    group = zarr.open_group(store, mode="r", zarr_format=3)
    for name, array in expected.items():
        _assert_same(group[node_name(name)][...], array)


def test_exotic_dtypes_are_their_bits(tmp_path: Path) -> None:
    data = build(
        {
            "__metadata__": {"format": "pt"},
            "bf16": tensor("BF16", [2, 3], 0, 12),
            "e4m3": tensor("F8_E4M3", [4], 12, 16),
            "e8m0": tensor("F8_E8M0", [], 16, 17),
            "f4": tensor("F4", [2, 3], 17, 20),
        },
        bytes(range(50, 70)),
    )
    path = tmp_path / "exotic.safetensors"
    path.write_bytes(data)
    reference = reference_header(data)
    parser = SafetensorsParser()
    dataset = open_virtual_dataset(
        path.as_uri(), registry=_registry(), parser=parser, loadable_variables=list(reference)
    )
    assert dataset.attrs == {"format": "pt"}
    for name, (dtype, shape, raw) in reference.items():
        variable = dataset[name]
        assert variable.attrs["safetensors_dtype"] == dtype
        assert variable.values.tobytes() == raw
        if dtype == "F4":
            assert variable.shape == (3,)
            assert variable.attrs["safetensors_shape"] == [2, 3]
        else:
            assert variable.shape == shape
            assert variable.dtype == (np.uint16 if dtype == "BF16" else np.uint8)


def test_drop_variables(numeric: tuple[Path, dict[str, Any]]) -> None:
    path, _ = numeric
    parser = SafetensorsParser(drop_variables=["layers/0/bias", "u8"])
    vds = open_virtual_dataset(path.as_uri(), registry=_registry(), parser=parser)
    assert "layers%2F0%2Fbias" not in vds
    assert "u8" not in vds
    assert "counts" in vds


class _CountingStore:
    """An obstore LocalStore that records the byte ranges the parser asks for."""

    def __init__(self) -> None:
        self.store = LocalStore()
        self.ranges: list[tuple[int, int | None, int | None]] = []

    def head(self, path: str) -> Any:
        return self.store.head(path)

    def get_range(
        self, path: str, *, start: int, end: int | None = None, length: int | None = None
    ) -> Any:
        self.ranges.append((start, end, length))
        return self.store.get_range(path, start=start, end=end, length=length)

    async def get_range_async(self, path: str, *, start: int, end: int) -> Any:
        return await self.store.get_range_async(path, start=start, end=end)  # loading chunks


def test_a_long_header_takes_a_second_read_of_exactly_the_rest(tmp_path: Path) -> None:
    note = "x" * (200 * 1024)  # a header longer than the first read of 128 KiB
    data = build({"__metadata__": {"note": note}, "w": tensor("U8", [3], 0, 3)}, b"abc", pad=True)
    path = tmp_path / "long.safetensors"
    path.write_bytes(data)
    header = read_header(path)
    store = _CountingStore()
    registry = ObjectStoreRegistry({"file://": store})
    manifest_store = SafetensorsParser()(path.as_uri(), registry)
    assert store.ranges == [(0, 128 * 1024, None), (128 * 1024, header.data_start, None)]
    dataset = manifest_store.to_virtual_dataset(loadable_variables=["w"])
    assert dataset.attrs == {"note": note}
    assert dataset["w"].values.tobytes() == b"abc"


def test_a_bad_file_raises_header_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(build({"w": tensor("F32", [2], 0, 8)}, 4))  # 4 bytes short
    with pytest.raises(HeaderError) as caught:
        open_virtual_dataset(path.as_uri(), registry=_registry(), parser=SafetensorsParser())
    assert caught.value.kind == "MetadataIncompleteBuffer"
    path.write_bytes(b"ab")
    with pytest.raises(HeaderError) as caught:
        SafetensorsParser()(path.as_uri(), _registry())
    assert caught.value.kind == "HeaderTooSmall"


def test_our_kerchunk_references_through_virtualizarr(
    numeric: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    # A second route: to_kerchunk's JSON, read by VirtualiZarr's own kerchunk parser.
    path, expected = numeric
    refs_path = tmp_path / "refs.json"
    refs_path.write_text(json.dumps(to_kerchunk(read_header(path), path.as_uri())))
    # VirtualiZarr 2.5.1's kerchunk translator gives a 0-d array's chunk "0" (the Zarr v2 key
    # of a scalar's chunk, which kerchunk writes too) a 1-d grid, and then cannot load it.
    names = [node_name(name) for name, array in expected.items() if array.ndim]
    parser = KerchunkJSONParser()
    dataset = open_virtual_dataset(
        refs_path.as_uri(), registry=_registry(), parser=parser, loadable_variables=names
    )
    assert dataset.attrs == {"format": "np", "step": "42"}
    for name, array in expected.items():
        if array.ndim:
            _assert_same(dataset[node_name(name)].values, array)


def test_a_short_header_takes_one_read_and_an_empty_file_none(tmp_path: Path) -> None:
    path = tmp_path / "small.safetensors"
    path.write_bytes(build({"w": tensor("U8", [3], 0, 3)}, b"abc"))
    store = _CountingStore()
    registry = ObjectStoreRegistry({"file://": store})
    SafetensorsParser()(path.as_uri(), registry)
    assert store.ranges == [(0, path.stat().st_size, None)]  # the whole (small) file
    path.write_bytes(b"")
    store.ranges.clear()
    with pytest.raises(HeaderError) as caught:
        SafetensorsParser()(path.as_uri(), registry)
    assert caught.value.kind == "HeaderTooSmall"
    assert store.ranges == []


class _ObstoreLike(_CountingStore):
    """With obstore's `get` too: a ranged GET that brings the size, so no HEAD is needed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def head(self, path: str) -> Any:
        self.calls.append("head")
        return super().head(path)

    def get(self, path: str, *, options: Any = None) -> Any:
        self.calls.append(f"get {options['range'] if options else None}")
        return self.store.get(path, options=options)

    def get_ranges(self, path: str, *, starts: Any, ends: Any) -> Any:
        self.calls.append("get_ranges")
        return self.store.get_ranges(path, starts=starts, ends=ends)


def test_a_header_from_an_obstore_store_is_one_get_and_no_head(tmp_path: Path) -> None:
    path = tmp_path / "small.safetensors"
    path.write_bytes(build({"w": tensor("U8", [3], 0, 3)}, b"abc"))
    store = _ObstoreLike()
    SafetensorsParser()(path.as_uri(), ObjectStoreRegistry({"file://": store}))
    assert store.calls == [f"get {(0, 128 * 1024)}"]
    assert store.ranges == []


def test_a_bad_length_prefix_is_judged_on_the_first_read(tmp_path: Path) -> None:
    path = tmp_path / "lfs.safetensors"
    path.write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 9\n")
    store = _CountingStore()
    registry = ObjectStoreRegistry({"file://": store})
    with pytest.raises(HeaderError) as caught:
        SafetensorsParser()(path.as_uri(), registry)
    assert caught.value.kind == "HeaderTooLarge"
    assert caught.value.hint is not None
    assert "git lfs pull" in caught.value.hint
    assert len(store.ranges) == 1


# --- chunks=, checkpoints, pickling ---------------------------------------------------------


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param(8, id="8-bytes"),
        pytest.param({"model.embed.weight": (2, 4), "counts": (1, 1), "empty": (3, 2)}, id="map"),
    ],
)
def test_chunked_virtual_arrays(numeric: tuple[Path, dict[str, Any]], chunks: Any) -> None:
    zarr = pytest.importorskip("zarr")
    from safetensors_header.zarr import chunk_shape, read_tensors

    path, expected = numeric
    header = read_header(path)
    parser = SafetensorsParser(chunks=chunks)
    vds = open_virtual_dataset(path.as_uri(), registry=_registry(), parser=parser)
    for name in expected:
        info = header.tensors[name]
        sizes = chunk_shape(info, chunks=chunks)
        manifest = vds[node_name(name)].data.manifest
        assert vds[node_name(name)].data.metadata.chunks == sizes
        if info.numel:
            assert sorted((e["offset"], e["length"]) for e in manifest.dict().values()) == [
                (offset, length) for _, offset, length in chunk_ranges(info, sizes)
            ]
            assert {e["path"] for e in manifest.dict().values()} == {path.as_uri()}
    group = zarr.open_group(parser(path.as_uri(), _registry()), mode="r", zarr_format=3)
    tensors = read_tensors(group)
    for name, array in expected.items():
        _assert_same(tensors[name], array)
    loaded = open_virtual_dataset(
        path.as_uri(), registry=_registry(), parser=parser, loadable_variables=list(vds)
    )
    for name, array in expected.items():
        _assert_same(loaded[node_name(name)].values, array)


@pytest.mark.parametrize("target", [1 << 20, 4 << 20], ids=["1MiB", "4MiB"])
def test_a_target_never_makes_chunks_below_a_quarter_of_it(tmp_path: Path, target: int) -> None:
    from safetensors_header.zarr import chunk_shape

    # Real models' shapes whose first axis has no divisor near a MiB: MiniLM's embedding
    # (30,522 = 2 x 3 x 5,087 rows), Llama 3's (128,256 rows), and a small 3-d tensor. The
    # file is sparse: only its header is read.
    shapes = {"minilm": ("F32", [30522, 384], 4), "llama": ("BF16", [128256, 4096], 2)}
    shapes["small"] = ("F32", [3, 5087, 7], 4)
    entries, offset = {}, 0
    for name, (dtype, shape, size) in shapes.items():
        entries[name] = tensor(dtype, shape, offset, offset + size * math.prod(shape))
        offset += size * math.prod(shape)
    path = tmp_path / "real.safetensors"
    path.write_bytes(build(entries))
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size + offset)
    header = read_header(path)
    vds = open_virtual_dataset(
        path.as_uri(), registry=_registry(), parser=SafetensorsParser(chunks=target)
    )
    for name, info in header.tensors.items():
        array = vds[name].data
        assert array.metadata.chunks == chunk_shape(info, chunks=target)
        lengths = [entry["length"] for entry in array.manifest.dict().values()]
        assert sum(lengths) == info.nbytes
        assert min(lengths) * 4 >= min(target, 4 * info.nbytes), name
    assert vds["minilm"].data.manifest.shape_chunk_grid == (6, 1)  # 5,087 rows a chunk
    assert vds["small"].data.manifest.shape_chunk_grid == (1, 1, 1)  # smaller: whole


def test_chunks_that_cannot_work(numeric: tuple[Path, dict[str, Any]]) -> None:
    path, _ = numeric
    with pytest.raises(ValueError, match="does not divide axis 0 \\(6\\)"):
        SafetensorsParser(chunks={"model.embed.weight": (4, 4)})(path.as_uri(), _registry())
    with pytest.raises(ValueError, match="not there: \\['nope'\\]"):
        SafetensorsParser(chunks={"nope": (1,)})(path.as_uri(), _registry())
    with pytest.raises(ValueError, match="at least 1 byte"):
        SafetensorsParser(chunks=0)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    rng = np.random.default_rng(5)
    shards = {
        "model-00001-of-00002.safetensors": {
            "embed": rng.standard_normal((6, 4)).astype(np.float32),
            "layers/0/w": rng.integers(-9, 9, (2, 3), dtype=np.int8),
        },
        "model-00002-of-00002.safetensors": {
            "head": rng.standard_normal((4, 2)).astype(np.float16),
            "scale": np.array(3.0, dtype=np.float32),
            "none": np.zeros((0,), dtype=np.int64),
        },
    }
    folder = tmp_path_factory.mktemp("vz-sharded")
    for shard, arrays in shards.items():
        safetensors_numpy.save_file(arrays, str(folder / shard), metadata={"format": "pt"})
    weight_map = {name: shard for shard, arrays in shards.items() for name in arrays}
    index = {"metadata": {"total_size": 1}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder, shards


def test_an_index_url_is_one_dataset_of_every_shard(
    sharded: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    from safetensors_header import read_checkpoint
    from safetensors_header.virtualizarr import read_checkpoint_from_store

    folder, shards = sharded
    index = (folder / "model.safetensors.index.json").as_uri()
    parser = SafetensorsParser(chunks=8)
    vds = open_virtual_dataset(index, registry=_registry(), parser=parser)
    assert vds.attrs == {"format": "pt"}
    names = [name for arrays in shards.values() for name in arrays]
    assert sorted(vds.data_vars) == sorted(node_name(name) for name in names)
    for shard, arrays in shards.items():
        for name in arrays:
            variable = vds[node_name(name)]
            assert variable.attrs["safetensors_file"] == shard
            if variable.size:  # VirtualiZarr < 2.7.2: no dict() of a manifest without chunks
                paths = {e["path"] for e in variable.data.manifest.dict().values()}
                assert paths == {(folder / shard).as_uri()}
    loaded = open_virtual_dataset(
        index, registry=_registry(), parser=parser, loadable_variables=list(vds)
    )
    for arrays in shards.values():
        for name, array in arrays.items():
            _assert_same(loaded[node_name(name)].values, array)
    # The same checks as read_checkpoint's, through the store.
    checkpoint = read_checkpoint_from_store(index, _registry())
    local = read_checkpoint(folder)
    assert dict(checkpoint.weight_map) == dict(local.weight_map)
    assert (
        [p.kind for p in checkpoint.problems] == [p.kind for p in local.problems] == ["TotalSize"]
    )


def test_a_bad_index_raises_header_error(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text('{"weight_map": {"w": "../elsewhere.safetensors"}}')
    with pytest.raises(HeaderError) as caught:
        SafetensorsParser()(index.as_uri(), _registry())
    assert caught.value.kind == "InvalidIndex"
    index.write_text("[]")
    with pytest.raises(HeaderError, match="expected a JSON object"):
        SafetensorsParser()(index.as_uri(), _registry())
    (tmp_path / "a.safetensors").write_bytes(build({"x": tensor("U8", [1], 0, 1)}, 1))
    index.write_text('{"weight_map": {"w": "a.safetensors"}}')
    with pytest.raises(HeaderError) as caught:
        SafetensorsParser()(index.as_uri(), _registry())
    assert caught.value.kind == "IndexMismatch"


def test_the_parser_and_its_datasets_pickle(numeric: tuple[Path, dict[str, Any]]) -> None:
    import pickle

    path, _ = numeric
    parser = SafetensorsParser(chunks={"model.embed.weight": (1, 4)}, drop_variables=["u8"])
    again = pickle.loads(pickle.dumps(parser))
    assert repr(again) == repr(parser)
    vds = open_virtual_dataset(path.as_uri(), registry=_registry(), parser=again)
    copy = pickle.loads(pickle.dumps(vds))
    assert sorted(copy.data_vars) == sorted(vds.data_vars)
    for name in vds.data_vars:
        assert copy[name].attrs == vds[name].attrs
        assert copy[name].data.metadata.chunks == vds[name].data.metadata.chunks
        if vds[name].size:  # VirtualiZarr < 2.7.2: no dict() of a manifest without chunks
            assert copy[name].data.manifest.dict() == vds[name].data.manifest.dict()


def _shards_of_big_data(count: int, data_size: int) -> dict[str, bytes]:
    """An index and `count` shards of tiny headers and `data_size` bytes of data each."""
    files: dict[str, bytes] = {}
    weight_map = {}
    for number in range(count):
        shard = f"model-{number + 1:05d}-of-{count:05d}.safetensors"
        arrays = {
            f"model.layers.{number}.mlp.up_proj.weight": np.full(
                (data_size // 4 - 2, 1), number, np.float32
            ),
            f"model.layers.{number}.norm.weight": np.ones(2, np.float32),
        }
        files[shard] = safetensors_numpy.save(arrays, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(arrays, shard))
    index = {"metadata": {"total_size": count * data_size}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = json.dumps(index).encode()
    return files


@pytest.mark.parametrize("data_size", [64, 400_000])
def test_a_checkpoint_over_http_is_one_request_per_shard_header_within_its_size(
    site: Any, data_size: int
) -> None:
    from obstore.store import HTTPStore

    site.files.update(_shards_of_big_data(5, data_size))
    base = site.url("")
    registry = ObjectStoreRegistry(
        {base: HTTPStore.from_url(base, client_options={"allow_http": True})}
    )
    vds = open_virtual_dataset(
        site.url("model.safetensors.index.json"), registry=registry, parser=SafetensorsParser()
    )
    assert len(vds.data_vars) == 10
    hits = site.done(6)
    by_path: dict[str, list[Any]] = {}
    for hit in hits:
        by_path.setdefault(hit.path.lstrip("/"), []).append(hit)
    assert sorted(by_path) == sorted(site.files)
    for path, requests in by_path.items():
        assert len(requests) == 1, path
        if path.endswith(".safetensors"):
            size = len(site.files[path])
            header = 8 + int.from_bytes(site.files[path][:8], "little")
            start, stop = (int(part) for part in requests[0].range[6:].split("-"))
            # One range from 0, covering the header, never beyond the file's size or 8 KiB
            # (a small header is not fetched with 128 KiB of tensor data).
            assert start == 0
            assert header <= stop + 1 <= 8192, (path, requests[0].range)
            assert requests[0].sent == min(stop + 1, size)


@pytest.mark.parametrize("chunks", [None, 4, {"same.1": [1, 3]}])
def test_each_array_is_what_zarr_makes_of_its_document(tmp_path: Path, chunks: Any) -> None:
    """Arrays of one layout share zarr's checks; each must still equal zarr's own."""
    from virtualizarr.manifests.manifest import validate_and_normalize_path_to_uri
    from zarr.core.metadata.v3 import ArrayV3Metadata

    from safetensors_header.zarr import array_metadata, chunk_shape

    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    at = 0
    layouts = [("F32", [2, 3]), ("BF16", [2, 3]), ("F8_E4M3", [4]), ("F4", [2, 4])]
    layouts += [("I64", []), ("U8", [0, 3]), ("F16", [2, 3])]
    for copy in range(3):  # three tensors of each layout
        for number, (dtype, shape) in enumerate(layouts):
            size = {"F32": 4, "BF16": 2, "I64": 8, "F16": 2}.get(dtype, 1)
            nbytes = max(1, int(np.prod(shape))) * size if shape != [0, 3] else 0
            nbytes = nbytes // 2 if dtype == "F4" else nbytes
            entries[f"layout{number}.{copy}"] = tensor(dtype, shape, at, at + nbytes)
            at += nbytes
    entries["same.1"] = tensor("F32", [2, 3], at, at + 24)
    at += 24
    path = tmp_path / "layouts.safetensors"
    path.write_bytes(build(entries, at))
    store = SafetensorsParser(chunks=chunks)(path.as_uri(), _registry())
    group = store._group  # the ManifestGroup
    header = read_header(path)
    uri = validate_and_normalize_path_to_uri(path.as_uri())
    assert len(group.arrays) == len(header.tensors) == 22
    for name, info in header.tensors.items():
        array = group.arrays[node_name(name)]
        expected = ArrayV3Metadata.from_dict(
            array_metadata(info, chunks=chunk_shape(info, chunks=chunks))
        )
        assert array.metadata == expected, name
        assert array.metadata.to_dict() == expected.to_dict(), name
        assert type(array.metadata) is ArrayV3Metadata
        references = [
            (u, o, n)
            for u, o, n in zip(
                array.manifest._paths.ravel().tolist(),
                array.manifest._offsets.ravel().tolist(),
                array.manifest._lengths.ravel().tolist(),
                strict=True,
            )
        ]
        sizes = chunk_shape(info, chunks=chunks)
        assert references == [
            (uri, offset, length) for _, offset, length in chunk_ranges(info, sizes)
        ], name


def test_extension_dtypes_need_a_data_type_zarr_python_knows(tmp_path: Path) -> None:
    from zarr.core.dtype import get_data_type_from_json

    path = tmp_path / "bf16.safetensors"
    path.write_bytes(build({"w": tensor("BF16", [2], 0, 4), "n": tensor("F32", [1], 4, 8)}, 8))
    parser = SafetensorsParser(extension_dtypes=True)
    try:
        get_data_type_from_json("bfloat16", zarr_format=3)
    except ValueError:
        with pytest.raises(
            ValueError,
            match="zarr-python has no data type 'bfloat16' \\(for the BF16 tensor 'w'\\)",
        ):
            parser(path.as_uri(), _registry())
    else:  # pragma: no cover - a package registered bfloat16 with zarr-python
        store = parser(path.as_uri(), _registry())
        assert store._group.arrays["w"].metadata.to_dict()["data_type"] == "bfloat16"
    # Off (the default): the same bits as uint16.
    store = SafetensorsParser()(path.as_uri(), _registry())
    assert store._group.arrays["w"].metadata.to_dict()["data_type"] == "uint16"


def test_hub_files_and_checkpoints_through_an_https_store(
    site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hf://`` paths read, and referred to, at the Hub's HTTPS URLs (here on loopback)."""
    from obstore.store import HTTPStore

    files = _shards_of_big_data(2, 64)
    one = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    files["model.safetensors"] = safetensors_numpy.save(one)
    site.files.update({f"org/repo/resolve/main/{key}": data for key, data in files.items()})
    base = site.url("").rstrip("/")
    monkeypatch.setenv("HF_ENDPOINT", base)
    registry = ObjectStoreRegistry(
        {base: HTTPStore.from_url(base, client_options={"allow_http": True})}
    )
    from virtualizarr.manifests.manifest import validate_and_normalize_path_to_uri

    from safetensors_header import hub_url

    parser = SafetensorsParser()

    def hub(path: str) -> str:
        # VirtualiZarr 2.5.0 takes a URL of a scheme it does not list (hf://) for a relative
        # path before the parser sees it: there, the HTTPS URL is what a user passes.
        try:
            kept = validate_and_normalize_path_to_uri(path) == path
        except ValueError:
            kept = False
        return path if kept else hub_url(path)

    assert isinstance(parser("hf://org/repo/model.safetensors", registry), ManifestStore)
    single = open_virtual_dataset(
        hub("hf://org/repo/model.safetensors"),
        registry=registry,
        parser=parser,
        loadable_variables=["w"],
    )
    _assert_same(single["w"].values, one["w"])
    index = hub("hf://org/repo/model.safetensors.index.json")
    checkpoint = open_virtual_dataset(index, registry=registry, parser=parser)
    variable = checkpoint[node_name("model.layers.1.norm.weight")]
    paths = {entry["path"] for entry in variable.data.manifest.dict().values()}
    assert paths == {f"{base}/org/repo/resolve/main/model-00002-of-00002.safetensors"}
    loaded = open_virtual_dataset(
        index,
        registry=registry,
        parser=parser,
        loadable_variables=list(checkpoint.data_vars),
    )
    assert loaded[node_name("model.layers.1.norm.weight")].values.tolist() == [1.0, 1.0]
    assert (loaded[node_name("model.layers.0.mlp.up_proj.weight")].values == 0).all()
