"""Which bytes of the file hold a part of a tensor: the ranges of a slice, and chunk grids.

Layer: core (sans-IO). The data of a safetensors tensor is stored in C (row-major) order,
little-endian, packed. Two questions about it are answered here, from a tensor's place in
the file (its name, dtype, shape and first byte: any object with those attributes, such as
`TensorInfo`) and nothing else:

* `byte_ranges`: a selection by basic indexing (ints, slices, ``...``) is a set of runs of
  consecutive elements, each one byte range of the file: what a tensor-parallel loader
  fetches to read its shard of a weight without the rest;
* contiguous chunkings (`check_chunk_shape`, `chunk_grid`, `iter_chunks`; Zarr's choice
  of one for a size is `zarr.auto_chunk_shape`'s): a chunk shape of the form
  ``(1, ..., 1, c_k, d_{k+1}, ..., d_n)`` with ``c_k`` dividing ``d_k`` cuts the tensor into
  equal pieces that follow each other in the file: chunk ``j`` of the grid (in C order) is
  the bytes ``start + j * size`` to ``start + (j + 1) * size``. Such chunks need no copy
  and no codec, so a Zarr array of them is still the file's bytes. Any other chunk shape
  either takes bytes that are not next to each other or, when it does not divide its axis,
  pads the last chunk past the end of the tensor (a reader then asks for bytes the file
  does not have).
"""

from __future__ import annotations

import math
import operator
from itertools import product
from typing import SupportsIndex

from .fileformat import DTYPE_BITS

__all__ = ["byte_ranges", "check_chunk_shape", "chunk_grid", "iter_chunks", "selected"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Protocol

    class Placed(Protocol):
        """A tensor's place in the file: what `TensorInfo` has (and all this module needs)."""

        @property
        def name(self) -> str: ...
        @property
        def dtype(self) -> str: ...
        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def start(self) -> int: ...


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


def iter_chunks(
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


# --- the byte ranges of a selection ----------------------------------------------------


def byte_ranges(tensor: Placed, key: object, /) -> list[tuple[int, int]]:
    """The byte ranges of the file that hold ``tensor[key]``, as ``(offset, length)`` pairs.

    Args:
        tensor: The tensor, as read from the header.
        key: An index as in ``array[key]`` with numpy's basic indexing: an ``int``
            (negative counts from the end), a ``slice`` (any step, negative too), ``...``,
            or a tuple of these, applied to the leading dimensions (missing trailing indices
            mean the whole dimension). ``numpy.s_[0, ::2]`` builds such a tuple.

    Returns:
        ``(absolute file offset, length in bytes)`` pairs, in the order in which their
        elements appear in ``tensor[key]``, neighbours that touch merged into one: reading
        the ranges in list order and joining the bytes gives ``tensor[key]`` in C order,
        exactly (``numpy.ascontiguousarray(a[key]).tobytes()``). With a negative step the
        elements come backwards; a range is never reversed, so runs that are adjacent in the
        file but come in reverse order stay separate ranges (a step of -1 over the first
        dimension gives one range per row, last row first). An empty selection gives ``[]``;
        the whole of a non-empty tensor gives ``[(tensor.start, tensor.nbytes)]``.

    Raises:
        IndexError: An int is out of range for its dimension, more indices than dimensions,
            or two ``...``.
        TypeError: An index numpy would treat as advanced indexing (a list, an array, a
            bool) or as a new axis (``None``), or anything else that is not an int, a slice
            or ``...``.
        ValueError: A slice step of zero; or a sub-byte dtype (``F4``, ``F6_*``) where a
            range would start or end inside a byte.
    """
    return selected(tensor, key)[0]


def selected(tensor: Placed, key: object, /) -> tuple[list[tuple[int, int]], tuple[int, ...]]:
    """`byte_ranges` of ``tensor[key]``, and the shape of ``tensor[key]`` (numpy's: the
    dimensions indexed by an int are dropped)."""
    shape = tensor.shape
    selection, kept = _select(tensor.name, shape, key)
    result = tuple(len(selection[axis]) for axis in kept)
    if any(len(r) == 0 for r in selection):
        return [], result
    return _to_bytes(tensor, _runs(shape, selection)), result


def _select(name: str, shape: tuple[int, ...], key: object) -> tuple[list[range], list[int]]:
    """One `range` of indices per dimension, in the order numpy visits them; and the axes
    that stay in the result (those not indexed by an int)."""
    items = key if isinstance(key, tuple) else (key,)
    if any(item is None for item in items):
        raise TypeError(
            f"tensor {name!r}: None (numpy.newaxis) adds a dimension; byte_ranges selects "
            "elements and takes only ints, slices and ..."
        )
    ellipses = sum(1 for item in items if item is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if len(items) - ellipses > len(shape):
        raise IndexError(
            f"too many indices for tensor {name!r}: it is {len(shape)}-dimensional, "
            f"but {len(items) - ellipses} were indexed"
        )
    # `...` stands for as many whole dimensions as are not indexed; so do missing indices.
    whole = (slice(None),) * (len(shape) - (len(items) - ellipses))
    if ellipses:
        at = next(i for i, item in enumerate(items) if item is Ellipsis)
        items = (*items[:at], *whole, *items[at + 1 :])
    else:
        items = (*items, *whole)
    selection = [
        _dimension(name, axis, size, item)
        for axis, (size, item) in enumerate(zip(shape, items, strict=True))
    ]
    return selection, [axis for axis, item in enumerate(items) if isinstance(item, slice)]


def _dimension(name: str, axis: int, size: int, item: object) -> range:
    if isinstance(item, slice):
        # slice.indices raises numpy's errors: ValueError for a zero step, TypeError for
        # bounds that are not integers.
        return range(*item.indices(size))
    # bool is an int, but numpy reads True/False (also numpy's, which older numpy lets
    # operator.index take) as a mask: advanced indexing.
    boolean = isinstance(item, bool) or getattr(getattr(item, "dtype", None), "kind", "") == "b"
    if isinstance(item, SupportsIndex) and not boolean:
        try:
            index = operator.index(item)
        except TypeError:  # numpy arrays of more than one element have __index__ too
            pass
        else:
            if not -size <= index < size:
                raise IndexError(
                    f"index {index} is out of bounds for axis {axis} with size {size} "
                    f"(tensor {name!r})"
                )
            index %= size
            return range(index, index + 1)
    raise TypeError(
        f"tensor {name!r}: byte_ranges takes ints, slices and ... (numpy's basic indexing), "
        f"not {type(item).__name__}: lists, arrays and booleans (advanced indexing) select "
        "elements in an arbitrary order"
    )


def _runs(shape: tuple[int, ...], selection: list[range]) -> list[tuple[int, int]]:
    """``(first element, element count)`` runs in selection order, touching ones merged."""
    # The trailing dimensions selected whole, in their order, are one block of `inner`
    # consecutive elements per index of the dimensions before them.
    split = len(shape)
    while split and selection[split - 1] == range(shape[split - 1]):
        split -= 1
    inner = math.prod(shape[split:])
    if split == 0:
        return [(0, inner)]
    # The first element of each block: a product over the dimensions before the last one
    # that is not whole, each contributing index * stride (the sizes of the dimensions
    # after it multiplied), in numpy's order (the last dimension varies fastest). The
    # strides come from one pass from the end: a product per axis would be quadratic in
    # the number of dimensions (40,000 of them took seconds).
    strides = [inner] * split
    for axis in range(split - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    starts = [0]
    for axis in range(split - 1):
        stride = strides[axis]
        starts = [start + i * stride for start in starts for i in selection[axis]]
    last = selection[split - 1]
    if last.step == 1 or len(last) == 1:
        # One run per combination of the outer indices: the indices of `last` are
        # consecutive and the dimensions after it are whole.
        first = last[0] * inner
        count = len(last) * inner
        runs = [(start + first, count) for start in starts]
    else:
        runs = [(start + i * inner, inner) for start in starts for i in last]
    merged: list[tuple[int, int]] = []
    for start, count in runs:
        if merged and merged[-1][0] + merged[-1][1] == start:
            merged[-1] = (merged[-1][0], merged[-1][1] + count)
        else:
            merged.append((start, count))
    return merged


def _to_bytes(tensor: Placed, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    bits = DTYPE_BITS[tensor.dtype]
    if bits % 8 == 0:
        size = bits // 8
        return [(tensor.start + start * size, count * size) for start, count in runs]
    # Sub-byte dtypes are packed: element i occupies bits [i * bits, (i + 1) * bits) of the
    # tensor's data. A range can only be fetched if it starts and ends on a byte boundary.
    out = []
    for start, count in runs:
        first_bit, end_bit = start * bits, (start + count) * bits
        if first_bit % 8 or end_bit % 8:
            every = 8 // math.gcd(bits, 8)
            raise ValueError(
                f"tensor {tensor.name!r} has dtype {tensor.dtype}, {bits} bits per element, "
                f"packed: the selection needs elements {start} to {start + count - 1} (in "
                f"file order), which {'start' if first_bit % 8 else 'end'} inside a byte. "
                f"A {tensor.dtype} tensor can be cut only where a byte boundary falls "
                f"between elements, every {every} elements"
            )
        out.append((tensor.start + first_bit // 8, (end_bit - first_bit) // 8))
    return out
