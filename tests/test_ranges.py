"""Byte ranges of slices, checked against numpy's slicing of the actual bytes."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from helpers import build, run_child, tensor

from safetensors_header import DTYPE_BITS, TensorInfo, parse_header
from safetensors_header._core.geometry import byte_ranges

np = pytest.importorskip("numpy")
hypothesis = pytest.importorskip("hypothesis")
st = pytest.importorskip("hypothesis.strategies")

_WHOLE_BYTE = {"U8": 1, "I16": 2, "F32": 4, "BF16": 2, "F64": 8, "C64": 8}


def _file(dtype: str, shape: tuple[int, ...], *, at: int = 0) -> tuple[TensorInfo, bytes]:
    """A file whose tensor `x` holds distinct bytes, after `at` bytes of another tensor."""
    nbytes = math.prod(shape) * DTYPE_BITS[dtype] // 8
    header = {"x": tensor(dtype, list(shape), at, at + nbytes)}
    if at:
        header["before"] = tensor("U8", [at], 0, at)
    data = build(header, bytes(i % 251 for i in range(at + nbytes)), pad=True)
    return parse_header(data, file_size=len(data)).tensors["x"], data


def _expected(info: TensorInfo, data: bytes, key: Any) -> bytes:
    """numpy's answer: the bytes of x[key], C order, from an array over the file's bytes."""
    size = DTYPE_BITS[info.dtype] // 8
    # An opaque dtype of the element's size: numpy moves the bytes and never reads them.
    elements = np.frombuffer(data[info.start : info.end], dtype=f"V{size}").reshape(info.shape)
    return np.ascontiguousarray(elements[key]).tobytes()


def _fetch(data: bytes, ranges: list[tuple[int, int]]) -> bytes:
    return b"".join(data[offset : offset + length] for offset, length in ranges)


def _assert_minimal(ranges: list[tuple[int, int]]) -> None:
    assert all(length > 0 for _, length in ranges)
    for (offset, length), (following, _) in itertools.pairwise(ranges):
        assert offset + length != following, "touching neighbours were not merged"


# --- examples -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param(np.s_[...], [(0, 96)], id="whole"),
        pytest.param(np.s_[1:3], [(24, 48)], id="rows: one range"),
        pytest.param(np.s_[1], [(24, 24)], id="one row"),
        pytest.param(np.s_[-1], [(72, 24)], id="last row"),
        pytest.param(np.s_[:, 2:4], [(8, 8), (32, 8), (56, 8), (80, 8)], id="columns"),
        pytest.param(np.s_[::2], [(0, 24), (48, 24)], id="every other row"),
        pytest.param(np.s_[::-1], [(72, 24), (48, 24), (24, 24), (0, 24)], id="rows reversed"),
        pytest.param(np.s_[1, ::-1], [(44, 4), (40, 4), (36, 4), (32, 4), (28, 4), (24, 4)]),
        pytest.param(np.s_[:, ::2], [(o, 4) for o in range(0, 96, 8)], id="every other column"),
        pytest.param(np.s_[:, 1::2], [(o, 4) for o in range(4, 96, 8)]),
        pytest.param(np.s_[2:2], [], id="empty"),
        pytest.param(np.s_[..., 5], [(20, 4), (44, 4), (68, 4), (92, 4)], id="ellipsis first"),
        pytest.param((3, 5), [(92, 4)], id="one element"),
        pytest.param(np.s_[1:3, :], [(24, 48)], id="explicit whole trailing"),
        pytest.param(np.s_[0:4:1, 0:6], [(0, 96)], id="whole, spelled out"),
    ],
)
def test_examples(key: Any, expected: list[tuple[int, int]]) -> None:
    info, data = _file("F32", (4, 6))
    assert byte_ranges(info, key) == [(info.start + o, n) for o, n in expected]
    assert _fetch(data, byte_ranges(info, key)) == _expected(info, data, key)


def test_every_other_column_of_odd_width_merges_across_rows() -> None:
    # Row r's last selected element (column 2) touches row r + 1's first (column 0).
    info, _ = _file("U8", (2, 3))
    assert byte_ranges(info, np.s_[:, ::2]) == [
        (info.start, 1),
        (info.start + 2, 2),
        (info.start + 5, 1),
    ]


def test_tensor_parallel_shards_cover_the_weight() -> None:
    # Column-parallel: each of 4 ranks takes rows [r * 2, r * 2 + 2) of an (8, 16) weight.
    info, data = _file("BF16", (8, 16), at=24)
    shards = [byte_ranges(info, np.s_[r * 2 : r * 2 + 2]) for r in range(4)]
    assert all(len(ranges) == 1 for ranges in shards)
    assert b"".join(_fetch(data, ranges) for ranges in shards) == data[info.start : info.end]
    # Row-parallel: columns [r * 4, r * 4 + 4): one range of 8 bytes per row.
    ranges = byte_ranges(info, np.s_[:, 4:8])
    assert ranges == [(info.start + row * 32 + 8, 8) for row in range(8)]


def test_scalar_and_zero_size() -> None:
    scalar, _ = _file("F64", ())
    for key in ((), ..., (...,)):
        assert byte_ranges(scalar, key) == [(scalar.start, 8)]
    with pytest.raises(IndexError, match="0-dimensional, but 1 were indexed"):
        byte_ranges(scalar, 0)
    empty, _ = _file("F32", (0, 3))
    assert byte_ranges(empty, ...) == []
    assert byte_ranges(empty, np.s_[:, 1]) == []
    with pytest.raises(IndexError, match="out of bounds for axis 0 with size 0"):
        byte_ranges(empty, 0)


def test_numpy_integers_are_indices() -> None:
    info, _ = _file("F32", (4, 6))
    assert byte_ranges(info, (np.int64(1), slice(np.int32(0), np.uint8(2)))) == [
        (info.start + 24, 8)
    ]
    assert byte_ranges(info, np.array(-1)) == [(info.start + 72, 24)]  # as numpy: an int


@pytest.mark.parametrize(
    ("key", "error", "match"),
    [
        pytest.param(4, IndexError, "index 4 is out of bounds for axis 0 with size 4", id="int"),
        pytest.param(-5, IndexError, "index -5 is out of bounds", id="negative"),
        pytest.param((0, 6), IndexError, "axis 1 with size 6", id="second axis"),
        pytest.param((0, 0, 0), IndexError, "2-dimensional, but 3 were indexed", id="too many"),
        pytest.param((..., 0, ...), IndexError, "single ellipsis", id="two ellipses"),
        pytest.param(np.s_[::0], ValueError, "slice step cannot be zero", id="step 0"),
        pytest.param(None, TypeError, "newaxis", id="None"),
        pytest.param((0, None), TypeError, "newaxis", id="None in a tuple"),
        pytest.param((None, 0, 0), TypeError, "newaxis", id="None beyond the dimensions"),
        pytest.param([0, 1], TypeError, "not list", id="list"),
        pytest.param(np.array([0, 1]), TypeError, "not ndarray", id="array"),
        pytest.param(True, TypeError, "not bool", id="bool"),
        pytest.param(np.True_, TypeError, "advanced indexing", id="numpy bool"),
        pytest.param(np.array(False), TypeError, "advanced indexing", id="0-d bool array"),
        pytest.param(1.0, TypeError, "not float", id="float"),
        pytest.param("a", TypeError, "not str", id="str"),
        pytest.param(slice(0.5, 2), TypeError, "slice indices must be integers", id="slice"),
    ],
)
def test_bad_keys(key: Any, error: type[Exception], match: str) -> None:
    info, _ = _file("F32", (4, 6))
    with pytest.raises(error, match=match):
        byte_ranges(info, key)


# --- sub-byte dtypes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "shape", "key", "expected"),
    [
        pytest.param("F4", (4, 6), np.s_[1:3], [(3, 6)], id="F4 rows"),
        pytest.param("F4", (4, 6), np.s_[:, 2:4], [(1, 1), (4, 1), (7, 1), (10, 1)], id="F4"),
        pytest.param("F4", (4, 6), np.s_[::-1], [(9, 3), (6, 3), (3, 3), (0, 3)], id="F4 rev"),
        pytest.param("F4", (6,), np.s_[2:], [(1, 2)], id="F4 tail"),
        pytest.param("F6_E2M3", (2, 8), np.s_[1], [(6, 6)], id="F6 row"),
        pytest.param("F6_E3M2", (2, 8), np.s_[:, 4:], [(3, 3), (9, 3)], id="F6 half rows"),
        pytest.param("F6_E2M3", (4,), np.s_[...], [(0, 3)], id="F6 whole"),
    ],
)
def test_sub_byte_on_byte_boundaries(
    dtype: str, shape: tuple[int, ...], key: Any, expected: list[tuple[int, int]]
) -> None:
    info, _ = _file(dtype, shape, at=8)
    assert byte_ranges(info, key) == [(info.start + o, n) for o, n in expected]


@pytest.mark.parametrize(
    ("dtype", "shape", "key", "match"),
    [
        pytest.param("F4", (4, 6), np.s_[:, 1:3], r"1 to 2 \(in file order\), which st", id="F4"),
        pytest.param("F4", (4, 3), np.s_[1], "elements 3 to 5", id="F4 odd row"),
        pytest.param("F4", (4, 6), np.s_[:, 0], "which end inside a byte", id="F4 end"),
        pytest.param("F6_E2M3", (2, 8), np.s_[:, 2:6], "every 4 elements", id="F6"),
        pytest.param("F4", (4, 6), np.s_[:, ::2], "every 2 elements", id="F4 step"),
    ],
)  # fmt: skip
def test_sub_byte_inside_a_byte_is_refused(
    dtype: str, shape: tuple[int, ...], key: Any, match: str
) -> None:
    info, _ = _file(dtype, shape)
    with pytest.raises(ValueError, match=match) as caught:
        byte_ranges(info, key)
    assert f"has dtype {dtype}" in str(caught.value)


# --- properties: numpy is the oracle -------------------------------------------------------


def _index(size: int) -> Any:
    # Mostly in range, sometimes just out, to check that the errors agree with numpy's.
    return st.integers(-size - 1, size)


def _slice(size: int) -> Any:
    bound = st.none() | st.integers(-size - 1, size + 1)
    step = st.none() | st.sampled_from([1, 2, 3, -1, -2])
    any_slice = st.builds(slice, bound, bound, step)
    if size == 0:
        return any_slice
    # Mostly slices that select something: empty ones end the case too early.
    selecting = any_slice.filter(lambda s: len(range(*s.indices(size))) > 0)
    return selecting | selecting | any_slice


@st.composite
def _case(draw: Any) -> tuple[str, tuple[int, ...], tuple[Any, ...]]:
    dtype = draw(st.sampled_from([*_WHOLE_BYTE, "F4", "F6_E2M3"]))
    shape = draw(st.lists(st.integers(1, 5), max_size=4))
    if shape and draw(st.integers(0, 9)) == 0:
        shape[draw(st.integers(0, len(shape) - 1))] = 0  # now and then a zero-size tensor
    if dtype == "F4":
        shape.append(2)  # a whole number of bytes in total
    elif dtype == "F6_E2M3":
        shape.append(4)
    items: list[Any] = [draw(_slice(size) | _slice(size) | _index(size)) for size in shape]
    items = items[: draw(st.integers(0, len(items)))]
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return dtype, tuple(shape), tuple(items)


def _numpy_runs(shape: tuple[int, ...], key: Any) -> list[tuple[int, int]]:
    """Maximal runs of consecutive element indices, in the order of numpy's result."""
    order = np.arange(math.prod(shape)).reshape(shape)[key].ravel().tolist()
    runs: list[list[int]] = []
    for index in order:
        if runs and runs[-1][0] + runs[-1][1] == index:
            runs[-1][1] += 1
        else:
            runs.append([index, 1])
    return [(start, count) for start, count in runs]


@pytest.mark.slow
@hypothesis.settings(max_examples=300, deadline=None, derandomize=True, database=None)
@hypothesis.given(_case())
def test_matches_numpy(case: tuple[str, tuple[int, ...], tuple[Any, ...]]) -> None:
    dtype, shape, key = case
    info, data = _file(dtype, shape, at=3)
    try:
        runs = _numpy_runs(shape, key)
    except IndexError:
        with pytest.raises(IndexError):
            byte_ranges(info, key)
        return
    bits = DTYPE_BITS[dtype]
    if any(start * bits % 8 or count * bits % 8 for start, count in runs):
        with pytest.raises(ValueError, match="inside a byte"):
            byte_ranges(info, key)
        return
    ranges = byte_ranges(info, key)
    assert ranges == [(info.start + s * bits // 8, n * bits // 8) for s, n in runs]
    _assert_minimal(ranges)
    if bits % 8 == 0:
        assert _fetch(data, ranges) == _expected(info, data, key)


def test_matches_the_reference_get_slice(tmp_path: Any) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    from safetensors import safe_open

    weight = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    path = tmp_path / "w.safetensors"
    safetensors_numpy.save_file({"b": np.zeros(3, np.int8), "w": weight}, str(path))
    data = path.read_bytes()
    info = parse_header(data, file_size=len(data)).tensors["w"]
    keys = [np.s_[1:3], np.s_[:, 2:4], np.s_[1], np.s_[..., 1], np.s_[::2], np.s_[-1, 1:]]
    with safe_open(str(path), "np") as file:
        view = file.get_slice("w")
        for key in keys:
            assert _fetch(data, byte_ranges(info, key)) == view[key].tobytes(), key


def test_the_method_delegates() -> None:
    info, _ = _file("F32", (4, 6))
    assert info.byte_ranges(np.s_[:, 2:4]) == byte_ranges(info, np.s_[:, 2:4])


def test_many_dimensions_take_linear_time() -> None:
    # A valid header of 150,000 dimensions (2, then ones, then 3) and keys that leave the last
    # dimension partly selected, so that every dimension before it counts. A product per axis
    # made this quadratic: 40,000 dimensions took 4.7 s, these would take over a minute. The
    # subprocess's timeout is the test; the answer is checked too.
    code = """
        from safetensors_header import parse_header
        dims = 150_000
        text = '{"a":{"dtype":"U8","shape":[2,' + '1,' * (dims - 2) + '3],"data_offsets":[0,6]}}'
        data = len(text).to_bytes(8, "little") + text.encode() + bytes(6)
        a = parse_header(data, file_size=len(data)).tensors["a"]
        start = a.start
        assert a.byte_ranges((..., 0)) == [(start, 1), (start + 3, 1)]
        assert a.byte_ranges((..., slice(1, None))) == [(start + 1, 2), (start + 4, 2)]
        assert a.byte_ranges((1, ..., -1)) == [(start + 5, 1)]
        assert a.byte_ranges((slice(None, None, -1), ..., 2)) == [(start + 5, 1), (start + 2, 1)]
    """
    result = run_child(code)
    assert result.returncode == 0, result.stderr
