"""Contiguous chunkings: TensorInfo.chunks and the chunk shape chosen for a size in bytes."""

from __future__ import annotations

import math
import time
from itertools import product

import pytest

from safetensors_header import DTYPES, TensorInfo
from safetensors_header.zarr import chunk_shape


def _info(dtype: str, shape: tuple[int, ...], start: int = 1000) -> TensorInfo:
    nbytes = math.prod(shape) * DTYPES[dtype].bits // 8
    return TensorInfo("t", dtype, shape, start, start + nbytes, 992)


def _is_contiguous(shape: tuple[int, ...], sizes: tuple[int, ...], bits: int) -> bool:
    """The rule, written the other way round: the chunk's elements are one run in C order."""
    if 0 in shape:
        return True
    numel = math.prod(sizes)
    # The elements of chunk 0, as flat C-order offsets; contiguous if they are 0..numel-1.
    strides = [math.prod(shape[axis + 1 :]) for axis in range(len(shape))]
    flat = sorted(
        sum(i * s for i, s in zip(index, strides, strict=True))
        for index in product(*map(range, sizes))
    )
    divides = all(size % chunk == 0 for size, chunk in zip(shape, sizes, strict=True))
    return divides and flat == list(range(numel)) and numel * bits % 8 == 0


def _all_chunk_shapes(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    return list(product(*(range(1, size + 1) for size in shape)))


# --- TensorInfo.chunks -----------------------------------------------------------------------


def test_one_chunk_by_default() -> None:
    info = _info("F32", (3, 4))
    assert list(info.chunks()) == [((0, 0), info.start, 48)]
    assert list(info.chunks((3, 4))) == [((0, 0), info.start, 48)]


@pytest.mark.parametrize(
    ("shape", "sizes"),
    [
        pytest.param((6,), (2,), id="1d-halves"),
        pytest.param((6,), (1,), id="1d-elements"),
        pytest.param((3, 4), (1, 4), id="rows"),
        pytest.param((3, 4), (1, 2), id="half-rows"),
        pytest.param((4, 3, 2), (2, 3, 2), id="blocks-of-2"),
        pytest.param((4, 3, 2), (1, 3, 2), id="blocks-of-1"),
        pytest.param((4, 3, 2), (1, 1, 2), id="rows-of-a-block"),
        pytest.param((4, 3, 2), (1, 1, 1), id="elements"),
        pytest.param((1, 5, 1), (1, 5, 1), id="unit-axes"),
        pytest.param((2, 1, 6), (1, 1, 3), id="unit-axis-before-the-cut"),
    ],
)
def test_chunks_are_the_grid_in_file_order(shape: tuple[int, ...], sizes: tuple[int, ...]) -> None:
    np = pytest.importorskip("numpy")
    info = _info("I16", shape)
    data = np.arange(math.prod(shape), dtype="<i2").reshape(shape)
    raw = bytes(info.start) + data.tobytes()  # the file: the tensor at info.start
    chunks = list(info.chunks(sizes))
    grid = tuple(size // chunk for size, chunk in zip(shape, sizes, strict=True))
    assert [index for index, _, _ in chunks] == list(product(*map(range, grid)))
    length = math.prod(sizes) * 2
    assert [(offset, size) for _, offset, size in chunks] == [
        (info.start + j * length, length) for j in range(len(chunks))
    ]
    for index, offset, size in chunks:
        block = data[tuple(slice(i * c, (i + 1) * c) for i, c in zip(index, sizes, strict=True))]
        assert raw[offset : offset + size] == block.tobytes()


@pytest.mark.parametrize(
    ("shape", "sizes", "why"),
    [
        pytest.param((3, 4), (2, 4), "2 does not divide axis 0 \\(3\\)", id="padded-last-chunk"),
        pytest.param((3, 4), (1, 3), "3 does not divide axis 1 \\(4\\)", id="padded-last-column"),
        pytest.param((3, 4), (3, 5), "5 does not divide axis 1", id="larger-than-the-axis"),
        pytest.param(
            (3, 4), (3, 2), "axis 1 is cut .* not 3 \\(axis 0\\)", id="not-contiguous-rows"
        ),
        pytest.param(
            (4, 3, 2), (2, 1, 2), "every axis before it must take 1", id="not-contiguous-blocks"
        ),
        pytest.param((3, 4), (4,), "1 dimension, the tensor has 2", id="too-few-dims"),
        pytest.param((3, 4), (1, 1, 4), "3 dimensions, the tensor has 2", id="too-many-dims"),
        pytest.param((3, 4), (0, 4), "at least 1", id="zero"),
        pytest.param((3, 4), (-1, 4), "at least 1", id="negative"),
        pytest.param((3, 4), (1.0, 4), "a sequence of integers", id="float"),
        pytest.param((3, 4), (True, 4), "a sequence of integers", id="bool"),
        pytest.param((3, 4), 4, "a sequence of integers", id="an-int"),
        pytest.param((), (1,), "1 dimension, the tensor has 0", id="scalar-given-a-dim"),
    ],
)
def test_invalid_chunk_shapes_say_why(shape: tuple[int, ...], sizes: object, why: str) -> None:
    info = _info("F32", shape)
    with pytest.raises(ValueError, match=why):
        list(info.chunks(sizes))  # type: ignore[arg-type]
    if not isinstance(sizes, int):  # in a mapping, an int is a target size (below)
        with pytest.raises(ValueError, match=why):
            chunk_shape(info, chunks={"t": sizes})  # type: ignore[dict-item]


def test_packed_chunks_hold_whole_bytes() -> None:
    info = _info("F4", (4, 6))  # 24 values of 4 bits: 12 bytes
    assert [(offset, size) for _, offset, size in info.chunks((1, 2))] == [
        (info.start + j, 1) for j in range(12)
    ]
    with pytest.raises(ValueError, match="a chunk of 3 F4 values is 12 bits"):
        list(info.chunks((1, 3)))
    six = _info("F6_E2M3", (8,))  # 48 bits: 6 bytes; 4 values are 3 bytes
    assert [size for _, _, size in six.chunks((4,))] == [3, 3]
    with pytest.raises(ValueError, match="is 12 bits"):
        list(six.chunks((2,)))


def test_scalars_and_zero_size_tensors() -> None:
    scalar = _info("F64", ())
    assert list(scalar.chunks()) == [((), scalar.start, 8)]
    assert list(scalar.chunks(())) == [((), scalar.start, 8)]
    empty = _info("F32", (0, 3))
    assert list(empty.chunks()) == []
    assert list(empty.chunks((5, 2))) == []  # no chunk, so no chunk can be wrong
    with pytest.raises(ValueError, match="at least 1"):
        list(empty.chunks((0, 3)))
    with pytest.raises(ValueError, match="1 dimension"):
        list(empty.chunks((3,)))


def test_every_contiguous_chunking_is_accepted_and_nothing_else() -> None:
    for dtype in ("U8", "F4", "F6_E3M2"):
        for shape in [(4,), (6,), (2, 4), (3, 2), (2, 2, 3), (4, 1, 2)]:
            if math.prod(shape) * DTYPES[dtype].bits % 8:
                continue  # not a valid tensor
            info = _info(dtype, shape)
            for sizes in _all_chunk_shapes(shape):
                expected = _is_contiguous(shape, sizes, DTYPES[dtype].bits)
                try:
                    list(info.chunks(sizes))
                except ValueError:
                    assert not expected, (dtype, shape, sizes)
                else:
                    assert expected, (dtype, shape, sizes)


# --- chunk_shape: a target in bytes --------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "shape"),
    [
        pytest.param("F32", (12,), id="1d"),
        pytest.param("BF16", (3, 4), id="2d"),
        pytest.param("U8", (4, 3, 2), id="3d"),
        pytest.param("I64", (2, 5, 1), id="unit-axis"),
        pytest.param("F4", (4, 6), id="f4"),
        pytest.param("F6_E2M3", (4, 4), id="f6"),
        pytest.param("F16", (7, 11), id="primes"),
    ],
)
def test_a_target_gets_the_largest_contiguous_chunking_not_above_it(
    dtype: str, shape: tuple[int, ...]
) -> None:
    info = _info(dtype, shape)
    bits = DTYPES[dtype].bits
    valid = {
        sizes: math.prod(sizes) * bits // 8
        for sizes in _all_chunk_shapes(shape)
        if _is_contiguous(shape, sizes, bits)
    }
    smallest = min(valid.values())
    for target in range(1, info.nbytes + 3):
        sizes = chunk_shape(info, chunks=target)
        assert sizes in valid
        fitting = [size for size in valid.values() if size <= target]
        assert valid[sizes] == (max(fitting) if fitting else smallest), target


def test_targets_on_scalars_zero_size_and_huge_axes() -> None:
    assert chunk_shape(_info("F64", ()), chunks=1) == ()
    assert chunk_shape(_info("F32", (0, 3)), chunks=1) == (1, 3)  # no chunk; Zarr wants sizes >= 1
    assert chunk_shape(_info("F32", (0, 3)), chunks=None) == (1, 3)
    # An embedding of 50,257 rows (29 x 1,733) of 3 KiB, with a 1 MiB target: 29 rows.
    assert chunk_shape(_info("F32", (50257, 768)), chunks=1 << 20) == (29, 768)
    # A claimed axis of a Mersenne prime: the search is bounded and still gives a divisor.
    huge = TensorInfo("t", "U8", (2**61 - 1,), 8, 8 + 2**61 - 1, 8)
    began = time.perf_counter()
    assert chunk_shape(huge, chunks=1 << 20) == (1,)
    assert time.perf_counter() - began < 5


@pytest.mark.parametrize("target", [0, -1, True, 1.5, "1"], ids=repr)
def test_a_target_must_be_a_positive_int(target: object) -> None:
    with pytest.raises(ValueError, match=r"at least 1 byte|a size in bytes|sequence of integers"):
        chunk_shape(_info("F32", (4,)), chunks=target)  # type: ignore[arg-type]


def test_a_mapping_names_its_tensors() -> None:
    info = _info("F32", (4, 2))
    assert chunk_shape(info, chunks={"t": (1, 2)}) == (1, 2)
    assert chunk_shape(info, chunks={"other": (1, 1)}) == (4, 2)  # not named: one chunk
    assert chunk_shape(info, chunks={"t": 8}) == (1, 2)  # a target of its own
