"""A pure-Python, zero-dependency, reference-exact parser (and writer) of safetensors headers.

Layer: adapters (the package's entry: the public names, from the layers below).

    >>> from safetensors_header import read_header
    >>> header = read_header("model.safetensors")  # doctest: +SKIP
    >>> for t in header.tensors.values():  # doctest: +SKIP
    ...     print(t.name, t.dtype, t.shape, t.start, t.end)

Every verdict (accept, or reject with an error kind) is the reference implementation's, the
Rust core of the ``safetensors`` package. `HeaderError` is the only exception raised for bad
input, `RemoteError` the one for network failures.
"""

from ._core.fileformat import DTYPE_BITS, DTYPES, MAX_HEADER_SIZE, Dtype, bytes_needed
from ._core.header import Header, TensorInfo, TensorTable
from ._core.parse import parse_header
from ._core.records import publish
from ._errors import KINDS, HeaderError, RemoteError
from ._sources import Source, read_header
from ._sources.identity import FileIdentity
from ._totals import DtypeTotal

TYPE_CHECKING = False  # typing is not imported at run time (import cost)
if TYPE_CHECKING:
    from ._audit import FINDING_KINDS, Finding, audit_header
    from ._checkpoint import Checkpoint, read_checkpoint
    from ._describe import describe_model
    from ._encode import encode_header
    from ._fetch import SafetensorsFile, open_file, read_ranges, read_tensor
    from ._hashes import TensorHashes, hash_tensors, verify_tensors
    from ._model import Adapter, DtypeParameters, Evidence, Inference, ModelInfo, Quantization
    from ._plan import Parts, PlannedTensor, ReadPlan, Split, plan_reads
    from ._ranks import plan_rank, split_tensors
    from ._sources.hub import hub_url
    from ._sources.transport import Transport
    from ._verify import FileCheck, published_sha256, verify_files
    from ._writer import update_metadata, write_file

# The audit, the checkpoint reader, the data path, read plans, hashes, the model's
# description and the writer load on first use, so that reading one header (and the command
# line's cold start) pays only for the core. The adapters are submodules, imported by name:
# safetensors_header.numpy, .zarr, .virtualizarr, .icechunk and .awkward.
_LAZY = {
    "FINDING_KINDS": "_audit",
    "Finding": "_audit",
    "audit_header": "_audit",
    "Checkpoint": "_checkpoint",
    "read_checkpoint": "_checkpoint",
    "describe_model": "_describe",
    "Adapter": "_model",
    "DtypeParameters": "_model",
    "Evidence": "_model",
    "Inference": "_model",
    "ModelInfo": "_model",
    "Quantization": "_model",
    "SafetensorsFile": "_fetch",
    "open_file": "_fetch",
    "read_ranges": "_fetch",
    "read_tensor": "_fetch",
    "TensorHashes": "_hashes",
    "hash_tensors": "_hashes",
    "verify_tensors": "_hashes",
    "hub_url": "_sources.hub",
    "PlannedTensor": "_plan",
    "ReadPlan": "_plan",
    "Split": "_plan",
    "plan_reads": "_plan",
    "split_tensors": "_ranks",
    "Parts": "_plan",
    "plan_rank": "_ranks",
    "Transport": "_sources.transport",
    "encode_header": "_encode",
    "update_metadata": "_writer",
    "write_file": "_writer",
    "FileCheck": "_verify",
    "published_sha256": "_verify",
    "verify_files": "_verify",
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
    "DTYPES",
    "DTYPE_BITS",
    "FINDING_KINDS",
    "KINDS",
    "MAX_HEADER_SIZE",
    "Adapter",
    "Checkpoint",
    "Dtype",
    "DtypeParameters",
    "DtypeTotal",
    "Evidence",
    "FileCheck",
    "FileIdentity",
    "Finding",
    "Header",
    "HeaderError",
    "Inference",
    "ModelInfo",
    "Parts",
    "PlannedTensor",
    "Quantization",
    "ReadPlan",
    "RemoteError",
    "SafetensorsFile",
    "Source",
    "Split",
    "TensorHashes",
    "TensorInfo",
    "TensorTable",
    "Transport",
    "__version__",
    "audit_header",
    "bytes_needed",
    "describe_model",
    "encode_header",
    "hash_tensors",
    "hub_url",
    "open_file",
    "parse_header",
    "plan_rank",
    "plan_reads",
    "published_sha256",
    "read_checkpoint",
    "read_header",
    "read_ranges",
    "read_tensor",
    "split_tensors",
    "update_metadata",
    "verify_files",
    "verify_tensors",
    "write_file",
]

__version__ = "0.1.0.dev0"

# The public classes say where users find them (help(), reprs, pickles by reference); the
# records (`_core.records.frozen_record`) and the lazily loaded classes say it themselves.
for _public in (Dtype, HeaderError, RemoteError, TensorTable):
    publish(_public)
del _public
