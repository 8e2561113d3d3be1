"""The core of safetensors_header: a safetensors file's header, validated, as typed records
with absolute byte ranges. The standard library only; nothing outside this folder.

It checks the length prefix, parses the string-only JSON header (with fast readers for the
forms writers produce) and the layout of ``data_offsets`` (contiguous, hole-free, each
tensor's size its dtype's times its elements), exactly as the reference implementation (the
Rust core of the ``safetensors`` package) does: the same files accepted, the same error kind
for the others. The rest of safetensors_header (URLs, object stores, checkpoints, loaders,
the command line) is built on it; this folder can be copied into another project as it is
(docs/embedding.md says how).

    >>> from safetensors_header._core import parse_header, read_header
    >>> header = parse_header(data)           # bytes from offset 0 (bytes_needed: how many)
    >>> header = read_header("m.safetensors")  # a local file: its header only

Layer: core (sans-IO but for `read_header`'s one open of a local path).
"""

from __future__ import annotations

from .errors import KINDS, REFERENCE_KINDS, HeaderError
from .fileformat import DTYPE_BITS, DTYPES, HEADER_LENGTH_SIZE, MAX_HEADER_SIZE, bytes_needed
from .header import DtypeTotal, Header, TensorInfo, TensorTable, by_dtype
from .parse import parse_header, read_header

__all__ = [
    "DTYPES",
    "DTYPE_BITS",
    "HEADER_LENGTH_SIZE",
    "KINDS",
    "MAX_HEADER_SIZE",
    "REFERENCE_KINDS",
    "DtypeTotal",
    "Header",
    "HeaderError",
    "TensorInfo",
    "TensorTable",
    "by_dtype",
    "bytes_needed",
    "parse_header",
    "read_header",
]
