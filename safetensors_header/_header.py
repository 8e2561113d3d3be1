"""The parsed header: immutable values with absolute byte ranges."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["HEADER_LENGTH_SIZE", "Header", "TensorInfo"]

HEADER_LENGTH_SIZE = 8  # the little-endian u64 N that opens every file


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor's entry in the header, with its place in the file.

    Attributes:
        name: The tensor's name, as in the header (after JSON unescaping).
        dtype: The dtype name as written, e.g. ``"BF16"`` (a key of ``DTYPE_BITS``).
        shape: The dimensions; ``()`` for a scalar.
        start: The absolute file offset of the tensor's first byte.
        end: The absolute file offset one past its last byte, so ``file_bytes[t.start:t.end]``
            is exactly the tensor's data.
        data_start: The absolute file offset of the data buffer (``8 + N``), which the
            header's ``data_offsets`` are relative to.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int
    end: int
    data_start: int

    @property
    def data_offsets(self) -> tuple[int, int]:
        """``(begin, end)`` as written in the header: relative to the data buffer."""
        return (self.start - self.data_start, self.end - self.data_start)

    @property
    def nbytes(self) -> int:
        """The size of the tensor's data in bytes (``end - start``)."""
        return self.end - self.start

    @property
    def numel(self) -> int:
        """The number of elements: the product of ``shape`` (1 for a scalar)."""
        return math.prod(self.shape)

    def byte_ranges(self, key: object, /) -> list[tuple[int, int]]:
        """The ``(absolute offset, length)`` byte ranges that hold ``self[key]``, in order.

        `key` is numpy basic indexing (ints, slices with any step, ``...``, or a tuple of
        them, e.g. ``numpy.s_[:, 128:256]``); touching ranges are merged, and joining the
        bytes of the ranges in list order gives ``tensor[key]`` in C order. Raises
        IndexError (out of range), TypeError (an unsupported key) and ValueError (a sub-byte
        dtype cut inside a byte); see ``safetensors_header._ranges.byte_ranges``.
        """
        from ._ranges import byte_ranges  # on first use: the import stays cheap

        return byte_ranges(self, key)

    def __reduce__(self) -> tuple[object, ...]:
        # Explicit, so that pickling works on Python 3.10 too (frozen + slots).
        return (
            TensorInfo,
            (self.name, self.dtype, self.shape, self.start, self.end, self.data_start),
        )


@dataclass(frozen=True, slots=True)
class Header:
    """A validated safetensors header.

    Attributes:
        tensors: Read-only mapping of tensor name to ``TensorInfo``, in the order of the
            tensors' data in the file (by ``data_offsets``).
        metadata: The ``__metadata__`` map (read-only), or ``None`` when the header has none
            or ``null``. An empty ``{}`` stays an empty mapping.
        header_size: N, the length of the JSON header in bytes, padding included.
        data_size: The size of the data buffer the tensors cover: the largest end of their
            ``data_offsets`` (0 with no tensors).
        file_size: The size of the whole file, when known (always for ``read_header``; for
            ``parse_header`` only when passed). Then ``file_size == data_start + data_size``.
    """

    tensors: Mapping[str, TensorInfo]
    metadata: Mapping[str, str] | None
    header_size: int
    data_size: int
    file_size: int | None

    @property
    def data_start(self) -> int:
        """The absolute file offset where the data buffer begins (``8 + header_size``)."""
        return HEADER_LENGTH_SIZE + self.header_size

    def __reduce__(self) -> tuple[object, ...]:
        # Mapping proxies cannot be pickled; rebuild them from plain dicts.
        metadata = None if self.metadata is None else dict(self.metadata)
        return (
            _rebuild,
            (dict(self.tensors), metadata, self.header_size, self.data_size, self.file_size),
        )


def _rebuild(
    tensors: dict[str, TensorInfo],
    metadata: dict[str, str] | None,
    header_size: int,
    data_size: int,
    file_size: int | None,
) -> Header:
    return Header(
        MappingProxyType(tensors),
        None if metadata is None else MappingProxyType(metadata),
        header_size,
        data_size,
        file_size,
    )
