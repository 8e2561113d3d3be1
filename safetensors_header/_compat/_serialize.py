"""``serialize``, ``serialize_file``, ``deserialize`` and ``TensorSpec``: the reference's
functions of raw tensors, over this project's writer and reader.

Layer: adapters (on the writer and the data path).
"""

from __future__ import annotations

import ctypes
import os

from .._encode import TYPE_NAMES
from .._fetch import open_file
from .._writer import file_bytes, write_file
from ._errors import SafetensorError, reference_errors

__all__ = ["TensorSpec", "deserialize", "serialize", "serialize_file"]

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

# The names a TensorSpec takes (torch's and numpy's, `TYPE_NAMES`) -> the safetensors dtype,
# in the order of the reference's list (its message names them so).
# fmt: off
_DTYPES = {
    TYPE_NAMES[dtype]: dtype
    for dtype in ("BOOL", "I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64", "F16", "F32",
                  "F64", "BF16", "F8_E4M3", "F8_E4M3FNUZ", "F8_E5M2", "F8_E5M2FNUZ", "F8_E8M0",
                  "F4", "C64")
}
# fmt: on


class TensorSpec:
    """One tensor for `serialize`: its dtype (torch's or numpy's name: ``"float32"``), its
    shape, and the address and length of its little-endian, C-ordered bytes, which must stay
    alive while it is serialized (the reference's ``TensorSpec``).

    For ``float4_e2m1fn_x2`` (two values a byte) the last dimension is doubled: `shape` is
    the header's. Raises `SafetensorError` for a dtype the reference does not name.
    """

    __slots__ = ("data_len", "data_ptr", "dtype", "shape")

    def __init__(self, *, dtype: str, shape: Sequence[int], data_ptr: int, data_len: int) -> None:
        code = _DTYPES.get(dtype) if isinstance(dtype, str) else None  # type: ignore[redundant-expr]
        if code is None:
            raise SafetensorError(
                f"Unknown dtype {dtype!r}. Supported dtypes: {', '.join(_DTYPES)}"
            )
        dims = [int(dim) for dim in shape]
        if code == "F4" and dims:
            dims[-1] *= 2
        self.dtype = code
        self.shape = dims
        self.data_ptr = int(data_ptr)
        self.data_len = int(data_len)

    def __repr__(self) -> str:
        return (
            f"TensorSpec(dtype={self.dtype!r}, shape={self.shape}, data_ptr={self.data_ptr}, "
            f"data_len={self.data_len})"
        )


def _tensors(tensor_dict: Mapping[str, TensorSpec]) -> dict[str, tuple[str, list[int], Any]]:
    """Each spec as the writer's ``(dtype, shape, bytes)``: a view of its memory, no copy."""
    if not hasattr(tensor_dict, "items"):
        raise TypeError(f"expected a dict of TensorSpec, not {type(tensor_dict).__name__}")
    tensors = {}
    for name, spec in tensor_dict.items():
        if not isinstance(spec, TensorSpec):
            raise TypeError(f"tensor {name!r}: expected a TensorSpec, not {type(spec).__name__}")
        if spec.data_len:
            data: Any = (ctypes.c_ubyte * spec.data_len).from_address(spec.data_ptr)
        else:
            data = b""
        tensors[name] = (spec.dtype, spec.shape, data)
    return tensors


def serialize(
    tensor_dict: Mapping[str, TensorSpec], metadata: Mapping[str, str] | None = None
) -> bytes:
    """The bytes of a safetensors file of these tensors, as the reference lays them out.

    Raises:
        SafetensorError: What the reference refuses to write (a buffer whose length is not
            its dtype and shape's, a name ``__metadata__``...), ``"Error while serializing:
            ..."``; a `HeaderError` too.
        TypeError: A value that is not a `TensorSpec`; metadata that is not ``str`` to
            ``str``.
    """
    with reference_errors("serializing"):
        return file_bytes(_tensors(tensor_dict), metadata=metadata)


def serialize_file(
    tensor_dict: Mapping[str, TensorSpec],
    filename: str | os.PathLike[str],
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Write `serialize`'s bytes to `filename` (replaced whole, never left half-written)."""
    with reference_errors("serializing"):
        write_file(filename, _tensors(tensor_dict), metadata=metadata)


def deserialize(bytes: Any) -> list[tuple[str, dict[str, Any]]]:
    """The tensors of a whole file's bytes: ``[(name, {"shape": [...], "dtype": "F32",
    "data": bytearray}), ...]``, in the order of their data (the reference's order is that of
    a hash map).

    Raises:
        SafetensorError: Bytes that are not a valid file, ``"Error while deserializing:
            ..."``; a `HeaderError` too.
    """
    with reference_errors("deserializing"):
        file = open_file(bytes)
        pieces = file.read_tensors()
    return [
        (info.name, {"shape": list(info.shape), "dtype": info.dtype, "data": bytearray(data)})
        for info, data in zip(file.header.tensors.values(), pieces.values(), strict=True)
    ]
