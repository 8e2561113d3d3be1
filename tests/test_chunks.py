"""Contiguous chunkings: TensorInfo.chunks and the chunk shape chosen for a size in bytes."""

from __future__ import annotations

import math
from itertools import islice, product

import pytest
from helpers import bounded, run_child
from hypothesis import assume, given
from hypothesis import strategies as st

from safetensors_header import DTYPES, TensorInfo
from safetensors_header.zarr import chunk_ranges, chunk_shape


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
    assert list(chunk_ranges(info)) == [((0, 0), info.start, 48)]
    assert list(chunk_ranges(info, (3, 4))) == [((0, 0), info.start, 48)]


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
    chunks = list(chunk_ranges(info, sizes))
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
        list(chunk_ranges(info, sizes))  # type: ignore[arg-type]
    if not isinstance(sizes, int):  # in a mapping, an int is a target size (below)
        with pytest.raises(ValueError, match=why):
            chunk_shape(info, chunks={"t": sizes})  # type: ignore[dict-item]


def test_packed_chunks_hold_whole_bytes() -> None:
    info = _info("F4", (4, 6))  # 24 values of 4 bits: 12 bytes
    assert [(offset, size) for _, offset, size in chunk_ranges(info, (1, 2))] == [
        (info.start + j, 1) for j in range(12)
    ]
    with pytest.raises(ValueError, match="a chunk of 3 F4 values is 12 bits"):
        list(chunk_ranges(info, (1, 3)))
    six = _info("F6_E2M3", (8,))  # 48 bits: 6 bytes; 4 values are 3 bytes
    assert [size for _, _, size in chunk_ranges(six, (4,))] == [3, 3]
    with pytest.raises(ValueError, match="is 12 bits"):
        list(chunk_ranges(six, (2,)))


def test_scalars_and_zero_size_tensors() -> None:
    scalar = _info("F64", ())
    assert list(chunk_ranges(scalar)) == [((), scalar.start, 8)]
    assert list(chunk_ranges(scalar, ())) == [((), scalar.start, 8)]
    empty = _info("F32", (0, 3))
    assert list(chunk_ranges(empty)) == []
    assert list(chunk_ranges(empty, (5, 2))) == []  # no chunk, so no chunk can be wrong
    with pytest.raises(ValueError, match="at least 1"):
        list(chunk_ranges(empty, (0, 3)))
    with pytest.raises(ValueError, match="1 dimension"):
        list(chunk_ranges(empty, (3,)))


def test_every_contiguous_chunking_is_accepted_and_nothing_else() -> None:
    for dtype in ("U8", "F4", "F6_E3M2"):
        for shape in [(4,), (6,), (2, 4), (3, 2), (2, 2, 3), (4, 1, 2)]:
            if math.prod(shape) * DTYPES[dtype].bits % 8:
                continue  # not a valid tensor
            info = _info(dtype, shape)
            for sizes in _all_chunk_shapes(shape):
                expected = _is_contiguous(shape, sizes, DTYPES[dtype].bits)
                try:
                    list(chunk_ranges(info, sizes))
                except ValueError:
                    assert not expected, (dtype, shape, sizes)
                else:
                    assert expected, (dtype, shape, sizes)


# --- chunk_shape: a target in bytes --------------------------------------------------------


def _expected_chunk_bytes(sizes: list[int], nbytes: int, target: int) -> int:
    """The rule, from the sizes of every contiguous chunking: the largest not above the
    target if it is at least a quarter of it, else the smallest above it."""
    fitting = [size for size in sizes if size <= target]
    if fitting and (4 * max(fitting) >= target or nbytes <= target):
        return max(fitting)
    return min(size for size in sizes if size > target)


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
        pytest.param("U8", (6, 7), id="a-prime-row"),
        pytest.param("F32", (3, 7, 2), id="3d-primes"),
    ],
)
def test_a_target_gets_the_nearest_contiguous_chunking_never_below_a_quarter(
    dtype: str, shape: tuple[int, ...]
) -> None:
    info = _info(dtype, shape)
    bits = DTYPES[dtype].bits
    valid = {
        sizes: math.prod(sizes) * bits // 8
        for sizes in _all_chunk_shapes(shape)
        if _is_contiguous(shape, sizes, bits)
    }
    for target in range(1, info.nbytes + 3):
        sizes = chunk_shape(info, chunks=target)
        assert sizes in valid
        assert valid[sizes] == _expected_chunk_bytes(list(valid.values()), info.nbytes, target)
        assert 4 * valid[sizes] >= target or sizes == shape, target


# Tensors of real models whose first axis has no divisor near a MiB-sized target: MiniLM's
# embedding (30,522 = 2 x 3 x 5,087 rows of 1.5 KiB), Llama 3's (128,256 = 2**8 x 3 x 167
# rows of 8 KiB), GPT-2's (50,257 = 29 x 1,733 rows of 3 KiB), and a small 3-d tensor.
@pytest.mark.parametrize(
    ("dtype", "shape", "target", "expected"),
    [
        pytest.param("F32", (30522, 384), 1 << 20, (5087, 384), id="minilm-1MiB"),
        pytest.param("F32", (30522, 384), 4 << 20, (5087, 384), id="minilm-4MiB"),
        pytest.param("BF16", (128256, 4096), 1 << 20, (128, 4096), id="llama-1MiB"),
        pytest.param("BF16", (128256, 4096), 4 << 20, (501, 4096), id="llama-4MiB"),
        pytest.param("F32", (50257, 768), 1 << 20, (1733, 768), id="gpt2-1MiB"),
        pytest.param("F32", (50257, 768), 64 << 10, (29, 768), id="gpt2-64KiB"),
        pytest.param("F32", (3, 5087, 7), 1 << 20, (3, 5087, 7), id="3d-1MiB-smaller"),
        pytest.param("F32", (3, 5087, 7), 4 << 20, (3, 5087, 7), id="3d-4MiB-smaller"),
        pytest.param("F64", (3, 5087, 7), 1 << 20, (3, 5087, 7), id="3d-f64-1MiB-smaller"),
        pytest.param("F32", (3, 5087, 7), 64 << 10, (1, 5087, 7), id="3d-64KiB"),
        pytest.param("F32", (3, 5087, 7), 16 << 10, (1, 5087, 7), id="3d-16KiB"),
        pytest.param("F4", (3, 5087, 14), 64 << 10, (1, 5087, 14), id="3d-f4-64KiB"),
    ],
)
def test_targets_on_real_shapes_give_no_tiny_chunks(
    dtype: str, shape: tuple[int, ...], target: int, expected: tuple[int, ...]
) -> None:
    info = _info(dtype, shape)
    sizes = chunk_shape(info, chunks=target)
    assert sizes == expected
    chunks = list(chunk_ranges(info, sizes))
    assert all(4 * length >= min(target, 4 * info.nbytes) for _, _, length in chunks)
    assert sum(length for _, _, length in chunks) == info.nbytes


_DTYPE_NAMES = sorted(DTYPES)


@bounded(400)
@given(
    dtype=st.sampled_from(_DTYPE_NAMES),
    shape=st.lists(st.integers(1, 3000), min_size=1, max_size=4).map(tuple),
    target=st.integers(1, 1 << 24),
)
def test_a_target_never_gives_chunks_below_a_quarter_of_it(
    dtype: str, shape: tuple[int, ...], target: int
) -> None:
    bits = DTYPES[dtype].bits
    assume(math.prod(shape) * bits % 8 == 0)  # a valid tensor holds whole bytes
    info = _info(dtype, shape)
    sizes = chunk_shape(info, chunks=target)
    # Validated (contiguous, dividing, whole bytes), and the chunks tile the tensor: the
    # grid's count of equal chunks, one after the other (the first thousand looked at).
    chunks = chunk_ranges(info, sizes)
    grid = tuple(size // chunk for size, chunk in zip(shape, sizes, strict=True))
    length = math.prod(sizes) * bits // 8
    assert math.prod(grid) * length == info.nbytes
    first = list(islice(chunks, 1000))
    assert [index for index, _, _ in first] == list(islice(product(*map(range, grid)), 1000))
    assert [(offset, size) for _, offset, size in first] == [
        (info.start + j * length, length) for j in range(len(first))
    ]
    if info.nbytes <= target:
        assert sizes == shape  # one chunk
    else:
        assert 4 * length >= target
        # Above the target only when no contiguous chunk lies in [target / 4, target]: the
        # largest chunk not above the target on each axis is below a quarter of it.
        if length > target:
            for axis in range(len(shape)):
                tail = math.prod(shape[axis + 1 :])
                for count in range(1, shape[axis] + 1):
                    candidate = count * tail * bits
                    if shape[axis] % count or candidate % 8:
                        continue
                    assert not target <= 4 * (candidate // 8) <= 4 * target, (axis, count)
                    if candidate // 8 > target:
                        assert candidate // 8 >= length, (axis, count)
                        break


def test_targets_on_scalars_and_zero_size_tensors() -> None:
    assert chunk_shape(_info("F64", ()), chunks=1) == ()
    assert chunk_shape(_info("F32", (0, 3)), chunks=1) == (1, 3)  # no chunk; Zarr wants sizes >= 1
    assert chunk_shape(_info("F32", (0, 3)), chunks=None) == (1, 3)


def test_a_huge_prime_axis_is_searched_a_bounded_time() -> None:
    # A claimed axis of a Mersenne prime: the search is bounded (the subprocess ends, or its
    # timeout fails the test) and still gives a divisor: the whole axis, as no other is near.
    code = (
        "from safetensors_header import TensorInfo\n"
        "from safetensors_header.zarr import chunk_shape\n"
        "huge = TensorInfo('t', 'U8', (2**61 - 1,), 8, 8 + 2**61 - 1, 8)\n"
        "print(chunk_shape(huge, chunks=1 << 20))\n"
    )
    done = run_child(code, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"({2**61 - 1},)"


@pytest.mark.parametrize("target", [0, -1, True, 1.5, "1"], ids=repr)
def test_a_target_must_be_a_positive_int(target: object) -> None:
    with pytest.raises(ValueError, match=r"at least 1 byte|a size in bytes|sequence of integers"):
        chunk_shape(_info("F32", (4,)), chunks=target)  # type: ignore[arg-type]


def test_a_mapping_names_its_tensors() -> None:
    info = _info("F32", (4, 2))
    assert chunk_shape(info, chunks={"t": (1, 2)}) == (1, 2)
    assert chunk_shape(info, chunks={"other": (1, 1)}) == (4, 2)  # not named: one chunk
    assert chunk_shape(info, chunks={"t": 8}) == (1, 2)  # a target of its own
