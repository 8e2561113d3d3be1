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
    from ._checkpoint import Checkpoint, read_checkpoint
    from ._compat._install import install_as_safetensors
    from ._encode import encode_header
    from ._fetch import SafetensorsFile, open_file, read_ranges, read_tensor
    from ._sources.hub import hub_url
    from ._sources.transport import Transport
    from ._writer import update_metadata, write_file

# The checkpoint reader, the data path and the writer load on first use, so that reading one
# header (and the command line's cold start) pays only for the core. The rest is in
# submodules, imported by name: read plans (.plan), hashes and verification (.integrity), the
# model's description (.model), the audit (.audit), and the adapters (.numpy, .torch, .jax,
# .zarr, .virtualizarr, .icechunk, .awkward).
_LAZY = {
    name: module
    for module, names in (
        ("_checkpoint", ("Checkpoint", "read_checkpoint")),
        ("_fetch", ("SafetensorsFile", "open_file", "read_ranges", "read_tensor")),
        ("_sources.hub", ("hub_url",)),
        ("_sources.transport", ("Transport",)),
        ("_encode", ("encode_header",)),
        ("_writer", ("update_metadata", "write_file")),
        ("_compat._install", ("install_as_safetensors",)),
    )
    for name in names
}


# Names that live in a submodule of their own: found here too for one release, with a
# DeprecationWarning that says where.
_MOVED = {
    **dict.fromkeys(("FINDING_KINDS", "Finding", "audit_header"), "audit"),
    **dict.fromkeys(
        ("FileCheck", "TensorHashes", "hash_tensors", "published_sha256", "verify_files"),
        "integrity",
    ),
    "verify_tensors": "integrity",
    **dict.fromkeys(
        ("Adapter", "DtypeParameters", "Evidence", "Inference", "ModelInfo", "Quantization"),
        "model",
    ),
    "describe_model": "model",
    **dict.fromkeys(
        ("Parts", "PlannedTensor", "ReadPlan", "Split", "plan_rank", "plan_reads"), "plan"
    ),
    "split_tensors": "plan",
}


# The submodules of the standard library alone, imported when first named as an attribute
# (safetensors_header.integrity.hash_tensors after `import safetensors_header`).
_SUBMODULES = frozenset({"audit", "integrity", "model", "plan"})


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None and name in _SUBMODULES:
        from importlib import import_module

        return import_module(f".{name}", __name__)
    if module is None:
        moved = _MOVED.get(name)
        if moved is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import warnings
        from importlib import import_module

        warnings.warn(
            f"safetensors_header.{name} is safetensors_header.{moved}.{name} now: import it "
            f"from there (from safetensors_header.{moved} import {name}); the name here goes "
            "in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(import_module(f".{moved}", __name__), name)
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "DTYPES",
    "DTYPE_BITS",
    "KINDS",
    "MAX_HEADER_SIZE",
    "Checkpoint",
    "Dtype",
    "DtypeTotal",
    "FileIdentity",
    "Header",
    "HeaderError",
    "RemoteError",
    "SafetensorsFile",
    "Source",
    "TensorInfo",
    "TensorTable",
    "Transport",
    "__version__",
    "bytes_needed",
    "encode_header",
    "hub_url",
    "install_as_safetensors",
    "open_file",
    "parse_header",
    "read_checkpoint",
    "read_header",
    "read_ranges",
    "read_tensor",
    "update_metadata",
    "write_file",
]

__version__ = "0.1.0.dev0"

# The public classes say where users find them (help(), reprs, pickles by reference); the
# records (`_core.records.frozen_record`) and the lazily loaded classes say it themselves.
for _public in (Dtype, HeaderError, RemoteError, TensorTable):
    publish(_public)
del _public
