"""A pure-Python, zero-dependency, reference-exact parser (and writer) of safetensors headers.

    >>> from safetensors_header import read_header
    >>> header = read_header("model.safetensors")  # doctest: +SKIP
    >>> for t in header.tensors.values():  # doctest: +SKIP
    ...     print(t.name, t.dtype, t.shape, t.start, t.end)

Every verdict (accept, or reject with an error kind) is the reference implementation's, the
Rust core of the ``safetensors`` package. `HeaderError` is the only exception raised for bad
input.
"""

from typing import TYPE_CHECKING

from ._dtypes import DTYPE_BITS
from ._errors import KINDS, HeaderError
from ._header import Header, TensorInfo
from ._parser import MAX_HEADER_SIZE, parse_header
from ._remote import RemoteError
from ._sources import read_header

if TYPE_CHECKING:
    from ._audit import FINDING_CODES, Finding, audit_header
    from ._checkpoint import Checkpoint, DtypeTotal, read_checkpoint
    from ._writer import encode_header, update_metadata, write_file
    from ._zarr import to_kerchunk, to_zarr_v3, zarr_node_name

# The audit, the checkpoint reader and the writer load on first use, so that reading one
# header (and the command line's cold start) pays only for the core.
_LAZY = {
    "FINDING_CODES": "_audit",
    "Finding": "_audit",
    "audit_header": "_audit",
    "Checkpoint": "_checkpoint",
    "DtypeTotal": "_checkpoint",
    "read_checkpoint": "_checkpoint",
    "encode_header": "_writer",
    "update_metadata": "_writer",
    "write_file": "_writer",
    "to_kerchunk": "_zarr",
    "to_zarr_v3": "_zarr",
    "zarr_node_name": "_zarr",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DTYPE_BITS",
    "FINDING_CODES",
    "KINDS",
    "MAX_HEADER_SIZE",
    "Checkpoint",
    "DtypeTotal",
    "Finding",
    "Header",
    "HeaderError",
    "RemoteError",
    "TensorInfo",
    "__version__",
    "audit_header",
    "encode_header",
    "parse_header",
    "read_checkpoint",
    "read_header",
    "to_kerchunk",
    "to_zarr_v3",
    "update_metadata",
    "write_file",
    "zarr_node_name",
]

__version__ = "0.1.0.dev0"
