"""The core of safetensors_header: a safetensors file's header, validated, as typed records
with absolute byte ranges. The standard library only; nothing outside this folder.

The length prefix, the string-only JSON header (with fast readers for the forms writers
produce) and the layout of ``data_offsets``, judged exactly as the reference (the Rust core of
``safetensors``) judges them. This folder can be copied into another project as it is
(docs/embedding.md).

    >>> from safetensors_header._core import parse_header, read_header
    >>> header = parse_header(data)           # bytes from offset 0 (bytes_needed: how many)
    >>> header = read_header("m.safetensors")  # a local file: its header only

Layer: core (sans-IO but for `read_header`'s one open of a local path).
"""

from __future__ import annotations

from .errors import KINDS, REFERENCE_KINDS, HeaderError
from .fileformat import DTYPE_BITS, DTYPES, HEADER_LENGTH_SIZE, MAX_HEADER_SIZE, bytes_needed
from .header import Header, TensorInfo, TensorTable
from .parse import parse_header, read_header

__all__ = ["DTYPES", "DTYPE_BITS", "HEADER_LENGTH_SIZE", "KINDS", "MAX_HEADER_SIZE"]
__all__ += ["REFERENCE_KINDS", "Header", "HeaderError", "TensorInfo", "TensorTable"]
__all__ += ["bytes_needed", "parse_header", "read_header"]
