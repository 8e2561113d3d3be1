"""The dtypes a safetensors header may name, with their sizes."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

__all__ = ["DTYPE_BITS"]

#: Every dtype name the reference accepts (exact, case-sensitive), mapped to its size in bits,
#: in the reference's enum order (``BOOL`` first, ``U64`` last), which is also the order its
#: writer sorts by. Sub-byte types (``F4``, ``F6_*``) are packed: a tensor's bit count must be
#: a multiple of 8.
DTYPE_BITS: Final[Mapping[str, int]] = MappingProxyType(
    {
        "BOOL": 8,
        "F4": 4,
        "F6_E2M3": 6,
        "F6_E3M2": 6,
        "U8": 8,
        "I8": 8,
        "F8_E5M2": 8,
        "F8_E4M3": 8,
        "F8_E8M0": 8,
        "F8_E4M3FNUZ": 8,
        "F8_E5M2FNUZ": 8,
        "I16": 16,
        "U16": 16,
        "F16": 16,
        "BF16": 16,
        "I32": 32,
        "U32": 32,
        "F32": 32,
        "C64": 64,
        "F64": 64,
        "I64": 64,
        "U64": 64,
    }
)
