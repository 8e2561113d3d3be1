"""Zarr v2 and v3 metadata and kerchunk references, read back by fsspec, zarr and xarray."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from helpers import build, reference_header, tensor

from safetensors_header import DTYPES, Header, TensorInfo, parse_header, read_header
from safetensors_header._zarr_layout import ZARR_TYPES, ZARR_V2_TYPES
from safetensors_header.zarr import (
    _decoded,
    array_metadata,
    array_shape,
    chunk_ranges,
    node_name,
    to_kerchunk,
    to_zarr,
)

# Names Zarr would misread: a "/" makes a group, a leading "." or "__" is reserved,
# "zarr.json" is the group's own key, and "%" is the escape character.
AWKWARD_NAMES = ["a/b", "a/b/c", "%", "a%2Fb", ".hidden", "..", "__x", "zarr.json", "é ü", "c"]

# The exotic dtypes: no numpy type of their own; carried as the same bits.
EXOTIC = build(
    {
        "__metadata__": {"format": "pt"},
        "bf16": tensor("BF16", [2, 3], 0, 12),
        "e4m3": tensor("F8_E4M3", [4], 12, 16),
        "e5m2": tensor("F8_E5M2", [2, 2], 16, 20),
        "e8m0": tensor("F8_E8M0", [1], 20, 21),
        "e4m3fnuz": tensor("F8_E4M3FNUZ", [3], 21, 24),
        "e5m2fnuz": tensor("F8_E5M2FNUZ", [], 24, 25),
        "f4": tensor("F4", [2, 3], 25, 28),
        "f6": tensor("F6_E2M3", [2, 4], 28, 34),
    },
    bytes(range(7, 7 + 34)),
)


def _header(data: bytes) -> Header:
    return parse_header(data, file_size=len(data))


# --- the documents themselves (standard library only) ------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight"),
        ("a/b", "a%2Fb"),
        ("a%2Fb", "a%252Fb"),
        ("%", "%25"),
        ("", "%"),
        (".zattrs", "%2Ezattrs"),
        ("..", "%2E."),
        ("__metadata", "%5F_metadata"),
        ("_x", "_x"),
        ("zarr.json", "%7Aarr.json"),
        ("zarr.json/x", "zarr.json%2Fx"),
        ("c", "c"),
    ],
)
def test_node_names(name: str, key: str) -> None:
    assert node_name(name) == key


def test_node_names_are_reversible_and_safe() -> None:
    hypothesis = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")

    alphabet = st.sampled_from("/%._z2F5Aa" + "arrjson") | st.characters()

    @hypothesis.settings(max_examples=400, derandomize=True, database=None, deadline=None)
    @hypothesis.given(st.text(alphabet, max_size=12) | st.sampled_from(AWKWARD_NAMES))
    def check(name: str) -> None:
        key = node_name(name)
        assert _decoded(key) == name  # the inverse read_tensors uses
        assert "/" not in key
        assert key
        assert key.strip(".")
        assert not key.startswith("__")
        assert key not in ("zarr.json", ".zarray", ".zattrs", ".zgroup")

    check()


def test_kerchunk_documents() -> None:
    entries = {"w/0": tensor("F32", [2, 3], 0, 24), "s": tensor("I64", [], 24, 32)}
    data = build({"__metadata__": {"k": "v"}, **entries}, 32)
    header = _header(data)
    refs = to_kerchunk(header, "s3://bucket/m.safetensors")
    assert refs["version"] == 1
    assert json.loads(json.dumps(refs)) == refs  # plain JSON
    docs = refs["refs"]
    assert json.loads(docs[".zgroup"]) == {"zarr_format": 2}
    assert json.loads(docs[".zattrs"]) == {"k": "v"}
    assert json.loads(docs["w%2F0/.zarray"]) == {
        "zarr_format": 2,
        "shape": [2, 3],
        "chunks": [2, 3],
        "dtype": "<f4",
        "compressor": None,
        "filters": None,
        "fill_value": None,
        "order": "C",
        "dimension_separator": ".",
    }
    assert json.loads(docs["w%2F0/.zattrs"]) == {
        "_ARRAY_DIMENSIONS": ["w%2F0/0", "w%2F0/1"],
        "safetensors_name": "w/0",
        "safetensors_dtype": "F32",
    }
    start = header.data_start
    assert docs["w%2F0/0.0"] == ["s3://bucket/m.safetensors", start, 24]
    assert json.loads(docs["s/.zarray"])["shape"] == []
    assert docs["s/0"] == ["s3://bucket/m.safetensors", start + 24, 8]  # a scalar's one chunk
    assert len(docs) == 8


def test_kerchunk_dtypes_and_edge_cases() -> None:
    data = build(
        {
            "b": tensor("BOOL", [1], 0, 1),
            "u": tensor("U8", [1], 1, 2),
            "i": tensor("I8", [1], 2, 3),
            "empty": tensor("F16", [0, 4], 3, 3),
        },
        3,
    )
    docs = to_kerchunk(_header(data), "m")["refs"]
    assert [json.loads(docs[f"{n}/.zarray"])["dtype"] for n in "bui"] == ["|b1", "|u1", "|i1"]
    assert json.loads(docs["empty/.zarray"])["chunks"] == [1, 4]  # Zarr wants chunks >= 1
    assert not [key for key in docs if key.startswith("empty/") and "z" not in key]  # no chunk
    exotic = to_kerchunk(_header(EXOTIC), "m")["refs"]
    assert json.loads(exotic["bf16/.zarray"])["dtype"] == "<u2"
    assert json.loads(exotic["bf16/.zattrs"])["safetensors_dtype"] == "BF16"
    assert json.loads(exotic["e4m3/.zarray"])["dtype"] == "|u1"
    f4 = json.loads(exotic["f4/.zarray"])
    assert (f4["shape"], f4["dtype"]) == ([3], "|u1")  # 6 values, 4 bits each: 3 bytes
    assert json.loads(exotic["f4/.zattrs"])["safetensors_shape"] == [2, 3]


def test_zarr_v3_documents() -> None:
    data = build({"bf/16": tensor("BF16", [2], 0, 4), "u": tensor("U8", [], 4, 5)}, 5)
    documents = to_zarr(_header(data))
    assert documents["zarr.json"] == {"zarr_format": 3, "node_type": "group", "attributes": {}}
    assert documents["bf%2F16/zarr.json"] == {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [2],
        "data_type": "uint16",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {"safetensors_name": "bf/16", "safetensors_dtype": "BF16"},
        "dimension_names": ["bf%2F16/0"],
    }
    assert documents["u/zarr.json"]["codecs"] == [{"name": "bytes"}]  # one byte: no endian
    refs = to_kerchunk(_header(data), "m", zarr_format=3)["refs"]
    assert sorted(refs) == ["bf%2F16/c/0", "bf%2F16/zarr.json", "u/c", "u/zarr.json", "zarr.json"]
    with pytest.raises(ValueError, match="zarr_format must be 2 or 3"):
        to_kerchunk(_header(data), "m", zarr_format=4)  # type: ignore[arg-type]


def test_zarr_v2_documents() -> None:
    entries = {"w/0": tensor("F32", [2, 3], 0, 24), "s": tensor("I64", [], 24, 32)}
    header = _header(build({"__metadata__": {"k": "v"}, **entries}, 32))
    documents = to_zarr(header, zarr_format=2)
    assert list(documents) == [
        ".zgroup",
        ".zattrs",
        "w%2F0/.zarray",
        "w%2F0/.zattrs",
        "s/.zarray",
        "s/.zattrs",
    ]
    assert documents[".zattrs"] == {"k": "v"}
    assert documents["w%2F0/.zarray"] == array_metadata(header.tensors["w/0"], zarr_format=2)
    assert documents["s/.zattrs"] == {
        "_ARRAY_DIMENSIONS": [],
        "safetensors_name": "s",
        "safetensors_dtype": "I64",
    }


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_kerchunk_holds_the_zarr_documents_and_the_chunks(zarr_format: int) -> None:
    header = _header(EXOTIC)
    documents = to_zarr(header, zarr_format=zarr_format)  # type: ignore[arg-type]
    refs = to_kerchunk(header, "m", zarr_format=zarr_format)["refs"]  # type: ignore[arg-type]
    assert {key: json.loads(refs[key]) for key in documents} == documents
    chunks = {key: value for key, value in refs.items() if key not in documents}
    assert sorted(value[1:] for value in chunks.values()) == sorted(
        [info.start, info.nbytes] for info in header.tensors.values()
    )


# The v3 fill values, where the zero is not the integer 0.
ZEROS: dict[str, object] = {"BOOL": False, "F16": 0.0, "F32": 0.0, "F64": 0.0, "C64": [0.0, 0.0]}


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_array_metadata_of_every_dtype(dtype: str) -> None:
    bits = DTYPES[dtype].bits
    info = TensorInfo("t", dtype, (2, 4), 100, 100 + 8 * bits // 8, 96)
    packed = bits % 8 != 0
    assert array_shape(info) == ((info.nbytes,) if packed else (2, 4))
    v3 = array_metadata(info)
    assert v3 == array_metadata(info, zarr_format=3)
    assert v3["data_type"] == ZARR_TYPES[dtype]
    assert v3["shape"] == list(array_shape(info))
    zero = ZEROS.get(dtype, 0)
    assert (v3["fill_value"], type(v3["fill_value"])) == (zero, type(zero))
    one_byte = bits <= 8
    assert ("configuration" in v3["codecs"][0]) is not one_byte  # the endian
    assert ("safetensors_shape" in v3["attributes"]) is packed
    assert v3["dimension_names"] == [f"t/{axis}" for axis in range(len(array_shape(info)))]
    v2 = array_metadata(info, zarr_format=2)
    assert (v2["dtype"], v2["fill_value"], v2["shape"]) == (
        ZARR_V2_TYPES[dtype],
        None,
        v3["shape"],
    )


def test_zarr_format_must_be_2_or_3() -> None:
    header = _header(EXOTIC)
    info = header.tensors["bf16"]
    for call in (
        lambda: to_zarr(header, zarr_format=4),  # type: ignore[arg-type]
        lambda: to_kerchunk(header, "m", zarr_format=1),  # type: ignore[arg-type]
        lambda: array_metadata(info, zarr_format="3"),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError, match="zarr_format must be 2 or 3"):
            call()


# --- read back by the real libraries -------------------------------------------------------


@pytest.fixture(scope="module")
def numeric(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A file written by the reference: every dtype numpy has, scalars, empties, odd names."""
    np = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(7)
    arrays = {
        "bool": rng.random((3, 2)) > 0.5,
        "u8": rng.integers(0, 255, (5,), dtype=np.uint8),
        "i8": rng.integers(-128, 127, (2, 2), dtype=np.int8),
        "i16": rng.integers(-1000, 1000, (3,), dtype=np.int16),
        "u16": rng.integers(0, 60000, (2, 1, 2), dtype=np.uint16),
        "f16": rng.standard_normal((4,)).astype(np.float16),
        "i32": rng.integers(-(2**31), 2**31 - 1, (2, 3), dtype=np.int32),
        "u32": rng.integers(0, 2**32 - 1, (1,), dtype=np.uint32),
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "c64": (rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64),
        "f64": rng.standard_normal((2, 2)),
        "i64": rng.integers(-(2**62), 2**62, (2,), dtype=np.int64),
        "u64": rng.integers(0, 2**63, (3,), dtype=np.uint64),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "zeros": np.zeros((2,), dtype=np.float64),  # a fill value must not mask them
    }
    for index, name in enumerate(AWKWARD_NAMES):
        arrays[name] = np.full((2,), index, dtype=np.int32)
    path = tmp_path_factory.mktemp("zarr") / "numeric.safetensors"
    safetensors_numpy.save_file(arrays, str(path), metadata={"format": "np", "note": "é"})
    return path, safetensors_numpy.load_file(str(path))


def _open_references(refs: dict[str, Any], zarr_format: int) -> Any:
    fsspec = pytest.importorskip("fsspec")
    zarr = pytest.importorskip("zarr")
    # Through JSON, as references are stored.
    fs = fsspec.filesystem("reference", fo=json.loads(json.dumps(refs)), asynchronous=True)
    store = zarr.storage.FsspecStore(fs, read_only=True)
    return zarr.open_group(store, mode="r", zarr_format=zarr_format), store


def _assert_same(actual: Any, expected: Any) -> None:
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.tobytes() == expected.tobytes()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_kerchunk_through_fsspec_and_zarr(
    numeric: tuple[Path, dict[str, Any]], zarr_format: int
) -> None:
    path, expected = numeric
    header = read_header(path)
    group, _ = _open_references(
        to_kerchunk(header, str(path), zarr_format=zarr_format), zarr_format
    )
    assert dict(group.attrs) == {"format": "np", "note": "é"}
    assert sorted(group.array_keys()) == sorted(node_name(name) for name in expected)
    for name, array in expected.items():
        z = group[node_name(name)]
        _assert_same(z[...], array)
        assert z.attrs["safetensors_name"] == name


def test_kerchunk_from_an_fsspec_memory_filesystem(numeric: tuple[Path, dict[str, Any]]) -> None:
    fsspec = pytest.importorskip("fsspec")
    path, expected = numeric
    memory = fsspec.filesystem("memory")
    memory.pipe("/weights/numeric.safetensors", path.read_bytes())
    try:
        header = read_header(path)
        group, _ = _open_references(to_kerchunk(header, "memory://weights/numeric.safetensors"), 2)
        for name, array in expected.items():
            _assert_same(group[node_name(name)][...], array)
    finally:
        memory.rm("/weights", recursive=True)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_kerchunk_through_xarray(numeric: tuple[Path, dict[str, Any]], zarr_format: int) -> None:
    xarray = pytest.importorskip("xarray")
    path, expected = numeric
    refs = to_kerchunk(read_header(path), str(path), zarr_format=zarr_format)
    _, store = _open_references(refs, zarr_format)
    dataset = xarray.open_zarr(store, consolidated=False, zarr_format=zarr_format)
    assert dataset.attrs == {"format": "np", "note": "é"}
    for name, array in expected.items():
        variable = dataset[node_name(name)]
        assert variable.dims == tuple(f"{node_name(name)}/{i}" for i in range(array.ndim))
        _assert_same(variable.values, array)


def test_exotic_dtypes_carried_as_their_bits(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    path = tmp_path / "exotic.safetensors"
    path.write_bytes(EXOTIC)
    reference = reference_header(EXOTIC)  # name -> (dtype, shape, bytes), from the reference
    for zarr_format in (2, 3):
        refs = to_kerchunk(read_header(path), str(path), zarr_format=zarr_format)
        group, _ = _open_references(refs, zarr_format)
        for name, (dtype, shape, raw) in reference.items():
            z = group[name]
            assert z.attrs["safetensors_dtype"] == dtype
            values = z[...]
            assert values.tobytes() == raw
            if dtype in ("F4", "F6_E2M3"):
                assert values.dtype == np.uint8
                assert list(z.attrs["safetensors_shape"]) == list(shape)
            else:
                assert values.dtype == (np.uint16 if dtype == "BF16" else np.uint8)
                assert values.shape == shape


def test_exotic_dtypes_view_as_ml_dtypes(tmp_path: Path) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    np = pytest.importorskip("numpy")
    values = np.array([1.0, -2.5, 0.15625], dtype=ml_dtypes.bfloat16)
    data = build({"w": tensor("BF16", [3], 0, 6)}, values.tobytes())
    path = tmp_path / "bf16.safetensors"
    path.write_bytes(data)
    group, _ = _open_references(to_kerchunk(read_header(path), str(path)), 2)
    assert group["w"][...].view(ml_dtypes.bfloat16).tolist() == [1.0, -2.5, 0.15625]


def test_zarr_v3_documents_in_a_zarr_store(numeric: tuple[Path, dict[str, Any]]) -> None:
    zarr = pytest.importorskip("zarr")
    from zarr.core.buffer import cpu

    path, expected = numeric
    data = path.read_bytes()
    header = read_header(path)
    contents = {key: json.dumps(doc).encode() for key, doc in to_zarr(header).items()}
    for info in header.tensors.values():  # the chunks, at the keys the documents promise
        if info.numel:
            chunk = "/".join(["c"] + ["0"] * len(info.shape))
            contents[f"{node_name(info.name)}/{chunk}"] = data[info.start : info.end]
    store = zarr.storage.MemoryStore({k: cpu.Buffer.from_bytes(v) for k, v in contents.items()})
    group = zarr.open_group(store, mode="r", zarr_format=3)
    assert dict(group.attrs) == {"format": "np", "note": "é"}
    for name, array in expected.items():
        z = group[node_name(name)]
        assert z.metadata.dimension_names == tuple(
            f"{node_name(name)}/{i}" for i in range(array.ndim)
        )
        _assert_same(z[...], array)


# --- chunks= --------------------------------------------------------------------------------

# A target in bytes that cuts most tensors of the `numeric` file, a mapping, and one chunk.
CHUNKINGS = [
    pytest.param(None, id="one-chunk"),
    pytest.param(4, id="4-bytes"),
    pytest.param(10, id="10-bytes"),
    pytest.param({"f32": (1, 2), "u16": (1, 1, 2), "empty": (5, 1), "scalar": ()}, id="mapping"),
]


def _chunk_keys(refs: dict[str, Any], node: str) -> list[str]:
    documents = ("zarr.json", ".zarray", ".zattrs")
    return [
        key for key in refs if key.startswith(f"{node}/") and key[len(node) + 1 :] not in documents
    ]


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_chunked_references_read_back_through_zarr_and_xarray(
    numeric: tuple[Path, dict[str, Any]], zarr_format: int, chunks: Any
) -> None:
    xarray = pytest.importorskip("xarray")
    from safetensors_header.zarr import chunk_shape, read_tensors

    path, expected = numeric
    header = read_header(path)
    refs = to_kerchunk(header, str(path), zarr_format=zarr_format, chunks=chunks)  # type: ignore[arg-type]
    group, store = _open_references(refs, zarr_format)
    dataset = xarray.open_zarr(store, consolidated=False, zarr_format=zarr_format, chunks=None)
    for name, array in expected.items():
        info = header.tensors[name]
        node = node_name(name)
        sizes = chunk_shape(info, chunks=chunks)
        z = group[node]
        assert z.chunks == tuple(max(size, 1) for size in sizes)
        # One reference per chunk of the grid: the tensor's bytes cut in equal pieces.
        keys = _chunk_keys(refs["refs"], node)
        assert [refs["refs"][key][1:] for key in keys] == [
            [offset, length] for _, offset, length in chunk_ranges(info, sizes)
        ]
        _assert_same(z[...], array)
        _assert_same(dataset[node].values, array)
    assert {name: value.tobytes() for name, value in read_tensors(group).items()} == {
        name: array.tobytes() for name, array in expected.items()
    }


def test_a_target_cuts_the_large_tensors_only(numeric: tuple[Path, dict[str, Any]]) -> None:
    path, _ = numeric
    header = read_header(path)
    refs = to_kerchunk(header, str(path), chunks=16)["refs"]
    f32 = json.loads(refs["f32/.zarray"])  # 3 x 4 float32: rows of 16 bytes
    assert (f32["shape"], f32["chunks"]) == ([3, 4], [1, 4])
    assert [refs[f"f32/{row}.0"][2] for row in range(3)] == [16, 16, 16]
    assert json.loads(refs["u8/.zarray"])["chunks"] == [5]  # 5 bytes: one chunk
    assert refs["scalar/0"][2] == 4
    assert json.loads(refs["empty/.zarray"])["chunks"] == [1, 3]
    assert not _chunk_keys(refs, "empty")


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_chunked_exotic_dtypes_read_back_as_ml_dtypes(tmp_path: Path, zarr_format: int) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from safetensors_header.zarr import read_tensors

    path = tmp_path / "exotic.safetensors"
    path.write_bytes(EXOTIC)
    reference = reference_header(EXOTIC)
    chunks = {"bf16": (1, 3), "e4m3": (2,), "e5m2": (1, 1), "f6": (1, 4)}
    refs = to_kerchunk(read_header(path), str(path), zarr_format=zarr_format, chunks=chunks)  # type: ignore[arg-type]
    group, _ = _open_references(refs, zarr_format)
    assert group["f4"].chunks == (3,)  # six F4 values: three bytes, which cannot be cut
    assert group["f6"].chunks == (3,)  # four F6 values: three bytes
    tensors = read_tensors(group)
    assert sorted(tensors) == sorted(reference)
    for name, (dtype, shape, raw) in reference.items():
        assert tensors[name].tobytes() == raw
        if dtype in ("F4", "F6_E2M3"):
            assert (tensors[name].dtype.name, tensors[name].shape) == ("uint8", (len(raw),))
        else:
            assert tensors[name].shape == shape
            assert tensors[name].dtype == getattr(ml_dtypes, DTYPES[dtype].ml_dtypes or "")
    assert read_tensors(group, names=["bf16"])["bf16"].dtype == ml_dtypes.bfloat16
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        read_tensors(group, names=["nope"])


@pytest.mark.parametrize(
    ("chunks", "why"),
    [
        pytest.param({"f32": (2, 4)}, "2 does not divide axis 0 \\(3\\)", id="padded"),
        pytest.param({"f32": (3, 2)}, "every axis before it must take 1", id="not-contiguous"),
        pytest.param({"f32": (4,)}, "1 dimension, the tensor has 2", id="rank"),
        pytest.param({"nope": (1,)}, "not there: \\['nope'\\]", id="unknown-name"),
        pytest.param(0, "at least 1 byte", id="zero-target"),
        pytest.param(True, "must be None, a target size", id="bool"),
        pytest.param((1, 4), "must be None, a target size", id="a-bare-shape"),
    ],
)
def test_chunks_that_cannot_work_raise_value_error(
    numeric: tuple[Path, dict[str, Any]], chunks: Any, why: str
) -> None:
    path, _ = numeric
    header = read_header(path)
    for call in (
        lambda: to_kerchunk(header, str(path), chunks=chunks),
        lambda: to_zarr(header, chunks=chunks, zarr_format=2),
    ):
        with pytest.raises(ValueError, match=why):
            call()


def test_array_metadata_takes_a_chunk_shape_or_a_target() -> None:
    info = TensorInfo("t", "F32", (4, 6), 100, 196, 96)
    assert array_metadata(info, chunks=(1, 3))["chunk_grid"]["configuration"] == {
        "chunk_shape": [1, 3]
    }
    assert array_metadata(info, zarr_format=2, chunks=48)["chunks"] == [2, 6]
    with pytest.raises(ValueError, match="does not divide"):
        array_metadata(info, chunks=(1, 4))


# Real models' shapes whose first axis has no divisor near a MiB: MiniLM's embedding
# (30,522 = 2 x 3 x 5,087 rows), Llama 3's (128,256 rows) and a small 3-d tensor.
REAL_SHAPES = {
    "minilm": ("F32", [30522, 384]),
    "llama": ("BF16", [128256, 4096]),
    "small": ("F32", [3, 5087, 7]),
}


def real_shapes_header() -> bytes:
    """The header of a file of `REAL_SHAPES` (the bytes up to the data, which is not read)."""
    entries, offset = {}, 0
    for name, (dtype, shape) in REAL_SHAPES.items():
        end = offset + math.prod(shape) * DTYPES[dtype].bits // 8
        entries[name] = tensor(dtype, shape, offset, end)
        offset = end
    return build(entries)


@pytest.mark.parametrize("target", [1 << 20, 4 << 20], ids=["1MiB", "4MiB"])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_target_never_makes_chunks_below_a_quarter_of_it(zarr_format: int, target: int) -> None:
    from safetensors_header.zarr import chunk_shape

    header = parse_header(real_shapes_header())
    refs = to_kerchunk(header, "x.safetensors", zarr_format=zarr_format, chunks=target)["refs"]
    documents = to_zarr(header, zarr_format=zarr_format, chunks=target)
    document = "zarr.json" if zarr_format == 3 else ".zarray"
    for name, info in header.tensors.items():
        sizes = chunk_shape(info, chunks=target)
        for metadata in (json.loads(refs[f"{name}/{document}"]), documents[f"{name}/{document}"]):
            if zarr_format == 2:
                assert metadata["chunks"] == list(sizes)
            else:
                assert metadata["chunk_grid"]["configuration"]["chunk_shape"] == list(sizes)
        lengths = [refs[key][2] for key in _chunk_keys(refs, name)]
        assert sum(lengths) == info.nbytes
        assert min(lengths) * 4 >= min(target, 4 * info.nbytes), name
    assert len(_chunk_keys(refs, "minilm")) == 6  # of 5,087 rows each
    assert len(_chunk_keys(refs, "small")) == 1  # smaller than the target: whole


# --- checkpoints ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A checkpoint of two shards and an index: shard name -> {tensor name -> array}."""
    np = pytest.importorskip("numpy")
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(3)
    shards = {
        "model-00001-of-00002.safetensors": {
            "embed.weight": rng.standard_normal((8, 4)).astype(np.float32),
            "layers.0.w": rng.integers(-9, 9, (4, 4), dtype=np.int8),
        },
        "model-00002-of-00002.safetensors": {
            "layers.1.w": rng.integers(-9, 9, (4, 4), dtype=np.int8),
            "norm": np.array(1.5, dtype=np.float64),
            "a/b": np.zeros((0, 2), dtype=np.float16),
        },
    }
    folder = tmp_path_factory.mktemp("sharded")
    for shard, arrays in shards.items():
        extra = {"shard": shard[6:11]}  # differs per shard: not a group attribute
        safetensors_numpy.save_file(arrays, str(folder / shard), metadata={"format": "pt", **extra})
    weight_map = {name: shard for shard, arrays in shards.items() for name in arrays}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder, shards


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_checkpoint_is_one_store_each_array_in_its_shard(
    sharded: tuple[Path, dict[str, dict[str, Any]]], zarr_format: int
) -> None:
    from safetensors_header import read_checkpoint
    from safetensors_header.zarr import read_tensors

    folder, shards = sharded
    checkpoint = read_checkpoint(folder)
    index_url = (folder / "model.safetensors.index.json").as_uri()
    for url in (index_url, folder.as_uri() + "/", {s: str(folder / s) for s in shards}):
        refs = to_kerchunk(checkpoint, url, zarr_format=zarr_format, chunks=16)  # type: ignore[arg-type]
        group, _ = _open_references(refs, zarr_format)
        assert dict(group.attrs) == {"format": "pt"}  # what the shards agree on
        for shard, arrays in shards.items():
            for name, array in arrays.items():
                z = group[node_name(name)]
                assert z.attrs["safetensors_file"] == shard
                for key in _chunk_keys(refs["refs"], node_name(name)):
                    assert refs["refs"][key][0].endswith(shard)
                _assert_same(z[...], array)
        tensors = read_tensors(group)
        assert sorted(tensors) == sorted(checkpoint.tensors)


def test_a_checkpoint_needs_every_shard_url(sharded: tuple[Path, dict[str, Any]]) -> None:
    from safetensors_header import read_checkpoint

    folder, shards = sharded
    checkpoint = read_checkpoint(folder)
    first = next(iter(shards))
    with pytest.raises(KeyError, match="model-00002-of-00002"):
        to_kerchunk(checkpoint, {first: str(folder / first)})
    with pytest.raises(TypeError, match="url must be a string"):
        to_kerchunk(read_header(folder / first), {first: "x"})
    documents = to_zarr(checkpoint)
    assert documents["norm/zarr.json"]["attributes"]["safetensors_file"] == (
        "model-00002-of-00002.safetensors"
    )


# --- extension data types, read by TensorStore ---------------------------------------------

_EXTENSION_CASES = [  # name, dtype, shape
    ("bf16", "BF16", [2, 3]),
    ("bf16.chunked", "BF16", [4, 6]),
    ("e4m3", "F8_E4M3", [4]),
    ("e5m2", "F8_E5M2", [2, 2]),
    ("e8m0", "F8_E8M0", []),
    ("e4m3fnuz", "F8_E4M3FNUZ", [3]),
    ("e5m2fnuz", "F8_E5M2FNUZ", [3]),
    ("f32.chunked", "F32", [4, 2]),
    ("f4", "F4", [2, 4]),
    ("empty", "BF16", [0, 2]),
]


def _extension_file(tmp_path: Path) -> tuple[Path, bytes]:
    entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    at = 0
    for name, dtype, shape in _EXTENSION_CASES:
        count = 1
        for size in shape:
            count *= size
        nbytes = count * DTYPES[dtype].bits // 8
        entries[name] = tensor(dtype, shape, at, at + nbytes)
        at += nbytes
    data = build(entries, bytes((7 * i + 3) % 251 for i in range(at)))
    path = tmp_path / "extension.safetensors"
    path.write_bytes(data)
    return path, data


def test_tensorstore_reads_the_extension_data_types(tmp_path: Path) -> None:
    ts = pytest.importorskip("tensorstore")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    np = pytest.importorskip("numpy")
    path, data = _extension_file(tmp_path)
    header = read_header(path)
    chunks = {"bf16.chunked": [1, 6], "f32.chunked": [2, 2]}
    refs = to_kerchunk(header, str(path), zarr_format=3, chunks=chunks, extension_dtypes=True)
    # The references made into a directory store (TensorStore reads no kerchunk): each
    # document as written, each chunk the bytes of the file it points at.
    root = tmp_path / "store"
    for key, value in refs["refs"].items():
        target = root / key
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, str):
            target.write_text(value)
        else:
            _, offset, length = value
            target.write_bytes(data[offset : offset + length])
    reference = reference_header(data)
    for name, dtype, shape in _EXTENSION_CASES:
        node = root / node_name(name)
        array = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": f"{node}/"}})
        values = array.result().read().result()
        kind = DTYPES[dtype]
        if kind.packed:  # F4: its bytes, as uint8
            assert values.dtype == np.uint8
            assert values.tobytes() == reference[name][2]
            continue
        assert values.shape == tuple(shape) == reference[name][1], name
        assert values.tobytes() == reference[name][2], name
        if kind.ml_dtypes is not None:
            assert values.dtype == np.dtype(getattr(ml_dtypes, kind.ml_dtypes)), name
            expected = np.frombuffer(reference[name][2], getattr(ml_dtypes, kind.ml_dtypes))
            assert np.array_equal(values.ravel(), expected, equal_nan=True), name


def test_extension_data_types_are_opt_in_and_zarr_v3_only(tmp_path: Path) -> None:
    path, _ = _extension_file(tmp_path)
    header = read_header(path)
    plain = to_zarr(header)
    named = to_zarr(header, extension_dtypes=True)
    for name, dtype, _ in _EXTENSION_CASES:
        document = named[f"{node_name(name)}/zarr.json"]
        assert plain[f"{node_name(name)}/zarr.json"]["data_type"] == ZARR_TYPES[dtype]
        if DTYPES[dtype].ml_dtypes is not None and not DTYPES[dtype].packed:
            assert document["data_type"] == DTYPES[dtype].ml_dtypes
            assert document["fill_value"] == "0x" + "00" * (DTYPES[dtype].bits // 8)
        else:
            assert document == plain[f"{node_name(name)}/zarr.json"]
    with pytest.raises(ValueError, match="extension_dtypes needs zarr_format=3"):
        to_kerchunk(header, str(path), extension_dtypes=True)  # kerchunk's default is v2
    with pytest.raises(ValueError, match="extension_dtypes needs zarr_format=3"):
        array_metadata(header.tensors["bf16"], zarr_format=2, extension_dtypes=True)


def test_kerchunk_references_over_http(numeric: tuple[Path, dict[str, Any]], site: Any) -> None:
    """What the docs say a user of HTTP references passes: the fsspec extra brings aiohttp,
    and the reference filesystem's remote is asynchronous, as zarr's FsspecStore wants."""
    fsspec = pytest.importorskip("fsspec")
    zarr = pytest.importorskip("zarr")
    pytest.importorskip("aiohttp")
    path, expected = numeric
    site.files["numeric.safetensors"] = path.read_bytes()
    url = site.url("numeric.safetensors")
    refs = to_kerchunk(read_header(url), url, zarr_format=3)
    fs = fsspec.filesystem(
        "reference",
        fo=refs,
        remote_protocol="http",
        remote_options={"asynchronous": True},
        asynchronous=True,
    )
    group = zarr.open_group(zarr.storage.FsspecStore(fs, read_only=True), mode="r", zarr_format=3)
    for name, array in expected.items():
        _assert_same(group[node_name(name)][...], array)
    assert all(hit.path == "/numeric.safetensors" for hit in site.hits)
