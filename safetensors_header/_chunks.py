"""Contiguous chunkings of a tensor: a regular grid whose every chunk is one byte range.

A tensor's data is one C-order block, so a chunk shape of the form
``(1, ..., 1, c_k, d_{k+1}, ..., d_n)`` with ``c_k`` dividing ``d_k`` cuts it into equal
pieces that follow each other in the file: chunk ``j`` of the grid (in C order) is the bytes
``start + j * size`` to ``start + (j + 1) * size``. Such chunks need no copy and no codec, so a
Zarr array of them is still the file's bytes. Any other chunk shape either takes bytes that are
not next to each other or, when it does not divide its axis, pads the last chunk past the end of
the tensor (a reader then asks for bytes the file does not have).
"""

from __future__ import annotations

import math
import operator
from itertools import product

from ._format import DTYPE_BITS

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Final

    from ._header import TensorInfo

__all__ = ["auto_chunk_shape", "check_chunk_shape", "chunk_grid", "iter_chunks"]

# The divisor search tries at most this many candidates per axis. Dimensions of real files are
# far below 2**40, where the search always ends sooner; past it (a header that claims a huge
# tensor) the result is still a divisor, maybe not the largest one under the target.
_MAX_DIVISOR_TRIES: Final = 1 << 20


def check_chunk_shape(info: TensorInfo, chunk_shape: Sequence[int], /) -> tuple[int, ...]:
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


def chunk_grid(info: TensorInfo, chunk_shape: tuple[int, ...], /) -> tuple[tuple[int, ...], int]:
    """The grid's shape and the bytes of each chunk, for a valid `chunk_shape`.

    A zero-size tensor has a grid with no chunk (0 along its empty axes).
    """
    grid = tuple(-(-size // chunk) for size, chunk in zip(info.shape, chunk_shape, strict=True))
    return grid, math.prod(chunk_shape) * DTYPE_BITS[info.dtype] // 8


def iter_chunks(
    info: TensorInfo, chunk_shape: Sequence[int] | None = None, /
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


def auto_chunk_shape(info: TensorInfo, target: int, /) -> tuple[int, ...]:
    """The contiguous chunk shape with the most bytes not above `target` (in bytes).

    When no chunk fits, the smallest there is: one element, or for the packed dtypes the
    fewest elements that fill whole bytes. A tensor at most `target` bytes is one chunk; a
    scalar is always one; a zero-size tensor, which has no chunk, gets its shape with 0s
    made 1 (Zarr's chunk sizes are at least 1).
    """
    shape = info.shape
    if 0 in shape:
        return tuple(max(size, 1) for size in shape)
    if not shape:
        return ()
    bits = DTYPE_BITS[info.dtype]
    budget = target * 8  # in bits, for the packed dtypes
    best: tuple[int, int, int] | None = None  # (bits, axis, size) of the largest that fits
    smallest: tuple[int, int, int] | None = None
    tail = 1  # elements after `axis`
    for axis in reversed(range(len(shape))):
        unit = tail * bits  # the bits of a chunk that takes 1 on `axis`
        step = 8 // math.gcd(unit, 8)  # sizes on `axis` must be multiples of it: whole bytes
        length = shape[axis]
        if length % step == 0:
            low = (step * unit, axis, step)
            smallest = low if smallest is None or low[0] < smallest[0] else smallest
            count = budget // (step * unit)
            if count >= 1:
                size = step * _largest_divisor_at_most(length // step, count)
                if best is None or size * unit > best[0]:
                    best = (size * unit, axis, size)
        tail *= length
    assert smallest is not None  # the first axis always qualifies: the whole tensor's bytes
    _, axis, size = best or smallest
    return (1,) * axis + (size,) + shape[axis + 1 :]


def _last_partial_axis(shape: tuple[int, ...], sizes: tuple[int, ...]) -> int:
    for axis in reversed(range(len(shape))):
        if sizes[axis] != shape[axis]:
            return axis
    return -1


def _largest_divisor_at_most(number: int, limit: int) -> int:
    """The largest divisor of `number` (>= 1) that is at most `limit` (>= 1)."""
    if limit >= number:
        return number
    best = 1
    # Divisors pair up as (i, number // i) with i <= sqrt(number); the large halves shrink as
    # i grows, so the first that fits is the largest of them, and above every small half.
    for tries, small in enumerate(range(1, math.isqrt(number) + 1)):
        if tries >= _MAX_DIVISOR_TRIES:
            break
        if number % small:
            continue
        if number // small <= limit:
            return number // small
        if small <= limit:
            best = small
        else:
            break  # every later small half is larger still, and no large half fits yet
    return best
