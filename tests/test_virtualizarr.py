"""The VirtualiZarr parser: open_virtual_dataset on local files, loaded and compared."""

from __future__ import annotations

import json
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
from safetensors_header.zarr import node_name, to_kerchunk  # noqa: E402


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
    assert store.ranges == [(0, None, 128 * 1024), (128 * 1024, header.data_start, None)]
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
    assert store.ranges == [(0, None, path.stat().st_size)]  # the whole (small) file
    path.write_bytes(b"")
    store.ranges.clear()
    with pytest.raises(HeaderError) as caught:
        SafetensorsParser()(path.as_uri(), registry)
    assert caught.value.kind == "HeaderTooSmall"
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
