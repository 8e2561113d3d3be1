"""A pure-Python, zero-dependency, reference-exact parser (and writer) of safetensors headers.

    >>> from safetensors_header import read_header
    >>> header = read_header("model.safetensors")  # doctest: +SKIP
    >>> for t in header.tensors.values():  # doctest: +SKIP
    ...     print(t.name, t.dtype, t.shape, t.start, t.end)

Every verdict (accept, or reject with an error kind) is the reference implementation's, the
Rust core of the ``safetensors`` package. `HeaderError` is the only exception raised for bad
input.
"""

from ._audit import FINDING_CODES, Finding, audit_header
from ._checkpoint import Checkpoint, DtypeTotal, read_checkpoint
from ._dtypes import DTYPE_BITS
from ._errors import KINDS, HeaderError
from ._header import Header, TensorInfo
from ._parser import MAX_HEADER_SIZE, parse_header
from ._sources import read_header
from ._writer import encode_header, update_metadata, write_file

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
    "TensorInfo",
    "__version__",
    "audit_header",
    "encode_header",
    "parse_header",
    "read_checkpoint",
    "read_header",
    "update_metadata",
    "write_file",
]

__version__ = "0.1.0.dev0"
