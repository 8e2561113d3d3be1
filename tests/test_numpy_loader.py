"""safetensors_header.numpy.load, compared with safetensors.numpy.load_file."""

from __future__ import annotations

import io
import mmap
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from helpers import build, reference_header, tensor
from loopback import Site

np = pytest.importorskip("numpy")
safetensors_numpy = pytest.importorskip("safetensors.numpy")

from safetensors_header import DTYPES, HeaderError, open_file, read_header  # noqa: E402
from safetensors_header.numpy import LazyTensor, load, numpy_dtype, open_tensors  # noqa: E402

EXOTIC = build(
    {
        "bf16": tensor("BF16", [2, 2], 0, 8),
        "e5m2": tensor("F8_E5M2", [3], 8, 11),
        "e4m3": tensor("F8_E4M3", [1, 2], 11, 13),
        "e8m0": tensor("F8_E8M0", [2], 13, 15),
        "e4m3fnuz": tensor("F8_E4M3FNUZ", [], 15, 16),
        "e5m2fnuz": tensor("F8_E5M2FNUZ", [2], 16, 18),
        "f32": tensor("F32", [1], 18, 22),
    },
    bytes([0x80, 0x3F, 0x20, 0xC0, 0, 0, 0x49, 0x40]) + bytes(range(0x30, 0x3E)),
)


@pytest.fixture(scope="module")
def numeric(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file written by the reference with every dtype numpy has, a scalar and an empty."""
    rng = np.random.default_rng(3)
    arrays = {
        "bool": rng.random((2, 3)) > 0.5,
        "u8": rng.integers(0, 255, (4,), dtype=np.uint8),
        "i8": rng.integers(-128, 127, (4,), dtype=np.int8),
        "i16": rng.integers(-999, 999, (2, 2), dtype=np.int16),
        "u16": rng.integers(0, 60000, (3,), dtype=np.uint16),
        "f16": rng.standard_normal((3, 1)).astype(np.float16),
        "i32": rng.integers(-(2**31), 2**31 - 1, (5,), dtype=np.int32),
        "u32": rng.integers(0, 2**32 - 1, (2,), dtype=np.uint32),
        "f32": rng.standard_normal((2, 3, 2)).astype(np.float32),
        "c64": (rng.standard_normal(2) - 1j).astype(np.complex64),
        "f64": rng.standard_normal((3,)),
        "i64": rng.integers(-(2**62), 2**62, (2,), dtype=np.int64),
        "u64": rng.integers(0, 2**63, (1,), dtype=np.uint64),
        "scalar": np.array(-1.5, dtype=np.float64),
        "empty": np.zeros((2, 0), dtype=np.int16),
        "a/b": np.arange(3, dtype=np.int8),
    }
    path = tmp_path_factory.mktemp("np") / "numeric.safetensors"
    safetensors_numpy.save_file(arrays, str(path), metadata={"format": "np"})
    return path


def _assert_equal(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert sorted(actual) == sorted(expected)
    for name, array in expected.items():
        assert type(actual[name]) is np.ndarray, name
        assert actual[name].dtype == array.dtype, name
        assert actual[name].shape == array.shape, name
        assert np.array_equal(actual[name], array), name


class _Stream(io.RawIOBase):
    """A pipe-like stream: read() only, in short pieces, no seek."""

    def __init__(self, data: bytes) -> None:
        self.data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self.data.read(min(size, 7) if size >= 0 else 7)


def _sources(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    return {
        "path": path,
        "str path": str(path),
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "BytesIO": io.BytesIO(data),
        "stream": _Stream(data),
    }


@pytest.mark.parametrize("kind", list(_sources(Path(__file__))))
def test_equals_the_reference(numeric: Path, kind: str) -> None:
    source = _sources(numeric)[kind]
    _assert_equal(load(source), safetensors_numpy.load_file(str(numeric)))


def test_from_an_open_file_and_an_mmap(numeric: Path) -> None:
    expected = safetensors_numpy.load_file(str(numeric))
    with numeric.open("rb") as file:
        _assert_equal(load(file), expected)
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            arrays = load(mapped)
            _assert_equal(arrays, expected)
            del arrays  # views of the map must go before it closes


def test_a_path_is_memory_mapped(numeric: Path) -> None:
    import mmap

    arrays = load(numeric)
    header = read_header(numeric)
    for name, array in arrays.items():
        view: Any = array
        # Down to the array made over the map, whole (numpy may hold it through a memoryview).
        while not isinstance(getattr(view.base, "obj", view.base), mmap.mmap):
            view = view.base
            assert isinstance(view, np.ndarray), f"{name} is not a view of a memory map"
        assert array.flags.writeable is False  # mapped read-only: the file cannot change
        if array.size:
            info = header.tensors[name]
            start = view.__array_interface__["data"][0]
            assert array.__array_interface__["data"][0] - start == info.start


def test_names(numeric: Path) -> None:
    arrays = load(numeric, names=["f32", "scalar"])
    assert list(arrays) == ["f32", "scalar"]
    expected = safetensors_numpy.load_file(str(numeric))
    _assert_equal(arrays, {name: expected[name] for name in ("f32", "scalar")})
    stream = load(_Stream(numeric.read_bytes()), names=["u8"])
    _assert_equal(stream, {"u8": expected["u8"]})
    with pytest.raises(KeyError, match="no tensor 'missing' in the file"):
        load(numeric, names=["f32", "missing"])
    with pytest.raises(TypeError, match="not a str"):
        load(numeric, names="f32")


def test_exotic_dtypes_through_ml_dtypes() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    arrays = load(EXOTIC)
    expected_dtypes = {
        "bf16": ml_dtypes.bfloat16,
        "e5m2": ml_dtypes.float8_e5m2,
        "e4m3": ml_dtypes.float8_e4m3fn,
        "e8m0": ml_dtypes.float8_e8m0fnu,
        "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
        "e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
        "f32": np.float32,
    }
    for name, (dtype, shape, raw) in reference_header(EXOTIC).items():
        array = arrays[name]
        assert array.dtype == np.dtype(expected_dtypes[name]), dtype
        assert array.shape == shape
        assert array.tobytes() == raw  # the reference's bytes for the tensor
    assert arrays["bf16"].ravel()[:3].tolist() == [1.0, -2.5, 0.0]  # 0x3F80, 0xC020, 0


def test_exotic_dtypes_without_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes now fails
    with pytest.raises(TypeError, match="dtype BF16 needs ml_dtypes"):
        load(EXOTIC)
    _assert_equal(load(EXOTIC, names=["f32"]), {"f32": np.frombuffer(EXOTIC[-4:], "<f4")})


@pytest.mark.parametrize("dtype", ["F4", "F6_E2M3", "F6_E3M2"])
def test_sub_byte_dtypes_are_refused(dtype: str) -> None:
    data = build({"w": tensor(dtype, [4], 0, 3 if dtype != "F4" else 2)}, 3 if dtype != "F4" else 2)
    with pytest.raises(TypeError, match=f"dtype {dtype} packs several values"):
        load(data)
    with pytest.raises(TypeError, match="unknown safetensors dtype 'F128'"):
        numpy_dtype("F128")


def test_bad_sources() -> None:
    with pytest.raises(HeaderError) as caught:
        load(build({"w": tensor("F32", [2], 0, 8)}, 4))
    assert caught.value.kind == "MetadataIncompleteBuffer"
    # A stream that ends inside the data: its size was unknown, so only reading finds out.
    short = build({"w": tensor("F32", [2], 0, 8)}, 8)[:-3]
    with pytest.raises(HeaderError, match="ended 3 bytes before the end of tensor 'w'"):
        load(_Stream(short))


@pytest.mark.parametrize("name", list(DTYPES))
def test_every_dtype_maps_to_its_numpy_type_or_is_refused(name: str) -> None:
    dtype = DTYPES[name]
    if dtype.packed:
        with pytest.raises(TypeError, match="packs several values"):
            numpy_dtype(name)
        return
    if dtype.numpy is None:
        ml_dtypes = pytest.importorskip("ml_dtypes")
        assert dtype.ml_dtypes is not None
        assert numpy_dtype(name) == np.dtype(getattr(ml_dtypes, dtype.ml_dtypes))
    else:
        assert numpy_dtype(name).str == dtype.numpy  # little-endian on any machine
    assert numpy_dtype(name).itemsize * 8 == dtype.bits


def test_a_file_object_that_ends_early() -> None:
    data = build({"w": tensor("U8", [100], 0, 100)}, 100)
    end = len(data) - 30

    class Lying(io.BytesIO):
        """Claims (by seeking) a size its reads do not deliver."""

        def read(self, size: int | None = -1) -> bytes:
            return super().read(max(0, min(end - self.tell(), size or 0)))

    with pytest.raises(HeaderError, match="ended 30 bytes before the end of tensor 'w'") as caught:
        load(Lying(data))
    assert caught.value.tensor == "w"


@pytest.mark.parametrize("mmap", [True, False])
def test_a_file_that_changes_after_its_header_is_read(
    numeric: Path, tmp_path: Path, mmap: bool
) -> None:
    path = tmp_path / "changing.safetensors"
    path.write_bytes(numeric.read_bytes())
    opened = open_file(path)
    header = opened.header
    with path.open("r+b") as file:
        file.truncate(header.file_size - 1)  # type: ignore[operator]
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        load(opened, mmap=mmap)
    assert caught.value.kind == "FileChanged"
    with pytest.raises(HeaderError, match="changed between two reads") as caught:
        load(path, header=header, mmap=mmap)  # a header of the file as it was
    assert caught.value.kind == "FileChanged"


# --- URLs, object stores and slices ---------------------------------------------------------


@pytest.mark.parametrize("scheme", ["http", "HTTP", "Http"])
def test_load_over_http_reads_the_header_then_only_the_chosen_tensors(
    site: Site, numeric: Path, scheme: str
) -> None:
    data = numeric.read_bytes()
    site.files["m"] = data
    url = site.url("m").replace("http", scheme, 1)
    _assert_equal(load(url), safetensors_numpy.load_file(numeric))
    header = read_header(data)
    chosen = ["f32", "u8"]
    arrays = load(url, names=chosen)
    assert list(arrays) == chosen
    hits = site.done(4)[2:]  # after the first load's two requests: a header, the tensors
    assert len(hits) == 2  # the tensors are less than the default gap apart: one request
    infos = [header.tensors[name] for name in chosen]
    assert hits[1].sent == max(i.end for i in infos) - min(i.start for i in infos)
    assert arrays["f32"].flags.writeable  # the arrays' own memory, read into once


def test_load_exotic_dtypes_over_http(site: Site) -> None:
    pytest.importorskip("ml_dtypes")
    site.files["x"] = EXOTIC
    remote, local = load(site.url("x")), load(EXOTIC)
    assert list(remote) == list(local)
    for name in local:
        assert remote[name].dtype == local[name].dtype
        assert remote[name].tobytes() == local[name].tobytes()


def test_load_from_object_stores(numeric: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    store_module = pytest.importorskip("obstore.store")
    data, want = numeric.read_bytes(), safetensors_numpy.load_file(numeric)
    fsspec.filesystem("memory").pipe("/np/m.safetensors", data)
    store = store_module.MemoryStore()
    store.put("m.safetensors", data)
    _assert_equal(load("memory://np/m.safetensors"), want)
    _assert_equal(load((store, "m.safetensors")), want)


KEYS = {
    "rows": np.s_[2:5],
    "one-row": np.s_[3],
    "columns": np.s_[:, 4:9],
    "strided": np.s_[::3, ::-2],
    "element": np.s_[1, 2],
    "ellipsis": np.s_[..., 0],
    "everything": np.s_[...],
    "empty": np.s_[4:2],
}


@pytest.mark.parametrize("key", list(KEYS))
def test_a_slice_reads_only_its_bytes(site: Site, key: str) -> None:
    array = np.arange(8 * 12, dtype=np.int32).reshape(8, 12)
    data = safetensors_numpy.save({"w": array, "other": np.ones(3, np.float64)})
    site.files["m"] = data
    tensors = open_tensors(site.url("m"), gap=0)  # gap=0: not a byte more than the selection
    assert len(site.done(1)) == 1  # the header, nothing else
    lazy = tensors["w"]
    assert isinstance(lazy, LazyTensor)
    assert (lazy.shape, lazy.dtype, lazy.ndim, len(lazy)) == ((8, 12), np.int32, 2, 8)
    got = lazy[KEYS[key]]
    want = array[KEYS[key]]
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    assert np.array_equal(got, want)
    ranges = lazy.info.byte_ranges(KEYS[key])
    header_read, *reads = site.done(1 + len(ranges))
    assert header_read.range == "bytes=0-131071"
    assert len(reads) == len(ranges)
    assert sum(hit.sent for hit in reads) == sum(length for _, length in ranges)
    # With the default gap, one request for any selection of this small tensor.
    if ranges:
        assert np.array_equal(open_tensors(site.url("m"))["w"][KEYS[key]], want)
        assert len(site.done(3 + len(ranges))) == 3 + len(ranges)


def test_tensor_parallel_rows_and_a_scalar(tmp_path: Path) -> None:
    weight = np.arange(16 * 6, dtype=np.float32).reshape(16, 6)
    path = tmp_path / "m.safetensors"
    path.write_bytes(safetensors_numpy.save({"w": weight, "s": np.array(2.5)}))
    tensors = open_tensors(path)
    world = 4
    shards = [tensors["w"][r * 4 : (r + 1) * 4] for r in range(world)]
    assert np.array_equal(np.concatenate(shards), weight)
    assert np.asarray(tensors["s"]).shape == ()
    assert float(tensors["s"][()]) == 2.5
    assert np.array_equal(np.asarray(tensors["w"], dtype=np.float64), weight)
    assert list(tensors) == ["s", "w"]
    assert len(tensors) == 2
    assert repr(tensors) == "<Tensors 2 tensors>"
    assert repr(tensors["w"]) == "<LazyTensor 'w' F32 [16, 6]>"
    with pytest.raises(TypeError, match="0-d"):
        len(tensors["s"])
    with pytest.raises(IndexError):
        tensors["w"][16]
    with pytest.raises(TypeError, match="basic indexing"):
        tensors["w"][[0, 1]]


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_fifo_path_is_read_in_order_never_mapped(tmp_path: Path) -> None:
    # The FIFO is opened once, found to be no regular file, and read in order from that very
    # descriptor (opened again, it would wait for a writer that is gone): in a child, whose
    # timeout is the test of a hang.
    from helpers import FEED_A_FIFO, run_child

    fifo = tmp_path / "pipe.safetensors"
    data = build({"w": tensor("F32", [2], 0, 8)}, data=b"\x00\x00\x80?\x00\x00\x00@")
    code = f"""
        from safetensors_header.numpy import load

        writer = feed({str(fifo)!r}, {data!r})
        print(load({str(fifo)!r})["w"].tolist())
        writer.join(10)
        """
    result = run_child(FEED_A_FIFO + textwrap.dedent(code), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[1.0, 2.0]"


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
def test_a_fifo_path_with_the_header_of_a_copy_is_held_to_its_header_bytes(
    tmp_path: Path,
) -> None:
    # A header read from a regular file, given for a FIFO of the same bytes: the FIFO's
    # header bytes are compared with it (a stream has no size: the header's own is the one
    # it was parsed with), and its data read in order; a FIFO of another header is refused.
    from helpers import FEED_A_FIFO, run_child

    copy, fifo = tmp_path / "copy.safetensors", tmp_path / "pipe.safetensors"
    data = build({"w": tensor("F32", [2], 0, 8)}, data=b"\x00\x00\x80?\x00\x00\x00@")
    other = build({"v": tensor("F32", [2], 0, 8)}, data=b"\x00\x00\x80?\x00\x00\x00@")
    copy.write_bytes(data)
    code = f"""
        from safetensors_header import read_header
        from safetensors_header.numpy import load

        header = read_header({str(copy)!r})
        for content in ({data!r}, {other!r}):
            writer = feed({str(fifo)!r}, content)
            try:
                print(load({str(fifo)!r}, header=header)["w"].tolist())
            except ValueError as error:
                print(type(error).__name__, getattr(error, "kind", None))
            writer.join(10)
            os.unlink({str(fifo)!r})
        """
    result = run_child(FEED_A_FIFO + textwrap.dedent(code), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[1.0, 2.0]", "HeaderError FileChanged"]
