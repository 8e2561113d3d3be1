"""A tensor's bytes as a Zarr array: its data type, and the chunk grids that keep every chunk
one byte range of the file.

Layer: core (sans-IO, with the format's facts). A chunk shape of the form
``(1, ..., 1, c_k, d_{k+1}, ..., d_n)`` with ``c_k`` dividing ``d_k`` cuts the tensor into
equal pieces that follow each other in the file: chunk ``j`` of the grid (in C order) is the
bytes ``start + j * size`` to ``start + (j + 1) * size``. Such chunks need no copy and no
codec, so a Zarr array of them is still the file's bytes. Any other chunk shape either takes
bytes that are not next to each other or, when it does not divide its axis, pads the last
chunk past the end of the tensor (a reader then asks for bytes the file does not have).
Zarr's choice of a chunk shape for a size is `zarr.auto_chunk_shape`'s.
"""

from __future__ import annotations

import math
import operator
from itertools import product

from ._core.fileformat import DTYPE_BITS, DTYPES
from ._encode import TYPE_NAMES

__all__ = ["ZARR_TYPES", "ZARR_V2_TYPES", "check_chunk_shape", "chunk_grid", "chunk_ranges"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Final

    from ._core.geometry import Placed

#: Each safetensors dtype's Zarr v3 ``data_type``: the real type where Zarr has one (numpy's),
#: else an unsigned integer of the same width (BF16 as ``"uint16"``, F8 as ``"uint8"``) and,
#: for the packed sub-byte types, ``"uint8"`` bytes.
ZARR_TYPES: Final = {
    name: TYPE_NAMES[name] if dtype.numpy is not None else f"uint{max(dtype.bits, 8)}"
    for name, dtype in DTYPES.items()
}
# Each numpy type's type string, by its name: the format table's (`Dtype.numpy`).
_NUMPY: Final = {TYPE_NAMES[name]: dtype.numpy for name, dtype in DTYPES.items() if dtype.numpy}
#: The same as Zarr v2 (numpy) type strings; one-byte types as ``"|u1"``, the only form
#: zarr-python 3 accepts for them.
ZARR_V2_TYPES: Final = {dtype: _NUMPY[name] for dtype, name in ZARR_TYPES.items()}


def check_chunk_shape(info: Placed, chunk_shape: Sequence[int], /) -> tuple[int, ...]:
    """`chunk_shape` as a tuple, if it cuts `info` into contiguous chunks; else ValueError.

    The message says why: the wrong number of dimensions, a size that is not a positive
    integer, a size that does not divide its axis, an axis before the partial one that is not
    1, or (F4, F6_*) a chunk that does not hold whole bytes. A zero-size tensor has no chunk,
    so any positive sizes of the right rank are accepted for it.
    """
    shape = info.shape
    try:
        given = list(chunk_shape)
        sizes = tuple(map(operator.index, given))
        if any(isinstance(size, bool) for size in given):
            raise TypeError
    except TypeError:
        raise ValueError(
            f"chunk shape {chunk_shape!r} for tensor {info.name!r} {list(shape)!r}: "
            "expected a sequence of integers"
        ) from None
    where = f"chunk shape {list(sizes)!r} for tensor {info.name!r} {list(shape)!r}"
    if len(sizes) != len(shape):
        raise ValueError(
            f"{where}: {len(sizes)} dimension{'' if len(sizes) == 1 else 's'}, "
            f"the tensor has {len(shape)}"
        )
    if any(size < 1 for size in sizes):
        raise ValueError(f"{where}: every size must be at least 1")
    if 0 in shape:
        return sizes  # no chunk at all: nothing to be contiguous
    last = _last_partial_axis(shape, sizes)
    if last < 0:
        return sizes  # the whole tensor
    if shape[last] % sizes[last]:
        raise ValueError(
            f"{where}: {sizes[last]} does not divide axis {last} ({shape[last]}), so the last "
            "chunk would be padded and read past the tensor's bytes"
        )
    for axis in range(last):
        if sizes[axis] != 1:
            raise ValueError(
                f"{where}: axis {last} is cut ({sizes[last]} of {shape[last]}), so every axis "
                f"before it must take 1, not {sizes[axis]} (axis {axis}); otherwise a chunk "
                "is not one contiguous byte range"
            )
    bits = math.prod(sizes) * DTYPE_BITS[info.dtype]
    if bits % 8:
        raise ValueError(
            f"{where}: a chunk of {math.prod(sizes):,} {info.dtype} values is {bits:,} bits; "
            "packed dtypes must be cut into whole bytes"
        )
    return sizes


def chunk_grid(info: Placed, chunk_shape: tuple[int, ...], /) -> tuple[tuple[int, ...], int]:
    """The grid's shape and the bytes of each chunk, for a valid `chunk_shape`.

    A zero-size tensor has a grid with no chunk (0 along its empty axes).
    """
    grid = tuple(-(-size // chunk) for size, chunk in zip(info.shape, chunk_shape, strict=True))
    return grid, math.prod(chunk_shape) * DTYPE_BITS[info.dtype] // 8


def chunk_ranges(
    info: Placed, chunk_shape: Sequence[int] | None = None, /
) -> Iterator[tuple[tuple[int, ...], int, int]]:
    """``(grid index, absolute offset, length)`` of every chunk, in file order.

    `chunk_shape` defaults to the whole tensor (one chunk); it is validated first.
    """
    if chunk_shape is None:
        sizes = tuple(max(size, 1) for size in info.shape)  # a zero-size tensor has no chunk
    else:
        sizes = check_chunk_shape(info, chunk_shape)
    grid, length = chunk_grid(info, sizes)
    start = info.start
    for number, index in enumerate(product(*map(range, grid))):
        yield index, start + number * length, length


def _last_partial_axis(shape: tuple[int, ...], sizes: tuple[int, ...]) -> int:
    for axis in reversed(range(len(shape))):
        if sizes[axis] != shape[axis]:
            return axis
    return -1
