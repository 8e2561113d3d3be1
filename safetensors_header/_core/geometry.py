"""Which bytes of the file hold a part of a tensor: the byte ranges of a slice.

Layer: core (sans-IO). A tensor's data is in C order, little-endian, packed. From its place
in the file (name, dtype, shape, first byte: a `TensorInfo`, or any object with those),
`byte_ranges` gives the runs of a selection by basic indexing (ints, slices, ``...``), each
one byte range: what a tensor-parallel loader fetches of a weight. (Zarr's chunk grids are
`safetensors_header._zarr_layout`'s.)
"""

from __future__ import annotations

import math
import operator
from typing import SupportsIndex

from .fileformat import DTYPE_BITS

__all__ = ["byte_ranges", "selected"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
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
